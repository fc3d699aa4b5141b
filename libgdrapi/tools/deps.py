#!/usr/bin/env python3
"""Who includes and calls whom inside libgdrapi, and whether any of it is a circle.

    libgdrapi/tools/deps.py [LIBGDRAPI_DIR]     print the picture; exit 1 on a circle

The calls come from the built objects (`nm` of build/obj/*.o, after `make`):
file A depends on file B when A references a symbol B defines, which an
inline function of a header counts towards too.  The includes are the
`#include "..."` lines of src/.  A circle is a set of files that depend on
each other through calls, or headers that include each other.  For each
header, "declares" names the files whose symbols it declares, so a header
that serves several files shows as such.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def includes(src: Path) -> dict[str, list[str]]:
    """file -> the local headers it includes, in order."""
    found: dict[str, list[str]] = {}
    for path in sorted(src.glob("*.[ch]")):
        names = INCLUDE.findall(path.read_text())
        found[path.name] = [n for n in names if (src / n).exists()]
    return found


def symbols(objdir: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """file -> symbols its object defines, and file -> symbols it references but does not define."""
    defined: dict[str, set[str]] = defaultdict(set)
    used: dict[str, set[str]] = defaultdict(set)
    for obj in sorted(objdir.glob("*.o")):
        source = obj.stem + ".c"
        out = subprocess.run(["nm", "-g", str(obj)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            fields = line.split()
            kind, name = fields[-2], fields[-1]
            (used if kind == "U" else defined)[source].add(name)
    return dict(defined), dict(used)


def calls(defined: Mapping[str, set[str]], used: Mapping[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """file -> file it calls -> the symbols."""
    owner = {name: source for source, names in defined.items() for name in names}
    edges: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for source, names in used.items():
        for name in names:
            if name in owner and owner[name] != source:
                edges[source][owner[name]].add(name)
    return {a: dict(b) for a, b in edges.items()}


def declares(src: Path, defined: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """header -> the files whose symbols its code (not its comments) names: declarations, inline calls."""
    found: dict[str, list[str]] = {}
    for header in sorted(src.glob("*.h")):
        words = set(re.findall(r"\b\w+\b", COMMENT.sub(" ", header.read_text())))
        found[header.name] = sorted(s for s, names in defined.items() if names & words)
    return found


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    src, objdir = root / "src", root / "build" / "obj"
    subprocess.run(["make", "-s", "-C", str(root)], check=True, stdout=subprocess.DEVNULL)
    inc = includes(src)
    defined, used = symbols(objdir)
    edges = calls(defined, used)

    print("includes:")
    for name, headers in inc.items():
        if headers:
            print(f"  {name}: {' '.join(headers)}")
    print("calls (file -> file: symbols):")
    for source in sorted(edges):
        for target in sorted(edges[source]):
            print(f"  {source} -> {target}: {' '.join(sorted(edges[source][target]))}")
    print("headers declare symbols of:")
    for header, owners in declares(src, defined).items():
        print(f"  {header}: {' '.join(owners) or '(types and macros only)'}")

    header_graph = {name: [h for h in headers if h.endswith(".h")] for name, headers in inc.items()}
    found = circles({a: list(b) for a, b in edges.items()}) + circles(header_graph)
    for group in found:
        print(f"circle: {' <-> '.join(group)}")
    if found:
        print(
            "error: libgdrapi has a dependency circle; a backend reaches the core only through backend.h "
            "and internal.h, and the core reaches a backend only through its ops",
            file=sys.stderr,
        )
        return 1
    print("no circle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
