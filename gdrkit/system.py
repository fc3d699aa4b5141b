"""The edge between gdrkit and the host: commands, prerequisites, user errors.

Every subprocess goes through `run()`, so a failure always shows the exact
command line; expected failures are raised with `die()` and carry a hint
that says what to do.  Long commands (package installs, image and root
builds, package builds) go through `step()`: one progress line each, their
output in a log file whose tail, compiler errors first, is shown when they
fail; GDRKIT_VERBOSE=1 streams that output as well.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from invoke.exceptions import Exit


class UserError(Exit):
    """An expected failure: printed as one message with a hint, exit status 1 (BAD_INPUT for InputError)."""

    def __init__(self, message: str, hint: str | None = None, code: int = 1) -> None:
        text = f"error: {message}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text, code=code)
        self.hint = hint


# The exit status of a bad input (an option or a file that says something wrong), as argparse's
# and ./toolkit's own usage errors: 1 stays a failure of the work itself.
BAD_INPUT = 2


class InputError(UserError):
    """A bad input, refused before anything is written: exit status BAD_INPUT."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint, code=BAD_INPUT)


def bad_input(message: str, hint: str) -> InputError:
    """Raise an InputError: `message` names the option or the file, field and line; `hint` what to do."""
    raise InputError(message, hint)


def die(message: str, hint: str | None = None) -> UserError:
    """Raise a UserError (returned type lets callers write `raise die(...)`)."""
    raise UserError(message, hint)


def log(message: str) -> None:
    """Progress output: one line to stderr, flushed at once."""
    _break_step_line()
    print(f"==> {message}", file=sys.stderr, flush=True)


# ---- long steps: one line each, their output in a log file ----

VERBOSE_ENV = "GDRKIT_VERBOSE"
COMPILER_DIAGNOSTIC = re.compile(r"\.[ch]:\d+:(\d+:)? (fatal )?error: ")
COMPILER_ERROR = re.compile(r"(error|fatal error): |\*\*\* \[.*\] Error \d+|^E: ")
TAIL_LINES = 30


def verbose() -> bool:
    """GDRKIT_VERBOSE=1: long steps stream their raw output as well as logging it."""
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def error_tail(text: str, lines: int = TAIL_LINES) -> str:
    """The compiler's (or apt's) error lines first, then the output's last `lines` lines."""
    all_lines = text.rstrip().splitlines()
    diagnostics = [line for line in all_lines if COMPILER_DIAGNOSTIC.search(line)]
    errors = diagnostics + [line for line in all_lines if COMPILER_ERROR.search(line) and line not in diagnostics]
    return "\n".join(errors[:10] + ["..."] + all_lines[-lines:] if errors else all_lines[-lines:])


@dataclass
class StepRecord:
    title: str
    status: str  # "ok" or "FAILED"
    seconds: float
    log_file: Path | None


# Every step this process ran, for `step_summary()`.
STEPS: list[StepRecord] = []
# The title of the step whose "==> title ... " line waits for its "ok"; None when none does.
_open_line: list[str] = []


def _break_step_line() -> None:
    """End a step's unfinished progress line before another line is printed."""
    if _open_line:
        print(file=sys.stderr, flush=True)
        _open_line.clear()


class Step:
    """A long step in progress: its commands' output goes to `log_file`."""

    def __init__(self, title: str, log_file: Path) -> None:
        self.title = title
        self.log_file = log_file
        # Set by a body that judges its work failed without raising (its caller reports how).
        self.failed = False

    def run(
        self,
        cmd: Sequence[str | os.PathLike[str]],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        hint: str | None = None,
    ) -> str:
        """Run `cmd`, its stdout and stderr appended to the log; its output.  On failure raise
        UserError with the command, the log's path and the tail of the output."""
        argv = [os.fspath(c) for c in cmd]
        line = shlex.join(argv)
        full_env = dict(os.environ, **env) if env is not None else None
        with self.log_file.open("a") as log_handle:
            log_handle.write(f"$ {line}\n")
            log_handle.flush()
            try:
                proc = subprocess.Popen(
                    argv, cwd=cwd, env=full_env, text=True, errors="replace",
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                )  # fmt: skip
            except FileNotFoundError:
                raise die(f"command not found: {argv[0]}", f"install the package that provides {argv[0]!r}")
            killed: list[bool] = []

            def kill() -> None:
                killed.append(True)
                proc.kill()

            timer = threading.Timer(timeout, kill) if timeout else None
            if timer:
                timer.start()
            chunks = []
            assert proc.stdout is not None
            for text in proc.stdout:
                chunks.append(text)
                log_handle.write(text)
                if verbose():
                    sys.stdout.write(text)
                    sys.stdout.flush()
            status = proc.wait()
            if timer:
                timer.cancel()
        output = "".join(chunks)
        if status != 0:
            why = f"timed out after {timeout:.0f} s" if killed else f"exit {status}"
            raise die(
                f"{self.title}: command failed ({why}): {line}\n  log: {self.log_file}\n{error_tail(output)}",
                hint,
            )
        return output


def step_log_path(title: str, directory: Path | None = None) -> Path:
    """Where the output of step `title` is kept: `directory` (default: the cache's logs/)."""
    slug = re.sub(r"[^A-Za-z0-9.+-]+", "-", title).strip("-")[:80] or "step"
    return (directory or cache_dir() / "logs") / f"{slug}.log"


