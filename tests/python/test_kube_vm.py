"""The Kubernetes images, run for real: their entrypoint and their module in a booted kernel.

The images are built from the packages (`gdrkit.kube.images`, as
`./toolkit build-image` builds them) for the release of this host and the
kernel of its suite's VM root, unpacked into that root, and run there as a
pod would run them (tests/python/vm/kube_pod.sh: chrooted, with the node's
/proc, /sys and /dev, and a driver root like the one the GPU Operator's
driver container shares, with softgpu standing in for nvidia.ko).  One boot
runs the precompiled image's pod as the GPU Operator's sidecar, then as the
standalone loader's init and long-running containers (deploy/kubernetes/loader),
then loads the KMM image's module (modprobe -d <image>/opt); the driver image's pod, which builds gdrdrv in the
guest, boots on its own in the soak tier, once against a driver root laid out
as a Debian driver container's and once as an EL one's (the kernel tree in
usr/src/kernels/<kver>).  Each boot also fails on any kernel-log finding (gdrkit.vm).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import yaml

from gdrkit import containers
from gdrkit.kube import images, lock, manifests
from gdrkit.packaging.pipeline import deb_target_release
from gdrkit.vm import SuiteRoot, boot, in_root

pytestmark = pytest.mark.slow

WORK = "var/tmp/gdrkit-kube"
DRIVER_ROOT = f"/{WORK}/driver-root"
POD = "/src/tests/python/vm/kube_pod.sh"
CHECK = re.compile(r"^kube-pod\[(\w+)\]: CHECK (.*): (ok|FAILED)$", re.MULTILINE)
VERDICT = re.compile(r"^kube-pod\[(\w+)\]: VERDICT (PASS|FAIL)$", re.MULTILINE)


@dataclass
class Boot:
    console: str
    problems: list[str]
    seconds: float
    rows: list[images.Row]
    layout: str = "debian"  # the driver root's (kube_driver_root.sh)


@contextmanager
def prepared(root: SuiteRoot, kinds: tuple[str, ...], layout: str = "debian") -> Iterator[list[images.Row]]:
    """The images of `kinds` built from the packages and unpacked into the root, and the driver root
    laid out as `layout`'s driver container lays it (kube_driver_root.sh)."""
    host = deb_target_release().codename
    node = next(n for n in images.node_oses() if n.codename == host)
    specs = images.plan([node.tag], [root.abi], host, kinds=kinds)
    with containers.engine() as engine:
        # softgpu's P2P exports carry other symbol versions than NVIDIA's: the
        # prebuilt module is built against its Module.symvers, as a fleet's
        # would be against its driver's (build-image --nvidia-src-dir).
        softgpu = root.source_dir / "tests" / "softgpu" / "kmod"
        rows = images.build_images(specs, nvidia_src_dir=softgpu, engine=engine)
        print("\n".join(images.summary_lines(rows)))
        missing = [row for row in rows if row.status != "built"]
        assert not missing, "\n".join(images.summary_lines(missing))
        work = root.root_dir / WORK
        shutil.rmtree(work, ignore_errors=True)
        try:
            for spec in specs:
                engine.export_image(spec.tag, work / spec.kind)
            status, output = in_root(
                root.root_dir, f"sh /src/tests/python/vm/kube_driver_root.sh {root.abi} {DRIVER_ROOT} softgpu {layout}"
            )
            assert status == 0, output[-3000:]
            yield rows
        finally:
            # The root is shared (cached): leave nothing of ours in it.
            shutil.rmtree(work, ignore_errors=True)


def node_access() -> str:
    """Who may open /dev/gdrdrv, as the rendered loader says (its env), for kube_pod.sh.

    The committed manifests exist only once the lock has their images, so the loader is rendered
    here from a lock whose digest is made up (the env does not depend on it);
    test_kube_manifests checks that every path (KMM's parameters too) says the same.
    """
    node = manifests.default_node()
    image = manifests.driver_image(node)
    locked = {image: lock.LockedImage(image, "sha256:" + "0" * 64, "driver", node.tag, "", "0" * 40)}
    daemonset = next(
        doc
        for doc in yaml.safe_load_all(manifests.render(locked=locked)["loader/daemonset.yaml"])
        if doc and doc.get("kind") == "DaemonSet"
    )
    init = daemonset["spec"]["template"]["spec"]["initContainers"][0]
    env = {e["name"]: e["value"] for e in init["env"] if e["name"].startswith("GDRCOPY_NODE_")}
    return f"KUBE_NODE_GID={env['GDRCOPY_NODE_GID']} KUBE_NODE_MODE={env['GDRCOPY_NODE_MODE']}"


def boot_pods(root: SuiteRoot, rows: list[images.Row], pods: list[str]) -> Boot:
    """One boot that runs `pods` (kube_pod.sh argument lists) in turn."""
    steps = [f"{node_access()} sh {POD} {pod}; s{index}=$?" for index, pod in enumerate(pods)]
    statuses = "".join(f"$s{index}" for index in range(len(pods)))
    command = "; ".join([*steps, f'test "{statuses}" = "{"0" * len(pods)}"'])
    result = boot(root.kernel_image, root.modules_dir, root.root_dir, command, timeout=1500)
    console = result.console_log.read_text(errors="replace")
    print(f"boot: {result.seconds:.0f} s in the VM")
    return Boot(console, result.problems(), result.seconds, rows)


