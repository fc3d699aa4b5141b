"""The kernel log as a test oracle: which lines fail a run.

Pure functions only, so the rules are unit-tested without a VM.  The kernel
log reaches us twice: as the serial console (only lines up to the console
log level, but it survives a panic) and as a `dmesg` dump taken after the
command (every level, but missing when the guest died).  Both are scanned
and the findings merged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A console line printed by the kernel starts with its printk timestamp;
# lines without one are program output and are never judged.
_TIMESTAMP = re.compile(r"^\s*(?:<\d+>)?\[\s*\d+\.\d+\]\s?")

# (rule name, pattern).  Each names a class of kernel-side failure.
# The debug kernels' judges (gdrkit.vm.debugkernel) come first, so that a
# report is counted under the judge that made it, not as a plain BUG or WARNING.
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("kasan", re.compile(r"\bKASAN\b")),
    ("kcsan", re.compile(r"\bKCSAN\b")),
    ("ubsan", re.compile(r"\bUBSAN\b")),
    (
        "lockdep",
        re.compile(
            r"possible circular locking|inconsistent lock state|possible recursive locking"
            r"|possible irq lock inversion|suspicious RCU usage|bad unlock balance|held lock freed"
            r"|lock held when returning to user space|lock held at task exit|INFO: trying to register non-static key"
        ),
    ),
    ("atomic-sleep", re.compile(r"BUG: sleeping function called from invalid context|BUG: scheduling while atomic")),
    # A kmemleak that turned itself off (its pool ran out) judges nothing: that fails the run too.
    ("kmemleak", re.compile(r"suspected memory leak|unreferenced object 0x|memory leak detector disabled")),
    ("debugobjects", re.compile(r"\bODEBUG: (?!selftest passed)")),
    ("oops", re.compile(r"\bOops\b")),
    ("bug", re.compile(r"\bBUG:|kernel BUG at")),
    ("warning", re.compile(r"\bWARNING:")),
    ("bad-page", re.compile(r"\b[Bb]ad page\b")),
    ("gpf", re.compile(r"general protection fault")),
    ("call-trace", re.compile(r"Call Trace")),
    ("panic", re.compile(r"Kernel panic")),
    ("page-fault", re.compile(r"[Uu]nable to handle (?:kernel|page fault)")),
    # Every x86/PAT complaint (reserve_ram_pages_type failed, conflicting
    # types, invalid frees, ...); only its boot-time configuration line is news.
    ("pat", re.compile(r"conflicting memory types|map pfn expected mapping type|x86/PAT: (?!Configuration \[)")),
)


@dataclass(frozen=True)
class Finding:
    """One kernel log line that fails the run."""

    rule: str
    line: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.line}"


def strip_timestamp(line: str) -> str:
    return _TIMESTAMP.sub("", line, count=1).strip()


def is_kernel_line(line: str) -> bool:
    return _TIMESTAMP.match(line) is not None


def scan_line(line: str) -> Finding | None:
    """The first rule `line` breaks, if any (the line without its timestamp)."""
    text = strip_timestamp(line)
    for rule, pattern in RULES:
        if pattern.search(text):
            return Finding(rule, text)
    return None


# A KCSAN report runs from its "BUG: KCSAN:" line to a line of "=", and
# gives the stack of each access it saw (one, "at unknown origin", when the
# other was made by code built without KCSAN).  Our modules (gdrdrv, softgpu,
# the test modules) are all built with KCSAN, so a report in which no access's
# stack names a module, down to its exception or interrupt entry (a user page
# fault taken in a module's copy_to_user, or a timer interrupt that lands in a
# module, runs the same core code), is the core kernel
# racing with itself: x86's TLB flush reading mm_cpumask while switch_mm sets
# a bit, the scheduler's load balancing, shmem faults of two threads (the
# fuzzer's forks and threads met all three under the kcsan kernel).  So is a
# race with both sides inside printk's lockless ring buffer, whoever printed
# (a module's printk against the fuzzer's /dev/kmsg reader).  Those are set
# apart, and shown, but fail no run; every other KCSAN report is a finding.
_KCSAN_START = re.compile(r"^BUG: KCSAN: ")
_KCSAN_END = re.compile(r"^={20,}$")
_KCSAN_ACCESS = re.compile(r"^(?:race at unknown origin, with )?(?:read|write|read-write)(?: \(marked\))? to 0x")
_MODULE_FRAME = re.compile(r"\+0x[0-9a-f]+/0x[0-9a-f]+ \[[\w-]+\]")
# Where a stack enters an exception or interrupt: the frames below are the code it interrupted.
_EXCEPTION_ENTRY = re.compile(r"^asm_(?:exc_|sysvec_|common_interrupt)\w*\+0x")
_PRINTK_RING = re.compile(r"^(?:_?prb_\w+|desc_\w+|data_\w+|get_data|copy_data)$")
_RACE_SIDES = re.compile(r"^BUG: KCSAN: data-race in (\S+) / (\S+)$")


def _printk_ring_race(header: str) -> bool:
    sides = _RACE_SIDES.match(header)
    return sides is not None and all(_PRINTK_RING.match(side.split("+")[0]) for side in sides.groups())


def _access_stacks(report: list[str]) -> list[list[str]]:
    """Each access's stack in a report, down to its exception or interrupt entry."""
    stacks = []
    for i, line in enumerate(report):
        if not _KCSAN_ACCESS.match(line):
            continue
        frames: list[str] = []
        for frame in report[i + 1 :]:
            if not frame:
                break
            frames.append(frame)
            if _EXCEPTION_ENTRY.match(frame):
                break
        stacks.append(frames)
    return stacks


