#!/usr/bin/env python3
"""The source files import one another without a circle, the filter core
and the shared region import nothing from pgrx, and each of those two lower
layers is reached only through its front: its root file (`filter/mod.rs`,
`region/mod.rs`) declares its file modules private and exports what the layers
above may use, so no file outside a layer names one of the layer's inner
modules.

Every reference to another module (a `use` statement, or a path such as
`super::cut::pass` or `crate::region::files::DIR` in the code) is an edge from
the file that makes it to the file that defines that module; `mod` declarations
are not. Test modules count too, inline or in their own files (a test module in
a file of its own counts as part of the file that declares it).
Prints the graph's layers and exits non-zero on a circle or a forbidden import.
  python3 tests/tools/layering.py [SRC_DIR]
  python3 tests/tools/layering.py --self-test   checks that it finds circles in
                                                small trees with tricky imports
"""
import os
import re
import sys



def self_test():
    """Small trees with the import forms that are easy to miss: each must be
    reported as a failure (or, where the case says so, must not)."""
    import subprocess
    import tempfile
    lib = "pub mod a;\npub mod b;\npub mod p;\n"
    p = "pub mod q;\npub mod r;\n"
    tail = "\npub struct A;\npub struct X;\npub fn g() {}\n"
    cases = [
        ("a group two deep", {"a.rs": "use crate::{p::{q, r::X}};", "p/r.rs": "use crate::a::A;"}, True),
        ("a glob of the parent", {"p/mod.rs": p + "pub use r::X;", "p/r.rs": "use super::*;"}, True),
        ("self in a group", {"a.rs": "use crate::{b::{self}};", "b.rs": "pub(crate) use crate::a::A;"}, True),
        ("a path in code after a char literal", {"a.rs": "fn f() { let q = '\"'; crate::b::g(); }", "b.rs": "use crate::a::A;"}, True),
        ("code under cfg(not(test))", {"a.rs": "#[cfg(not(test))]\nmod m {\n    use crate::b::X;\n}", "b.rs": "use crate::a::A;"}, True),
        ("only a test module imports back", {"a.rs": "use crate::b::X;", "b.rs": "#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}"}, True),
        ("a test module uses its parent", {"a.rs": "use crate::b::X;", "b.rs": "#[cfg(test)]\nmod tests {\n    use super::*;\n}"}, False),
        ("a test module in its own file imports back", {"a.rs": "use crate::b::X;", "b.rs": "#[cfg(test)]\nmod tests;", "b/tests.rs": "use super::*;\nuse crate::a::A;"}, True),
        ("a test module in its own file uses its parent", {"a.rs": "use crate::b::X;", "b.rs": "#[cfg(test)]\nmod tests;", "b/tests.rs": "use super::*;"}, False),
        ("around a lower layer's front", {"filter/mod.rs": "mod inner;\npub use inner::X;", "filter/inner.rs": "", "a.rs": "use crate::filter::inner::X;"}, True),
        ("a lower layer's inner module made public", {"filter/mod.rs": "pub mod inner;", "filter/inner.rs": ""}, True),
        ("through a lower layer's front", {"filter/mod.rs": "mod inner;\npub use inner::X;", "filter/inner.rs": "", "a.rs": "use crate::filter::X;"}, False),
    ]
    ok = True
    for what, bodies, circle in cases:
        with tempfile.TemporaryDirectory() as d:
            tree = {"lib.rs": lib, "a.rs": "", "b.rs": "", "p/mod.rs": p, "p/q.rs": "", "p/r.rs": ""}
            tree.update(bodies)
            for n, body in tree.items():
                os.makedirs(os.path.dirname(os.path.join(d, "src", n)), exist_ok=True)
                open(os.path.join(d, "src", n), "w").write(body + tail)
            rc = subprocess.run([sys.executable, __file__, os.path.join(d, "src")], capture_output=True).returncode
            if (rc != 0) != circle:
                ok = False
                print(f"layering: self-test FAIL: {what}: {'not ' if circle else ''}reported as a failure")
    print("layering: self-test " + ("ok" if ok else "FAILED") + f" ({len(cases)} cases)")
    sys.exit(0 if ok else 1)


if sys.argv[1:] == ["--self-test"]:
    self_test()
