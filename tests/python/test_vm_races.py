"""Race tests of gdrdrv in real Debian kernels: gdrdrv_race under qemu (TCG).

gdrdrv_race (tests/kernel) hammers one handle from several threads at once
(UNPIN vs mmap, softgpu FREE vs mmap, FREE vs munmap, UNPIN vs munmap, close
vs all of them) and checks after every round that no mapping outlived its
pin: a mapping that survived must fault, never read the memory's next
allocation.  run_ktests.sh -r runs it with softgpu on the ivshmem BAR and on
RAM, each with persistent and legacy gdrdrv pins.  Besides the program's own
verdict, the VM's verdict applies: no oops, WARNING, BUG or PAT complaint in
the kernel log, the pin refcount back to 0, a clean unload.

- marker slow (.ci/run): a short run per suite, all four configurations in
  one boot (about a minute each).
- marker slow: PIN's return raced by an UNPIN of the handle it returns
  (gdrdrv_ktest's gdrdrv_pin_vs_unpin_of_its_handle) with slab poisoning,
  which turns a read of the freed region into a wrong handle; about 50 s.
- marker soak (./toolkit test --soak): GDRKIT_RACE_ROUNDS (default 20,000)
  rounds of every scenario per suite x configuration, one boot each, and the
  same again with slab poisoning (slub_debug=FZPU) so that a use-after-free
  faults instead of reading stale memory quietly.

Suites: GDRKIT_VM_SUITES (comma separated), default bookworm,trixie.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gdrkit.vm import SuiteRoot, boot, default_loads

SUITES = [s for s in os.environ.get("GDRKIT_VM_SUITES", "bookworm,trixie").split(",") if s]
CONFIGS = ("bar-persistent", "bar-legacy", "ram-persistent", "ram-legacy")
SCENARIOS = ("unpin-vs-mmap", "free-vs-mmap", "free-vs-munmap", "unpin-vs-munmap", "close-vs-all")

SHORT_ROUNDS = 100
SHORT_CAP_S = 20  # per scenario: bounds .ci/run's time on a busy host ...
SHORT_MIN_ROUNDS = 25  # ... which must still get this far
SHORT_TIMEOUT_S = 900
SOAK_ROUNDS = int(os.environ.get("GDRKIT_RACE_ROUNDS", "20000"))
SOAK_CAP_S = 3600  # per scenario: a scenario that gets this slow fails on its count
SOAK_TIMEOUT_S = len(SCENARIOS) * SOAK_CAP_S + 1200
SLAB_POISONING = "slub_debug=FZPU"

CONFIG_HEADER = re.compile(r"^# === softgpu (bar|ram), gdrdrv use_persistent_mapping=([01]) ===$", re.MULTILINE)
SCENARIO_LINE = re.compile(
    r"^(ok|not ok) ([a-z-]+): (\d+) iterations, (\d+) stale mappings \((\d+) read another allocation's bytes\),"
    r" (\d+) other failures",
    re.MULTILINE,
)
TOTALS = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", re.MULTILINE)


@dataclass(frozen=True)
class ScenarioResult:
    config: str
    scenario: str
    ok: bool
    iterations: int
    stale: int
    foreign: int
    failures: int
    line: str


def parse(console: str) -> list[ScenarioResult]:
    """Every scenario line of a run_ktests.sh -r run, with its configuration."""
    console = console.replace("\r", "")
    headers = [(m.start(), f"{m.group(1)}-{'persistent' if m.group(2) == '1' else 'legacy'}")
               for m in CONFIG_HEADER.finditer(console)]  # fmt: skip
    results = []
    for m in SCENARIO_LINE.finditer(console):
        config = next((name for start, name in reversed(headers) if start < m.start()), "?")
        line = console[m.start() : console.find("\n", m.start())]
        results.append(
            ScenarioResult(config, m.group(2), m.group(1) == "ok", int(m.group(3)), int(m.group(4)),
                           int(m.group(5)), int(m.group(6)), line)
        )  # fmt: skip
    return results


def failing_lines(console: str) -> str:
    """The program's reports of failing rounds, for the assertion message."""
    keep = [line for line in console.replace("\r", "").splitlines()
            if "STALE MAPPING" in line or "FAILURE" in line or line.startswith(("# seed", "# ===", "not ok"))]  # fmt: skip
    return "\n".join(keep[-60:])