def _is_core_kernel_race(report: list[str]) -> bool:
    stacks = _access_stacks(report)
    outside_modules = bool(stacks) and all(
        frames and not any(_MODULE_FRAME.search(frame) for frame in frames) for frames in stacks
    )
    return outside_modules or _printk_ring_race(report[0])


def _core_kernel_races(lines: list[str]) -> list[tuple[int, int]]:
    """[start, end) of each KCSAN report that is the core kernel's own race."""
    spans = []
    start = None
    for i, line in enumerate(lines):
        text = strip_timestamp(line)
        if _KCSAN_START.match(text):
            start = i
        elif start is not None and _KCSAN_END.match(text):
            if _is_core_kernel_race([strip_timestamp(r) for r in lines[start : i + 1]]):
                spans.append((start, i + 1))
            start = None
    return spans


def _kernel_lines(text: str, kernel_lines_only: bool) -> list[str]:
    lines = text.replace("\r", "").splitlines()
    return [line for line in lines if is_kernel_line(line)] if kernel_lines_only else lines


def core_kernel_races(text: str, *, kernel_lines_only: bool = False) -> list[str]:
    """The first line of each KCSAN report `scan_kernel_log` sets apart as the core kernel's own race
    (no module in any access's stack, or inside printk's ring buffer)."""
    lines = _kernel_lines(text, kernel_lines_only)
    return [strip_timestamp(lines[start]) for start, _ in _core_kernel_races(lines)]


def scan_kernel_log(text: str, *, kernel_lines_only: bool = False) -> list[Finding]:
    """Every failing line of `text`, in order.

    With `kernel_lines_only`, lines without a printk timestamp are skipped:
    that is how the serial console, where program output and kernel messages
    interleave, is read.  The core kernel's own KCSAN races
    (`core_kernel_races`) are not findings.
    """
    lines = _kernel_lines(text, kernel_lines_only)
    apart = {i for start, end in _core_kernel_races(lines) for i in range(start, end)}
    findings = []
    for i, raw in enumerate(lines):
        if i in apart:
            continue
        finding = scan_line(raw)
        if finding is not None:
            findings.append(finding)
    return findings


def merge_findings(*groups: list[Finding]) -> list[Finding]:
    """The findings of every group, each distinct line once, first seen first."""
    seen: set[Finding] = set()
    merged = []
    for group in groups:
        for finding in group:
            if finding not in seen:
                seen.add(finding)
                merged.append(finding)
    return merged


def log_tail(text: str, lines: int = 60) -> str:
    """The last `lines` lines of a log, for printing after a failure."""
    return "\n".join(text.replace("\r", "").splitlines()[-lines:])