@contextmanager
def step(title: str, *, log_dir: Path | None = None) -> Iterator[Step]:
    """One long step: `==> title ... ` then `ok (N s)` or `FAILED (N s)` and the log's path.

    The log starts empty each time; an exception in the body marks the step
    failed and goes on up (the UserError of `Step.run` carries the tail).
    """
    log_file = step_log_path(title, log_dir)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_text("")
    _break_step_line()
    if verbose():
        print(f"==> {title} (output below; kept in {log_file})", file=sys.stderr, flush=True)
    else:
        print(f"==> {title} ... ", end="", file=sys.stderr, flush=True)
        _open_line.append(title)
    start = time.monotonic()
    status = "FAILED"
    try:
        current = Step(title, log_file)
        yield current
        status = "FAILED" if current.failed else "ok"
    finally:
        seconds = time.monotonic() - start
        STEPS.append(StepRecord(title, status, seconds, log_file))
        # Other lines came in between: say which step this verdict is of.
        prefix = "" if _open_line else f"==> {title}: "
        _open_line.clear()
        note = "" if status == "ok" else f" (log: {log_file})"
        print(f"{prefix}{status} ({seconds:.0f} s){note}", file=sys.stderr, flush=True)


def run_step(
    title: str,
    cmd: Sequence[str | os.PathLike[str]],
    *,
    log_dir: Path | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    hint: str | None = None,
) -> str:
    """A step of one command (see `step`); its output."""
    with step(title, log_dir=log_dir) as current:
        return current.run(cmd, cwd=cwd, env=env, timeout=timeout, hint=hint)


def step_summary(since: int = 0) -> str:
    """One line per step run since `STEPS[since]`: status, seconds, title (and log if it failed)."""
    lines = []
    for record in STEPS[since:]:
        where = f"  (log: {record.log_file})" if record.status != "ok" and record.log_file else ""
        lines.append(f"  {record.status:<6} {record.seconds:6.0f} s  {record.title}{where}")
    return "\n".join(lines)


def run(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    check: bool = True,
    capture: bool = False,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    timeout: float | None = None,
    dry_run: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure raise UserError naming the command and its output."""
    argv = [os.fspath(c) for c in cmd]
    line = shlex.join(argv)
    if dry_run:
        print(f"[dry-run] {line}", flush=True)
        return subprocess.CompletedProcess(argv, 0, "", "")
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    try:
        result = subprocess.run(
            argv,
            cwd=cwd,
            env=full_env,
            text=True,
            input=input_text,
            capture_output=capture,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise die(f"command not found: {argv[0]}", f"install the package that provides {argv[0]!r}")
    except subprocess.TimeoutExpired:
        raise die(f"timed out after {timeout}s: {line}")
    if check and result.returncode != 0:
        detail = ""
        if capture:
            tail = (result.stdout or "")[-2000:] + (result.stderr or "")[-2000:]
            detail = f"\n{tail.rstrip()}" if tail.strip() else ""
        if result.returncode == 127:
            raise die(f"command not found (exit 127): {line}{detail}")
        raise die(f"command failed (exit {result.returncode}): {line}{detail}")
    return result


def have_command(name: str) -> bool:
    return shutil.which(name) is not None


def apt_install_hint(packages: Iterable[str]) -> str:
    """What a person runs to install `packages` on this (Debian-like) host."""
    return f"apt-get install {' '.join(packages)}"


# The audit event ensure_debian_packages raises with the packages it was asked for.
ENSURE_EVENT = "gdrkit.ensure_debian_packages"


def missing_debian_packages(packages: Iterable[str]) -> list[str]:
    """The packages of `packages` that dpkg does not report as installed."""
    missing = []
    for package in packages:
        result = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package],
            capture_output=True,
            text=True,
            check=False,
        )
        if "install ok installed" not in result.stdout:
            missing.append(package)
    return missing


def ensure_debian_packages(packages: Iterable[str], *, dry_run: bool = False) -> None:
    """Install what is missing of `packages` with apt (idempotent; needs root)."""
    wanted = list(packages)
    if not have_command("dpkg-query"):
        raise die(
            f"need the packages {' '.join(wanted)} but this is not a Debian-like host",
            "install their equivalents with your distribution's package manager",
        )
    if not dry_run:
        # Announced to audit hooks: the test suite's host-needs check
        # (tests/python/hostneeds.py) counts what each test asked for.
        sys.audit(ENSURE_EVENT, tuple(wanted))
    missing = missing_debian_packages(wanted)
    if not missing:
        return
    if os.geteuid() != 0 and not dry_run:
        raise die(
            f"missing packages: {' '.join(missing)}",
            f"run as root, or: sudo {apt_install_hint(missing)}",
        )
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    stamp = Path("/var/lib/apt/periodic/gdrkit-update-stamp")
    update = ["apt-get", "update", "-q"]
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    if dry_run:
        if not stamp.exists():
            run(update, dry_run=True)
        run(install, dry_run=True)
        return
    hint = f"see the log; then retry, or install them by hand: {apt_install_hint(missing)}"
    with step(f"installing {' '.join(missing)}") as current:
        if not stamp.exists():
            current.run(update, env=env, hint=hint)
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.touch()
        current.run(install, env=env, hint=hint)


def cache_dir() -> Path:
    """Where downloads and built images are kept between runs."""
    base = os.environ.get("GDRKIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gdrkit"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
