"""gdrdrv_fuzz in real Debian kernels: seeded ioctl/mmap fuzzing of /dev/gdrdrv.

The fuzzer (tests/kernel/gdrdrv_fuzz.c) runs in the VM through run_fuzz.sh,
which loads softgpu on the ivshmem BAR and in RAM, each with gdrdrv's
persistent and legacy pins, and checks after each configuration that the
pin refcount is 0 and the modules unload.  The VM runner judges the whole
kernel log (no oops, BUG, WARNING, PAT complaint) and the final unload.

- `slow` (in .ci/run): a short run, one boot per suite; bookworm and trixie
  cover two configurations each, all four between them.
- `soak` (./toolkit test --soak): >= 200,000 operations per suite x softgpu
  mode x pin mode, one boot each.

A failing seed's output has the seed and the shortest failing sequence the
fuzzer found (its "| R" lines replay with `gdrdrv_fuzz -R FILE`).
GDRKIT_FUZZ_SEED sets the first seed (default: fixed, so that runs repeat).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from gdrkit.vm import SuiteRoot, boot, default_loads

SUITES = [s for s in os.environ.get("GDRKIT_VM_SUITES", "bookworm,trixie").split(",") if s]
FIRST_SEED = int(os.environ.get("GDRKIT_FUZZ_SEED", "1000"))

CONFIG_LINE = re.compile(
    r"^(ok|not ok) \d+ - softgpu (bar|ram), (persistent|legacy) pins: (\d+) ops(.*)$", re.MULTILINE
)
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.MULTILINE)

# The short run: 1,500 ops with 2 threads per configuration (~10 s each, module reloads included).
SHORT_OPS = 1500
# The soak: per configuration, 4 seeds x 50,000 ops with 3 threads.
SOAK_SEEDS = 4
SOAK_OPS = 50_000
SOAK_TIMEOUT_S = 3 * 3600


@dataclass
class ConfigResult:
    ok: bool
    mode: str
    pins: str
    ops: int
    detail: str


@dataclass
class FuzzRun:
    status: int | None
    console: str
    problems: list[str]
    configs: list[ConfigResult]


@pytest.fixture(scope="module", params=SUITES)
def root(request: pytest.FixtureRequest, built_root: Callable[[str], SuiteRoot]) -> SuiteRoot:
    # The session's shared build (conftest.py), which also boots a debug kernel when GDRKIT_DEBUG_KERNEL asks.
    return built_root(str(request.param))


def parse_configs(console: str) -> list[ConfigResult]:
    return [
        ConfigResult(verdict == "ok", mode, pins, int(ops), rest.strip(" :;,"))
        for verdict, mode, pins, ops, rest in CONFIG_LINE.findall(console)
    ]


def fuzz_in_vm(root: SuiteRoot, runner_args: str, fuzz_args: str, timeout: float) -> FuzzRun:
    loads = default_loads()
    result = boot(
        root.kernel_image,
        root.modules_dir,
        root.root_dir,
        f"run_fuzz.sh {runner_args} -- {fuzz_args}",
        loads=loads,
        check_refcount=True,
        timeout=timeout,
    )
    console = result.console_log.read_text(errors="replace")
    return FuzzRun(result.status, console, result.problems(loads), parse_configs(console))


def failure_report(run: FuzzRun) -> str:
    """The fuzzer's own lines (seeds, failures, shortest sequences), without the kernel's."""
    lines = [line for line in run.console.splitlines() if line.startswith(("#", "ok", "not ok")) or SUMMARY.match(line)]
    return "\n".join(lines)[-8000:]


def assert_fuzz_clean(run: FuzzRun, expected: set[tuple[str, str]], min_ops: int) -> None:
    report = failure_report(run)
    seen = {(c.mode, c.pins) for c in run.configs}
    assert seen == expected, f"configurations run: {sorted(seen)}, want {sorted(expected)}\n{report}"
    for config in run.configs:
        assert config.ok, f"softgpu {config.mode}, {config.pins} pins: {config.detail}\n{report}"
        assert config.ops >= min_ops, (
            f"softgpu {config.mode}, {config.pins} pins ran {config.ops} ops, want >= {min_ops}"
        )
    assert run.status == 0, f"run_fuzz.sh exited {run.status}\n{report}"
    assert not run.problems, f"{run.problems}\n{report}"


ALL_CONFIGS = {(mode, pins) for mode in ("bar", "ram") for pins in ("persistent", "legacy")}


def short_run_configs(suite: str) -> set[tuple[str, str]]:
    """What the short run covers in `suite`.  A configuration costs ~10 s of
    TCG (module reload, fuzzing, checks), so with two suites each runs two
    and the two cover all four between them."""
    if len(SUITES) < 2 or suite not in SUITES[:2]:
        return ALL_CONFIGS
    if SUITES.index(suite) == 0:
        return {("bar", "persistent"), ("ram", "legacy")}
    return {("bar", "legacy"), ("ram", "persistent")}


def config_words(configs: set[tuple[str, str]]) -> str:
    return " ".join(f"{mode}/{pins}" for mode, pins in sorted(configs))


@pytest.mark.slow
def test_short_fuzz_run(root: SuiteRoot) -> None:
    configs = short_run_configs(root.suite)
    run = fuzz_in_vm(root, f"-c '{config_words(configs)}'", f"-s {FIRST_SEED} -n {SHORT_OPS} -t 2 -S 20", timeout=900)
    assert_fuzz_clean(run, configs, SHORT_OPS)


@pytest.mark.soak
@pytest.mark.parametrize("mode", ["bar", "ram"])
@pytest.mark.parametrize("pins", ["persistent", "legacy"])
def test_soak_fuzz_200k_ops(root: SuiteRoot, mode: str, pins: str) -> None:
    # A different seed range per configuration, the same on every run.
    seed = FIRST_SEED + 100 * (("bar", "ram").index(mode) * 2 + ("persistent", "legacy").index(pins))
    run = fuzz_in_vm(
        root,
        f"-c {mode}/{pins}",
        f"-s {seed} -k {SOAK_SEEDS} -n {SOAK_OPS} -t 3 -S 300",
        timeout=SOAK_TIMEOUT_S,
    )
    assert_fuzz_clean(run, {(mode, pins)}, SOAK_SEEDS * SOAK_OPS)
    print("\n".join(f"{root.suite} softgpu {c.mode}, {c.pins} pins: {c.ops} ops, {c.detail}" for c in run.configs))
