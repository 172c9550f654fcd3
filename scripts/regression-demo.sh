#!/usr/bin/env bash
# The regression gate and the history on a GPU machine, end to end, in one call: ten baseline
# runs (so the gate sees each case's run-to-run variation), two A/A runs of the same binary (must
# give no "slower" verdict), and four runs whose reduce_fast kernel is slowed by 5% (below). Then:
#   - compare --retest: each A/A run and the first slowed run against the ten baselines, the cases
#     called slower measured again in a fresh process (tables in the output folder, a summary by
#     kind of case here: verdicts, how many slower the retest removed, GPU kernel cases of 5 us
#     or more judged same, the detectable change of the undecided cases);
#   - history: the 16 runs in order as a CI job would see them, after run 12 (nothing may be
#     flagged), 13 (the slowdown suspected), 14 to 16 (confirmed, at run 13), and an HTML page of
#     trend charts.
# Run from the repository root, with the binary from scripts/gpu-bundle.sh:
#   bash scripts/regression-demo.sh [kbench binary] [output folder] [manifest] [kbench run options]
# The options go to every run; without any, `--max-time-s 0.25` (16 runs of reduction.toml must
# fit the device call). DEMO_BUDGET_S (default 520) stops starting runs that would not finish in
# time: what ran is still judged. PROCESSES (default 1) is given to every run as `--processes`:
# each case measured in that many worker processes (the retests take it from the results).
# LAUNCH (default stream) is given as `--launch`: `graph` replays each kernel-scope run from a
# CUDA graph (docs/ci/gate.md says why a gate's runs may want that).
# REUSE=1 goes on in an output folder an earlier, cut-short call left: the runs it finished
# (listed in its done.txt) are kept and not run again.
set -uo pipefail
kbench="${1:-.gpu-bundle/kbench}"
out="${2:-out/regression-demo}"
manifest="${3:-experiments/reduction.toml}"
shift 3 2>/dev/null || shift $#
options=("$@")
[ ${#options[@]} -gt 0 ] || options=(--max-time-s 0.25)
budget_s="${DEMO_BUDGET_S:-520}"
processes="${PROCESSES:-1}"
launch="${LAUNCH:-stream}"
base_runs=10
slow_runs=4
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${REUSE:-0}" != 1 ] && compgen -G "$out/*/2*.json" > /dev/null; then
  echo "$out holds runs already: give an empty or new output folder (or REUSE=1 to go on)"; exit 2
fi
mkdir -p "$out"
touch "$out/done.txt"

start_s=$SECONDS
last_s=0
# Runs one study run (name, then extra options) unless the budget would run out first.
run() {
  local name="$1"; shift
  if grep -qx "$name" "$out/done.txt"; then echo "run $name: kept from an earlier call"; return 0; fi
  local elapsed=$((SECONDS - start_s))
  if [ $((elapsed + last_s + last_s / 4)) -gt "$budget_s" ]; then
    echo "budget: ${elapsed}s used, a run takes ${last_s}s: $name and later runs not started"
    return 1
  fi
  local t0=$SECONDS
  "$kbench" run "$manifest" "${options[@]}" --processes "$processes" --launch "$launch" --out-dir "$out" "$@" > "$out/$name.txt"
  local code=$?
  last_s=$((SECONDS - t0))
  echo "run $name: ${last_s}s (exit $code)"
  # Exit 1 (a case failed) still leaves a results file; 2 and above do not.
  [ "$code" -le 1 ] && echo "$name" >> "$out/done.txt"
}

ran=0
for i in $(seq "$base_runs"); do run "base$i" --save-baseline demo && ran=$((ran + 1)) || break; done
[ "$ran" = "$base_runs" ] || { echo "fewer than $base_runs baseline runs: stopping"; exit 2; }

# The slowed kernel: reduce_fast's last block, before it writes the sum, spins for 5% of the
# baselines' median of that case (its size and type), so that each case's run is 5% slower at
# every size, not only where loads dominate (5% more loads made n = 1e6 only 3.4% slower: its
# time is partly the launch). The spin counts SM cycles at the clock the baselines recorded.
slow_dir="$out/slow-kernels"
mkdir -p "$slow_dir"
python3 - "$slow_dir/reduce.cu" "$out" <<'PY' || { echo "cannot write the slowed kernel"; exit 2; }
import glob, json, statistics, sys
runs = sorted(glob.glob(f"{sys.argv[2]}/*/2*.json"))[:10]
medians, mhz = {}, None
for path in runs:
    doc = json.load(open(path))
    mhz = doc["environment"]["device"]["sm_clock_mhz"]
    for c in doc["cases"]:
        if c["variant"] == "fast" and c.get("summary"):
            medians.setdefault((c["params"]["n"], c["params"]["dtype"]), []).append(
                c["summary"]["median_s"])
codes = {"i32": 0, "f32": 1, "f64": 2}
lines = "".join(
    f"        if (n == {n}ull && dtype == {codes[d]}) cycles = {round(0.05 * statistics.median(m) * mhz * 1e6)}ull;\n"
    for (n, d), m in sorted(medians.items()))
spin = """    {   // regression-demo slowdown: 5% of the baselines' median, spun by the writing thread
        const int dtype = sizeof(T) == 8 ? 2 : ((T)0.5 == (T)0 ? 0 : 1);
        unsigned long long cycles = 0;
CASES        if (t == 0 && cycles) {
            const long long started = clock64();
            while ((unsigned long long)(clock64() - started) < cycles) {}
        }
    }
""".replace("CASES", lines)
src = open("kernels/reduce.cu").read()
# Where the sum is written: by the one block of a one-block grid, else by the last block. Every
# other block must not spin (they run side by side: a spin in each would count twice).
anchors = ["    if (gridDim.x == 1) {\n", "    v = block_sum(v);\n"]
for anchor in anchors:
    assert src.count(anchor) == 1, anchor
    src = src.replace(anchor, anchor + spin)
open(sys.argv[1], "w").write(src)
print(f"slowed reduce_fast: spins 5% of the baselines' median ({len(medians)} cases, SM clock {mhz} MHz)")
PY
run aa1 && run aa2 && for i in $(seq "$slow_runs"); do run "slow$i" --kernels-dir "$slow_dir" || break; done
study=$(basename "$(dirname "$(ls "$out"/*/2*.json | head -1)")")
mapfile -t runs < <(ls "$out/$study"/2*.json)
echo "${#runs[@]} runs in $((SECONDS - start_s))s; options: ${options[*]} --processes $processes --launch $launch"

status=0
# Each run is judged as a CI job would: `compare --retest`, so a case called slower is measured
# again in a fresh process and stays slower only if the retest confirms it (the JSON, with the
# retest's verdicts). The table without the retest is kept beside it, to count what the retest
# removed.
judge() {  # label, results file, expected exit, then options for the retest
  local label="$1" file="$2" expect="$3"; shift 3
  "$kbench" compare --baseline demo --out-dir "$out" --wide "$file" > "$out/compare_${label}_no_retest.txt"
  "$kbench" compare --baseline demo --out-dir "$out" --json --retest "$@" "$file" > "$out/compare_$label.json"; local code=$?
  echo "== $label: $(basename "$file") vs the $base_runs baselines, with --retest: exit $code (expect $expect)"
  python3 - "$out/compare_$label.json" "$out/compare_${label}_no_retest.txt" <<'PY'
import json, re, sys
c = json.load(open(sys.argv[1]))
before = int(re.search(r"^(\d+) slower", open(sys.argv[2]).read(), re.M).group(1))
after = sum(x["verdict"] == "slower" for x in c["cases"])
r = c.get("retest")
print(f"slower before the retest: {before}; after: {after}; the retest removed {before - after}"
      + (f" ({r['retested']} retested, {r['confirmed']} confirmed; {r['file']})" if r else ""))
for x in c["cases"]:
    if x.get("retest"):
        print(f"  {x['variant']} {x['params']}: {x['note']}")
PY
  python3 "$here/demo_summary.py" "$out/compare_$label.json" "$file"
  [ "$code" = "$expect" ] || status=1
}
[ ${#runs[@]} -ge 11 ] && judge aa1 "${runs[10]}" 0
[ ${#runs[@]} -ge 12 ] && judge aa2 "${runs[11]}" 0
[ ${#runs[@]} -ge 13 ] && judge slow "${runs[12]}" 1 --kernels-dir "$slow_dir"
echo "(tables without the retest: $out/compare_*_no_retest.txt; verdicts with it: $out/compare_*.json; retest runs: $out/$study/retest/)"

echo "== history: the runs in order, judged after each (run 13 on are slowed)"
for n in $(seq 12 "${#runs[@]}"); do
  "$kbench" history "${runs[@]:0:n}" --json > "$out/history_$n.json"; code=$?
  python3 - "$out/history_$n.json" "$n" "$code" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))
def said(cases):
    return ", ".join(f"{c['variant']} {c['params']}: {c['verdict']} at run "
                     f"{c['changes'][-1]['run'] + 1} ({100 * (c['changes'][-1]['ratio'] - 1):+.1f}%)"
                     for c in cases)
flagged = [c for c in h["cases"]
           if c["verdict"] not in ("stable", "insufficient_data", "machine_changed")]
moved = [c for c in h["cases"] if c["verdict"] == "machine_changed"]
print(f"after run {sys.argv[2]}: exit {sys.argv[3]}; " + (said(flagged) or "nothing flagged")
      + (f"; put down to a move to another machine: {said(moved)}" if moved else ""))
PY
done
"$kbench" history "${runs[@]}" --wide --html "$out/history.html" > "$out/history.txt"
echo "(history table: $out/history.txt; trend charts: $out/history.html)"
exit $status
