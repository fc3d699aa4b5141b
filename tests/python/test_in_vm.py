"""The real thing, in real Debian kernels: gdrdrv + softgpu + libgdrapi + the test programs.

For each suite the project is built once inside that suite's root (its own
compiler, its kernel's exact headers), then each test boots the kernel under
qemu (TCG) with the root as filesystem and runs one command.  A test passes
only if the command succeeds AND the modules loaded and unloaded, the
driver's pin counter is back to 0, and the kernel log has no oops, BUG,
WARNING, lockdep or PAT complaint (gdrkit.vm decides that).

Suites: GDRKIT_VM_SUITES (comma separated), default bookworm,trixie -- the
two .ci/run covers; bullseye and sid run the same way when named.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from gdrkit.vm import ModuleLoad, SuiteRoot, boot, default_loads, in_root

pytestmark = pytest.mark.slow

SUITES = [s for s in os.environ.get("GDRKIT_VM_SUITES", "bookworm,trixie").split(",") if s]
SANITY_SUMMARY = re.compile(r"^Total: (\d+), Passed: (\d+), Failed: (\d+), Waived: (\d+)$", re.MULTILINE)
KTEST_SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$", re.MULTILINE)


@pytest.fixture(scope="module", params=SUITES)
def root(request: pytest.FixtureRequest, built_root: Callable[[str], SuiteRoot]) -> SuiteRoot:
    return built_root(str(request.param))


@dataclass
class Run:
    status: int | None
    console: str
    problems: list[str]


def run_in_vm(root: SuiteRoot, command: str, loads: tuple[ModuleLoad, ...] | None = None) -> Run:
    loads = default_loads() if loads is None else loads
    result = boot(
        root.kernel_image,
        root.modules_dir,
        root.root_dir,
        command,
        loads=loads,
        check_refcount=any(load.name == "gdrdrv" for load in loads),
    )
    console = result.console_log.read_text(errors="replace")
    return Run(result.status, console, result.problems(loads))


def assert_clean(run: Run, what: str) -> None:
    assert run.status == 0, f"{what} exited {run.status}:\n{run.console[-6000:]}"
    assert not run.problems, f"{what}: {run.problems}\n{run.console[-6000:]}"


def sanity_counts(console: str) -> tuple[int, int, int, int]:
    found = SANITY_SUMMARY.findall(console)
    assert found, f"no sanity summary line in:\n{console[-4000:]}"
    total, passed, failed, waived = (int(x) for x in found[-1])
    return total, passed, failed, waived


def test_kernel_level_tests_in_every_configuration(root: SuiteRoot) -> None:
    # BAR-backed (WC) and RAM-backed (cacheable) softgpu, each with persistent and legacy pins.
    run = run_in_vm(root, "run_ktests.sh")
    totals = KTEST_SUMMARY.findall(run.console)
    assert totals, run.console[-4000:]
    passed, failed = int(totals[-1][0]), int(totals[-1][1])
    assert failed == 0 and passed >= 4 * 40, f"{passed=} {failed=}\n{run.console[-4000:]}"
    assert_clean(run, "run_ktests.sh")


def test_pat_holds_each_bar_range_once(root: SuiteRoot) -> None:
    """Issue 37 D7, gdrdrv_sectest's pat_* tests on the BAR: about 10 s in the VM plus a boot.

    One buffer mapped 4,096 times must hold one x86 PAT entry (not one per
    mapping, each reservation walking all of them under the host-wide lock),
    and overlapping mappings exactly their union.  The soak tier runs them
    again with the rest of gdrdrv_sectest.
    """
    command = "run_ktests.sh -p gdrdrv_sectest -c bar-persistent -c bar-legacy -- -t 'pat_*'"
    run = run_in_vm(root, command)
    totals = KTEST_SUMMARY.findall(run.console)
    assert totals, run.console[-4000:]
    passed, failed = int(totals[-1][0]), int(totals[-1][1])
    # Two tests in two configurations; a skip (no debugfs PAT list) is a failure here.
    assert failed == 0 and passed == 2 * 2, f"{passed=} {failed=}\n{run.console[-4000:]}"
    assert_clean(run, command)


@pytest.mark.soak
def test_isolation_tests_in_every_configuration(root: SuiteRoot) -> None:
    """gdrdrv_sectest (tokens, pin limits, memcg, execve, PAT, failed put_pages): about 60 s in the VM plus a boot."""
    run = run_in_vm(root, "run_ktests.sh -p gdrdrv_sectest")
    totals = KTEST_SUMMARY.findall(run.console)
    assert totals, run.console[-4000:]
    passed, failed = int(totals[-1][0]), int(totals[-1][1])
    # Each configuration skips what does not apply to it (BAR vs RAM, legacy vs persistent).
    assert failed == 0 and passed >= 4 * 5, f"{passed=} {failed=}\n{run.console[-4000:]}"
    assert_clean(run, "run_ktests.sh -p gdrdrv_sectest")


@pytest.mark.parametrize(
    "backend, environment",
    [("gdrdrv", ""), ("dmabuf", "GDRCOPY_USE_DMABUF_MMAP=1 ")],
)
def test_sanity_passes_on_each_backend(root: SuiteRoot, backend: str, environment: str) -> None:
    run = run_in_vm(root, f"{environment}gdrcopy_sanity -v")
    total, passed, failed, waived = sanity_counts(run.console)
    assert failed == 0 and total >= 36, f"{backend}: {total=} {passed=} {failed=} {waived=}"
    # Every waived test must say why.
    assert run.console.count("waived: ") >= waived, run.console[-4000:]
    assert_clean(run, f"gdrcopy_sanity ({backend} backend)")


def test_sanity_on_a_coherent_platform(root: SuiteRoot) -> None:
    # softgpu in RAM mode reports CPU-cacheable page tables: gdrdrv maps CACHING.
    loads = default_loads(softgpu_args="force_ram=1")
    run = run_in_vm(root, "gdrcopy_sanity -v", loads)
    total, passed, failed, waived = sanity_counts(run.console)
    failures = [line for line in run.console.splitlines() if "FAIL" in line]
    assert failed == 0 and total >= 36, f"{total=} {passed=} {failed=} {waived=}: {failures}"
    assert_clean(run, "gdrcopy_sanity (RAM-backed, cacheable)")


def test_benchmarks_run(root: SuiteRoot) -> None:
    run = run_in_vm(root, "sh /src/tests/bench/smoke.sh")
    assert_clean(run, "benchmark smoke run")


FORCE_PCIE_SCRIPT = "/src/tests/python/vm/force_pcie_reasons.sh"
FORCE_PCIE_SUMMARY = re.compile(r"^force-pcie: (\d+) passed, (\d+) failed$", re.MULTILINE)


def test_force_pcie_failures_say_why(root: SuiteRoot) -> None:
    # A refused forced pin (softgpu's injected ENOTSUPP) is ENXIO, legacy pins ENOPROTOOPT,
    # through the real gdrdrv and libgdrapi; the other reasons are unit-tested with fakes.
    run = run_in_vm(root, f"sh {FORCE_PCIE_SCRIPT}")
    found = FORCE_PCIE_SUMMARY.findall(run.console)
    assert found and found[-1] == ("8", "0"), run.console[-4000:]
    assert_clean(run, "force_pcie_reasons.sh")


def test_pin_count_benchmark_prints_the_ratio(root: SuiteRoot) -> None:
    # GET_INFO and mmap latency with 1 pinned buffer and with 10,000, and their ratio.
    run = run_in_vm(root, "gdrdrv_pinbench")
    assert_clean(run, "gdrdrv_pinbench")
    assert re.search(
        r"ratio 10000 pins / 1 pin \(oldest handle\): get_info [0-9.]+x, mmap\+munmap [0-9.]+x", run.console
    ), run.console[-3000:]


SANITIZED_TREE = "/opt/gdrcopy-asan"
SANITIZE_FLAGS = "-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"


def test_sanity_passes_with_asan_and_ubsan(root: SuiteRoot) -> None:
    # The library and gdrcopy_sanity both built with AddressSanitizer and UBSan (in the
    # root, by its own compiler, in a copy of the tree); any report aborts the test child.
    status, output = in_root(
        root.root_dir,
        f"rm -rf {SANITIZED_TREE} && cp -a /src {SANITIZED_TREE} && "
        f"make -s -C {SANITIZED_TREE}/libgdrapi clean && make -s -C {SANITIZED_TREE}/libgdrapi SANITIZE=1 && "
        f"make -s -C {SANITIZED_TREE}/tests/common clean && make -s -C {SANITIZED_TREE}/tests/sanity clean && "
        f"make -s -C {SANITIZED_TREE}/tests/sanity CFLAGS='{SANITIZE_FLAGS}' LDFLAGS='-fsanitize=address,undefined'",
    )
    assert status == 0, output[-4000:]
    run = run_in_vm(
        root,
        f"LD_LIBRARY_PATH={SANITIZED_TREE}/libgdrapi/build ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 "
        f"UBSAN_OPTIONS=print_stacktrace=1 {SANITIZED_TREE}/tests/sanity/gdrcopy_sanity -v",
    )
    total, passed, failed, waived = sanity_counts(run.console)
    assert "ERROR: AddressSanitizer" not in run.console and "runtime error:" not in run.console, run.console[-6000:]
    assert failed == 0 and total >= 36, f"{total=} {passed=} {failed=} {waived=}"
    assert_clean(run, "gdrcopy_sanity under ASan+UBSan")


PY_CHECK = "/src/tests/python/vm/gdrcopy_vm_check.py"
PY_SUMMARY = re.compile(r"^gdrcopy_vm_check: (\d+) checks passed \((\w+) backend, (\w+) pins\)$", re.MULTILINE)


# .ci/run runs the legacy-pin configuration (data at every size and offset, and
# invalidation); the two persistent ones add about four minutes and run in the
# soak tier, to keep .ci/run within its budget.
@pytest.mark.parametrize(
    "backend, pins",
    [
        pytest.param("gdrdrv", "persistent", marks=pytest.mark.soak),
        ("gdrdrv", "legacy"),
        pytest.param("dmabuf", "persistent", marks=pytest.mark.soak),
    ],
)
def test_python_bindings_move_data_and_see_invalidation(root: SuiteRoot, backend: str, pins: str) -> None:
    # The gdrcopy package from /src/python with the suite's python3 and NumPy,
    # over the libgdrapi.so.2 installed in the root: every size from 1 B to
    # 1 MiB at many offsets through copy_to/copy_from/ndarray, checked with
    # softgpu's cuMemcpy; freeing mapped GPU memory (legacy pins: the flag,
    # InvalidatedError and a faulting access; persistent: the data stays).
    loads = default_loads(gdrdrv_args="use_persistent_mapping=0" if pins == "legacy" else "")
    run = run_in_vm(root, f"PYTHONPATH=/src/python python3 {PY_CHECK} --backend {backend} --pins {pins}", loads)
    found = PY_SUMMARY.findall(run.console)
    assert found, f"no gdrcopy_vm_check summary line:\n{run.console[-6000:]}"
    checks, ran_backend, ran_pins = found[-1]
    assert (ran_backend, ran_pins) == (backend, pins) and int(checks) >= 900, f"{found[-1]}\n{run.console[-3000:]}"
    assert_clean(run, f"gdrcopy_vm_check.py ({backend} backend, {pins} pins)")
