#!/usr/bin/env bash
# Issue 30's first-study effect, on a freshly started GPU machine (run it as the call's first
# GPU work): NVML's clocks logged every 100 ms throughout; kbench's first two studies in one
# command; the same two studies in a second command; then scripts/lab/cold_start_probe.py's
# copy rate against time. Prints each study's measured copy peak.
#   bash scripts/lab/cold_start.sh KBENCH OUT_DIR
set -uo pipefail
kbench="$1"
out="$2"
mkdir -p "$out"
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_event_reasons.active \
  --format=csv -lms 100 > "$out/smi.csv" 2>&1 &
smi=$!
peaks() {
  python3 - "$@" <<'PY'
import json, sys, glob, os
for path in sys.argv[1:]:
    for f in sorted(glob.glob(os.path.join(path, "*", "*.json"))):
        d = json.load(open(f))
        for dev in d["environment"].get("devices", []):
            print(f"{os.path.basename(os.path.dirname(f)):28s} {os.path.basename(f):28s} copy peak {dev['measured_copy_gbytes_per_s']:.1f} GB/s")
PY
}
date +%T.%N
"$kbench" run experiments/timer_check_saxpy.toml experiments/timer_check_reduce.toml --out-dir "$out/first" > "$out/first.txt" 2>&1
date +%T.%N
"$kbench" run experiments/timer_check_saxpy.toml experiments/timer_check_reduce.toml --out-dir "$out/second" > "$out/second.txt" 2>&1
date +%T.%N
echo "== first command"; peaks "$out/first"
echo "== second command"; peaks "$out/second"
python3 scripts/lab/cold_start_probe.py 6 probe
kill $smi
