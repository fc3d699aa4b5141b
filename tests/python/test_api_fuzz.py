"""The public API of libgdrapi under libFuzzer, AddressSanitizer and UBSan, on the unit
tests' fakes: no kernel, no GPU (tests/unit/fuzz_api.c says what it does to the API).

.ci/run (marker slow) replays the committed corpus and runs a bounded number of new
inputs, about a minute; the soak tier runs at least a million.  Any crash, sanitizer
report, leak or broken contract fails the test with the path of the input that caused it
and the command that replays it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT

UNIT = REPO_ROOT / "tests" / "unit"
CORPUS = UNIT / "fuzz-corpus" / "api"
BUILD = UNIT / "build-fuzz"
FUZZER = BUILD / "fuzz_api"
ARTIFACTS = BUILD / "artifacts"
MAX_LEN = 4100  # a 4-byte header and 256 operations of 16 bytes

# Leaks count; UBSan stops at its first report; failed allocations come back as NULL.
SANITIZERS = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1:allocator_may_return_null=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}
FAILURE_SIGNS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
    "ERROR: libFuzzer",
    "contract violated",
    "fuzz_api (threads)",
)

SHORT_RUNS = 25_000  # new inputs in .ci/run: about a minute at the usual 400-1000 per second
SHORT_SECONDS = 80
SOAK_TOTAL = 1_000_000


@dataclass
class FuzzRun:
    name: str
    command: list[str]
    env: dict[str, str]
    returncode: int
    seconds: float
    output: str
    executions: int = 0
    artifacts: list[Path] = field(default_factory=list)

    def failed(self) -> bool:
        return self.returncode != 0 or bool(self.artifacts) or any(sign in self.output for sign in FAILURE_SIGNS)

    def summary(self) -> str:
        rate = self.executions / self.seconds if self.seconds else 0.0
        return f"{self.name}: {self.executions} executions in {self.seconds:.0f} s ({rate:.0f}/s)"

    def report(self) -> str:
        """What a failure needs: the reproducer, the command that replays it, the sanitizer's words."""
        env = " ".join(f"{k}={v}" for k, v in self.env.items())
        lines = [f"{self.summary()}; exit status {self.returncode}"]
        for artifact in self.artifacts:
            lines.append(f"reproducer: {artifact}")
            lines.append(f"replay with: cd {UNIT} && {env} {FUZZER} {artifact}")
        if not self.artifacts:
            lines.append(f"command: {env} {' '.join(self.command)}")
        lines.append(self.output[-8000:])
        return "\n".join(lines)


