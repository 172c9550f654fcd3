#!/usr/bin/env bash
# Checks kbench's GPU timer against Nsight Compute, case by case: runs each study as usual, then
# runs each of its CUDA kernel-scope cases again under `ncu` (gpu__time_duration of every kernel,
# caches flushed before each, clocks left alone), and prints kbench's median, ncu's median and
# their ratio, with CUPTI's median where kbench recorded one. Run on a GPU machine, from the
# repository root:
#   bash scripts/timer-check.sh [--kbench PATH] [--out DIR] MANIFEST...
# (kbench defaults to .gpu-bundle/kbench, then target/release/kbench; the output to out/timer-check.)
set -euo pipefail
kbench=""
out="out/timer-check"
manifests=()
while [ $# -gt 0 ]; do
  case "$1" in
    --kbench) kbench="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) manifests+=("$1"); shift ;;
  esac
done
if [ ${#manifests[@]} -eq 0 ]; then
  echo "usage: bash scripts/timer-check.sh [--kbench PATH] [--out DIR] MANIFEST..." >&2
  exit 2
fi
if [ -z "$kbench" ]; then
  for candidate in .gpu-bundle/kbench target/release/kbench; do
    if [ -x "$candidate" ]; then kbench="$candidate"; break; fi
  done
fi
[ -x "$kbench" ] || { echo "no kbench binary (build it, or pass --kbench)" >&2; exit 2; }
command -v ncu >/dev/null || { echo "ncu (Nsight Compute) is not on PATH" >&2; exit 2; }
exec python3 "$(dirname "$0")/timer_check.py" --kbench "$kbench" --out "$out" "${manifests[@]}"
