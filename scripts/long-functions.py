#!/usr/bin/env python3
"""Functions in a Rust tree longer than a limit (default 150 lines), outside #[cfg(test)] modules.
Usage: scripts/long-functions.py [src] [limit]"""
import os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else "src"
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 150
found = 0
for dp, _, fs in os.walk(root):
    for f in sorted(fs):
        if not f.endswith(".rs"): continue
        p = os.path.join(dp, f)
        lines = open(p).read().split("\n")
        t = next((i for i, l in enumerate(lines) if l.strip() == "#[cfg(test)]"), len(lines))
        for i, l in enumerate(lines[:t]):
            m = re.match(r"^(\s*)(pub(\([a-z]+\))? )?(const )?(unsafe )?fn (\w+)", l)
            if not m: continue
            indent = len(m.group(1))
            # find the opening brace, then the closing brace at the same indent
            j = i
            while j < t and "{" not in lines[j] and not lines[j].rstrip().endswith(";"): j += 1
            if j >= t or lines[j].rstrip().endswith(";"): continue
            k = j + 1
            while k < t and not (lines[k].startswith(" " * indent + "}") and len(lines[k]) - len(lines[k].lstrip()) == indent): k += 1
            n = k - i + 1
            if n > limit:
                found += 1
                print(f"{p}:{i+1}: fn {m.group(6)}: {n} lines")
print(f"{found} functions over {limit} lines")
sys.exit(1 if found else 0)
