#!/usr/bin/env bash
# `kbench tune` on a GPU, end to end, in one command of a few minutes: the example kernel
# (examples/tune: a sum with BLOCK x ITEMS = 6 x 8 = 48 configurations) at 3 sizes, tuned with
# the model-based strategy (Bayesian optimisation, 14 evaluations per size: 30% of 48) and with
# the exhaustive one, and the same grid run by `kbench run`. Prints, per size: exhaustive's best,
# the model-based winner, their ratio (both configurations' medians from the exhaustive tune, so
# one measurement of each), the evaluations used, the separation verdicts; and checks that
# exhaustive's winner is `kbench run`'s best. Run from the repository root, with the binary from
# scripts/gpu-bundle.sh:
#   bash scripts/tune-demo.sh [kbench binary] [output folder] [kbench tune/run options]
# Exit 0 when every size's model-based winner is within 2% of exhaustive's best with at most 30%
# of its evaluations, and exhaustive's winner is run's best (or statistically tied with it);
# 1 otherwise; 2 when a command failed.
set -uo pipefail
kbench="${1:-.gpu-bundle/kbench}"
out="${2:-out/tune-demo}"
shift 2 2>/dev/null || shift $#
options=("$@")
manifest=examples/tune/tune.toml
mkdir -p "$out"
start=$(date +%s)

echo "== exhaustive ($((SECONDS))s)"
"$kbench" tune "$manifest" --strategy exhaustive --out-dir "$out" --json "${options[@]}" \
  > "$out/exhaustive.json" 2> "$out/exhaustive.log" || { tail -n 20 "$out/exhaustive.log"; exit 2; }
echo "== bayes ($((SECONDS))s)"
"$kbench" tune "$manifest" --out-dir "$out" --json "${options[@]}" \
  --export-header "$out/tuned.h" > "$out/bayes.json" 2> "$out/bayes.log" || { tail -n 20 "$out/bayes.log"; exit 2; }
echo "== kbench run over the same grid ($((SECONDS))s)"
"$kbench" run "$manifest" --out-dir "$out/run" --results "$out/run-results.json" --overwrite-results \
  "${options[@]}" > "$out/run.txt" 2> "$out/run.log"
code=$?
# Exit 1 is a failed case (none is expected from this kernel); anything else is a failed command.
[ "$code" -le 1 ] || { tail -n 20 "$out/run.log"; exit 2; }
echo "== done in $(( $(date +%s) - start ))s"

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
ex = json.load(open(f"{out}/exhaustive.json"))
bo = json.load(open(f"{out}/bayes.json"))
run = json.load(open(f"{out}/run-results.json"))

def key(values):
    return f"block={values['block']} items={values['items']}"

run_best = {}
failed = 0
for case in run["cases"]:
    if case["status"] != "passed":
        failed += 1
        continue
    n, m = case["params"]["n"], case["summary"]["median_s"]
    if n not in run_best or m < run_best[n][0]:
        run_best[n] = (m, key(case["params"]))

ok = True
print(f"{'n':>10}  {'exhaustive best':<22} {'bayes winner':<22} {'ratio':>6}  {'evals':>7}  verdicts")
for pe, pb in zip(ex["problems"], bo["problems"]):
    n = pe["params"]["n"]
    assert pb["params"]["n"] == n
    medians = {key(e["values"]): e["median_s"] for e in pe["evaluations"] if e["median_s"]}
    ex_best = min(medians, key=medians.get)
    ew, bw = pe.get("winner"), pb.get("winner")
    if not ew or not bw:
        print(f"{n:>10}  no winner: {pe.get('no_winner')} / {pb.get('no_winner')}")
        ok = False
        continue
    bo_key = key(bw["values"])
    ratio = medians[bo_key] / medians[ex_best]
    used, total = len(pb["evaluations"]), len(pe["evaluations"])
    print(f"{n:>10}  {ex_best:<15} {medians[ex_best]*1e6:6.1f}us {bo_key:<15} {medians[bo_key]*1e6:6.1f}us {ratio:6.3f}  {used:>3}/{total:<3}"
          f"  exhaustive {ew['verdict']['kind']}, bayes {bw['verdict']['kind']}")
    for name, w in (("exhaustive", ew), ("bayes", bw)):
        v = w["verdict"]
        slower = v.get("runner_up_slower_by")
        p = v.get("p_value")
        ru = w.get("runner_up_values")
        if ru:
            print(f"{'':>12}{name}: {key(w['values'])} vs runner-up {key(ru)}: {v['kind']}, "
                  f"{slower*100:.2f}% apart, p = {p:.2e}, {w['rounds']} rounds")
    if ratio > 1.02 or used > 0.3 * total:
        ok = False
    run_key = run_best[n][1]
    same = run_key == key(ew["values"])
    tied = ew["verdict"]["kind"] != "separated" and ew.get("runner_up_values") and key(ew["runner_up_values"]) == run_key
    print(f"{'':>12}exhaustive's winner {key(ew['values'])} vs kbench run's best {run_key}: "
          + ("SAME" if same else ("tied (the verdict says the two are not separated)" if tied else "DIFFERENT")))
    if not same and not tied:
        ok = False
print(f"kbench run: {failed} cases failed" if failed else "kbench run: every case passed")
print("DEMO PASSED" if ok and not failed else "DEMO FAILED")
sys.exit(0 if ok and not failed else 1)
PY
