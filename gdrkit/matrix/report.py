"""Results of a matrix run: the per-step outcome of each entry, as a table and as JUnit XML."""

from __future__ import annotations

import enum
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# "nvidia": the checks against Debian's real NVIDIA driver, on the rows that install it
# (CRCs, GPL-only imports, module dependency, DKMS after removals and reinstalls);
# rows tested with the stand-in GPU leave it empty ("-").
STEPS = ("image", "build", "install", "dkms", "nvidia", "load", "sanity")


class Outcome(enum.Enum):
    PASSED = "pass"
    FAILED = "FAIL"
    SKIPPED = "skip"
    NOT_RUN = "-"


@dataclass
class StepResult:
    outcome: Outcome
    detail: str = ""  # why it failed or was skipped; output tail for failures
    seconds: float = 0.0


@dataclass
class EntryResult:
    name: str
    steps: dict[str, StepResult] = field(default_factory=dict)
    seconds: float = 0.0
    # What the entry tested, as JUnit properties of its testcases (the publish
    # manifest reads them): "kernel" (release), "nvidia.driver" ("<package>
    # <version>" on real-NVIDIA rows), "package.version" (of the built packages).
    facts: dict[str, str] = field(default_factory=dict)

    def record(self, step: str, outcome: Outcome, detail: str = "", seconds: float = 0.0) -> StepResult:
        if step not in STEPS:
            raise ValueError(f"unknown matrix step {step!r}")
        result = StepResult(outcome, detail, seconds)
        self.steps[step] = result
        return result

    def skip_rest(self, reason: str) -> None:
        """Mark every step not yet recorded as skipped for `reason`."""
        for step in STEPS:
            self.steps.setdefault(step, StepResult(Outcome.SKIPPED, reason))

    def outcome(self, step: str) -> Outcome:
        return self.steps.get(step, StepResult(Outcome.NOT_RUN)).outcome

    @property
    def failed(self) -> bool:
        return any(r.outcome is Outcome.FAILED for r in self.steps.values())

    @property
    def skipped(self) -> bool:
        ran = [r for r in self.steps.values() if r.outcome is not Outcome.NOT_RUN]
        return not self.failed and all(r.outcome is Outcome.SKIPPED for r in ran)

    def first_failure(self) -> tuple[str, StepResult] | None:
        for step in STEPS:
            result = self.steps.get(step)
            if result and result.outcome is Outcome.FAILED:
                return step, result
        return None

    def skip_reason(self) -> str:
        reasons = [r.detail for r in self.steps.values() if r.outcome is Outcome.SKIPPED and r.detail]
        return reasons[0] if reasons else ""


def format_table(results: Sequence[EntryResult]) -> str:
    """A fixed-width table: entry, one column per step, time; skip reasons below."""
    name_width = max([len("entry")] + [len(r.name) for r in results])
    header = f"{'entry':<{name_width}}  " + "  ".join(f"{s:<7}" for s in STEPS) + "  time"
    lines = [header, "-" * len(header)]
    notes = []
    for result in results:
        cells = "  ".join(f"{result.outcome(s).value:<7}" for s in STEPS)
        lines.append(f"{result.name:<{name_width}}  {cells}  {result.seconds:6.0f}s")
        failure = result.first_failure()
        if failure:
            notes.append(
                f"{result.name}: {failure[0]} failed: {failure[1].detail.splitlines()[0] if failure[1].detail else ''}"
            )
        elif result.skipped or any(r.outcome is Outcome.SKIPPED for r in result.steps.values()):
            reason = result.skip_reason()
            if reason:
                notes.append(f"{result.name}: skipped: {reason}")
    passed = sum(1 for r in results if not r.failed and not r.skipped)
    failed = sum(1 for r in results if r.failed)
    skipped = sum(1 for r in results if r.skipped)
    lines.append("")
    lines.extend(notes)
    lines.append(f"matrix: {passed} passed, {failed} failed, {skipped} skipped")
    return "\n".join(lines)


def write_junit(results: Sequence[EntryResult], path: Path) -> None:
    """One testcase per entry and step, so a CI page shows exactly which step broke where."""
    suite = ET.Element("testsuite", name="gdrcopy-matrix")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    total_time = 0.0
    for result in results:
        for step in STEPS:
            step_result = result.steps.get(step)
            if step_result is None or step_result.outcome is Outcome.NOT_RUN:
                continue
            case = ET.SubElement(
                suite, "testcase", classname=f"matrix.{result.name}", name=step, time=f"{step_result.seconds:.1f}"
            )
            if result.facts:
                properties = ET.SubElement(case, "properties")
                for fact, text in sorted(result.facts.items()):
                    ET.SubElement(properties, "property", name=fact, value=text)
            counts["tests"] += 1
            total_time += step_result.seconds
            if step_result.outcome is Outcome.FAILED:
                counts["failures"] += 1
                failure = ET.SubElement(case, "failure", message=f"{step} failed on {result.name}")
                failure.text = step_result.detail
            elif step_result.outcome is Outcome.SKIPPED:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=step_result.detail)
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{total_time:.1f}")
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
