#!/usr/bin/env bash
# Issue 16 on a machine with two or more GPUs (the GPU machine kind nvidia-h200-x2): runs a
# study on one GPU (`--devices 0`), then on every GPU (`--devices all`), and checks that both
# hold the same cases with the same statuses and accuracy, that every CUDA case of the second
# names its GPU, and that its wall time is at most 0.6x the first's. Prints PASS/FAIL lines and
# exits 1 on a FAIL.
#   bash scripts/multi-gpu-check.sh [MANIFEST] [OUT_DIR]     (kbench: $KBENCH or .gpu-bundle/kbench)
set -uo pipefail
cd "$(dirname "$0")/.."
kbench=${KBENCH:-.gpu-bundle/kbench}
manifest=${1:-experiments/multi_gpu.toml}
out=${2:-out/multi-gpu-check}
rm -rf "$out" && mkdir -p "$out"
nvidia-smi -L || true
grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
echo "cgroup memory.max: $(cat /sys/fs/cgroup/memory.max 2>/dev/null || echo none)"
"$kbench" check "$manifest"
t0=$(date +%s.%N)
"$kbench" run "$manifest" --devices 0 --out-dir "$out/one" > "$out/one.txt" 2>&1
echo "one GPU: exit $?"
t1=$(date +%s.%N)
"$kbench" run "$manifest" --devices all --out-dir "$out/all" > "$out/all.txt" 2>&1
echo "all GPUs: exit $?"
t2=$(date +%s.%N)
one=$(ls "$out"/one/*/*.json | head -1)
all=$(ls "$out"/all/*/*.json | head -1)
echo "finished cases per GPU, from the progress lines:"
grep -oE 'GPU [0-9]+\)' "$out/all.txt" | sort | uniq -c
"$kbench" report "$all" | head -12
"$kbench" compare "$one" "$all" | grep -E '^(moved GPU|[0-9]+ slower)' | head -8
python3 - "$one" "$all" "$t0" "$t1" "$t2" <<'PY'
import json, sys
one, all_, t0, t1, t2 = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
a, b = json.load(open(one)), json.load(open(all_))
def key(c): return (c["variant"], json.dumps(c["params"], sort_keys=True))
def acc(c): return (c["status"], [(o["name"], o["accuracy"]["passed"], o["accuracy"]["wrong_elements"]) for o in c["outputs"]])
def err(c): return [o["accuracy"]["max_rel_err"] for o in c["outputs"]]
ca, cb = {key(c): c for c in a["cases"]}, {key(c): c for c in b["cases"]}
ok = True
def check(name, cond, detail=""):
    global ok
    ok &= bool(cond)
    print(("PASS" if cond else "FAIL") + f": {name} {detail}")
check("same cases", ca.keys() == cb.keys(), f"({len(ca)} and {len(cb)})")
diff = [k for k in ca if k in cb and acc(ca[k]) != acc(cb[k])]
check("same statuses and accuracy", not diff, f"(differ: {diff[:3]})")
errs = [k for k in ca if k in cb and err(ca[k]) != err(cb[k])]
print(f"INFO: max_rel_err bit-identical in {len(ca) - len(errs)} of {len(ca)} cases (differ: {errs[:3]})")
cuda = [c for c in b["cases"] if c["backend"] == "cuda" and c["status"] != "skipped"]
named = [c for c in cuda if c.get("device")]
check("every CUDA case names its GPU", cuda and len(named) == len(cuda), f"({len(named)} of {len(cuda)})")
per = {}
for c in named: per[c["device"]["pci_bus_id"]] = per.get(c["device"]["pci_bus_id"], 0) + 1
print("cases per GPU:", per)
print("devices:", [(d["pci_bus_id"], round(d["measured_copy_gbytes_per_s"])) for d in b["environment"].get("devices", [])])
check("ran on 2+ GPUs", len(per) >= 2)
w1, w2 = t1 - t0, t2 - t1
check("wall time <= 0.6x", w2 <= 0.6 * w1, f"(one GPU {w1:.1f} s, all {w2:.1f} s, ratio {w2 / w1:.2f})")
sys.exit(0 if ok else 1)
PY
