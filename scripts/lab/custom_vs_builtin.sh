#!/usr/bin/env bash
# Does a kernel declared in TOML time the same as kbench's built-in copy of it? On a GPU machine,
# from the repository root after scripts/gpu-bundle.sh (OUT defaults to out/custom-vs-builtin):
#   1. ROUNDS calls of `kbench run` holding examples/reduction/reduction.toml (the seed's kernels
#      in TOML), examples/reduction/dynamic_shared.toml (kbench's own code in TOML) and
#      examples/reduction/builtin.toml (kbench's own), the order reversed between calls, with
#      more samples than the manifests ask for; per case, the ratio of each TOML study's median
#      to the built-in's in each call, the median of those ratios, and each study's wall time;
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
dynamic=examples/reduction/dynamic_shared.toml
own=examples/reduction/builtin.toml
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then order=("$user" "$dynamic" "$own"); else order=("$own" "$dynamic" "$user"); fi
  "$kbench" run "${order[@]}" --out-dir "$out/runs" --min-samples 50 --max-samples 400 \
    --json > "$out/round-$round.jsonl"
  echo "round $round (${order[0]##*/} first): rc=$?"
done

python3 - "$out"/round-*.jsonl <<'PY'
import json, statistics, sys
ratios, medians, wall = {}, {}, {}
for path in sys.argv[1:]:
    docs = {d["study"]["name"]: d for d in map(json.loads, filter(str.strip, open(path)))}
    key = lambda c: (c["variant"], c["params"]["dtype"], c["params"]["n"])
    own = {key(c): c for c in docs["builtin_reduction"]["cases"]}
    for name, d in docs.items():
        wall.setdefault(name, []).append(sum(c["wall_s"] for c in d["cases"]))
    for study in ("custom_reduction", "custom_reduction_dynamic"):
        for c in docs[study]["cases"]:
            o = own[key(c)]
            assert c["status"] == o["status"] == "passed", (key(c), c["status"], o["status"])
            u, b = c["summary"]["median_s"], o["summary"]["median_s"]
            ratios.setdefault((study,) + key(c), []).append(u / b)
            medians.setdefault((study,) + key(c), []).append((u * 1e6, b * 1e6))
print(f"{'study':24} {'variant':12} {'dtype':5} {'n':>10}  {'user µs':>8} {'own µs':>8}  per-call ratios (user/own)   median")
for k in sorted(ratios):
    us = statistics.median(u for u, _ in medians[k]); bs = statistics.median(b for _, b in medians[k])
    calls = " ".join(f"{r:.3f}" for r in ratios[k])
    print(f"{k[0]:24} {k[1]:12} {k[2]:5} {k[3]:>10}  {us:8.2f} {bs:8.2f}  {calls:28} {statistics.median(ratios[k]):.3f}")
for name, w in sorted(wall.items()):
    print(f"wall time of {name}: " + " ".join(f"{x:.2f}" for x in w) + " s")
PY

echo "== Nsight Compute, n = 1000 (scripts/timer-check.sh: each case again under ncu)"
small="$out/n1000"
mkdir -p "$small"
cp examples/reduction/reduce.cu "$small/"
cp examples/reduction/reduce_dynamic.cu "$small/"
for m in "$user" "$dynamic" "$own"; do
  sed 's/^n = \[.*\]/n = [1_000]/' "$m" > "$small/${m##*/}"
done
bash scripts/timer-check.sh --kbench "$kbench" --out "$small/timer-check" "$small/reduction.toml" \
  "$small/dynamic_shared.toml" "$small/builtin.toml"

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