@pytest.fixture(scope="module")
def root(built_root: Callable[[str], SuiteRoot]) -> SuiteRoot:
    return built_root(deb_target_release().codename)


@pytest.fixture(scope="module")
def loader_boot(root: SuiteRoot) -> Boot:
    """The precompiled driver image as the operator's sidecar, then as the standalone loader; the KMM image."""
    with prepared(root, ("precompiled", "kmm")) as rows:
        pods = [f"operator /{WORK}/precompiled {DRIVER_ROOT}", f"standalone /{WORK}/precompiled", f"kmm /{WORK}/kmm"]
        return boot_pods(root, rows, pods)


@pytest.fixture(scope="module", params=["debian", "el"])
def build_boot(root: SuiteRoot, request: pytest.FixtureRequest) -> Boot:
    """The driver image's pod: gdrdrv built in the VM (minutes under TCG), against a driver root
    laid out as a Debian one (the build link) or an EL one (usr/src/kernels/<kver>, no link)."""
    with prepared(root, ("driver",), request.param) as rows:
        booted = boot_pods(root, rows, [f"operator /{WORK}/driver {DRIVER_ROOT}"])
        booted.layout = request.param
        return booted


def pod_lines(boot_: Boot, name: str) -> str:
    return "\n".join(
        line for line in boot_.console.splitlines() if line.startswith(f"kube-pod[{name}]") or line.startswith("    ")
    )


def assert_pod_passed(boot_: Boot, name: str, at_least: int) -> None:
    checks = [(what, state) for pod, what, state in CHECK.findall(boot_.console) if pod == name]
    verdicts = [state for pod, state in VERDICT.findall(boot_.console) if pod == name]
    lines = pod_lines(boot_, name)
    assert verdicts == ["PASS"], f"{name}: verdict {verdicts}\n{lines[-8000:]}"
    assert len(checks) >= at_least and all(state == "ok" for _, state in checks), lines
    assert not boot_.problems, f"{boot_.problems}\n{boot_.console[-6000:]}"


# Building gdrdrv inside the TCG guest takes minutes (the kernel's conftest
# probes and the module, compiled emulated): beyond .ci/run's budget, so in
# the soak tier.  The precompiled pod runs the same entrypoint through every
# other step in CI.
@pytest.mark.soak
def test_driver_image_builds_gdrdrv_on_the_node_and_unloads_on_term(build_boot: Boot) -> None:
    assert_pod_passed(build_boot, "driver", 16)
    log = pod_lines(build_boot, "driver")
    # Built here, against the driver root's sources, in the open flavour softgpu is.
    assert re.search(
        r"nvidia-gdrcopy-driver: build: gdrdrv from /usr/src/gdrdrv-[\d.]+ .*NVIDIA_IS_OPENSOURCE=y", log
    ), log
    assert "nvidia-gdrcopy-driver: module: built /var/lib/gdrcopy/build/gdrdrv.ko" in log, log
    # The kernel tree where the driver root's layout keeps it.
    where = {
        "debian": r"build tree /run/nvidia/driver/usr/src/linux-headers-\S+ \(the driver root's /lib/modules/\S+/build ->",
        "el": r"build tree /run/nvidia/driver/usr/src/kernels/\S+ \(EL kernel-devel in the driver root",
    }
    assert re.search(where[build_boot.layout], log), log


def test_precompiled_image_waits_loads_and_unloads_on_term(loader_boot: Boot) -> None:
    assert_pod_passed(loader_boot, "precompiled", 16)
    log = pod_lines(loader_boot, "precompiled")
    assert re.search(r"nvidia-gdrcopy-driver: module: prebuilt /lib/modules/\S+/updates/gdrdrv.ko", log), log
    assert "build:" not in log, log


def test_standalone_loader_loads_writes_cdi_and_stays_unprivileged(loader_boot: Boot) -> None:
    # deploy/kubernetes/loader's containers: `load` with the host's root at /host, then `watch` as nobody.
    assert_pod_passed(loader_boot, "standalone", 11)


def test_kmm_image_module_loads_in_its_kernel(loader_boot: Boot) -> None:
    assert_pod_passed(loader_boot, "kmm", 8)


@pytest.mark.parametrize("pod", ["precompiled", "standalone", "kmm"])
def test_non_root_pod_in_the_node_group_opens_gdrdrv_and_others_are_refused(loader_boot: Boot, pod: str) -> None:
    """Every path gives /dev/gdrdrv the manifests' mode and group: a pod process as uid 1000 in that group
    opens it (the host's node, or the one the runtime makes from the CDI spec), one outside it is refused."""
    checks = {what: state for name, what, state in CHECK.findall(loader_boot.console) if name == pod}
    opened = [what for what in checks if " opens " in what]
    refused = [what for what in checks if " is refused " in what]
    print("\n".join(f"{pod}: {what}: {checks[what]}" for what in [*opened, *refused]))
    # The KMM path's kernel-made node is root's: only its CDI node is opened.
    assert opened and refused and all(checks[what] == "ok" for what in [*opened, *refused]), pod_lines(loader_boot, pod)
