"""gdrcopy_doctor's exit status in each documented deployment, from real package installs (issue 36).

Health checkers go by the exit status (docs/nodes.md): a healthy node must
exit 0, whatever its deployment.  Each deployment is built as the docs say
(tests/packaging/doctor_prepare.sh installs this release's .deb packages in
the scenario image, natively), then booted under qemu with softgpu loaded as
the NVIDIA P2P provider, and tests/packaging/doctor_deployments.sh runs the
documented command in it:

* the DKMS node (`gdrcopy_doctor`): 0;
* NHC's lines of docs/nodes.md: the gpu line 0; the cpu line
  (`--no-gpu-ok`) 0 once no provider is loaded, 3 without the option;
* the liveness probe of docs/kubernetes.md (`gdrcopy_doctor --json`) in a
  containerd pod (service-account mount, KUBERNETES_SERVICE_HOST, no
  /.dockerenv, no /lib/modules) and in a Docker container, each given
  /dev/gdrdrv: 0; the same pod without /dev/gdrdrv: 1;
* the prebuilt-module node without headers or dkms: 0; once its gdrdrv is
  gone too: 1.

Cost: the DKMS deployment uses the session's .deb set (built once for the
package tests) and adds one container run and one TCG boot, about 3 minutes
(slow tier).  The prebuilt one builds the prebuilt-module package of the
kernel first, 5 to 10 minutes more, and runs in the soak tier.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from gdrkit import containers
from gdrkit.packaging import build, pipeline
from gdrkit.stage.packages import checked_packages
from gdrkit.system import die
from gdrkit.vm.rootfs import SuiteRoot
from pkgkit import faults, scenarios
from pkgkit.faults import DebSets

DOCTOR = re.compile(r"^DOCTOR (.+): exit (\d+) \(expected (\d+)\)$", re.MULTILINE)


@pytest.fixture(scope="module")
def kernel() -> str:
    return scenarios.bookworm_kernels()[0]


def deployment_root(mode: str, kernel: str, debs: Path, work: Path) -> SuiteRoot:
    """The root of deployment `mode` (doctor_prepare.sh), exported from a container of the scenario image."""
    image = containers.ensure_image(faults.fault_recipe(kernel))
    tree = faults.extract_source(build.source_at("HEAD"), work / "src")
    root = work / "root"
    mounts = {tree: "/src", faults.SCRIPTS: "/faults", debs.resolve(): "/pkgs/new"}
    engine = containers.default_engine()
    result, container = engine.run(
        image, faults.script_command("doctor_prepare.sh", mode, kernel), mounts=mounts, read_only=True,
        network=False, shell_flags="-euo pipefail", stream=False, keep=True, timeout_s=1800,
    )  # fmt: skip
    try:
        if result.status != 0 or faults.PASSED_MARK not in result.output:
            raise die(f"preparing the {mode} deployment failed:\n" + result.output[-4000:])
        engine.export_to(container, root)
    finally:
        engine.remove(container)
    shutil.rmtree(tree)
    return SuiteRoot(faults.FAULT_SUITE, kernel, root)


def check_deployments(mode: str, kernel: str, debs: Path, work: Path, expected: dict[str, int]) -> None:
    root = deployment_root(mode, kernel, debs, work)
    try:
        outcome, problems = faults.run_in_vm(root, "doctor_deployments.sh", mode, log_dir=work / "logs", timeout_s=1800)
    finally:
        shutil.rmtree(root.root_dir, ignore_errors=True)
    seen = {name: (int(rc), int(want)) for name, rc, want in DOCTOR.findall(outcome.output)}
    print("\n" + "\n".join(line for line in outcome.output.splitlines() if line.startswith(("DOCTOR ", "  "))))
    assert {name: rc for name, (rc, _) in seen.items()} == expected, outcome.output[-8000:]
    assert outcome.passed and not problems, f"{problems}\n{outcome.output[-8000:]}"


@pytest.mark.slow
def test_dkms_node_nhc_and_pods(deb_sets: DebSets, kernel: str, tmp_path: Path) -> None:
    check_deployments(
        "dkms",
        kernel,
        deb_sets.new,
        tmp_path,
        {
            "DKMS node": 0,
            "NHC gpu line (check_cmd_status -t 60 -r 0)": 0,
            "liveness probe in a containerd pod given /dev/gdrdrv": 0,
            "liveness probe in a Docker container given /dev/gdrdrv": 0,
            "liveness probe in a containerd pod without /dev/gdrdrv": 1,
            "NHC cpu line (--no-gpu-ok)": 0,
            "CPU-only node without --no-gpu-ok": 3,
        },
    )


@pytest.mark.soak
def test_prebuilt_module_node_without_headers(kernel: str, tmp_path: Path) -> None:
    out = tmp_path / "debs"
    request = dataclasses.replace(faults.deb_request(out), with_kmod=True, kernels=(kernel,))
    checked_packages(pipeline.plan_request(request, build.source_at("HEAD")))
    assert list(out.glob(f"gdrdrv-modules-{kernel}_*.deb")), sorted(p.name for p in out.iterdir())
    check_deployments(
        "prebuilt",
        kernel,
        out,
        tmp_path,
        {"prebuilt-module node without headers": 0, "NHC gpu line on it": 0, "no gdrdrv and no headers": 1},
    )
