"""`./toolkit imports`: the floors and circles of an import graph (pure), and the toolkit's own map (quick)."""

from __future__ import annotations

from gdrkit import importmap


def edges(**imports: str) -> dict[str, frozenset[str]]:
    return {node: frozenset(targets.split()) for node, targets in imports.items()}


def test_circles_are_the_strongly_connected_parts() -> None:
    graph = edges(a="b", b="c", c="a d", d="", e="e f", f="")
    assert importmap.circles(graph) == [("a", "b", "c")]


def test_floors_put_a_circle_on_one_floor_above_what_it_imports() -> None:
    graph = edges(top="a", a="b", b="a d", d="", lone="")
    assert importmap.floors(graph) == [("d", "lone"), ("a", "b"), ("top",)]


def test_the_toolkits_map_has_no_circle_and_the_doctor_at_the_bottom() -> None:
    levels = importmap.import_map("gdrkit")
    assert [lv.package for lv in levels][0] == "gdrkit"
    assert all(not lv.circles and not lv.back_up for lv in levels), importmap.render(levels)
    top = levels[0]
    assert "gdrkit.gdrcopy_doctor" in top.floors[0] and top.imports["gdrkit.gdrcopy_doctor"] == frozenset()
    text = importmap.render(levels)
    assert text.startswith(f"== gdrkit: {len(top.floors)} floor(s), 0 circle(s), 0 arrow(s) back up\n")
