"""gdrcopy_doctor's command line: the verdict first on a host with nothing to check, each fix for the
host's family, and the exit statuses exactly as its docstring and the README document them."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gdrkit.gdrcopy_doctor import cli, doctor
from gdrkit.gdrcopy_doctor.probe import FakeProbe, Loaded, Output
from gdrkit.version import REPO_ROOT

DEBIAN = {"/etc/os-release": 'ID=debian\nVERSION_ID="12"\n'}
ROCKY = {"/etc/os-release": 'ID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n'}
SLES = {"/etc/os-release": 'ID="sles"\nID_LIKE="suse"\nVERSION_ID="15.6"\n'}


def test_nothing_to_check_comes_first_then_the_details(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.run(probe=FakeProbe(files=DEBIAN))
    out = capsys.readouterr().out.splitlines()
    assert status == cli.NO_GPU
    assert out[0].startswith(cli.NOTHING_TO_CHECK) and "exit 3" in out[0]
    assert not any(line.startswith("FAIL") for line in out[:1])
    assert any(line.startswith("FAIL") for line in out[1:]), "the details follow the verdict"


def test_no_gpu_ok_turns_nothing_to_check_into_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(no_gpu_ok=True, probe=FakeProbe(files=DEBIAN)) == cli.HEALTHY
    assert capsys.readouterr().out.startswith(cli.NOTHING_TO_CHECK)


def test_json_stays_json_on_a_host_with_nothing_to_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(json=True, probe=FakeProbe(files=DEBIAN)) == cli.NO_GPU
    captured = capsys.readouterr()
    assert captured.out.lstrip().startswith("[") and cli.NOTHING_TO_CHECK in captured.err


@pytest.mark.parametrize(
    ("os_release", "wanted", "refused"),
    [
        (DEBIAN, "apt-get install", ("dnf", "zypper", "./dist")),
        (ROCKY, "dnf install", ("apt", ".deb")),
        (SLES, "zypper", ("apt", ".deb", "dnf")),
    ],
)
def test_every_fix_is_for_the_hosts_family(os_release: dict[str, str], wanted: str, refused: tuple[str, ...]) -> None:
    findings = doctor.diagnose(FakeProbe(files=os_release, commands={"dkms status -m gdrdrv": Output(0, "")}))
    fixes = {f.check: f.fix for f in findings if f.fix and f.status in (doctor.FAIL, doctor.WARN)}
    for check in ("versions", "dkms", "library names"):
        assert wanted in fixes[check], (check, fixes[check])
    for check, fix in fixes.items():
        for word in refused:
            assert not re.search(rf"(^|\W){re.escape(word)}", fix), f"{check}'s fix on this family: {fix}"


def test_an_installed_module_without_its_library_gets_this_familys_runtime_package() -> None:
    probe = FakeProbe(files={**ROCKY, "/sys/module/gdrdrv/version": "2.6.1\n"}, commands={"ldconfig -p": Output(0, "")})
    finding = doctor.check_versions(probe)
    assert finding.status == doctor.FAIL and "dnf install" in finding.fix and "(deb)" not in finding.fix


def doctor_program(*argv: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from gdrkit.gdrcopy_doctor import cli; sys.exit(cli.main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )


def test_exit_statuses_are_the_documented_ones() -> None:
    # The README's table of them (or the docs/ page it moves to).
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    documented = dict(re.findall(r"^\| (\d) \| (\w+)", text, re.MULTILINE))
    assert documented.get("2") == "usage" and documented.get("3") == "nothing"
    assert (cli.HEALTHY, cli.FAILED, cli.USAGE, cli.NO_GPU) == (0, 1, 2, 3)
    assert doctor_program("--bogus").returncode == cli.USAGE
    assert doctor_program("--help").returncode == cli.HEALTHY
    toolkit = subprocess.run(
        [sys.executable, "-m", "gdrkit.tasks.program", "doctor", "--bogus"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert toolkit.returncode == cli.USAGE, toolkit.stderr


def _module_free_node(files: dict[str, str]) -> FakeProbe:
    """The GPU machine's kind of node: driver 580 (CUDA 13.0), no gdrdrv, NVIDIA's Vulkan driver, our library."""
    lib = "/usr/lib/x86_64-linux-gnu/libgdrapi.so.2.6.1"
    return FakeProbe(
        files={**DEBIAN, "/usr/share/vulkan/icd.d/nvidia_icd.json": "{}", **files},
        libraries={
            "libgdrapi.so": Loaded("libgdrapi.so", lib, "", (2, 6)),
            "libgdrapi.so.2": Loaded("libgdrapi.so.2", lib, "", (2, 6)),
            "libvulkan.so.1": Loaded("libvulkan.so.1", "/usr/lib/x86_64-linux-gnu/libvulkan.so.1"),
        },
        cuda_version=13000,
    )


@pytest.mark.parametrize(
    ("conf", "gets", "setting"),
    [
        (None, "no backend", "allow_vulkan not set"),
        ("allow_vulkan = no\n", "no backend", "allow_vulkan no"),
        ("allow_vulkan = yes\n", "backend vulkan", "allow_vulkan yes"),
    ],
)
def test_the_table_says_which_backend_a_process_gets_without_and_with_the_opt_in(
    capsys: pytest.CaptureFixture[str], conf: str | None, gets: str, setting: str
) -> None:
    cli.run(probe=_module_free_node({"/etc/gdrcopy.conf": conf} if conf else {}))
    line = next(line for line in capsys.readouterr().out.splitlines() if "consumer gates" in line)
    assert line.split("consumer gates", 1)[1].strip().startswith(gets), line
    assert "a process gets no backend without opting in to vulkan and vulkan with it" in line, line
    assert f"(/etc/gdrcopy.conf: {setting})" in line, line
    assert ("this node opts in" in line) == (gets == "backend vulkan"), line
