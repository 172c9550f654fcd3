#!/usr/bin/env python3
"""Module import graph of a Rust crate's src/ (file-level modules) and its cycles (SCCs > 1).
Edges: `crate::a::b` and `super::` paths in non-test code. Parent->child `mod` lines are not edges."""
import os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else "src"
mods = {}
for dp, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith(".rs"): continue
        p = os.path.join(dp, f); rel = os.path.relpath(p, root)[:-3].split(os.sep)
        if rel[-1] == "mod": rel = rel[:-1]
        if rel in (["lib"], ["main"]): rel = []
        if rel and rel[0] == "bin": continue
        mods[tuple(rel)] = p
def resolve(path):
    for k in range(len(path), 0, -1):
        if tuple(path[:k]) in mods: return tuple(path[:k])
    return None
edges = {m: set() for m in mods}
for m, p in mods.items():
    src = open(p).read()
    t = src.find("#[cfg(test)]")
    if t >= 0: src = src[:t]
    src = re.sub(r"//[^\n]*", "", src)
    # expand `use crate::{a, b::c}` groups one level
    for g in re.finditer(r"\b(crate|super)::\{([^}]*)\}", src):
        for part in g.group(2).split(","):
            seg = [x for x in re.split(r"::", part.strip()) if x and re.match(r"^[a-z_][a-z0-9_]*$", x)]
            if g.group(1) == "super": seg = list(m[:-1]) + seg
            r = resolve(seg)
            if r and r != m and r[:len(m)] != m: edges[m].add(r)
    for u in re.finditer(r"\b(crate|super)((?:::[a-z_][a-z0-9_]*)+)", src):
        seg = u.group(2).split("::")[1:]
        if u.group(1) == "super":
            base = list(m[:-1]) if not p.endswith("mod.rs") else list(m[:-1])
            # in a file module a.rs, super is its parent; in mod.rs of a/, super is a's parent
            seg = base + seg
        r = resolve(seg)
        if r is None or r == m: continue
        if r == m[:len(r)]: continue  # a module naming its ancestor's items: parent edge, not counted
        if r[:len(m)] == m: continue  # into its own children
        edges[m].add(r)
# Tarjan
idx = {}; low = {}; st = []; on = set(); sccs = []; c = [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(comp)
for v in edges:
    if v not in idx: sc(v)
for comp in sccs:
    print("cycle:", " <-> ".join("::".join(x) or "crate" for x in sorted(comp)))
up = [(m, r) for m in edges for r in edges[m] if m[:1] == ("device",) and r[:1] in (("algos",), ("manifest",), ("grid",), ("measure",), ("run",))]
for m, r in up: print("device up-import:", "::".join(m), "->", "::".join(r))
print(len(sccs), "cycles")
if "-v" in sys.argv:
    for comp in sccs:
        s = set(comp)
        for m in sorted(comp):
            print("  ", "::".join(m), "->", ", ".join(sorted("::".join(r) for r in edges[m] if r in s)))
sys.exit(1 if sccs or up else 0)
