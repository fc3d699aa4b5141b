"""gdrcopy_doctor as the packages install it: the toolkit's doctor modules, alone (quick).

The modules are installed the way debian/rules and the spec do it (`make
doctor_install`), the launcher and facts.json as the package build renders
them, and the installed copy is run by a Python that cannot see this tree
(-I): it must work with the standard library only, give the same findings
as `./toolkit doctor`, and keep the documented exit statuses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gdrkit.distro import families
from gdrkit.gdrcopy_doctor import cli, doctor, facts
from gdrkit.gdrcopy_doctor.probe import FakeProbe, Output, Probe
from gdrkit.packaging.doctor_facts import registry_facts
from gdrkit.packaging import model, render
from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT

DEBIAN = families.DebianFamily(release=families.debian_release("bookworm"))
KALLSYMS_SOFTGPU = "0 T nvidia_p2p_get_pages\t[softgpu]\n0 T nvidia_p2p_put_pages\t[softgpu]\n"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DESTDIR holding what the packages install of gdrcopy_doctor."""
    root = tmp_path_factory.mktemp("destdir")
    ensure_debian_packages(["make"])
    subprocess.run(
        ["make", "-s", "-C", str(REPO_ROOT), "doctor_install", f"DESTDIR={root}", f"doctordir={DEBIAN.doctordir}"],
        check=True,
    )
    files = render.system_files(model.plan(DEBIAN, source_date_epoch=0))
    for rel, rendered in files.items():
        if render.DOCTOR_PROGRAM in rel or rel.endswith(facts.FACTS_FILE):
            path = root / rel.removeprefix("pkgroot/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(rendered.text)
            path.chmod(rendered.mode)
    return root


def run_installed(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # -I: no user site, no PYTHON* variables, not this tree's directory: only the installed copy.
    here = str(root / DEBIAN.doctordir.lstrip("/"))
    code = f"import sys; sys.path.insert(0, {here!r}); from gdrcopy_doctor.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-I", "-c", code, *args], capture_output=True, text=True, cwd="/")


def test_launcher_runs_the_installed_modules(installed: Path) -> None:
    launcher = (installed / "usr/bin" / render.DOCTOR_PROGRAM).read_text()
    assert launcher.startswith(f"#!{DEBIAN.python_interpreter}\n")
    assert f'sys.path.insert(0, "{DEBIAN.doctordir}")' in launcher and "from gdrcopy_doctor.cli import main" in launcher
    compile(launcher, render.DOCTOR_PROGRAM, "exec")
    shipped = sorted(p.name for p in (installed / DEBIAN.doctordir.lstrip("/") / "gdrcopy_doctor").iterdir())
    assert shipped == ["__init__.py", "cli.py", "consumers.py", "doctor.py", facts.FACTS_FILE, "facts.py", "probe.py"]


@pytest.mark.probes_host
def test_installed_copy_gives_the_toolkits_findings_and_exit_status(installed: Path) -> None:
    done = run_installed(installed, "--json")
    print(done.stdout[-2000:], done.stderr)
    found = json.loads(done.stdout)
    here = doctor.diagnose()
    assert [(f["check"], f["status"]) for f in found] == [(f.check, f.status) for f in here]
    # The consumers' gates travel in the JSON, from the installed consumers module.
    [gates] = [f["gates"] for f in found if f["check"] == "consumer gates"]
    assert [g["consumer"] for g in gates] == [g.consumer for g in next(f for f in here if f.gates).gates]
    expected = cli.exit_status(here, doctor.gpu_present(Probe()))
    assert done.returncode == expected, done.stderr
    # This machine has no GPU: the tests run on CPU-only hosts.
    assert expected == cli.NO_GPU


def test_installed_exit_statuses_for_usage_and_no_gpu_ok(installed: Path) -> None:
    bad = run_installed(installed, "--frobnicate")
    assert bad.returncode == cli.USAGE and "unrecognized arguments" in bad.stderr
    assert run_installed(installed, "--no-gpu-ok", "--json").returncode == cli.HEALTHY
    helped = run_installed(installed, "--help")
    assert helped.returncode == 0 and "3 no NVIDIA GPU" in " ".join(helped.stdout.split())


def test_packaged_facts_are_the_registrys(installed: Path) -> None:
    text = (installed / DEBIAN.doctordir.lstrip("/") / "gdrcopy_doctor" / facts.FACTS_FILE).read_text()
    shipped = facts.Facts.from_json(text)
    assert shipped == registry_facts()
    # The answers doctor gives from them are the registry's own, for every family.
    for cls in families.Family.registry.values():
        os_release = f"ID={cls.os_ids[0]}\n"
        assert shipped.install_hint(os_release, ["pkg x"]) == cls().install_hint("pkg x")
        fam = shipped.family(facts.parse_os_release(os_release))
        assert fam is not None and fam.kernel_headers_package == cls.kernel_headers_package


def test_exit_status_rules() -> None:
    ok = [
        doctor.Finding("a", doctor.OK, ""),
        doctor.Finding("b", doctor.WARN, ""),
        doctor.Finding("c", doctor.SKIP, ""),
    ]
    failed = [*ok, doctor.Finding("d", doctor.FAIL, "")]
    assert cli.exit_status(ok, gpu=True) == cli.HEALTHY
    assert cli.exit_status(failed, gpu=True) == cli.FAILED
    assert cli.exit_status(failed, gpu=False) == cli.NO_GPU
    assert cli.exit_status(failed, gpu=False, no_gpu_ok=True) == cli.HEALTHY


def test_gpu_present_from_driver_p2p_provider_or_pci_device() -> None:
    assert not doctor.gpu_present(FakeProbe())
    assert doctor.gpu_present(FakeProbe(files={"/proc/driver/nvidia/version": "NVRM version: 550\n"}))
    assert doctor.gpu_present(FakeProbe(files={"/proc/kallsyms": KALLSYMS_SOFTGPU}))
    gpu = {
        "/sys/bus/pci/devices/0000:41:00.0/vendor": "0x10de\n",
        "/sys/bus/pci/devices/0000:41:00.0/class": "0x030200\n",
    }
    assert doctor.gpu_present(FakeProbe(files=gpu))
    # An NVIDIA device that is not a GPU (a bridge, an audio function) is not one.
    bridge = {
        "/sys/bus/pci/devices/0000:40:00.0/vendor": "0x10de\n",
        "/sys/bus/pci/devices/0000:40:00.0/class": "0x040300\n",
    }
    assert not doctor.gpu_present(FakeProbe(files=bridge))
    # __ksymtab entries are not the exported function.
    assert not doctor.gpu_present(FakeProbe(files={"/proc/kallsyms": "0 r __ksymtab_nvidia_p2p_get_pages\t[x]\n"}))


def test_a_p2p_stand_in_is_a_warning_not_a_failure() -> None:
    probe = FakeProbe(files={"/proc/kallsyms": KALLSYMS_SOFTGPU}, commands={"modinfo -F license nvidia": Output(1, "")})
    finding = doctor.check_nvidia_driver(probe)
    assert finding.status == doctor.WARN and "softgpu exports the NVIDIA P2P API" in finding.detail
    assert "modprobe nvidia" in finding.fix
