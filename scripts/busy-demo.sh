#!/usr/bin/env bash
# The gate on a busy CPU-only machine: ten baseline runs and ten A/A runs of the reduction
# study's CPU variants, counting the cases called SLOWER (must be 0) and the runs judged loaded.
# Two phases (PHASES, default "steady rising"):
#   steady: N-1 cores kept busy (busy loops) through the baselines and the A/A runs;
#   rising: quiet baselines, then the A/A runs with N-1 cores busy: those cases must be judged
#           loaded, never slower.
#   bash scripts/busy-demo.sh [kbench binary] [output folder] [kbench run options]
# The busy loops are this script's own children and are ended (by their process ids) on exit.
set -uo pipefail
kbench="${1:-target/debug/kbench}"
out="${2:-out/busy-demo}"
shift 2 2>/dev/null || shift $#
options=("$@")
[ ${#options[@]} -gt 0 ] || options=(--max-time-s 0.3)
tries="${TRIES:-10}"
here="$(cd "$(dirname "$0")" && pwd)"
busy_cores=$(( $(nproc) > 1 ? $(nproc) - 1 : 1 ))
mkdir -p "$out"
manifest="$out/busy.toml"
cat > "$manifest" <<'TOML'
[study]
name = "busy"
title = "The reduction study's CPU variants, for the busy-machine A/A demo"
algorithm = "reduce"
seed = 4

[grid]
n = [1_000, 1_000_003, 16_777_213]
dtype = ["i32", "f32", "f64"]

[[variant]]
name = "cpu"
backend = "cpu"
impl = "sequential"

[[variant]]
name = "cpu_pairwise"
backend = "cpu"
impl = "pairwise"

[[variant]]
name = "cpu_threads"
backend = "cpu"
impl = "threads"

[measure]
warmup = 3
min_samples = 10
max_samples = 200
max_time_s = 1.0
target_rel_ci = 0.02
TOML

busy_pids=()
start_busy() {
  for _ in $(seq "$busy_cores"); do
    ( while :; do :; done ) &
    busy_pids+=("$!")
  done
}
stop_busy() {
  for pid in "${busy_pids[@]}"; do kill "$pid" 2>/dev/null; done
  busy_pids=()
}
trap stop_busy EXIT

status=0
for phase in ${PHASES:-steady rising}; do
  dir="$out/$phase"
  rm -rf "$dir"
  [ "$phase" = steady ] && start_busy
  for i in $(seq 10); do
    "$kbench" run "$manifest" "${options[@]}" --out-dir "$dir" --save-baseline b > /dev/null 2>> "$out/runs.log"
  done
  [ "$phase" = rising ] && start_busy
  slower_total=0; failed_runs=0; loaded_runs=0
  for i in $(seq "$tries"); do
    "$kbench" run "$manifest" "${options[@]}" --out-dir "$dir" --results "$dir/aa$i.json" > /dev/null 2>> "$out/runs.log"
    "$kbench" compare --baseline b --out-dir "$dir" --json "$dir/aa$i.json" > "$dir/compare$i.json"; code=$?
    line=$(python3 - "$dir/compare$i.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
v = [x["verdict"] for x in c["cases"]]
load = c.get("load") or {}
print(v.count("slower"), int(bool(load.get("loaded"))),
      f"{v.count('slower')} slower, {v.count('same')} same, {v.count('inconclusive')} inconclusive;"
      f" others kept {load.get('new_other_busy_cpus', float('nan')):.2f} CPUs busy"
      f" (baselines at most {load.get('baseline_max_other_busy_cpus', float('nan')):.2f})"
      f"{', loaded' if load.get('loaded') else ''}")
PY
)
    read -r slower loaded rest <<< "$line"
    echo "$phase A/A $i: exit $code; $rest"
    slower_total=$((slower_total + slower)); loaded_runs=$((loaded_runs + loaded))
    [ "$code" = 0 ] || failed_runs=$((failed_runs + 1))
  done
  stop_busy
  echo "== $phase: $slower_total cases SLOWER over $tries A/A runs, $failed_runs runs exit 1, $loaded_runs runs judged loaded"
  [ "$slower_total" = 0 ] || status=1
done
exit $status
