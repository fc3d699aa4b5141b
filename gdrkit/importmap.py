"""The import map of a Python package (`./toolkit imports`): its floors, circles and arrows back up.

Read from the source by grimp (import-linter's graph, so the map and the
lint check's floors contracts see the same imports, function-level ones
included).  At the top level each direct child of the package (subpackage
or module) is one node; floor 0 imports no other child, and a child's floor
is one above the highest floor it imports.  Children that import each other,
directly or round a longer loop, form a circle: they share a floor, and the
fewest imports whose removal would break every circle are its arrows back up.  Then the same for the
modules inside each subpackage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Edges = Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class Arrow:
    importer: str  # module that imports
    imported: str  # module it imports
    line: int


@dataclass(frozen=True)
class Level:
    """One package's children: their floors, the circles among them and the imports that close those circles."""

    package: str
    floors: tuple[tuple[str, ...], ...]  # floors[n]: the children on floor n
    imports: Edges  # child -> the children it imports
    circles: tuple[tuple[str, ...], ...]
    back_up: tuple[Arrow, ...]


def circles(edges: Edges) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one node (Tarjan's algorithm), each sorted (pure)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def floors(edges: Edges) -> list[tuple[str, ...]]:
    """The nodes by floor: a circle's members share one, one above the highest floor any of them imports (pure)."""
    group: dict[str, tuple[str, ...]] = {node: (node,) for node in edges}
    for circle in circles(edges):
        for node in circle:
            group[node] = circle
    floor: dict[tuple[str, ...], int] = {}

    def floor_of(members: tuple[str, ...]) -> int:
        if members not in floor:
            floor[members] = -1  # on the walk: a circle is one group, so this is never read
            below = {group[s] for m in members for s in edges.get(m, ()) if group[s] != members}
            floor[members] = 1 + max((floor_of(b) for b in below), default=-1)
        return floor[members]

    by_floor: dict[int, list[str]] = {}
    for members in set(group.values()):
        by_floor.setdefault(floor_of(members), []).extend(members)
    return [tuple(sorted(by_floor[n])) for n in sorted(by_floor)]


def _child(module: str, package: str) -> str | None:
    """The direct child of package that module is or lies in, or None outside it."""
    if not module.startswith(package + "."):
        return None
    return package + "." + module[len(package) + 1 :].split(".")[0]


def level(graph: object, package: str) -> Level:
    """The map of package's direct children in a grimp ImportGraph."""
    import grimp

    assert isinstance(graph, grimp.ImportGraph)
    children = sorted(graph.find_children(package))
    imports: dict[str, set[str]] = {c: set() for c in children}
    for child in children:
        for module in sorted({child} | graph.find_descendants(child)):
            for imported in graph.find_modules_directly_imported_by(module):
                target = _child(imported, package)
                if target is not None and target != child:
                    imports[child].add(target)
    edges = {c: frozenset(t) for c, t in imports.items()}
    # The fewest imports whose removal leaves the children without a circle (grimp's choice).
    back_up = [
        Arrow(importer, imported, int(detail["line_number"]))
        for importer, imported in sorted(graph.nominate_cycle_breakers(package))
        for detail in graph.get_import_details(importer=importer, imported=imported)
    ]
    return Level(package, tuple(floors(edges)), edges, tuple(circles(edges)), tuple(back_up))


def import_map(package: str) -> list[Level]:
    """The top level of package, then each of its subpackages (with children), outermost first."""
    import grimp

    graph = grimp.build_graph(package, cache_dir=None)
    levels = [level(graph, package)]
    for child in sorted(graph.find_children(package)):
        if graph.find_children(child):
            levels.append(level(graph, child))
    return levels


def _short(name: str, package: str) -> str:
    return name[len(package) + 1 :] if name.startswith(package + ".") else name


def render(levels: Iterable[Level]) -> str:
    """The map as text: per package its floors (top first) with what each child imports, circles, arrows back up."""
    out: list[str] = []
    for lv in levels:
        p = lv.package
        out.append(
            f"== {p}: {len(lv.floors)} floor(s), {len(lv.circles)} circle(s), {len(lv.back_up)} arrow(s) back up"
        )
        for n in reversed(range(len(lv.floors))):
            for child in lv.floors[n]:
                targets = ", ".join(_short(t, p) for t in sorted(lv.imports[child])) or "-"
                out.append(f"  floor {n:2}  {_short(child, p):<16} -> {targets}")
        for circle in lv.circles:
            out.append(f"  circle: {' <-> '.join(_short(c, p) for c in circle)}")
        for arrow in lv.back_up:
            out.append(f"  back up: {arrow.importer}:{arrow.line} -> {arrow.imported}")
    return "\n".join(out) + "\n"