@pytest.fixture(scope="module", params=SUITES)
def root(request: pytest.FixtureRequest, built_root: Callable[[str], SuiteRoot]) -> SuiteRoot:
    return built_root(str(request.param))


def run_races(
    root: SuiteRoot,
    configs: tuple[str, ...],
    rounds: int,
    min_rounds: int,
    cap_s: int,
    timeout_s: int,
    log_dir: Path,
    kernel_args: tuple[str, ...] = (),
) -> list[ScenarioResult]:
    """Boots once, runs every scenario in each configuration, asserts the whole verdict.

    Each scenario runs `rounds` rounds or for `cap_s` seconds, whichever ends
    first, and must have run at least `min_rounds`.
    """
    selection = " ".join(f"-c {config}" for config in configs)
    command = f"run_ktests.sh -r {selection} -- -n {rounds} -t {cap_s}"
    if kernel_args:
        # Show that the options took: the command line and a poisoned slab cache.
        command = f"cat /proc/cmdline; grep -H . /sys/kernel/slab/kmalloc-256/poison; {command}"
    loads = default_loads()
    result = boot(
        root.kernel_image, root.modules_dir, root.root_dir, command,
        loads=loads, check_refcount=True, timeout=timeout_s, log_dir=log_dir,
        extra_kernel_args=kernel_args,
    )  # fmt: skip
    console = result.console_log.read_text(errors="replace")
    where = f"{root.suite} {' '.join(kernel_args)} ({log_dir})"
    results = parse(console)
    summary = "\n".join(r.line for r in results)
    assert result.status is not None, (
        f"{where}: gdrdrv_race did not finish: {result.problems(loads)}\n{summary}\n{console[-6000:]}"
    )
    problems = result.problems(loads)
    assert result.status == 0 and not problems, (
        f"{where}: exit {result.status}, {problems}\n{summary}\n{failing_lines(console)}\n{console[-3000:]}"
    )
    if SLAB_POISONING in kernel_args:
        assert SLAB_POISONING in console and re.search(r"kmalloc-256/poison:1", console), (
            f"{where}: slab poisoning is not on in the guest\n{console[-3000:]}"
        )
    totals = TOTALS.findall(console)
    assert totals and totals[-1][1] == "0", f"{where}: no clean summary line\n{console[-3000:]}"
    assert "0 could not run" in console, f"{where}: a configuration could not be set up\n{console[-3000:]}"

    seen = {(r.config, r.scenario) for r in results}
    missing = [(c, s) for c in configs for s in SCENARIOS if (c, s) not in seen]
    assert not missing, f"{where}: no result for {missing}\n{console[-3000:]}"
    for r in results:
        assert r.ok and r.stale == 0 and r.failures == 0, f"{where}: {r.config}: {r.line}\n{failing_lines(console)}"
        assert r.iterations >= min_rounds, (
            f"{where}: {r.config}: only {r.iterations} of {rounds} rounds in time (at least {min_rounds} needed): {r.line}"
        )
    return results


# ---- .ci/run ------------------------------------------------------------------------


@pytest.mark.slow
def test_races_short_run_in_every_configuration(root: SuiteRoot, tmp_path: Path) -> None:
    results = run_races(root, CONFIGS, SHORT_ROUNDS, SHORT_MIN_ROUNDS, SHORT_CAP_S, SHORT_TIMEOUT_S, tmp_path)
    assert len(results) == len(CONFIGS) * len(SCENARIOS)


PIN_RACE_TEST = "gdrdrv_pin_vs_unpin_of_its_handle"
KTEST_TAP = re.compile(r"^(ok|not ok) \d+ (\S+)", re.MULTILINE)


