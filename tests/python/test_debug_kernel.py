"""gdrkit's debug kernels (gdrkit.vm.debugkernel): their configuration and cache keys (no build),
then, in the soak tier, each kernel itself (kasan, kcsan): built once from bookworm's linux-source
and cached, booted with the kernel tests under every judge (zero reports), and a planted bug for
each judge that must be reported (a judge that stays silent there makes every clean run worthless).

Cost (2 shared cores): the first build of each kernel 17-50 min (kcsan 1020 s, kasan 3102 s with
other work beside it), cached after; each boot under TCG a few minutes.
Run: ./toolkit test --soak -k debug_kernel (one flavour: -k "debug_kernel and kcsan")
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gdrkit.system import UserError
from gdrkit.vm import (
    BuildStep,
    SuiteRoot,
    boot,
    build_in_root,
    debugkernel,
    default_loads,
    default_steps,
    prepare_suite_root,
)
from gdrkit.vm import runner

KASAN_JUDGES = ("KASAN", "PROVE_LOCKING", "DEBUG_ATOMIC_SLEEP", "UBSAN", "DEBUG_KMEMLEAK", "DEBUG_OBJECTS")
JUDGES_DIR = "/src/tests/kernel/judges"
# (plant, the klog rule whose judge must report it), per flavour, in the order one boot plants
# them: the lock inversion first, because lockdep turns itself off after any report that makes
# it unreliable (a KASAN report taints the kernel so), and after its own first one.
PLANTS = {
    "kasan": (
        ("lock_inversion", "lockdep"),
        ("use_after_free", "kasan"),
        ("sleep_in_atomic", "atomic-sleep"),
        ("shift_overflow", "ubsan"),
        ("free_active_timer", "debugobjects"),
        ("leak", "kmemleak"),
    ),
    "kcsan": (
        ("data_race", "kcsan"),
        ("sleep_in_atomic", "atomic-sleep"),
    ),
}


# ---- configuration and cache keys (no build) --------------------------------------------


def test_the_kasan_fragment_turns_on_every_judge_and_what_the_vm_needs() -> None:
    options = debugkernel.fragment("kasan")
    assert all(options[name] == "y" for name in KASAN_JUDGES)
    assert all(options[name] == "y" for name in ("9P_FS", "NET_9P_VIRTIO", "VIRTIO_PCI", "MODULES", "DEBUG_FS"))
    assert options["DRM"] == "n" and options["LOCALVERSION"] == '"-gdrkit-kasan"'


def test_the_kcsan_fragment_has_kcsan_and_not_kasan() -> None:
    options = debugkernel.fragment("kcsan")
    assert options["KCSAN"] == "y" and "KASAN" not in options
    assert options["LOCALVERSION"] == '"-gdrkit-kcsan"'


def test_an_unknown_flavour_is_refused_with_the_choices() -> None:
    with pytest.raises(UserError, match="kasan, kcsan"):
        debugkernel.fragment("msan")


def test_fragment_text_is_sorted_kconfig() -> None:
    text = debugkernel.fragment_text({"B": "y", "A": "n", "C": '"x"'})
    assert text == '# CONFIG_A is not set\nCONFIG_B=y\nCONFIG_C="x"\n'


def test_the_cache_key_changes_with_source_compiler_and_options_only() -> None:
    text = debugkernel.fragment_text(debugkernel.fragment("kasan"))
    key = debugkernel.cache_key("6.1.192-3", "gcc 12.2.0", text)
    assert key == debugkernel.cache_key("6.1.192-3", "gcc 12.2.0", text)
    assert key != debugkernel.cache_key("6.1.193-1", "gcc 12.2.0", text)
    assert key != debugkernel.cache_key("6.1.192-3", "gcc 12.3.0", text)
    assert key != debugkernel.cache_key("6.1.192-3", "gcc 12.2.0", text + "CONFIG_KCOV=y\n")
    assert key != debugkernel.cache_key(
        "6.1.192-3", "gcc 12.2.0", debugkernel.fragment_text(debugkernel.fragment("kcsan"))
    )


def test_a_judge_that_kconfig_dropped_is_a_mismatch() -> None:
    wanted = {"KASAN": "y", "DRM": "n", "SOUND": "n", "LOCALVERSION": '"-x"'}
    config = 'CONFIG_KASAN=y\n# CONFIG_DRM is not set\nCONFIG_LOCALVERSION="-x"\n'
    assert debugkernel.config_mismatches(wanted, config) == []
    dropped = '# CONFIG_KASAN is not set\nCONFIG_DRM=y\nCONFIG_LOCALVERSION="-x"\n'
    assert debugkernel.config_mismatches(wanted, dropped) == [
        "CONFIG_DRM: wanted n, got y",
        "CONFIG_KASAN: wanted y, got n",
    ]


def test_judge_counts_name_every_judge_of_the_flavour() -> None:
    counts = debugkernel.judge_counts("kasan", ["kasan", "warning", "lockdep", "kasan"])
    assert counts == {"kasan": 2, "lockdep": 1, "atomic-sleep": 0, "ubsan": 0, "kmemleak": 0, "debugobjects": 0}
    assert debugkernel.judge_counts("kcsan", []) == {"kcsan": 0, "atomic-sleep": 0}


def test_a_debug_kernel_boot_gets_a_longer_time_limit() -> None:
    # qemu.boot multiplies the boot's limit by this factor and hands it to the guest.
    assert debugkernel.slowdown(Path("/r/boot/vmlinuz-6.1.192-gdrkit-kasan")) == 4
    assert debugkernel.slowdown(Path("/r/boot/vmlinuz-6.1.192-gdrkit-kcsan")) == 2
    assert debugkernel.slowdown(Path("/r/boot/vmlinuz-6.1.0-57-amd64")) == 1


def test_a_debug_kernel_is_refused_for_another_release_or_architecture() -> None:
    debugkernel.check_debug_target("kasan", "bookworm", "amd64")
    with pytest.raises(UserError, match="--kernel bookworm --arch amd64"):
        debugkernel.check_debug_target("kasan", "trixie", "amd64")
    with pytest.raises(UserError, match="--kernel bookworm --arch amd64"):
        debugkernel.check_debug_target("kcsan", "bookworm", "arm64")


def test_a_dry_run_says_which_debug_kernel_it_would_boot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(debugkernel, "describe", lambda flavour: f"reuse the cached {flavour} kernel 6.1.192-gdrkit")
    lines = runner.plan(runner.VmTestOptions(debug_kernel="kasan", dry_run=True))
    assert any(
        line.startswith("reuse the cached kasan kernel 6.1.192-gdrkit; install it into a copy of") for line in lines
    )
    assert any(line.startswith("boot the kasan debug kernel under") for line in lines)
    with pytest.raises(UserError, match="--kernel bookworm"):
        runner.plan(runner.VmTestOptions(kernel="trixie", debug_kernel="kasan", dry_run=True))


def test_the_summary_counts_each_judges_reports() -> None:
    assert runner.judge_line("kcsan", ["kcsan", "kcsan", "warning"]) == "kcsan 2, atomic-sleep 0"


def fake_built_kernel(cache: Path) -> debugkernel.DebugKernel:
    """A cache entry laid out as build() leaves one, with stand-in files (no compiler)."""
    kernel = debugkernel.DebugKernel("kasan", "6.1.192-3", "0123456789ab")
    release = "6.1.192-gdrkit-kasan"
    kernel.image.parent.mkdir(parents=True)
    kernel.image.write_bytes(b"bzImage")
    (kernel.tree / "Module.symvers").write_text("0x1\tsym\tvmlinux\tEXPORT_SYMBOL\t\n")
    modules = kernel.modules_staging / "lib" / "modules" / release
    modules.mkdir(parents=True)
    (modules / "modules.dep").write_text("kernel/drivers/block/brd.ko:\n")
    (modules / "build").symlink_to(kernel.tree)
    kernel.marker.write_text(f"{release} 3600 1 3600\n")
    assert kernel.directory.is_relative_to(cache)
    return kernel


def test_install_makes_a_copy_of_the_root_that_boots_the_debug_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GDRKIT_CACHE", str(tmp_path / "cache"))
    kernel = fake_built_kernel(tmp_path / "cache")
    root_dir = tmp_path / "roots" / "bookworm-6.1.0-57-amd64"
    (root_dir / "boot").mkdir(parents=True)
    (root_dir / "usr" / "src").mkdir(parents=True)
    (root_dir / "boot" / "vmlinuz-6.1.0-57-amd64").write_bytes(b"debian")
    root_dir.with_name("bookworm-6.1.0-57-amd64.json").write_text('{"packages": ["kmod"]}')
    root = SuiteRoot("bookworm", "6.1.0-57-amd64", root_dir)

    debug = debugkernel.install_into_root(kernel, root)

    assert (debug.suite, debug.abi) == ("bookworm", "6.1.192-gdrkit-kasan")
    assert debug.root_dir == debugkernel.debug_root_dir(kernel, root) and debug.root_dir != root_dir
    # The suite's root, which other runs share (and whose DKMS would build for every kernel), is untouched.
    assert sorted(p.name for p in (root_dir / "boot").iterdir()) == ["vmlinuz-6.1.0-57-amd64"]
    assert not (root_dir / "lib").exists()
    assert debug.kernel_image.read_bytes() == b"bzImage"
    assert (debug.root_dir / "boot" / "vmlinuz-6.1.0-57-amd64").read_bytes() == b"debian"
    assert (debug.modules_dir / "modules.dep").is_file()
    # The build link is in the root's terms (the in-root build is chrooted); the tree hard links into the cache.
    assert os.readlink(debug.modules_dir / "build") == "/usr/src/linux-6.1.192-gdrkit-kasan"
    symvers = debug.root_dir / "usr" / "src" / "linux-6.1.192-gdrkit-kasan" / "Module.symvers"
    assert symvers.stat().st_ino == (kernel.tree / "Module.symvers").stat().st_ino

    # Made once: a second call keeps the copy (and what was built in it) ...
    (debug.modules_dir / "built-there").touch()
    assert debugkernel.install_into_root(kernel, root) == debug
    assert (debug.modules_dir / "built-there").exists()
    # ... until the suite's root changes (its stamp: packages topped up).
    root_dir.with_name("bookworm-6.1.0-57-amd64.json").write_text('{"packages": ["kmod", "e2fsprogs"]}')
    assert debugkernel.install_into_root(kernel, root) == debug
    assert not (debug.modules_dir / "built-there").exists()


def test_an_unbuilt_kernel_is_not_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GDRKIT_CACHE", str(tmp_path))
    kernel = debugkernel.DebugKernel("kasan", "6.1.192-3", "0123456789ab")
    with pytest.raises(UserError, match="not built"):
        debugkernel.install_into_root(kernel, SuiteRoot("bookworm", "6.1.0-57-amd64", tmp_path / "root"))


# ---- the kernel itself (soak) ---------------------------------------------------------------


@pytest.fixture(scope="module", params=debugkernel.FLAVOURS)
def debug_root(request: pytest.FixtureRequest) -> tuple[str, SuiteRoot]:
    """bookworm's root with a debug kernel (built once, cached) and the project built for it."""
    flavour: str = request.param
    kernel = debugkernel.build(flavour)
    problems = debugkernel.config_mismatches(debugkernel.fragment(flavour), (kernel.tree / ".config").read_text())
    assert not problems, f"the cached {flavour} kernel lacks options: {problems}"
    print(f"{flavour} kernel {kernel.release}: built in {kernel.build_seconds:.0f} s ({kernel.directory})")
    root = debugkernel.install_into_root(kernel, prepare_suite_root(debugkernel.SOURCE_SUITE))
    judges = BuildStep("judges", f"make -C {JUDGES_DIR} KVER={root.abi}")
    report = build_in_root(root, [*default_steps(root.abi), judges])
    assert not report.failed, "\n\n".join(f"{step.name}:\n{step.output[-3000:]}" for step in report.failed)
    return flavour, root


