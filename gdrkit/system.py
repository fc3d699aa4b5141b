"""The edge between gdrkit and the host: commands, prerequisites, user errors.

Every subprocess goes through `run()`, so a failure always shows the exact
command line; expected failures are raised with `die()` and carry a hint
that says what to do.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from invoke.exceptions import Exit


class UserError(Exit):
    """An expected failure: printed as one message with a hint, exit status 1."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        text = f"error: {message}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text, code=1)
        self.hint = hint


def die(message: str, hint: str | None = None) -> UserError:
    """Raise a UserError (returned type lets callers write `raise die(...)`)."""
    raise UserError(message, hint)


def log(message: str) -> None:
    """Progress output: one line to stderr, flushed at once."""
    print(f"==> {message}", file=sys.stderr, flush=True)


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
    missing = missing_debian_packages(wanted)
    if not missing:
        return
    if os.geteuid() != 0 and not dry_run:
        raise die(
            f"missing packages: {' '.join(missing)}",
            f"run as root, or: sudo {apt_install_hint(missing)}",
        )
    log(f"installing {' '.join(missing)}")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    stamp = Path("/var/lib/apt/periodic/gdrkit-update-stamp")
    if not stamp.exists():
        run(["apt-get", "update", "-q"], env=env, dry_run=dry_run)
        if not dry_run:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.touch()
    run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
        env=env,
        dry_run=dry_run,
    )


def cache_dir() -> Path:
    """Where downloads and built images are kept between runs."""
    base = os.environ.get("GDRKIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gdrkit"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path