src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "src"))


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
    """The file's text without comments, char and string literals; `super`
    inside an inline module (`mod tests { use super::*; }`, a front's
    `pub mod v2 { pub use super::dense::X; }`) names the file's own module.
    Test modules count like any other code: a test that imports back makes a
    circle too."""
    text = open(path).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"'(\\.|[^'\\\n])'", "' '", text)  # char literals, not lifetimes
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    inline = re.compile(r"\bmod\s+\w+\s*\{")
    while True:
        m = inline.search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i:m.end()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        out.append(re.sub(r"\bsuper::", "self::", text[m.end():j]))
        i = j
    return "".join(out)


def expand(prefix, tree):
    """The paths a `use` tree names: `a::{b, c::{d, e as f}, self, *}` gives
    a::b, a::c::d, a::c::e, a, a (a glob or `self` names the prefix itself)."""
    tree = tree.strip()
    if tree.startswith("{") and tree.endswith("}"):
        items, depth, cur = [], 0, ""
        for ch in tree[1:-1]:
            if ch == "," and depth == 0:
                items.append(cur)
                cur = ""
                continue
            depth += {"{": 1, "}": -1}.get(ch, 0)
            cur += ch
        items.append(cur)
        return [p for it in items if it.strip() for p in expand(prefix, it)]
    head, sep, rest = tree.partition("::")
    head = head.split(" as ")[0].strip()
    if head in ("*", "self"):
        return [prefix]
    path = head if not prefix else prefix + "::" + head
    return expand(path, rest) if sep else [path]


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
codes = {}
pgrx_users = set()
for mod, path in files.items():
    code = codes[mod] = code_of(path)
    if re.search(r"\bpgrx\b", code):
        pgrx_users.add(mod)
    # use statements, their trees expanded
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        for t in expand("", m.group(1)):
            r = resolve(mod, t)
            if r and r != mod:
                edges[mod].add(r)
    for m in re.finditer(r"(?<![\w:])(\w+(?:::\w+)+)", code):
        r = resolve(mod, m.group(1))
        if r and r != mod:
            edges[mod].add(r)
    # A parent's `mod` declarations and the children it reaches through them
    # are not counted when it only declares them; `pub use child::X` is.

# A test module in a file of its own (`#[cfg(test)] mod tests;`, or the
# `pg_test` feature's) is part of the file that declares it: its imports are
# that file's, so a test that imports back makes a circle as it would inline.
part_of = {}
for mod, path in files.items():
    for m in re.finditer(r"#\[cfg\([^\]]*(?:\btest\b|pg_test)[^\]]*\]\s*(?:pub(?:\([\w:]+\))?\s+)?mod\s+(\w+)\s*;", codes[mod]):
        child = mod + (m.group(1),)
        if child in files:
            part_of[child] = mod
# ...unless other files import it: then it is a helper of the tests (a
# random stream, say), a module of its own.
for child in list(part_of):
    if any(child in targets for m, targets in edges.items() if m != child and m[:len(child)] != child):
        del part_of[child]


def owner(m):
    while m in part_of:
        m = part_of[m]
    return m


folded = {m: set() for m in files if m not in part_of}
for m, targets in edges.items():
    for t in targets:
        if owner(t) != owner(m):
            folded[owner(m)].add(owner(t))
edges = folded
files = {m: p for m, p in files.items() if m not in part_of}

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
LOWER = ("filter", "region")
for layer_name in LOWER:
    root = ("crate", layer_name)
    if root not in files:
        continue
    decl = code_of(files[root])
    for m in re.finditer(r"^\s*pub(\([\w:]+\))?\s+mod\s+(\w+)\s*;", decl, flags=re.M):
        failed = True
        print(f"layering: FAIL: {name(root)} makes its inner module `{m.group(2)}` public: export names instead")
    for mod in sorted(files):
        if mod[1:2] == (layer_name,):
            continue
        around = sorted(name(w) for w in edges[mod] if w[1:2] == (layer_name,) and w != root)
        if around:
            failed = True
            print(f"layering: FAIL: {name(mod)} goes around the front of {layer_name}/ to " + ", ".join(around))

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
    print(f"layering: ok ({len(files)} files, {sum(len(e) for e in edges.values())} imports, no circle; filter/ and region/ free of pgrx, reached only through their fronts)")
sys.exit(1 if failed else 0)
