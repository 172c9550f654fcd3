#!/usr/bin/env bash
# `kbench tune` on a GPU, end to end, in one command of a few minutes: the example kernel
# (examples/tune: a sum with BLOCK x ITEMS = 6 x 8 = 48 configurations) at 3 sizes, tuned with
# the model-based strategy (Bayesian optimisation, 14 evaluations per size: 30% of 48) and with
# the exhaustive one, and the same grid run by `kbench run`. Then, per size, two pairs are
# compared by the procedure the tune decides its winner with (`kbench tune` of a manifest holding
# only the pair: interleaved rounds, each configuration in a fresh worker per round, a paired
# interval over the rounds), never from two separate single measurements:
#   - the model-based winner against exhaustive's winner: the ratio of their times (with its
#     interval), the model-based search passing when it is at most 1.02;
#   - exhaustive's winner against `kbench run`'s best: SAME (one configuration), TIED (the pair's
#     verdict a tie), NOT SEPARATED (unresolved: neither shown apart nor within the tie band) or
#     DIFFERENT (separated, run's best the faster).
# A pair of one configuration is not measured (ratio 1, SAME); a pair takes at most PAIR_ROUNDS
# rounds (default 8, at least 5). Run from the repository root,
# with the binary from scripts/gpu-bundle.sh:
#   bash scripts/tune-demo.sh [kbench binary] [output folder] [kbench tune/run options]
#   REUSE=1 bash scripts/tune-demo.sh ...   # keep the phases an earlier, cut-short call finished
# Exit 0 when every size's model-based winner is within 2% of exhaustive's (by the pair's
# re-measurement) with at most 30% of its evaluations, and no exhaustive winner is DIFFERENT
# from run's best; 1 otherwise; 2 when a command failed.
set -uo pipefail
kbench="${1:-.gpu-bundle/kbench}"
out="${2:-out/tune-demo}"
shift 2 2>/dev/null || shift $#
options=("$@")
manifest=examples/tune/tune.toml
mkdir -p "$out"
start=$(date +%s)

# REUSE=1 keeps a phase's JSON already in the output folder (a demo cut short by a time limit
# goes on from there) instead of measuring it again.
have() { [ "${REUSE:-0}" = 1 ] && [ -s "$out/$1" ] && echo "== $1: kept from an earlier call"; }
if ! have exhaustive.json; then
  echo "== exhaustive ($((SECONDS))s)"
  "$kbench" tune "$manifest" --strategy exhaustive --out-dir "$out" --json "${options[@]}" \
    > "$out/exhaustive.json" 2> "$out/exhaustive.log" || { tail -n 20 "$out/exhaustive.log"; exit 2; }
fi
if ! have bayes.json; then
  echo "== bayes ($((SECONDS))s)"
  "$kbench" tune "$manifest" --out-dir "$out" --json "${options[@]}" \
    --export-header "$out/tuned.h" > "$out/bayes.json" 2> "$out/bayes.log" || { tail -n 20 "$out/bayes.log"; exit 2; }
fi
if ! have run-results.json; then
  echo "== kbench run over the same grid ($((SECONDS))s)"
  "$kbench" run "$manifest" --out-dir "$out/run" --results "$out/run-results.json" --overwrite-results \
    "${options[@]}" > "$out/run.txt" 2> "$out/run.log"
  code=$?
  # Exit 1 is a failed case (none is expected from this kernel); anything else is a failed command.
  [ "$code" -le 1 ] || { tail -n 20 "$out/run.log"; exit 2; }
fi
echo "== the pairs, re-measured in rounds ($((SECONDS))s)"

python3 - "$out" "$kbench" "$manifest" "${options[@]}" <<'PY'
import json, os, subprocess, sys
out, kbench, manifest, options = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
ex = json.load(open(f"{out}/exhaustive.json"))
bo = json.load(open(f"{out}/bayes.json"))
run = json.load(open(f"{out}/run-results.json"))
source = open(manifest).read()
# The most rounds of a pair's re-measurement (at least 5, the first look).
pair_rounds = int(os.environ.get("PAIR_ROUNDS", "8"))

def key(values):
    return f"block={values['block']} items={values['items']}"

run_best, failed = {}, 0
for case in run["cases"]:
    if case["status"] != "passed":
        failed += 1
        continue
    n, m = case["params"]["n"], case["summary"]["median_s"]
    if n not in run_best or m < run_best[n][0]:
        run_best[n] = (m, {"block": case["params"]["block"], "items": case["params"]["items"]})

