#!/usr/bin/env bash
# The regression gate on a GPU machine, end to end: ten baseline runs (so the gate sees each
# case's run-to-run variation), two A/A runs of the same binary (must give no "slower" verdict),
# and a run whose reduce_fast kernel does 5% more loads (must be caught). Run from the repository
# root, with the binary from scripts/gpu-bundle.sh:
#   bash scripts/regression-demo.sh [kbench binary] [output folder] [manifest] [kbench run options]
# (the options go to every run, e.g. --max-time-s 0.5 to shorten the CPU cases).
set -uo pipefail
kbench="${1:-.gpu-bundle/kbench}"
out="${2:-out/regression-demo}"
manifest="${3:-experiments/reduction.toml}"
shift 3 2>/dev/null || shift $#
options=("$@")
base_runs=10

# The slowed kernel: reduce_fast also reads the first 5% of the input once more and adds 0 * that
# sum (floats keep 0 * x, so the loads cannot be optimized away; the result is unchanged).
slow_dir="$out/slow-kernels"
mkdir -p "$slow_dir"
python3 - "$slow_dir/reduce.cu" <<'PY'
import sys
src = open("kernels/reduce.cu").read()
anchor = "    static_assert(FAST_UNROLL == 4"
extra = """    {   // regression-demo slowdown: 5% more loads
        Acc extra = Acc(0);
        for (unsigned long long j = (unsigned long long)blockIdx.x * B + t; j < n / 20; j += (unsigned long long)gridDim.x * B)
            extra += Traits<T>::to_acc(__ldg(in + j));
        acc[0] += Acc(0) * extra;
    }
"""
assert anchor in src
open(sys.argv[1], "w").write(src.replace(anchor, extra + anchor))
PY

for i in $(seq "$base_runs"); do
  "$kbench" run "$manifest" "${options[@]}" --out-dir "$out" --save-baseline demo > "$out/base$i.txt" || exit 2
done
"$kbench" run "$manifest" "${options[@]}" --out-dir "$out" > "$out/aa1.txt" || exit 2
"$kbench" run "$manifest" "${options[@]}" --out-dir "$out" > "$out/aa2.txt" || exit 2
"$kbench" run "$manifest" "${options[@]}" --out-dir "$out" --kernels-dir "$slow_dir" > "$out/slow.txt" || exit 2
study=$(basename "$(dirname "$(ls "$out"/*/2*.json | head -1)")")
mapfile -t runs < <(ls "$out/$study"/2*.json)
status=0
for aa in $base_runs $((base_runs + 1)); do
  echo "== A/A: ${runs[$aa]} vs the $base_runs baseline runs (expect exit 0, no slower case)"
  "$kbench" compare --baseline demo --out-dir "$out" "${runs[$aa]}" > "$out/compare_aa$aa.txt"; code=$?
  tail -n 4 "$out/compare_aa$aa.txt"; echo "exit $code"
  [ "$code" = 0 ] || status=1
done
slow=$((base_runs + 2))
echo "== slowed reduce_fast: ${runs[$slow]} vs the $base_runs baseline runs (expect exit 1, reduce_fast slower)"
"$kbench" compare --baseline demo --out-dir "$out" "${runs[$slow]}" > "$out/compare_slow.txt"; code=$?
grep -E "SLOWER" "$out/compare_slow.txt"; tail -n 3 "$out/compare_slow.txt"; echo "exit $code"
[ "$code" = 1 ] || status=1
exit $status
