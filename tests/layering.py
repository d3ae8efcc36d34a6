#!/usr/bin/env python3
"""The source files import one another without a circle, and the filter core
and the shared region import nothing from pgrx.

Every reference to another module (a `use` statement, or a path such as
`super::cut::pass` or `crate::region::files::DIR` in the code) is an edge from
the file that makes it to the file that defines that module; `mod` declarations
are not. Test modules inside a file (`#[cfg(test)] mod tests`) are left out.
Prints the graph's layers and exits non-zero on a circle or a forbidden import.
  python3 tests/layering.py [SRC_DIR]
"""
import os
import re
import sys

src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src"))


def module_of(path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return tuple(["crate"] + rel)


files = {}
for root, _, names in os.walk(src):
    for n in names:
        if n.endswith(".rs"):
            p = os.path.join(root, n)
            files[module_of(p)] = p


def code_of(path):
    """The file's text without comments, strings, and inline test modules."""
    out, skip = [], False
    lines = open(path).read().split("\n")
    for i, line in enumerate(lines):
        if re.match(r"\s*#\[cfg\(.*\btest\b", line) and i + 1 < len(lines) and re.match(r"\s*(pub(\(\w+\))? )?mod \w+\s*\{", lines[i + 1]):
            skip = True
        if not skip:
            out.append(re.sub(r"//.*", "", line))
        if skip and line.startswith("}"):
            skip = False
    text = "\n".join(out)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def resolve(mod, path):
    """The module (a key of `files`) that path `a::b::c` used in `mod` names."""
    parts = path.split("::")
    if parts[0] == "crate":
        base = ["crate"]
        parts = parts[1:]
    elif parts[0] in ("super", "self"):
        base = list(mod)
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                base.pop()
            parts = parts[1:]
    elif tuple(mod) + (parts[0],) in files:
        base = list(mod)  # a child module, named relative to this one
    else:
        return None
    best = tuple(base)
    for p in parts:
        cand = tuple(base + [p])
        if cand in files:
            base.append(p)
            best = cand
        else:
            break
    return best if best in files else None


edges = {m: set() for m in files}
pgrx_users = set()
for mod, path in files.items():
    code = code_of(path)
    if re.search(r"\bpgrx\b", code):
        pgrx_users.add(mod)
    # use statements, with their braces flattened one level
    for m in re.finditer(r"\buse\s+(\w[\w:]*)(::\{([^;]*)\})?\s*;", code):
        head, group = m.group(1), m.group(3)
        targets = [head] if group is None else [head + "::" + g.strip().split(" ")[0] for g in re.split(r",(?![^{]*\})", group) if g.strip()]
        for t in targets:
            t = t.replace("::{", "::").rstrip(":")
            r = resolve(mod, t)
            if r and r != mod:
                edges[mod].add(r)
    for m in re.finditer(r"(?<![\w:])(\w+(?:::\w+)+)", code):
        r = resolve(mod, m.group(1))
        if r and r != mod:
            edges[mod].add(r)
    # A parent's `mod` declarations and the children it reaches through them
    # are not counted when it only declares them; `pub use child::X` is.

name = lambda m: os.path.relpath(files[m], src)

# Circles: Tarjan's strongly connected components.
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        sccs.append(comp)


sys.setrecursionlimit(10000)
for v in sorted(files):
    if v not in index:
        visit(v)

failed = False
for comp in sccs:
    if len(comp) > 1:
        failed = True
        print("layering: FAIL: these files import one another in a circle: " + ", ".join(sorted(name(m) for m in comp)))
        for m in sorted(comp):
            print("  " + name(m) + " -> " + ", ".join(sorted(name(w) for w in edges[m] if w in comp)))
for mod in sorted(pgrx_users):
    if mod[1:2] in (("filter",), ("region",)):
        failed = True
        print(f"layering: FAIL: {name(mod)} uses pgrx (the filter core and the region must not)")

if not failed:
    # Layers: a file's layer is one more than the highest layer it imports.
    layer = {}

    def depth(m):
        if m not in layer:
            layer[m] = 1 + max((depth(w) for w in edges[m]), default=-1)
        return layer[m]

    for m in files:
        depth(m)
    top = max(layer.values())
    for d in range(top + 1):
        print(f"layer {d}: " + " ".join(sorted(name(m) for m in files if layer[m] == d)))
    print(f"layering: ok ({len(files)} files, {sum(len(e) for e in edges.values())} imports, no circle; filter/ and region/ free of pgrx)")
sys.exit(1 if failed else 0)
