"""Suite roots: the mmdebstrap and chroot command lines, source sync, build steps."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gdrkit.system import UserError
from gdrkit.vm import rootfs
from gdrkit.vm.rootfs import BuildStep, SuiteRoot
from gdrkit.vm.suites import SUITES, KernelChoice

TRIXIE = KernelChoice(SUITES["trixie"], "6.12.57+deb13-amd64")


def test_mmdebstrap_builds_a_lean_root_with_the_exact_kernel() -> None:
    argv = rootfs.mmdebstrap_command(TRIXIE, Path("/cache/partial"), ["libcmocka-dev"])
    assert argv[:2] == ["mmdebstrap", "--variant=minbase"]
    include = next(a for a in argv if a.startswith("--include=")).removeprefix("--include=").split(",")
    assert {"build-essential", "kmod", "libcmocka-dev"} <= set(include)
    assert "linux-image-6.12.57+deb13-amd64" in include and "linux-headers-6.12.57+deb13-amd64" in include
    assert "linux-image-amd64" not in include, "the exact ABI, not whatever the metapackage points at now"
    assert '--aptopt=APT::Install-Recommends "false"' in argv
    assert "--dpkgopt=path-exclude=/usr/share/doc/*" in argv
    assert "--dpkgopt=path-exclude=/etc/kernel/postinst.d/initramfs-tools" in argv
    suite_at = argv.index("trixie")
    assert argv[suite_at + 1] == "/cache/partial"
    assert argv[suite_at + 2 :] == SUITES["trixie"].sources_lines()


def test_chroot_runs_in_private_namespaces_with_a_clean_environment() -> None:
    argv = rootfs.chroot_command(Path("/r"), "make")
    assert argv[0] == "unshare"
    assert {"--mount", "--pid", "--fork", "--kill-child"} <= set(argv)
    assert "--mount-proc=/r/proc" in argv
    assert argv[argv.index("chroot") + 1] == "/r"
    assert argv[argv.index("/usr/bin/env") + 1] == "-i"
    assert not any(a.startswith("LD_LIBRARY_PATH") for a in argv)
    assert argv[-3:] == ["/bin/sh", "-c", "make"]


def test_suite_root_paths() -> None:
    root = SuiteRoot("trixie", "6.12.57+deb13-amd64", Path("/c/roots/trixie-6.12.57+deb13-amd64"))
    assert root.kernel_image == root.root_dir / "boot/vmlinuz-6.12.57+deb13-amd64"
    assert root.modules_dir == root.root_dir / "lib/modules/6.12.57+deb13-amd64"
    assert root.source_dir == root.root_dir / "src"
    assert rootfs.root_name(TRIXIE) == "trixie-6.12.57+deb13-amd64"


def test_default_steps_build_softgpu_before_the_driver_and_install_with_kver() -> None:
    steps = rootfs.default_steps("6.1.0-41-amd64")
    names = [s.name for s in steps]
    assert names.index("softgpu_kmod") < names.index("driver")
    assert "softgpu_kmod" in next(s for s in steps if s.name == "driver").needs
    assert names[-2:] == ["ldconfig", "depmod"]
    assert steps[-1].script == "depmod -a 6.1.0-41-amd64"
    driver = next(s for s in steps if s.name == "driver_install").script
    assert "KVER=6.1.0-41-amd64" in driver and "prefix=/usr/local" in driver
    assert "P2P_SYMVERS=/src/tests/softgpu/kmod/Module.symvers" in driver
    assert all("-j2" in s.script for s in steps if s.script.startswith("make"))


def test_run_steps_skips_what_depends_on_a_failure() -> None:
    steps = [
        BuildStep("a", "good"),
        BuildStep("b", "bad"),
        BuildStep("c", "good", ("b",)),
        BuildStep("d", "good", ("a",)),
    ]
    ran: list[str] = []

    def execute(script: str) -> tuple[int, str]:
        ran.append(script)
        return (0, "fine") if script == "good" else (2, "error: x.c:1: oops")

    report = rootfs.run_steps(steps, execute)
    assert [(s.name, s.status) for s in report.steps] == [("a", "ok"), ("b", "failed"), ("c", "skipped"), ("d", "ok")]
    assert ran == ["good", "bad", "good"]
    assert [s.name for s in report.failed] == ["b", "c"]
    assert report.failed[0].output == "error: x.c:1: oops" and report.failed[0].reason == "exit 2"
    assert "needs b" in report.summary()


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("*.o\n")
    (repo / "Makefile").write_text("all:\n")
    (repo / "sub/a.c").write_text("int a;\n")
    (repo / "sub/a.o").write_text("object")
    git(repo, "add", ".gitignore", "Makefile")
    return repo


def test_source_files_are_tracked_plus_unignored(repo: Path) -> None:
    assert rootfs.source_files(repo) == [".gitignore", "Makefile", "sub/a.c"]


def test_sync_source_is_incremental_and_drops_deleted_files(repo: Path, tmp_path: Path) -> None:
    root = SuiteRoot("bookworm", "6.1.0-41-amd64", tmp_path / "root")
    assert rootfs.sync_source(root, repo) == 3
    assert (root.source_dir / "sub/a.c").read_text() == "int a;\n"
    assert not (root.source_dir / "sub/a.o").exists()
    (root.source_dir / "sub/built.o").write_text("build product")
    assert rootfs.sync_source(root, repo) == 0
    (repo / "sub/a.c").write_text("int a = 1;\n")
    (repo / "sub/a.c").unlink()
    (repo / "sub/b.c").write_text("int b;\n")
    assert rootfs.sync_source(root, repo) == 1
    assert not (root.source_dir / "sub/a.c").exists()
    assert (root.source_dir / "sub/b.c").exists()
    assert (root.source_dir / "sub/built.o").exists(), "build products stay for incremental builds"


def test_build_in_root_builds_a_source_once_per_process(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = SuiteRoot("bookworm", "6.1.0-41-amd64", tmp_path / "root")
    root.root_dir.mkdir()
    ran: list[str] = []

    def fake_in_root(root_dir: Path, script: str) -> tuple[int, str]:
        ran.append(script)
        return 0, ""

    monkeypatch.setattr(rootfs, "in_root", fake_in_root)
    monkeypatch.setattr(rootfs, "_built", {})
    steps = [BuildStep("a", "make a"), BuildStep("b", "make b")]
    first = rootfs.build_in_root(root, steps, repo)
    assert ran == ["make a", "make b"] and not first.failed
    assert rootfs.build_in_root(root, steps, repo) is first, "same source, same root: not built again"
    assert ran == ["make a", "make b"]
    (repo / "sub/a.c").write_text("int a = 2;\n")
    rootfs.build_in_root(root, steps, repo)
    assert ran == ["make a", "make b"] * 2, "a changed file builds again"
    rootfs.build_in_root(root, [BuildStep("c", "make c")], repo)
    assert ran[-1] == "make c", "other steps build"


def test_a_failed_build_is_tried_again(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = SuiteRoot("bookworm", "6.1.0-41-amd64", tmp_path / "root")
    root.root_dir.mkdir()
    ran: list[str] = []

    def failing(root_dir: Path, script: str) -> tuple[int, str]:
        ran.append(script)
        return 2, "error"

    monkeypatch.setattr(rootfs, "in_root", failing)
    monkeypatch.setattr(rootfs, "_built", {})
    steps = [BuildStep("a", "make a")]
    assert rootfs.build_in_root(root, steps, repo).failed
    assert rootfs.build_in_root(root, steps, repo).failed
    assert ran == ["make a", "make a"]


def test_extra_packages_make_another_root() -> None:
    plain = rootfs.root_name(TRIXIE)
    extra = rootfs.root_name(TRIXIE, ["libcmocka-dev"])
    assert extra.startswith(plain + "-x") and extra != plain
    assert rootfs.root_name(TRIXIE, ["b", "a"]) == rootfs.root_name(TRIXIE, ["a", "b"])


def test_mounts_below_finds_leftovers_deepest_first() -> None:
    mounts = """\
