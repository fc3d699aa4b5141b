"""Long steps: one progress line, the raw output in a log, its tail (errors first) on failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from gdrkit import system
from gdrkit.system import UserError, run_step, step

NOISY_FAILURE = (
    'for i in $(seq 1 60); do echo "  CC noise $i"; done; '
    "echo 'gdrdrv.c:12:3: error: unknown type name foo' >&2; "
    'for i in $(seq 1 40); do echo "packaging noise $i"; done; exit 3'
)


@pytest.fixture(autouse=True)
def quiet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(system.VERBOSE_ENV, raising=False)
    monkeypatch.setenv("GDRKIT_CACHE", str(tmp_path / "cache"))


def test_a_passing_step_prints_one_line_and_keeps_its_output_in_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = run_step("building things", ["sh", "-c", "echo raw apt progress; echo more"], log_dir=tmp_path)
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("==> building things ... ok (") and lines[0].endswith(" s)")
    assert output == "raw apt progress\nmore\n"
    assert "raw apt progress" in (tmp_path / "building-things.log").read_text()
    assert system.STEPS[-1].status == "ok"


def test_a_failing_step_prints_its_log_path_and_the_error_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UserError) as failure:
        run_step("dpkg-buildpackage", ["sh", "-c", NOISY_FAILURE], log_dir=tmp_path, hint="look at the staged tree")
    log_file = tmp_path / "dpkg-buildpackage.log"
    err = capsys.readouterr().err
    assert err.startswith("==> dpkg-buildpackage ... FAILED (") and str(log_file) in err
    message = str(failure.value.message)
    assert "exit 3" in message and f"log: {log_file}" in message and "hint: look at the staged tree" in message
    tail = message.split(f"log: {log_file}\n", 1)[1].splitlines()
    assert tail[0] == "gdrdrv.c:12:3: error: unknown type name foo"
    assert "packaging noise 40" in tail and "  CC noise 1" not in tail
    assert "  CC noise 1" in log_file.read_text()  # the log has everything
    assert system.STEPS[-1].status == "FAILED"


def test_verbose_streams_the_raw_output_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(system.VERBOSE_ENV, "1")
    run_step("installing x", ["sh", "-c", "echo Get:1 http://deb.debian.org x"], log_dir=tmp_path)
    captured = capsys.readouterr()
    assert "Get:1 http://deb.debian.org x" in captured.out
    assert str(tmp_path / "installing-x.log") in captured.err


def test_a_line_printed_inside_a_step_does_not_hide_which_step_the_verdict_is_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with step("image build", log_dir=tmp_path):
        system.log("importing")
    assert capsys.readouterr().err.splitlines() == [
        "==> image build ... ",
        "==> importing",
        "==> image build: ok (0 s)",
    ]


def test_a_step_past_its_timeout_is_killed_and_says_so(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="timed out after 1 s"):
        run_step("boot", ["sleep", "30"], log_dir=tmp_path, timeout=1)


def test_the_summary_lists_each_step_with_its_status() -> None:
    first = len(system.STEPS)
    run_step("one", ["true"])
    with pytest.raises(UserError):
        run_step("two", ["false"])
    lines = system.step_summary(first).splitlines()
    assert [line.split()[0] for line in lines] == ["ok", "FAILED"]
    assert lines[1].endswith("two  (log: " + str(system.step_log_path("two")) + ")")


def test_a_step_command_never_reads_the_terminal(tmp_path: Path) -> None:
    # qemu (and apt) must not get the terminal as stdin: qemu would change its modes.
    assert run_step("reads stdin", ["sh", "-c", "cat; echo eof"], log_dir=tmp_path, timeout=10) == "eof\n"


class _FakeContainer:
    """What Engine.run uses of a docker container: start, logs, wait, remove."""

    def __init__(self, output: bytes, status: int) -> None:
        self.output, self.status = output, status

    def start(self) -> None:
        pass

    def logs(self, stream: bool, follow: bool) -> list[bytes]:
        return [self.output]

    def wait(self) -> dict[str, int]:
        return {"StatusCode": self.status}

    def remove(self, force: bool = False) -> None:
        pass


class _FakeClient:
    def __init__(self, container: _FakeContainer) -> None:
        self.containers = self
        self.container = container

    def create(self, *args: object, **kwargs: object) -> _FakeContainer:
        return self.container


@pytest.mark.parametrize("status", [0, 2])
def test_a_titled_container_run_is_one_step_line_and_raw_output_only_on_failure(
    capsys: pytest.CaptureFixture[str], status: int
) -> None:
    """The matrix's image builds and NVIDIA layer (gdrkit.containers.Engine.run with a title)."""
    from gdrkit.containers import Engine

    noise = b"".join(b"Get:%d http://deb.debian.org bookworm/main amd64 pkg\n" % i for i in range(200))
    engine = Engine(client=_FakeClient(_FakeContainer(noise + b"E: Unable to locate package nvidia\n", status)))
    result, _ = engine.run("image", "true", title="debian-bookworm: NVIDIA layer")
    err = capsys.readouterr().err
    assert result.status == status and system.STEPS[-1].title == "debian-bookworm: NVIDIA layer"
    log_file = system.STEPS[-1].log_file
    assert log_file is not None and "Get:150" in log_file.read_text(), "the whole output is in the step's log"
    first = err.splitlines()[0]
    assert first.startswith("==> debian-bookworm: NVIDIA layer ... ")
    if status == 0:
        assert len(err.splitlines()) == 1 and first.endswith(" s)") and system.STEPS[-1].status == "ok"
    else:
        assert "FAILED" in first and system.STEPS[-1].status == "FAILED"
        assert "E: Unable to locate package nvidia" in err, "the failure's tail, errors first"
        assert "Get:5 " not in err, "not the whole raw output"