@pytest.mark.slow
def test_pin_returns_its_handle_while_another_thread_unpins_it(root: SuiteRoot, tmp_path: Path) -> None:
    """PIN's return raced by an UNPIN of the handle it is about to return, under slab poisoning.

    Without poisoning a read of the freed region returns the old bytes and
    goes unseen; with slub_debug=P it returns 0x6b6b6b6b6b6b6b6b as the
    handle, which the test reports (how issue 37's D2 showed).  One boot,
    two configurations, about 50 s.
    """
    command = f"cat /proc/cmdline; run_ktests.sh -c bar-legacy -c ram-persistent -- -t {PIN_RACE_TEST}"
    loads = default_loads()
    result = boot(
        root.kernel_image, root.modules_dir, root.root_dir, command,
        loads=loads, check_refcount=True, timeout=SHORT_TIMEOUT_S, log_dir=tmp_path,
        extra_kernel_args=(SLAB_POISONING,),
    )  # fmt: skip
    console = result.console_log.read_text(errors="replace").replace("\r", "")
    where = f"{root.suite} {SLAB_POISONING} ({tmp_path})"
    assert SLAB_POISONING in console and "(slab poisoning on)" in console, f"{where}: no poisoning\n{console[-3000:]}"
    verdicts = [m.group(1) for m in KTEST_TAP.finditer(console) if m.group(2) == PIN_RACE_TEST]
    assert verdicts == ["ok", "ok"], f"{where}: {verdicts}\n{console[-4000:]}"
    problems = result.problems(loads)
    assert result.status == 0 and not problems, f"{where}: exit {result.status}, {problems}\n{console[-3000:]}"


# ---- soak tier ----------------------------------------------------------------------


@pytest.mark.soak
@pytest.mark.parametrize("config", CONFIGS)
def test_races_soak(root: SuiteRoot, config: str, tmp_path: Path) -> None:
    results = run_races(root, (config,), SOAK_ROUNDS, SOAK_ROUNDS, SOAK_CAP_S, SOAK_TIMEOUT_S, tmp_path)
    print("\n".join(f"{root.suite} {r.config}: {r.line}" for r in results))


@pytest.mark.soak
@pytest.mark.parametrize("config", CONFIGS)
def test_races_soak_with_slab_poisoning(root: SuiteRoot, config: str, tmp_path: Path) -> None:
    results = run_races(
        root, (config,), SOAK_ROUNDS, SOAK_ROUNDS, SOAK_CAP_S, SOAK_TIMEOUT_S, tmp_path,
        kernel_args=(SLAB_POISONING,),
    )  # fmt: skip
    print("\n".join(f"{root.suite} {SLAB_POISONING} {r.config}: {r.line}" for r in results))


# ---- the parser (no VM) -----------------------------------------------------------


def test_parse_attributes_each_line_to_its_configuration() -> None:
    console = (
        "# === softgpu bar, gdrdrv use_persistent_mapping=1 ===\r\n"
        "ok unpin-vs-mmap: 100 iterations, 0 stale mappings (0 read another allocation's bytes),"
        " 0 other failures; mmap succeeded 60\n"
        "# === softgpu ram, gdrdrv use_persistent_mapping=0 ===\n"
        "# free-vs-mmap round 7: STALE MAPPING: mapping after FREE returned\n"
        "not ok free-vs-mmap: 99 iterations, 2 stale mappings (1 read another allocation's bytes),"
        " 3 other failures; mmap succeeded 50\n"
    )
    first, second = parse(console)
    assert (first.config, first.scenario, first.ok, first.iterations, first.stale) == (
        "bar-persistent", "unpin-vs-mmap", True, 100, 0,
    )  # fmt: skip
    assert (second.config, second.scenario, second.ok) == ("ram-legacy", "free-vs-mmap", False)
    assert (second.iterations, second.stale, second.foreign, second.failures) == (99, 2, 1, 3)
    assert "round 7: STALE MAPPING" in failing_lines(console)
