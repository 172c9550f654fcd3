#!/usr/bin/env bash
# The custom-kernel examples on a GPU machine, in one command, beside what they are measured
# against (run from the repository root after scripts/gpu-bundle.sh; OUT defaults to out/custom):
#   - examples/reduction (the seed's kernels declared in TOML) and examples/reduction/builtin.toml
#     (kbench's own kernels, same grid) in one kbench call: each case's median, their ratio, and the
#     two studies' wall time;
#   - examples/transpose and examples/numpy_reference;
#   - a copy of examples/reduction whose .cu does not compile: refused before anything runs
#     (exit 2) with NVRTC's log naming the user's file and line (where NVRTC is not found by the
#     check, the cases fail with that log instead and the study goes on: exit 1).
set -uo pipefail
cd "$(dirname "$0")/.."
kbench="${KBENCH_EXE:-.gpu-bundle/kbench}"
out="${OUT:-out/custom}"
mkdir -p "$out"

echo "== reduction: user kernels and built-in kernels, one call"
"$kbench" run examples/reduction/reduction.toml examples/reduction/builtin.toml --out-dir "$out/runs" --json > "$out/reduction.jsonl"
echo "rc=$?"
python3 - "$out/reduction.jsonl" <<'PY'
import json, sys
docs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
by = {d["study"]["name"]: d for d in docs}
user, own = by["custom_reduction"], by["builtin_reduction"]
key = lambda c: (c["variant"], c["params"]["n"], c["params"]["dtype"])
own_cases = {key(c): c for c in own["cases"]}
print(f"{'variant':12} {'n':>10} {'dtype':5} {'user µs':>9} {'built-in µs':>11} {'ratio':>6}  status")
ratios = []
for c in user["cases"]:
    o = own_cases[key(c)]
    if not (c.get("summary") and o.get("summary")):
        print(key(c), c["status"], o["status"]); continue
    u, b = c["summary"]["median_s"] * 1e6, o["summary"]["median_s"] * 1e6
    ratios.append(u / b)
    print(f"{c['variant']:12} {c['params']['n']:>10} {c['params']['dtype']:5} {u:9.2f} {b:11.2f} {u / b:6.3f}  {c['status']}/{o['status']}")
wall = lambda d: sum(c["wall_s"] for c in d["cases"])
print(f"ratios: min {min(ratios):.3f} max {max(ratios):.3f}; wall time user {wall(user):.2f} s, built-in {wall(own):.2f} s, ratio {wall(user) / wall(own):.3f}")
PY

echo "== transpose and numpy_reference"
for m in examples/transpose/transpose.toml examples/numpy_reference/*.toml; do
  [ -e "$m" ] || continue
  "$kbench" run "$m" --out-dir "$out/runs"
  echo "rc=$?"
done

echo "== a kernel that does not compile"
broken="$out/broken"
rm -rf "$broken"; mkdir -p "$broken"
cp examples/reduction/reduction.toml "$broken/"
sed 's/partialSum\[t\] = /partialSum[t] = oops /' examples/reduction/reduce.cu > "$broken/reduce.cu"
"$kbench" run "$broken/reduction.toml" --out-dir "$out/runs" --max-samples 3 --min-samples 3 2>&1 | tail -25
echo "rc=$? (2 expected: refused before anything ran)"
