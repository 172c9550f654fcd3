#!/usr/bin/env bash
# Does a kernel declared in TOML time the same as kbench's built-in copy of it? On a GPU machine,
# from the repository root after scripts/gpu-bundle.sh (OUT defaults to out/custom-vs-builtin):
#   1. ROUNDS calls of `kbench run` holding examples/reduction/reduction.toml (the seed's kernels
#      in TOML) and examples/reduction/builtin.toml (kbench's own), the order alternating between
#      calls, with more samples than the manifests ask for; per case, the ratio of the two medians
#      in each call, and the median of those ratios;
#   2. the n = 1000 cases of both studies (where the ratio strays most) checked against Nsight
#      Compute by scripts/timer-check.sh: the same kernels with the same grids must take the same
#      time under ncu, and kbench's medians must agree with ncu's;
#   3. every example once more with `--sanitize` (memcheck): errors found, wall time.
set -uo pipefail
cd "$(dirname "$0")/../.."
kbench="$(realpath "${KBENCH_EXE:-.gpu-bundle/kbench}")"
out="${OUT:-out/custom-vs-builtin}"
rounds="${ROUNDS:-4}"
rm -rf "$out"; mkdir -p "$out"

user=examples/reduction/reduction.toml
own=examples/reduction/builtin.toml
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then order=("$user" "$own"); else order=("$own" "$user"); fi
  "$kbench" run "${order[@]}" --out-dir "$out/runs" --min-samples 50 --max-samples 400 \
    --json > "$out/round-$round.jsonl"
  echo "round $round (${order[0]##*/} first): rc=$?"
done

python3 - "$out"/round-*.jsonl <<'PY'
import json, statistics, sys
ratios, medians = {}, {}
for path in sys.argv[1:]:
    docs = {d["study"]["name"]: d for d in map(json.loads, filter(str.strip, open(path)))}
    key = lambda c: (c["variant"], c["params"]["dtype"], c["params"]["n"])
    own = {key(c): c for c in docs["builtin_reduction"]["cases"]}
    for c in docs["custom_reduction"]["cases"]:
        o = own[key(c)]
        assert c["status"] == o["status"] == "passed", (key(c), c["status"], o["status"])
        u, b = c["summary"]["median_s"], o["summary"]["median_s"]
        ratios.setdefault(key(c), []).append(u / b)
        medians.setdefault(key(c), []).append((u * 1e6, b * 1e6))
print(f"{'variant':12} {'dtype':5} {'n':>10}  {'user µs':>8} {'own µs':>8}  per-call ratios (user/own)        median")
for k in sorted(ratios, key=lambda k: (k[0], k[1], k[2])):
    us = statistics.median(u for u, _ in medians[k]); bs = statistics.median(b for _, b in medians[k])
    calls = " ".join(f"{r:.3f}" for r in ratios[k])
    print(f"{k[0]:12} {k[1]:5} {k[2]:>10}  {us:8.2f} {bs:8.2f}  {calls:32} {statistics.median(ratios[k]):.3f}")
PY

echo "== Nsight Compute, n = 1000 (scripts/timer-check.sh: each case again under ncu)"
small="$out/n1000"
mkdir -p "$small"
cp examples/reduction/reduce.cu "$small/"
for m in "$user" "$own"; do
  sed 's/^n = \[.*\]/n = [1_000]/' "$m" > "$small/${m##*/}"
done
bash scripts/timer-check.sh --kbench "$kbench" --out "$small/timer-check" "$small/reduction.toml" "$small/builtin.toml"

echo "== every example once more under compute-sanitizer (memcheck)"
for m in examples/reduction/reduction.toml examples/transpose/transpose.toml examples/numpy_reference/saxpy.toml; do
  start=$(date +%s.%N)
  "$kbench" run "$m" --out-dir "$out/sanitized" --sanitize --json > "$out/sanitized-${m##*/}.jsonl"
  rc=$?
  python3 - "$out/sanitized-${m##*/}.jsonl" "$m" "$rc" "$start" <<'PY'
import json, sys, time
doc = json.loads(open(sys.argv[1]).readline())
cases = doc["cases"]
checked = [c["sanitizer"] for c in cases if c.get("sanitizer")]
errors = sum(s["errors"] or 0 for s in checked)
passed = sum(c["status"] == "passed" for c in cases)
print(f"{sys.argv[2]}: rc={sys.argv[3]}, {passed}/{len(cases)} passed, {len(checked)} sanitized, {errors} errors, "
      f"{time.time() - float(sys.argv[4]):.1f} s wall")
PY
done
