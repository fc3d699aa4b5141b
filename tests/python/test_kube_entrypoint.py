"""nvidia-gdrcopy-driver's decisions, on fake /sys and /proc trees (no kernel, no container).

The script is sourced by bash (it runs main only when executed), each
function is called with GDRCOPY_SYSFS / GDRCOPY_PROC pointing at a temporary
tree, and commands that would touch the kernel (rmmod) are fakes on PATH that
record their calls.  The whole flow, with a real kernel, is
tests/python/test_kube_vm.py's.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gdrkit.kube.images import ENTRYPOINT_SCRIPT


def run(
    tmp_path: Path, script: str, env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """bash: source the entrypoint, then `script`; fake sysfs/proc under tmp_path."""
    fakes = tmp_path / "bin"
    fakes.mkdir(exist_ok=True)
    for name in ("rmmod", "insmod"):
        fake = fakes / name
        fake.write_text(f'#!/bin/sh\necho "{name} $*" >> "{tmp_path}/calls"\n')
        fake.chmod(0o755)
    (tmp_path / "proc").mkdir(exist_ok=True)
    (tmp_path / "proc" / "modules").touch()
    environment = {
        "PATH": f"{fakes}:{os.environ['PATH']}",
        "GDRCOPY_SYSFS": str(tmp_path / "sys"),
        "GDRCOPY_PROC": str(tmp_path / "proc"),
        "NVIDIA_DRIVER_ROOT": str(tmp_path / "driver"),
        **(env or {}),
    }
    return subprocess.run(
        ["bash", "-c", f'source "{ENTRYPOINT_SCRIPT}"; {script}'],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def module(tmp_path: Path, name: str, *, taint: str | None = None, version: str | None = None, refcnt: int = 0) -> None:
    """A loaded module in the fake /proc/modules and /sys/module."""
    with (tmp_path / "proc" / "modules").open("a") as modules:
        modules.write(f"{name} 16384 {refcnt} - Live 0x0000000000000000 (O)\n")
    sysdir = tmp_path / "sys" / "module" / name
    sysdir.mkdir(parents=True)
    (sysdir / "refcnt").write_text(f"{refcnt}\n")
    if taint is not None:
        (sysdir / "taint").write_text(f"{taint}\n")
    if version is not None:
        (sysdir / "version").write_text(f"{version}\n")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "modules").touch()
    return tmp_path


@pytest.mark.parametrize(
    "taint, version, env, expected",
    [
        ("PO", "535.247.01", {}, "proprietary (module nvidia taints the kernel: PO)"),
        ("O", "570.86.15", {}, "open (module nvidia is not proprietary: taint 'O')"),
        ("OE", "535.247.01", {}, "open"),  # the loaded module decides, not the branch
        (None, "550.163.01", {}, "proprietary (driver branch 550"),
        (None, "570.86.15", {}, "open (driver branch 570"),
        ("PO", "570.86.15", {"GDRCOPY_NVIDIA_FLAVOUR": "open"}, "open requested (GDRCOPY_NVIDIA_FLAVOUR)"),
    ],
)
def test_flavour_follows_the_loaded_driver_then_its_branch(
    tree: Path, taint: str | None, version: str, env: dict[str, str], expected: str
) -> None:
    module(tree, "nvidia", taint=taint, version=version)
    result = run(tree, "choose_flavour", env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(expected), result.stdout


def test_flavour_without_any_clue_says_what_to_set(tree: Path) -> None:
    module(tree, "nvidia")
    result = run(tree, "choose_flavour")
    assert result.returncode == 1
    assert "set GDRCOPY_NVIDIA_FLAVOUR" in result.stderr


def test_flavour_refuses_a_bad_request(tree: Path) -> None:
    result = run(tree, "choose_flavour", {"GDRCOPY_NVIDIA_FLAVOUR": "closed"})
    assert result.returncode == 1 and "say open, proprietary or auto" in result.stderr


def test_sources_of_the_loaded_version_and_its_flavours_half(tree: Path) -> None:
    module(tree, "nvidia", version="570.86.15")
    for half in ("kernel", "kernel-open"):
        (tree / "driver/usr/src/nvidia-570.86.15" / half / "nvidia").mkdir(parents=True)
        (tree / "driver/usr/src/nvidia-570.86.15" / half / "nvidia" / "nv-p2p.h").touch()
    (tree / "driver/usr/src/nvidia-550.1").mkdir()
    result = run(
        tree, 'src=$(driver_sources); echo "$src"; p2p_header_dir "$src" open; p2p_header_dir "$src" proprietary'
    )
    assert result.returncode == 0, result.stderr
    sources, open_dir, proprietary_dir = result.stdout.split()
    assert sources == str(tree / "driver/usr/src/nvidia-570.86.15")
    assert open_dir == f"{sources}/kernel-open/nvidia" and proprietary_dir == f"{sources}/kernel/nvidia"


def test_sources_missing_or_ambiguous_say_what_to_do(tree: Path) -> None:
    module(tree, "nvidia")
    (tree / "driver/usr/src").mkdir(parents=True)
    result = run(tree, "driver_sources")
    assert result.returncode == 1 and "mount the NVIDIA driver's root" in result.stderr
    (tree / "driver/usr/src/nvidia-550.1").mkdir()
    (tree / "driver/usr/src/nvidia-570.2").mkdir()
    result = run(tree, "driver_sources")
    assert result.returncode == 1 and "set NVIDIA_DRIVER_VERSION" in result.stderr
    result = run(tree, "driver_sources", {"NVIDIA_DRIVER_VERSION": "570.2"})
    assert result.returncode == 0 and result.stdout.strip().endswith("nvidia-570.2")


def test_unload_leaves_a_module_in_use_and_unloads_one_at_refcount_0(tree: Path) -> None:
    module(tree, "gdrdrv", refcnt=2)
    result = run(tree, "unload_module")
    assert result.returncode == 0
    assert "in use (refcount 2): left loaded" in result.stderr
    assert not (tree / "calls").exists()
    (tree / "sys/module/gdrdrv/refcnt").write_text("0\n")
    result = run(tree, "unload_module")
    assert result.returncode == 0 and "gdrdrv unloaded (refcount was 0)" in result.stderr
    assert (tree / "calls").read_text() == "rmmod gdrdrv\n"


def test_wait_gives_up_after_its_timeout_with_the_reason(tree: Path) -> None:
    result = run(tree, "wait_for_driver", {"GDRCOPY_WAIT_TIMEOUT": "1", "GDRCOPY_POLL_INTERVAL": "1"})
    assert result.returncode == 1
    assert "waiting for module nvidia to be loaded" in result.stderr
    assert "did not appear within 1s" in result.stderr


def test_term_while_waiting_exits_at_once(tree: Path) -> None:
    process = subprocess.Popen(
        ["bash", str(ENTRYPOINT_SCRIPT), "install"],
        env={
            **os.environ,
            "GDRCOPY_PROC": str(tree / "proc"),
            "GDRCOPY_POLL_INTERVAL": "30",
            "NVIDIA_DRIVER_ROOT": str(tree / "driver"),
        },
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    assert "waiting for module nvidia" in process.stderr.readline()
    process.terminate()
    # The 30 s sleep runs in the background: TERM is handled without waiting for it.
    assert process.wait(timeout=5) == 0
    assert "nothing to unload" in process.stderr.read()


def test_cdi_spec_written_unless_another_spec_has_the_kind(tree: Path) -> None:
    spec = tree / "spec.yaml"
    spec.write_text('cdiVersion: "0.5.0"\nkind: "nvidia.com/gdrcopy"\ndevices:\n  - name: "all"\n')
    dirs = {"GDRCOPY_CDI_SPEC": str(spec), "GDRCOPY_CDI_SEARCH": f"{tree}/etc-cdi {tree}/run-cdi"}
    result = run(tree, f"install_cdi {tree}/run-cdi", dirs)
    assert result.returncode == 0, result.stderr
    assert (tree / "run-cdi/gdrcopy-k8s.yaml").read_text() == spec.read_text()
    assert "(nvidia.com/gdrcopy=all)" in result.stderr
    # Ours again: rewritten, not counted as another.
    assert run(tree, f"install_cdi {tree}/run-cdi", dirs).returncode == 0
    (tree / "run-cdi/gdrcopy-k8s.yaml").unlink()
    (tree / "etc-cdi").mkdir()
    (tree / "etc-cdi/nvidia.json").write_text('{"cdiVersion": "0.5.0", "kind": "nvidia.com/gdrcopy", "devices": []}')
    result = run(tree, f"install_cdi {tree}/run-cdi", dirs)
    assert result.returncode == 0
    assert "already defines nvidia.com/gdrcopy: ours is not written" in result.stderr
    assert not (tree / "run-cdi/gdrcopy-k8s.yaml").exists()


def test_status_is_the_validators_check(tree: Path) -> None:
    assert run(tree, "main status").returncode == 1
    module(tree, "gdrdrvx")  # a prefix is not gdrdrv
    assert run(tree, "main status").returncode == 1
    module(tree, "gdrdrv")
    assert run(tree, "main status").returncode == 0


def test_unknown_subcommand_prints_the_usage(tree: Path) -> None:
    result = run(tree, "main frobnicate")
    assert (
        result.returncode == 2
        and "usage: nvidia-gdrcopy-driver install|load|watch|unload|status|cdi DIR" in result.stderr
    )


def test_watch_fails_without_gdrdrv_and_leaves_it_loaded_on_term(tree: Path) -> None:
    result = run(tree, "main watch", {"GDRCOPY_POLL_INTERVAL": "1"})
    assert result.returncode == 1 and "the init container did not load it" in result.stderr
    module(tree, "gdrdrv")
    process = subprocess.Popen(
        ["bash", str(ENTRYPOINT_SCRIPT), "watch"],
        env={**os.environ, "GDRCOPY_PROC": str(tree / "proc"), "GDRCOPY_POLL_INTERVAL": "30"},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    assert "gdrdrv is loaded; watching" in process.stderr.readline()
    process.terminate()
    assert process.wait(timeout=5) == 0
    assert "gdrdrv stays loaded" in process.stderr.read()