@pytest.mark.soak
def test_the_kernel_tests_give_no_judge_a_report(debug_root: tuple[str, SuiteRoot], tmp_path: Path) -> None:
    flavour, root = debug_root
    loads = default_loads()
    result = boot(
        root.kernel_image, root.modules_dir, root.root_dir, "gdrdrv_ktest",
        loads=loads, check_refcount=True, log_dir=tmp_path, timeout=45 * 60,
    )  # fmt: skip
    console = result.console_log.read_text(errors="replace")
    counts = debugkernel.judge_counts(flavour, [finding.rule for finding in result.kernel_log_findings])
    print(f"gdrdrv_ktest under {root.abi}: {counts}")
    assert result.status == 0 and not result.problems(loads), f"{result.problems(loads)}\n{console[-6000:]}"
    assert sum(counts.values()) == 0


@pytest.mark.soak
def test_each_judge_reports_its_planted_bug(debug_root: tuple[str, SuiteRoot], tmp_path: Path) -> None:
    flavour, root = debug_root
    plants = " ".join(plant for plant, _ in PLANTS[flavour])
    command = (
        f"for plant in {plants}; do insmod {JUDGES_DIR}/gdrkit_judges.ko plant=$plant || exit 1;"
        " rmmod gdrkit_judges || exit 1; done"
    )
    result = boot(
        root.kernel_image, root.modules_dir, root.root_dir, command,
        loads=(), log_dir=tmp_path, timeout=20 * 60,
    )  # fmt: skip
    findings = result.kernel_log_findings
    counts = debugkernel.judge_counts(flavour, [finding.rule for finding in findings])
    print(f"planted bugs under {root.abi}: {counts}")
    for finding in findings:
        print(f"  {finding}")
    console = result.console_log.read_text(errors="replace")
    assert result.status == 0, f"the plants did not run (status {result.status}):\n{console[-6000:]}"
    silent = [f"{plant} ({judge})" for plant, judge in PLANTS[flavour] if counts[judge] == 0]
    assert not silent, f"judges that did not report their planted bug: {silent}\n{console[-6000:]}"
