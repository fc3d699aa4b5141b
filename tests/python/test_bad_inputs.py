"""Each task's likeliest mistakes, and the issue's bad inputs: refused before anything is written, with a
message that names the option (or file, field and line) and what to do, and exit status 2.

Every case runs `./toolkit`'s program (in this process, to keep it quick) as a person would, with --dry-run where the
task has it: a dry run must refuse what the real run would refuse.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gdrkit.kube import lock
from gdrkit.system import BAD_INPUT
from gdrkit.tasks import ns
from gdrkit.tasks.program import ToolkitProgram
from gdrkit.version import VERSION

# (argv, what the first error line says, what the hint says)
CASES = [
    (["k8s-manifests", "--kubernetes", "0.1"], "--kubernetes '0.1': no bundled schemas", "--kubernetes 1."),
    (["k8s-manifests", "--kernel", "six", "-n"], "--kernel 'six' is not a kernel release", "uname -r"),
    (["build-deb", "--ref", "nosuchref", "--no-kmod", "-n"], "--ref 'nosuchref': no commit", "git log"),
    (["build-wheel", "--ref", "nosuchref", "-n"], "--ref 'nosuchref': no commit", "git log"),
    (["build-deb", "--kernel", "bogus", "-n"], "--kernel 'bogus' is not a kernel release", "uname -r"),
    (["build", "--kernel", "latest", "-n"], "--kernel 'latest' is not a kernel release", "uname -r"),
    (["build-image", "--kernel", "6", "-n"], "--kernel '6' is not a kernel release", "uname -r"),
    (["build-image", "--os", "plan9", "--kernel", "none", "-n"], "no image is made for node OS 'plan9'", "use one of"),
    (["build-deb", "--suite", "hamm", "--no-kmod", "-n"], "unknown Debian or Ubuntu release 'hamm'", "codename"),
    (["build-rpm", "--family", "arch", "--no-kmod", "-n"], "unknown distribution family 'arch'", "rhel"),
    (["build-deb", "--device-mode", "999", "--no-kmod", "-n"], "device mode '999' is not an octal mode", "0660"),
    (["publish", "--key", "NOSUCHKEY0", "-n"], "--key 'NOSUCHKEY0': no secret GnuPG key", "gpg --list-secret-keys"),
    # A dry run previews without a key (test_publish.py); a real run needs one.
    (["publish"], "--key: no signing key given", "--key <id>"),
    (["insmod", "--mode", "999", "-n"], "--mode '999' is not an octal file mode", "--mode 0660"),
    (["insmod", "--group", "no-such-group-x", "-n"], "--group 'no-such-group-x': no such group", "groupadd"),
    (["vm-test", "--kernel", "hamm", "-n"], "'hamm' is neither a Debian suite nor a kernel version", "bookworm"),
    (["vm-test", "--arch", "sparc", "-n"], "unknown architecture 'sparc'", "arm64"),
    (["matrix", "--only", "debian-potato", "-n"], "no matrix entry named debian-potato", "known:"),
    (["lint", "--only", "pylint", "-n"], "--only: unknown lint check pylint", "comma-separated"),
    (["molecule", "--command", "run", "-n"], "--command 'run' is not a Molecule command", "converge"),
    (
        ["sanity", "--path", "/nonexistent/gdrcopy_sanity"],
        "--path '/nonexistent/gdrcopy_sanity' is not an executable",
        "leave --path out",
    ),
    (["doctor", "--bogus"], "No idea what '--bogus' is", "./toolkit doctor --help"),
    (["test", "--quick", "--soak"], "--quick and --soak exclude each other", ""),
]


def toolkit(capsys: pytest.CaptureFixture[str], *argv: str) -> subprocess.CompletedProcess[str]:
    """`./toolkit ARGV` in this process (what the toolkit script runs), its exit status and output."""
    status = 0
    try:
        ToolkitProgram(namespace=ns, version=VERSION, name="gdrcopy toolkit", binary="./toolkit").run(
            ["./toolkit", *argv]
        )
    except SystemExit as exited:
        status = int(exited.code or 0)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(argv, status, out.out, out.err)


@pytest.mark.parametrize(("argv", "message", "hint"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_bad_input_is_refused_with_what_to_do_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str, hint: str
) -> None:
    result = toolkit(capsys, *argv)
    assert result.returncode == BAD_INPUT, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert message in result.stderr and hint in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    first = next(line for line in result.stderr.splitlines() if message in line)
    with capsys.disabled():
        print(f"\n| ./toolkit {' '.join(argv)} | {first.strip()} | {result.returncode} |")


def test_k8s_manifests_with_a_bad_kubernetes_writes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The issue's case: it wrote 17 files, then printed a traceback."""
    result = toolkit(capsys, "k8s-manifests", "--kubernetes", "0.1", "--output", str(tmp_path / "out"))
    assert result.returncode == BAD_INPUT and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists(), "files were written before the input was checked"


def test_k8s_manifests_dry_run_writes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    result = toolkit(capsys, "k8s-manifests", "-n", "--output", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "out").exists()
    if lock.load():
        assert "[dry-run] would write" in result.stdout
    else:  # the committed lock is empty until images are built (docs/kubernetes.md)
        assert "not rendered  loader/: no digest of" in result.stdout and "./toolkit build-image" in result.stdout