proc /proc proc rw 0 0
udev /c/roots/.r.partial/dev devtmpfs rw 0 0
devpts /c/roots/.r.partial/dev/pts devpts rw 0 0
proc /c/roots/.r.partial/proc proc rw 0 0
tmpfs /c/roots/.r.partial2 tmpfs rw 0 0
"""
    assert rootfs.mounts_below(Path("/c/roots/.r.partial"), mounts) == [
        "/c/roots/.r.partial/dev/pts",
        "/c/roots/.r.partial/proc",
        "/c/roots/.r.partial/dev",
    ]
    assert "/c/roots/.r.partial2" not in rootfs.mounts_below(Path("/c/roots/.r.partial"), mounts)


def test_locked_is_exclusive_and_says_when_it_waits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import fcntl
    import threading

    lock = tmp_path / "root.lock"
    with open(lock, "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        threading.Timer(0.3, lambda: fcntl.flock(other, fcntl.LOCK_UN)).start()
        with rootfs.locked(lock):
            pass
    assert "waiting for another gdrkit run" in capsys.readouterr().err


def test_preparing_a_root_first_installs_what_the_host_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh machine has no qemu or mmdebstrap: every VM flow starts here, so it installs them.
    from gdrkit.vm import rootfs

    seen: list[tuple[str, ...]] = []

    class Stop(Exception):
        pass

    def no_kernel(*args: object, **kwargs: object) -> None:
        raise Stop

    monkeypatch.setattr(rootfs, "ensure_debian_packages", lambda packages: seen.append(tuple(packages)))
    monkeypatch.setattr(rootfs, "resolve_kernel", no_kernel)
    with pytest.raises(Stop):
        rootfs.prepare_suite_root("bookworm")
    assert seen and {"qemu-system-x86", "mmdebstrap", "busybox-static"} <= set(seen[0])


def test_a_root_built_before_its_package_list_grew_gets_only_the_new_packages() -> None:
    wanted = rootfs.root_packages(["libcmocka-dev"])
    assert {"python3", "python3-numpy", "libcmocka-dev"} <= set(wanted) and wanted == sorted(wanted)
    # A stamp from before roots recorded their packages: the three original ones.
    old = {"suite": "trixie", "abi": "6.12.57+deb13-amd64", "build_seconds": 50.0}
    assert rootfs.missing_packages(old, wanted) == ["e2fsprogs", "libcmocka-dev", "python3", "python3-numpy"]
    assert rootfs.missing_packages({**old, "packages": wanted}, wanted) == []
    assert rootfs.missing_packages({**old, "packages": ["python3"]}, ["kmod", "python3"]) == ["kmod"]


def test_a_root_appears_only_when_its_build_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "roots" / "bookworm-x"
    target.mkdir(parents=True)
    (target / "stale").write_text("from an older build")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")

    def builds(what: str, argv: list[str], **_: object) -> None:
        partial = Path(argv[-1])
        assert partial.name == ".bookworm-x.partial" and not target.exists()
        (partial / "usr").mkdir(parents=True)

    monkeypatch.setattr(rootfs, "run_step", builds)
    seconds = rootfs.build_root_with_mmdebstrap("a test root", target, lambda partial: ["mmdebstrap", str(partial)])
    assert seconds >= 0 and (target / "usr").is_dir() and not (target / "stale").exists()

    def fails(what: str, argv: list[str], **_: object) -> None:
        (Path(argv[-1]) / "usr").mkdir(parents=True)
        raise UserError("mmdebstrap failed")

    monkeypatch.setattr(rootfs, "run_step", fails)
    with pytest.raises(UserError):
        rootfs.build_root_with_mmdebstrap("a test root", target, lambda partial: ["mmdebstrap", str(partial)])
    # Neither the half-built root nor the one it replaced is left to be taken for a root.
    assert not target.exists() and not (target.parent / ".bookworm-x.partial").exists()