def clang_major() -> int:
    out = subprocess.run(["clang", "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"clang version (\d+)", out)
    assert found, f"cannot tell clang's version from: {out}"
    return int(found.group(1))


@pytest.fixture(scope="module")
def fuzzer() -> Path:
    """The harness, built with clang; clang and its libFuzzer runtime are installed if missing."""
    ensure_debian_packages(["clang", "make"])
    ensure_debian_packages([f"libclang-rt-{clang_major()}-dev"])
    result = subprocess.run(
        ["make", "-C", str(UNIT), "-j2", "fuzz-build", "FUZZ_CC=clang"], capture_output=True, text=True
    )
    assert result.returncode == 0, f"building the fuzzer failed:\n{(result.stdout + result.stderr)[-6000:]}"
    return FUZZER


def run_fuzzer(name: str, args: list[str], timeout: float, extra_env: dict[str, str] | None = None) -> FuzzRun:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    prefix = ARTIFACTS / f"{name}-"
    before = set(ARTIFACTS.iterdir())
    env = dict(SANITIZERS, **(extra_env or {}))
    command = [
        str(FUZZER),
        f"-artifact_prefix={prefix}",
        f"-max_len={MAX_LEN}",
        "-timeout=60",
        "-rss_limit_mb=4096",
        "-print_final_stats=1",
        *args,
    ]
    start = time.monotonic()
    try:
        proc = subprocess.run(
            command,
            cwd=UNIT,
            env=dict(os.environ, **env),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
        )
        returncode, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as expired:
        returncode = -1
        output = (expired.stdout or b"").decode(errors="replace") + (expired.stderr or b"").decode(errors="replace")
        output += f"\n(killed after {timeout:.0f} s)"
    run = FuzzRun(name, command, env, returncode, time.monotonic() - start, output)
    counted = re.findall(r"stat::number_of_executed_units: (\d+)", output) or re.findall(r"Done (\d+) runs", output)
    run.executions = int(counted[-1]) if counted else 0
    run.artifacts = sorted(set(ARTIFACTS.iterdir()) - before)
    return run


def corpus_copy(destination: Path) -> Path:
    """A scratch copy of the committed corpus: a run adds to and reduces its first directory."""
    shutil.copytree(CORPUS, destination)
    return destination


def test_corpus_is_committed_and_small() -> None:
    files = [path for path in CORPUS.iterdir() if path.is_file()]
    total = sum(path.stat().st_size for path in files)
    assert len(files) >= 50, f"{CORPUS} has {len(files)} inputs; grow it with make -C tests/unit fuzz-run fuzz-merge"
    assert total <= 512 * 1024, f"{CORPUS} holds {total} bytes; minimize it (make -C tests/unit fuzz-merge)"
    assert all(path.stat().st_size <= MAX_LEN for path in files)


@pytest.mark.slow
def test_api_fuzz_corpus_then_new_inputs(fuzzer: Path, tmp_path: Path) -> None:
    """Every committed input once, with the library logging all it does, then a bounded run of new ones."""
    inputs = sum(1 for _ in CORPUS.iterdir())
    replay = run_fuzzer(
        "replay", ["-runs=0", "-close_fd_mask=2", str(CORPUS)], timeout=600, extra_env={"GDRFUZZ_LOG": "1"}
    )
    assert not replay.failed(), replay.report()
    assert replay.executions >= inputs, replay.report()
    fresh = run_fuzzer(
        "short",
        [f"-runs={SHORT_RUNS}", f"-max_total_time={SHORT_SECONDS}", str(corpus_copy(tmp_path / "corpus"))],
        timeout=SHORT_SECONDS + 300,
    )
    assert not fresh.failed(), fresh.report()
    # On a loaded machine the time cap may come first; new inputs must have run all the same.
    assert fresh.executions >= inputs + 2_000, fresh.report()
    print(f"\n{replay.summary()} (corpus of {inputs})\n{fresh.summary()}")


# The soak tier's million, spread over the copy routines and settings that are chosen once
# per process: (name, executions, environment, extra libFuzzer flags).
SOAK_JOBS: list[tuple[str, int, dict[str, str], list[str]]] = [
    ("soak-auto", 550_000, {}, []),
    ("soak-logging", 150_000, {"GDRFUZZ_LOG": "1"}, ["-close_fd_mask=2"]),
    ("soak-default-threads", 150_000, {"GDRCOPY_COPY_THREADS": "3", "GDRCOPY_PARALLEL_MIN_SIZE": "65536"}, []),
    ("soak-generic", 100_000, {"GDRCOPY_COPY_ROUTINE": "generic"}, []),
    ("soak-memcpy", 50_000, {"GDRCOPY_COPY_ROUTINE": "memcpy"}, []),
]


@pytest.mark.soak
def test_api_fuzz_a_million(fuzzer: Path, tmp_path: Path) -> None:
    assert sum(job[1] for job in SOAK_JOBS) >= SOAK_TOTAL
    parallel = max(1, min(len(SOAK_JOBS), os.cpu_count() or 1))

    def one(job: tuple[str, int, dict[str, str], list[str]]) -> FuzzRun:
        name, runs, env, flags = job
        corpus = corpus_copy(tmp_path / name)
        return run_fuzzer(
            name, [f"-runs={runs}", "-max_total_time=14400", *flags, str(corpus)], timeout=15000, extra_env=env
        )

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        runs = list(pool.map(one, SOAK_JOBS))
    elapsed = time.monotonic() - start
    failures = [run.report() for run in runs if run.failed()]
    assert not failures, "\n\n".join(failures)
    total = sum(run.executions for run in runs)
    summary = "\n".join(run.summary() for run in runs)
    assert total >= SOAK_TOTAL, f"only {total} executions:\n{summary}"
    print(f"\n{summary}\ntotal: {total} executions, 0 crashes, {elapsed:.0f} s on {parallel} processes")
