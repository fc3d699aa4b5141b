"""The compatibility manifest: which package version was tested with which kernels and NVIDIA drivers.

Read from the matrix's results, never typed: `./toolkit matrix --junit FILE`
writes one testcase per entry and step, each with the entry's facts as
properties (kernel release, NVIDIA driver package and version, package
version; gdrkit.matrix.report).  An entry's verdict is "passed" when no step
failed and at least one ran, "failed at <step>" otherwise, "skipped: why"
when nothing ran.  Without results the published version is "untested".

The manifest is cumulative: manifest.json in the repository keeps every
version published before, each with what it was tested with.
"""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
UNTESTED = "untested"
# Properties gdrkit.matrix.report writes on each testcase.
PROP_KERNEL = "kernel"
PROP_DRIVER = "nvidia.driver"
PROP_VERSION = "package.version"


@dataclass(frozen=True)
class Tested:
    """One matrix entry's verdict on a package version."""

    entry: str
    kernel: str
    nvidia: str  # "<package> <version> (branch N)", or "none (softgpu stand-in)"
    result: str

    def as_dict(self) -> dict[str, str]:
        return {"entry": self.entry, "kernel": self.kernel, "nvidia": self.nvidia, "result": self.result}


def driver_branch(version: str) -> str:
    """The NVIDIA driver branch of a driver (package) version: 535.309.01-0+deb12u1 -> 535."""
    head = version.split(":")[-1].split(".")[0]
    return head if head.isdigit() else ""


def _nvidia_text(driver: str) -> str:
    if not driver:
        return "none (softgpu stand-in)"
    package, _, version = driver.partition(" ")
    branch = driver_branch(version)
    return f"{package} {version} (branch {branch})" if branch else driver


@dataclass
class _EntryFacts:
    steps: dict[str, str]
    props: dict[str, str]


def read_junit(path: Path, version: str) -> tuple[list[Tested], list[str]]:
    """The verdicts in the JUnit file of a matrix run that are about `version`, and notes on what was left out."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as error:
        raise ValueError(f"cannot read matrix results {path}: {error}") from error
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    entries: dict[str, _EntryFacts] = {}
    for suite in suites:
        for case in suite.iter("testcase"):
            classname = case.get("classname", "")
            if not classname.startswith("matrix."):
                continue
            facts = entries.setdefault(classname.removeprefix("matrix."), _EntryFacts({}, {}))
            if case.find("failure") is not None or case.find("error") is not None:
                outcome = "failed"
            elif case.find("skipped") is not None:
                skipped = case.find("skipped")
                outcome = "skipped: " + (skipped.get("message", "") if skipped is not None else "")
            else:
                outcome = "passed"
            facts.steps[case.get("name", "?")] = outcome
            for prop in case.iter("property"):
                facts.props[prop.get("name", "")] = prop.get("value", "")
    if not entries:
        raise ValueError(
            f"{path} holds no matrix testcases (classname matrix.<entry>): is it `./toolkit matrix --junit`'s?"
        )
    tested, notes = [], []
    for name, facts in entries.items():
        tested_version = facts.props.get(PROP_VERSION, "")
        if tested_version != version:
            notes.append(
                f"{name}: results are for package version {tested_version or '(not recorded)'}, not {version}: left out"
            )
            continue
        failed = [step for step, outcome in facts.steps.items() if outcome == "failed"]
        ran = [step for step, outcome in facts.steps.items() if not outcome.startswith("skipped")]
        if failed:
            result = f"failed at {failed[0]}"
        elif ran:
            left_out = [step for step in facts.steps if step not in ran]
            result = "passed" + (f" ({', '.join(ran)}; skipped: {', '.join(left_out)})" if left_out else "")
        else:
            result = next(iter(facts.steps.values()))
        tested.append(
            Tested(
                name,
                facts.props.get(PROP_KERNEL, "") or "(not recorded)",
                _nvidia_text(facts.props.get(PROP_DRIVER, "")),
                result,
            )
        )
    return sorted(tested, key=lambda t: t.entry), notes


def update(
    previous: Mapping[str, Any] | None,
    package: str,
    version: str,
    published: Mapping[str, Sequence[str]],
    tested: Sequence[Tested] | None,
) -> dict[str, Any]:
    """The manifest with `version`'s entry set: its releases, and what it was tested with.

    `tested` None means no results were given: the entry keeps the results
    it had (a re-publish of the same version), or says "untested".
    """
    versions: list[dict[str, Any]] = [dict(v) for v in (previous or {}).get("versions", [])]
    current = next((v for v in versions if v.get("version") == version), None)
    if current is None:
        current = {"version": version}
        versions.append(current)
    merged = {
        kind: sorted(set(current.get("published", {}).get(kind, [])) | set(releases))
        for kind, releases in published.items()
    }
    for kind, releases in current.get("published", {}).items():
        merged.setdefault(kind, sorted(releases))
    current["published"] = merged
    if tested is not None:
        current["tested"] = [t.as_dict() for t in tested] if tested else UNTESTED
    current.setdefault("tested", UNTESTED)
    return {"format": MANIFEST_FORMAT, "package": package, "versions": versions}


def load(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"{path} is not a manifest of format {MANIFEST_FORMAT}")
    return data


def dumps(manifest: Mapping[str, Any]) -> str:
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def table_rows(manifest: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(version, matrix entry, kernel, NVIDIA driver, result) rows, newest publish last."""
    rows = []
    for entry in manifest.get("versions", []):
        tested = entry.get("tested", UNTESTED)
        if tested == UNTESTED or not tested:
            rows.append((entry["version"], "-", "-", "-", UNTESTED))
            continue
        for t in tested:
            rows.append((entry["version"], t["entry"], t["kernel"], t["nvidia"], t["result"]))
    return rows


def render_index(manifest: Mapping[str, Any], files: Sequence[tuple[str, str]]) -> str:
    """The repository's index.html: how to add it, and the compatibility table."""
    e = html.escape
    links = "\n".join(f'<li><a href="{e(href)}">{e(href)}</a> {e(what)}</li>' for href, what in files)
    header = "".join(f"<th>{h}</th>" for h in ("package version", "matrix entry", "kernel", "NVIDIA driver", "result"))
    body = "\n".join("<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>" for row in table_rows(manifest))
    return f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{e(str(manifest.get("package", "")))} package repository</title></head>
<body>
<h1>{e(str(manifest.get("package", "")))} package repository</h1>
<ul>
{links}
</ul>
<h2>Compatibility</h2>
<p>From the distro matrix's results (<a href="{MANIFEST}">{MANIFEST}</a>); "untested" where none were given.</p>
<table>
<thead><tr>{header}</tr></thead>
<tbody>
{body}
</tbody>
</table>
</body>
</html>
"""
