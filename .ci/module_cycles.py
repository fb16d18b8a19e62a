#!/usr/bin/env python3
"""Fails when a crate's modules import each other in a circle.

For each crate directory given, every file under src/ is a module; an edge A -> B is a
`crate::…`, `super::…` or `self::…` path in A (in a `use` or inline, tests excluded) that names
module B. A strongly connected component of more than one module is a circle: printed with its
edges, and the exit status is 1. A circle means two modules share a concept that neither owns;
break it by moving that concept to the module that owns it.

A reader of paths, not a Rust parser: it skips comments, strings and `#[cfg(test)] mod … { … }`
blocks, and resolves a path to the longest module prefix it names. A module's use of its own
ancestors (`super::…` up to `lib.rs`) is not an edge: a parent declares its children, and what
it defines for them to share is the tree's shape, not a circle.

    python3 .ci/module_cycles.py crates/picker crates/engine
"""
import os
import re
import sys

TEST_MOD = re.compile(r'#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{')
PATH = re.compile(r'\b((?:crate|super|self)(?:::\w+)+)')
USE = re.compile(r'\buse\s+([^;]+);')


def module_of(src, path):
    parts = os.path.relpath(path, src)[:-3].split(os.sep)
    if parts[-1] in ('mod', 'lib', 'main'):
        parts = parts[:-1]
    return tuple(parts)


def strip(text):
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    while (m := TEST_MOD.search(text, i)) is not None:
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {'{': 1, '}': -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return ''.join(out)


def expand(body):
    """`a::{b, c::{d}}` -> `a::b`, `a::c::d`."""
    if '{' not in body:
        return [body.split(' as ')[0]]
    i = body.index('{')
    prefix, inner = body[:i], body[i + 1:-1]
    items, depth, cur = [], 0, ''
    for ch in inner:
        if ch == ',' and depth == 0:
            items.append(cur)
            cur = ''
        else:
            depth += (ch == '{') - (ch == '}')
            cur += ch
    items.append(cur)
    return [prefix + p if p != 'self' else prefix.rstrip(':')
            for item in items if item for p in expand(item)]


def paths(text):
    for m in USE.finditer(text):
        yield from expand(re.sub(r'\s+', '', m.group(1)))
    for m in PATH.finditer(text):
        yield m.group(1)


def resolve(module, path, modules):
    segs = path.split('::')
    if segs[0] == 'crate':
        base, segs = (), segs[1:]
    else:
        base = module
        while segs and segs[0] in ('super', 'self'):
            if segs[0] == 'super':
                base = base[:-1]
            segs = segs[1:]
    best = base if base in modules else None
    for s in segs:
        base = base + (s,)
        if base not in modules:
            break
        best = base
    return best


def circles(graph):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(crate):
    src = os.path.join(crate, 'src')
    files = {module_of(src, os.path.join(root, n)): os.path.join(root, n)
             for root, _, names in os.walk(src) for n in names if n.endswith('.rs')}
    graph = {m: set() for m in files}
    for m, path in files.items():
        with open(path, encoding='utf-8') as f:
            text = strip(f.read())
        for p in paths(text):
            target = resolve(m, p, graph)
            # A module's own ancestors declare it (`mod …;`) and hold what it shares with its
            # siblings: using them is the tree's shape, not an import circle.
            if target is not None and m[:len(target)] != target:
                graph[m].add(target)
    name = lambda m: '::'.join(m) or 'lib'
    found = circles(graph)
    for comp in found:
        print(f'{crate}: module circle: ' + ' <-> '.join(map(name, comp)))
        for m in comp:
            print(f'    {name(m)} -> ' + ', '.join(sorted(name(t) for t in graph[m] if t in comp)))
    return bool(found)


if __name__ == '__main__':
    sys.setrecursionlimit(10_000)
    failed = [c for c in sys.argv[1:] if check(c.rstrip('/'))]
    sys.exit(1 if failed else 0)
