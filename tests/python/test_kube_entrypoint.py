"""nvidia-gdrcopy-driver's decisions, on fake /sys and /proc trees (no kernel, no container).

The script is sourced by bash (it runs main only when executed), each
function is called with GDRCOPY_SYSFS / GDRCOPY_PROC (and, for the kernel
build tree, GDRCOPY_LIB_MODULES / GDRCOPY_USR_SRC) pointing at a temporary
tree, and commands that would touch the kernel (rmmod, insmod; modinfo where
a test needs its answer) are fakes on PATH that record their calls.  The
driver roots are laid out as each family's NVIDIA driver container keeps its
kernel headers.  The whole flow, with a real kernel, is
tests/python/test_kube_vm.py's.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from gdrkit.kube.images import ENTRYPOINT_SCRIPT


def run(
    tmp_path: Path,
    script: str,
    env: dict[str, str] | None = None,
    timeout: float = 30,
    fakes: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """bash: source the entrypoint, then `script`; fake sysfs/proc under tmp_path.

    rmmod and insmod record their calls in tmp_path/calls; `fakes` adds or
    replaces commands (name: the shell script's body).
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    bodies = {name: f'echo "{name} $*" >> "{tmp_path}/calls"' for name in ("rmmod", "insmod")}
    for name, body in {**bodies, **(fakes or {})}.items():
        fake = bin_dir / name
        fake.write_text(f"#!/bin/sh\n{body}\n")
        fake.chmod(0o755)
    (tmp_path / "proc").mkdir(exist_ok=True)
    (tmp_path / "proc" / "modules").touch()
    environment = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
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


# The kernel build tree, in the driver roots of each family's NVIDIA driver container.
DEBIAN_KVER = "6.1.0-18-amd64"
EL_KVER = "5.14.0-427.13.1.el9_4.x86_64"
SUSE_VERSION = "5.14.21-150500.55.62"
SUSE_KVER = f"{SUSE_VERSION}-default"
ARCH = os.uname().machine  # the script's `uname -m`: SUSE's obj trees are per architecture


def image(tree: Path) -> dict[str, str]:
    """The image's /lib/modules and /usr/src, under tree/image."""
    (tree / "image/lib/modules").mkdir(parents=True, exist_ok=True)
    (tree / "image/usr/src").mkdir(parents=True, exist_ok=True)
    return {"GDRCOPY_LIB_MODULES": str(tree / "image/lib/modules"), "GDRCOPY_USR_SRC": str(tree / "image/usr/src")}


def makefile(directory: Path, text: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Makefile").write_text(text)
    return directory


def build_link(tree: Path, kver: str, target: str) -> None:
    """The driver root's lib/modules/<kver>/build link (absolute, as the packages make it)."""
    link = tree / "driver/lib/modules" / kver / "build"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def test_kernel_tree_debian_link_is_followed_inside_the_driver_root(tree: Path) -> None:
    headers = makefile(
        tree / f"driver/usr/src/linux-headers-{DEBIAN_KVER}",
        "include /usr/src/linux-headers-6.1.0-18-common/Makefile\n",
    )
    makefile(tree / "driver/usr/src/linux-headers-6.1.0-18-common")
    build_link(tree, DEBIAN_KVER, f"/usr/src/linux-headers-{DEBIAN_KVER}")
    result = run(tree, f"kernel_tree {DEBIAN_KVER}", image(tree))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(headers)
    assert f"-> /usr/src/linux-headers-{DEBIAN_KVER}, taken inside the driver root" in result.stderr
    # The Makefile's absolute include resolves through our /usr/src.
    common = tree / "image/usr/src/linux-headers-6.1.0-18-common"
    assert common.is_symlink() and common.resolve() == (tree / "driver/usr/src/linux-headers-6.1.0-18-common").resolve()
    assert "linked the driver root's /usr/src entries" in result.stderr


@pytest.mark.parametrize("with_link", [False, True])
def test_kernel_tree_el_kernel_devel_with_or_without_its_build_link(tree: Path, with_link: bool) -> None:
    devel = makefile(tree / f"driver/usr/src/kernels/{EL_KVER}")
    if with_link:
        build_link(tree, EL_KVER, f"/usr/src/kernels/{EL_KVER}")
    result = run(tree, f"kernel_tree {EL_KVER}", image(tree))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(devel)
    why = f"-> /usr/src/kernels/{EL_KVER}, taken inside" if with_link else "EL kernel-devel in the driver root"
    assert f"kernel: build tree {devel} (" in result.stderr and why in result.stderr
    assert (tree / "image/usr/src/kernels").is_symlink()


@pytest.mark.parametrize("with_link", [False, True])
def test_kernel_tree_suse_obj_tree_and_its_sources_linked(tree: Path, with_link: bool) -> None:
    sources = makefile(tree / f"driver/usr/src/linux-{SUSE_VERSION}")
    obj = makefile(
        tree / f"driver/usr/src/linux-{SUSE_VERSION}-obj/{ARCH}/default",
        f"include /usr/src/linux-{SUSE_VERSION}/Makefile\n",
    )
    if with_link:
        build_link(tree, SUSE_KVER, f"/usr/src/linux-{SUSE_VERSION}-obj/{ARCH}/default")
    result = run(tree, f"kernel_tree {SUSE_KVER}", image(tree))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(obj)
    if not with_link:
        assert "SUSE kernel-default-devel in the driver root" in result.stderr
    # The obj tree's Makefile names the sources by absolute path: they are ours too.
    linked = tree / f"image/usr/src/linux-{SUSE_VERSION}"
    assert linked.is_symlink() and (linked / "Makefile").exists()
    assert linked.resolve() == sources.resolve()
    assert (tree / f"image/usr/src/linux-{SUSE_VERSION}-obj").is_symlink()


def test_kernel_tree_of_the_image_first_and_nothing_linked(tree: Path) -> None:
    own = makefile(tree / f"image/lib/modules/{EL_KVER}/build")
    makefile(tree / f"driver/usr/src/kernels/{EL_KVER}")
    result = run(tree, f"kernel_tree {EL_KVER}", image(tree))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(own) and "this image's headers" in result.stderr
    assert not any((tree / "image/usr/src").iterdir())


def test_kernel_tree_missing_lists_every_place_and_what_to_do(tree: Path) -> None:
    (tree / "driver/usr/src").mkdir(parents=True)
    build_link(tree, SUSE_KVER, "/usr/src/linux-gone-obj/x86_64/default")  # dangling in the driver root too
    result = run(tree, f"kernel_tree {SUSE_KVER}", image(tree))
    assert result.returncode == 1
    driver = tree / "driver"
    for place in (
        f"{tree}/image/lib/modules/{SUSE_KVER}/build (this image)",
        f"{driver}/lib/modules/{SUSE_KVER}/build -> /usr/src/linux-gone-obj/x86_64/default (no {driver}/usr/src/linux-gone-obj/x86_64/default/Makefile)",
        f"{driver}/usr/lib/modules/{SUSE_KVER}/build",
        f"{driver}/usr/src/kernels/{SUSE_KVER} (EL, RHCOS)",
        f"{driver}/usr/src/linux-{SUSE_VERSION}-obj/{ARCH}/default (SUSE)",
    ):
        assert place in result.stderr, place
    assert "Install the running kernel's headers in the NVIDIA driver container" in result.stderr
    assert f"SUSE: kernel-default-devel {SUSE_VERSION}" in result.stderr and "set GDRCOPY_KDIR" in result.stderr
    # An EL release names no SUSE tree and no SUSE package.
    result = run(tree, f"kernel_tree {EL_KVER}", image(tree))
    assert result.returncode == 1
    assert f"{driver}/usr/src/kernels/{EL_KVER} (EL, RHCOS)" in result.stderr and "SUSE" not in result.stderr
    assert f"EL, RHCOS: kernel-devel-{EL_KVER})" in result.stderr


def test_kernel_tree_named_by_gdrcopy_kdir(tree: Path) -> None:
    kdir = makefile(tree / "elsewhere")
    result = run(tree, f"kernel_tree {EL_KVER}", {**image(tree), "GDRCOPY_KDIR": str(kdir)})
    assert result.returncode == 0 and result.stdout.strip() == str(kdir)
    assert "(GDRCOPY_KDIR)" in result.stderr
    result = run(tree, f"kernel_tree {EL_KVER}", {**image(tree), "GDRCOPY_KDIR": str(tree / "nowhere")})
    assert result.returncode == 1 and "has no Makefile" in result.stderr


# SUSE's "supported" flag: gdrdrv has none; kernel.unsupported decides whether the kernel loads it.
def suse(tree: Path, unsupported: str | None, supported: str = "", insmod_rc: int = 0) -> dict[str, str]:
    """A SUSE kernel's kernel.unsupported (None: not a SUSE kernel); fakes that see it."""
    if unsupported is not None:
        (tree / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
        (tree / "proc/sys/kernel/unsupported").write_text(f"{unsupported}\n")
    answer = f"echo {supported}" if supported else "true"
    return {
        "modinfo": f'[ "$1 $2" = "-F supported" ] && {answer}',
        "insmod": f'echo "insmod $* unsupported=$(cat {tree}/proc/sys/kernel/unsupported 2>/dev/null)"'
        f' >> "{tree}/calls"; exit {insmod_rc}',
    }


def knob(tree: Path) -> str:
    return (tree / "proc/sys/kernel/unsupported").read_text().strip()


def test_not_a_suse_kernel_loads_without_a_word_about_support(tree: Path) -> None:
    result = run(tree, "insert_module /m/gdrdrv.ko dbg=1", fakes=suse(tree, None))
    assert result.returncode == 0, result.stderr
    assert (tree / "calls").read_text() == "insmod /m/gdrdrv.ko dbg=1 unsupported=\n"
    assert "SUSE" not in result.stderr


def test_suse_default_loads_unsupported_gdrdrv_and_changes_nothing(tree: Path) -> None:
    result = run(tree, "insert_module /m/gdrdrv.ko", fakes=suse(tree, "2"))
    assert result.returncode == 0, result.stderr
    assert (tree / "calls").read_text() == "insmod /m/gdrdrv.ko unsupported=2\n"
    assert "kernel.unsupported=2 lets it load" in result.stderr
    assert "allow_unsupported_modules does not apply to insmod" in result.stderr
    assert "nothing on the node is changed" in result.stderr and knob(tree) == "2"


def test_suse_refusing_kernel_is_not_overridden_unasked(tree: Path) -> None:
    result = run(tree, "insert_module /m/gdrdrv.ko", fakes=suse(tree, "0"))
    assert result.returncode == 1
    assert not (tree / "calls").exists() and knob(tree) == "0"
    assert "FAILED: this SUSE kernel refuses modules not marked supported (kernel.unsupported=0" in result.stderr
    assert "sysctl -w kernel.unsupported=1" in result.stderr and "GDRCOPY_ALLOW_UNSUPPORTED=1" in result.stderr


@pytest.mark.parametrize("insmod_rc", [0, 1])
def test_suse_refusing_kernel_raised_for_our_insmod_alone_when_asked(tree: Path, insmod_rc: int) -> None:
    result = run(
        tree,
        "insert_module /m/gdrdrv.ko",
        {"GDRCOPY_ALLOW_UNSUPPORTED": "1"},
        fakes=suse(tree, "0", insmod_rc=insmod_rc),
    )
    assert result.returncode == insmod_rc, result.stderr
    # insmod ran with 1; the node has its 0 back afterwards, even when insmod failed.
    assert (tree / "calls").read_text() == "insmod /m/gdrdrv.ko unsupported=1\n"
    assert knob(tree) == "0"
    assert "kernel.unsupported raised from 0 to 1 for this insmod of gdrdrv alone" in result.stderr
    assert "kernel.unsupported put back to 0" in result.stderr


def test_suse_knob_is_put_back_when_the_script_exits_in_between(tree: Path) -> None:
    result = run(
        tree, "allow_unsupported /m/gdrdrv.ko; exit 3", {"GDRCOPY_ALLOW_UNSUPPORTED": "1"}, fakes=suse(tree, "0")
    )
    assert result.returncode == 3 and knob(tree) == "0"
    assert "put back to 0" in result.stderr


def test_suse_module_marked_supported_needs_nothing(tree: Path) -> None:
    result = run(tree, "insert_module /m/gdrdrv.ko", fakes=suse(tree, "0", supported="external"))
    assert result.returncode == 0, result.stderr
    assert (tree / "calls").read_text() == "insmod /m/gdrdrv.ko unsupported=0\n"
    assert "marked supported=external" in result.stderr


def test_allow_unsupported_refuses_a_bad_value(tree: Path) -> None:
    result = run(tree, "insert_module /m/gdrdrv.ko", {"GDRCOPY_ALLOW_UNSUPPORTED": "yes"}, fakes=suse(tree, "2"))
    assert result.returncode == 1 and "GDRCOPY_ALLOW_UNSUPPORTED=yes: say 0 or 1" in result.stderr
    assert not (tree / "calls").exists()


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


def test_node_group_goes_to_insmod_and_a_bad_one_is_refused(tree: Path) -> None:
    result = run(tree, "module_options", {"GDRCOPY_NODE_GID": "44", "GDRCOPY_MODULE_ARGS": "dbg_enabled=1"})
    assert result.returncode == 0, result.stderr
    # After modprobe.d's options (its node_mode included): the last of a name wins in insmod.
    assert result.stdout.strip().endswith("node_mode=0660 node_gid=44 dbg_enabled=1"), result.stdout
    assert run(tree, "module_options").stdout.strip() == ""
    for env, says in [
        ({"GDRCOPY_NODE_GID": "video"}, "give a numeric group id"),
        ({"GDRCOPY_NODE_GID": "44", "GDRCOPY_NODE_MODE": "0666"}, "gives every user access"),
        ({"GDRCOPY_NODE_GID": "44", "GDRCOPY_NODE_MODE": "rw"}, "give octal permission bits"),
    ]:
        refused = run(tree, "load_module", env)
        assert refused.returncode == 1 and says in refused.stderr, (env, refused.stderr)
        assert not (tree / "calls").exists(), "nothing may be loaded with a bad node setting"


def test_node_group_applied_to_the_node_in_the_dev_dir(tree: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a character device node needs root")
    dev = tree / "dev"
    dev.mkdir()
    node = dev / "gdrdrv"
    os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    result = run(tree, "apply_node_access", {"GDRCOPY_NODE_GID": "44", "GDRCOPY_DEV_DIR": str(dev)})
    assert result.returncode == 0, result.stderr
    assert (stat.S_IMODE(node.stat().st_mode), node.stat().st_gid, node.stat().st_uid) == (0o660, 44, 0)
    assert "non-root users outside that group are refused" in result.stderr
    # A /dev without the node (the container's own): said, not fatal.
    result = run(tree, "apply_node_access", {"GDRCOPY_NODE_GID": "44", "GDRCOPY_DEV_DIR": str(tree)})
    assert result.returncode == 0 and "the host's /dev is not mounted" in result.stderr, result.stderr
    # Without a group asked for, the node is left alone.
    node.chmod(0o600)
    assert run(tree, "apply_node_access", {"GDRCOPY_DEV_DIR": str(dev)}).returncode == 0
    assert stat.S_IMODE(node.stat().st_mode) == 0o600


def test_cdi_spec_carries_the_node_group_and_mode(tree: Path) -> None:
    spec = tree / "spec.yaml"
    spec.write_text(
        'cdiVersion: "0.5.0"\nkind: "nvidia.com/gdrcopy"\ndevices:\n  - name: "all"\n    containerEdits:\n'
        '      deviceNodes:\n        - path: "/dev/gdrdrv"\n          permissions: "rw"\n'
    )
    dirs = {"GDRCOPY_CDI_SPEC": str(spec), "GDRCOPY_CDI_SEARCH": f"{tree}/run-cdi", "GDRCOPY_NODE_GID": "44"}
    result = run(tree, f"install_cdi {tree}/run-cdi", dirs)
    assert result.returncode == 0, result.stderr
    written = yaml.safe_load((tree / "run-cdi/gdrcopy-k8s.yaml").read_text())
    node = written["devices"][0]["containerEdits"]["deviceNodes"][0]
    assert node == {"path": "/dev/gdrdrv", "permissions": "rw", "fileMode": 0o660, "uid": 0, "gid": 44}
