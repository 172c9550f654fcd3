#!/usr/bin/env bash
# The timer sweep (issue 30): every CUDA kernel of every algorithm at several sizes (2^14 to 2^28,
# powers of two and not) and block sizes, each case timed by kbench as usual and then again under
# Nsight Compute (scripts/timer_check.py: gpu__time_duration, caches flushed before each kernel,
# clocks left alone), with a markdown table of the verdicts at the end. Run on a GPU machine,
# from the repository root:
#   bash scripts/timer-sweep.sh [--kbench PATH] [--out DIR] [--samples N] [--resume JSON] [MANIFEST...]
# (manifests default to experiments/timer_sweep/*.toml, and then host_loop/*.toml, whose host
# relaunches until done, are judged against CUPTI's span instead of ncu, into DIR/host-loop, in
# full each time: --resume is for the ncu part; pass no host_loop manifest by name, as ncu would
# run it;
# the table goes to DIR/summary.md). A small
# case costs about 9 s under ncu (every launch, the L2 flush's too, is profiled with its caches
# flushed; the runs set KBENCH_SKIP_PEAKS); --resume goes on from a stopped sweep's
# timer-check.json.
set -euo pipefail
kbench=.gpu-bundle/kbench
out=out/timer-sweep
samples=10
manifests=()
resume=()
while [ $# -gt 0 ]; do
  case "$1" in
    --kbench) kbench="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --samples) samples="$2"; shift 2 ;;
    --resume) resume=(--resume "$2"); shift 2 ;;
    *) manifests+=("$1"); shift ;;
  esac
done
host_loop=()
if [ ${#manifests[@]} -eq 0 ]; then
  manifests=(experiments/timer_sweep/*.toml)
  host_loop=(experiments/timer_sweep/host_loop/*.toml)
fi
[ -x "$kbench" ] || { echo "no kbench binary at $kbench (build it, or pass --kbench)" >&2; exit 2; }
command -v ncu >/dev/null || { echo "ncu (Nsight Compute) is not on PATH" >&2; exit 2; }
mkdir -p "$out"
status=0
python3 "$(dirname "$0")/timer_check.py" --kbench "$kbench" --out "$out" --samples "$samples" \
  "${resume[@]}" "${manifests[@]}" || status=$?
checked=("$out/timer-check.json")
if [ ${#host_loop[@]} -gt 0 ]; then
  python3 "$(dirname "$0")/timer_check.py" --kbench "$kbench" --out "$out/host-loop" \
    --reference cupti-span "${host_loop[@]}" || status=$?
  checked+=("$out/host-loop/timer-check.json")
fi
python3 "$(dirname "$0")/timer_sweep_summary.py" "${checked[@]}" | tee "$out/summary.md"
exit "$status"
