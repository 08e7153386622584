#!/usr/bin/env python3
"""Prints the import graph between dirthara's top-level modules and any cycle in it.

Test-only files (tests.rs, */tests/*, the in-memory backend and lease store) are left out:
tests may import anything. `crate::X` paths and `super::` paths that leave a module count.
Usage: python3 bench/module_cycles.py [crates/dirthara/src]
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "crates/dirthara/src"
TEST_ONLY = re.compile(r"(^|/)(tests?\.rs|tests/|memory\.rs)")

def top_module(path):
    rel = os.path.relpath(path, root)
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first

# `crate::Error` and the like: root re-exports, counted as an import of their module.
reexports = {}
lib = open(os.path.join(root, "lib.rs")).read()
for module, names in re.findall(r"pub use ([a-z_]+)::\{?([^;}]*)\}?;", lib):
    for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", names):
        reexports[name] = module

graph = {}
for dirpath, _, files in os.walk(root):
    for name in files:
        if not name.endswith(".rs"):
            continue
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, root)
        if TEST_ONLY.search(rel) or rel == "lib.rs":
            continue
        text = open(path).read()
        # Drop `#[cfg(test)] mod tests { ... }` blocks at the end of a file.
        cut = text.find("#[cfg(test)]\nmod tests {")
        if cut >= 0:
            text = text[:cut]
        # Doc links are not imports.
        text = re.sub(r"//.*", "", text)
        me = top_module(path)
        deps = graph.setdefault(me, set())
        targets = re.findall(r"\bcrate::([a-z_]+)", text)
        targets += [reexports[n] for n in re.findall(r"\bcrate::([A-Z][A-Za-z]+)", text) if n in reexports]
        for target in targets:
            if target != me and os.path.exists(os.path.join(root, target + ".rs")):
                deps.add(target)

def cycles():
    found, stack, state = [], [], {}
    def visit(node):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                found.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = "done"
    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found

for module in sorted(graph):
    print(f"{module:12} -> {', '.join(sorted(graph[module])) or '-'}")
found = cycles()
print(f"\n{len(found)} cycle(s)")
for cycle in found:
    print("  " + " -> ".join(cycle))
sys.exit(1 if found else 0)