def pair_tune(name, pairs):
    """Re-measures each size's pair (a, b) by `kbench tune` of a manifest holding only them;
    returns {n: winner} of the pairs measured (sizes whose pair is one configuration left out)."""
    pairs = {n: (a, b) for n, (a, b) in pairs.items() if key(a) != key(b)}
    if not pairs:
        return {}
    where = " or ".join(
        f"(n == {n} and block == {v['block']} and items == {v['items']})"
        for n, (a, b) in pairs.items() for v in (a, b))
    grid_end, end = source.index("[tune]"), source.index("[custom]")
    text = (source[:grid_end] + f'where = "{where}"\n\n'
            + "[tune]\naxes = [\"block\", \"items\"]\nstrategy = \"exhaustive\"\ntop = 2\n"
            + f"rounds = {pair_rounds}\nmin_rounds = 5\ntie_within = 0.01\n\n" + source[end:])
    path = f"{out}/{name}.toml"
    kernel = os.path.abspath(os.path.join(os.path.dirname(manifest), "sum.cu"))
    open(path, "w").write(text.replace('sources = ["sum.cu"]', f'sources = ["{kernel}"]'))
    with open(f"{out}/{name}.json", "w") as stdout, open(f"{out}/{name}.log", "w") as stderr:
        code = subprocess.call([kbench, "tune", path, "--out-dir", out, "--json", *options], stdout=stdout, stderr=stderr)
    if code != 0:
        print(open(f"{out}/{name}.log").read()[-3000:])
        sys.exit(2)
    doc = json.load(open(f"{out}/{name}.json"))
    return {p["params"]["n"]: p["winner"] for p in doc["problems"]}

def slowdown(winner, of, against):
    """How much slower `of` is than `against` in a pair's verdict: (point, lo, hi)."""
    v = winner["verdict"]
    s, (lo, hi) = v["runner_up_slower_by"], v["runner_up_slower_by_ci"]
    if key(winner["values"]) == key(against):   # `of` is the runner-up
        return 1 + s, 1 + lo, 1 + hi
    return 1 / (1 + s), 1 / (1 + hi), 1 / (1 + lo)

sizes = [p["params"]["n"] for p in ex["problems"]]
ew = {p["params"]["n"]: p.get("winner") for p in ex["problems"]}
bw = {p["params"]["n"]: p.get("winner") for p in bo["problems"]}
if not all(ew.values()) or not all(bw.values()):
    print("a size has no winner:", [p.get("no_winner") for p in ex["problems"] + bo["problems"]])
    sys.exit(1)
model_pairs = pair_tune("pair-bayes-exhaustive", {n: (bw[n]["values"], ew[n]["values"]) for n in sizes})
run_pairs = pair_tune("pair-exhaustive-run", {n: (ew[n]["values"], run_best[n][1]) for n in sizes})

ok = True
print(f"{'n':>10}  {'exhaustive winner':<22} {'bayes winner':<22} {'ratio (interval)':<24} {'evals':>7}")
for p_ex, p_bo in zip(ex["problems"], bo["problems"]):
    n = p_ex["params"]["n"]
    e, b = ew[n], bw[n]
    used, total = len(p_bo["evaluations"]), len(p_ex["evaluations"])
    if n in model_pairs:
        r, lo, hi = slowdown(model_pairs[n], b["values"], e["values"])
        ratio = f"{r:.3f} ({lo:.3f} .. {hi:.3f})"
    else:
        r, ratio = 1.0, "1 (the same)"
    print(f"{n:>10}  {key(e['values']):<22} {key(b['values']):<22} {ratio:<24} {used:>3}/{total:<3}")
    for name, w in (("exhaustive", e), ("bayes", b)):
        v = w["verdict"]
        if not w.get("runner_up_values"):
            print(f"{'':>12}{name}'s verdict: {v['kind']}")
            continue
        lo, hi = v["runner_up_slower_by_ci"]
        print(f"{'':>12}{name}'s verdict: {v['kind']} after {w['rounds']} rounds: "
              f"{key(w['values'])} vs {key(w['runner_up_values'])}: runner-up "
              f"{v['runner_up_slower_by'] * 100:+.2f}% ({lo * 100:+.2f}% .. {hi * 100:+.2f}%, "
              f"{v['confidence'] * 100:.1f}%), between-round CV {(v.get('winner_round_cv') or 0) * 100:.1f}%")
    if r > 1.02 or used > 0.3 * total:
        ok = False
    rb = run_best[n][1]
    if n not in run_pairs:
        said = "SAME"
    else:
        w = run_pairs[n]
        kind = w["verdict"]["kind"]
        s, lo, hi = slowdown(w, rb, e["values"])
        said = {"tie": "TIED", "unresolved": "NOT SEPARATED"}.get(kind)
        if kind == "separated":
            said = "DIFFERENT" if key(w["values"]) == key(rb) else "exhaustive's winner faster (separated)"
        said += f" (run's best at {s:.3f}x, {lo:.3f} .. {hi:.3f}, {w['rounds']} rounds)"
    print(f"{'':>12}exhaustive's winner {key(e['values'])} vs kbench run's best {key(rb)}: {said}")
    if said.startswith("DIFFERENT"):
        ok = False
print(f"kbench run: {failed} cases failed" if failed else "kbench run: every case passed")
print("DEMO PASSED" if ok and not failed else "DEMO FAILED")
sys.exit(0 if ok and not failed else 1)
PY
code=$?
echo "== done in $(( $(date +%s) - start ))s"
exit $code
