"""NVIDIA's real CUDA driver library as the judge of our code and of softgpu's libcuda.

Debian's libcuda1 (535 in bookworm, 550 in trixie) and nvidia-smi, unpacked
from the archive (gdrkit.nvidia.driver_libraries), on this host where no
NVIDIA kernel driver is loaded (there is no GPU): everything runs in a
private /dev (tests/realcuda/no-driver.sh), since the libraries create
/dev/nvidiactl when they run as root.

- gdr_open() (gdrdrv, dma-buf; vulkan only when asked), each backend alone
  (vulkan over Mesa's lavapipe, so it reaches libcuda) and every program
  that loads libcuda report why they cannot work, and nothing crashes.
- Every CUDA entry point our code resolves (libgdrapi's cuda_imports.h,
  dlsym() literals, the test programs' link-time imports) exists in the real
  library under the same versioned name, and the real cuGetProcAddress hands
  out exactly the variant we declare; softgpu's libcuda exports, maps
  (cuGetProcAddress), requires and names (errors) nothing the real one does
  differently.  The summary table is printed.
- The real nvidia-smi's failure without a driver is what doctor's unit test
  replays (tests/python/golden/nvidia-smi), and doctor explains it.

Update the captured nvidia-smi output with
    GDRKIT_UPDATE_GOLDEN=1 ./toolkit test -k test_real_libcuda
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gdrkit.gdrcopy_doctor import doctor
from gdrkit.gdrcopy_doctor.probe import Output, Probe
from gdrkit.nvidia import DriverLibraries, driver_libraries, run_without_driver
from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT

pytestmark = pytest.mark.slow

SUITES = ["bookworm", "trixie"]  # libcuda1 535 and 550
GOLDEN = Path(__file__).resolve().parent / "golden" / "nvidia-smi"
UPDATE = os.environ.get("GDRKIT_UPDATE_GOLDEN") == "1"
LIBGDRAPI = REPO_ROOT / "libgdrapi" / "build" / "libgdrapi.so.2"
SOFTGPU_LIBCUDA = REPO_ROOT / "tests" / "softgpu" / "libcuda" / "libcuda.so.1"
PROGRAMS = [REPO_ROOT / "tests" / "sanity" / "gdrcopy_sanity"] + [
    REPO_ROOT / "tests" / "bench" / f"gdrcopy_{name}" for name in ("copybw", "copylat", "apiperf", "pplat")
]
# Every CUDA version there is: MAJOR.MINOR as CUDA numbers them (12020 = 12.2).
CUDA_VERSIONS = [major * 1000 + minor * 10 for major in range(2, 14) for minor in range(10)]
NOT_LOADED = "the NVIDIA kernel driver is not loaded (no /proc/driver/nvidia/version)"
CUINIT_NO_DEVICE = (
    "cuInit failed: CUDA_ERROR_NO_DEVICE (error 100: no CUDA-capable device is detected); "
    + NOT_LOADED
    + ": install the driver for this kernel and load it (modprobe nvidia)"
)
# The invocations doctor makes.
SMI_ARGS = {
    "summary": ("--query-gpu=driver_version,name", "--format=csv,noheader"),
    "names": ("--query-gpu=name", "--format=csv,noheader"),
    "memory": ("-q", "-d", "MEMORY"),
}


def cuda_text(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


@pytest.fixture(scope="module", autouse=True)
def preconditions(tree_programs: None) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the real libraries run in a private /dev (unshare --mount)")
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this host has an NVIDIA kernel driver loaded: the no-driver case cannot be shown here")
    # lavapipe: a Vulkan device with device-local host-visible memory, so the vulkan backend reaches libcuda.
    ensure_debian_packages(["libvulkan1", "mesa-vulkan-drivers"])


@pytest.fixture(scope="module", params=SUITES)
def real(request: pytest.FixtureRequest) -> DriverLibraries:
    return driver_libraries(str(request.param))


def probe(command: str, library: Path, argument: Any = None, env: dict[str, str] | None = None) -> Any:
    """gdrkit.cudaprobe in a child process, in the private /dev; its JSON answer."""
    result = run_without_driver(
        [sys.executable, "-m", "gdrkit.cudaprobe", command, str(library)],
        env={"PYTHONPATH": str(REPO_ROOT), **(env or {})},
        input_text=json.dumps(argument) if argument is not None else None,
    )
    assert result.returncode == 0, (
        f"cudaprobe {command} {library} exited with {result.returncode} (negative: killed by that signal):\n"
        f"{result.stdout[-2000:]}{result.stderr[-3000:]}"
    )
    return json.loads(result.stdout)


# --- gdr_open and the programs: a reason, never a crash ------------------------


def gdr_open(real: DriverLibraries, **env: str) -> tuple[dict[str, Any], str]:
    result = run_without_driver(
        [sys.executable, "-m", "gdrkit.cudaprobe", "gdr-open", str(LIBGDRAPI)],
        env={"PYTHONPATH": str(REPO_ROOT), "LD_LIBRARY_PATH": real.library_path, "GDRCOPY_ENABLE_LOGGING": "1",
             "GDRCOPY_LOG_LEVEL": "3", "GDRCOPY_CONFIG_FILE": str(REPO_ROOT / "no-such-gdrcopy.conf"), **env},
    )  # fmt: skip
    assert result.returncode == 0, f"gdr_open crashed or failed ({result.returncode}):\n{result.stderr[-3000:]}"
    return json.loads(result.stdout), result.stderr


def reasons(log: str) -> dict[str, str]:
    """backend -> why gdr_open() rejected it, from its error log."""
    return dict(re.findall(r"^ERR:\s+(gdrdrv|dmabuf|vulkan): (.*)$", log, re.MULTILINE))


def test_gdr_open_says_why_each_backend_cannot_work(real: DriverLibraries) -> None:
    version = probe("version", real.libcuda, env={"LD_LIBRARY_PATH": real.library_path})
    assert version >= 12000, f"cuDriverGetVersion of libcuda {real.version}: {version}"

    opened, log = gdr_open(real)
    print(f"libcuda {real.version} (CUDA {cuda_text(version)}), gdr_open() with every backend:\n{log}")
    assert not opened["opened"] and opened["errno"] == errno.ENOENT, opened
    why = reasons(log)
    assert set(why) == {"gdrdrv", "dmabuf", "vulkan"}, log
    assert why["gdrdrv"].startswith("the gdrdrv kernel module is not loaded"), log
    assert why["dmabuf"].startswith(
        f"the CUDA driver is {cuda_text(version)} but mapping dma-buf fds needs 13.3 or newer"
    ), log
    # Not asked for, vulkan is not tried (issue 35), and the reason says how to ask.
    assert why["vulkan"].startswith("not tried: it pins only cuMemCreate memory"), log
    assert "GDRCOPY_BACKEND=vulkan" in why["vulkan"], log

    # Each backend alone, past every check that does not need the kernel driver.
    for env, backend in (
        ({"GDRCOPY_USE_DMABUF_MMAP": "1", "GDRCOPY_DMABUF_SKIP_VERSION_CHECK": "1"}, "dmabuf"),
        # lavapipe passes the Vulkan side: the rejection is libcuda's, and says why.
        ({"GDRCOPY_BACKEND": "vulkan"}, "vulkan"),
    ):
        opened, log = gdr_open(real, **env)
        print(f"{' '.join(f'{k}={v}' for k, v in env.items())}:\n{log}")
        assert not opened["opened"] and opened["errno"] == errno.ENODEV, opened
        assert reasons(log)[backend] == CUINIT_NO_DEVICE, log


def resolved_libcuda(program: Path, env: dict[str, str]) -> str:
    out = subprocess.run(["ldd", str(program)], env={**os.environ, **env}, capture_output=True, text=True).stdout
    match = re.search(r"libcuda\.so\.1 => (\S+)", out)
    return os.path.realpath(match.group(1)) if match else f"not found:\n{out}"


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_programs_say_why_cuda_cannot_start(real: DriverLibraries, program: Path) -> None:
    env = {"LD_LIBRARY_PATH": f"{real.library_path}:{LIBGDRAPI.parent}", "GDRCOPY_ENABLE_LOGGING": "1"}
    # The real library is the one it loads (the programs record only the soname).
    assert resolved_libcuda(program, env) == os.path.realpath(real.libcuda)
    result = run_without_driver([program], env=env, timeout=60)
    output = result.stdout + result.stderr
    print(f"{program.name} on libcuda {real.version}: exit {result.returncode}\n{output}")
    # A failure with a reason: no signal, no loader error (127: a symbol the library lacks).
    assert 0 < result.returncode < 127, f"{program.name} exited with {result.returncode}:\n{output}"
    assert "CUDA_ERROR_NO_DEVICE" in output and NOT_LOADED in output, output


def test_real_and_softgpu_libcuda_agree_without_a_device(real: DriverLibraries) -> None:
    # softgpu's libcuda without /dev/softgpu is the same situation: no GPU behind the library.
    real_init = probe("init", real.libcuda, env={"LD_LIBRARY_PATH": real.library_path})
    ours = probe("init", SOFTGPU_LIBCUDA)
    print(f"libcuda {real.version}: {real_init}; softgpu: {ours}")
    assert real_init["cuInit"] == 100 and ours == real_init


# --- entry points: our names against the real library ----------------------------


def exported(library: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.split()[-1].startswith("cu")}


def imported(binary: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--undefined-only", str(binary)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.split()[-1].startswith("cu")}


@dataclass(frozen=True)
class Import:
    backend: str
    kind: str  # dlsym or proc
    symbol: str  # the exported name our signature describes
    name: str = ""  # the name given to cuGetProcAddress
    version: int = 0


def libgdrapi_imports() -> list[Import]:
    """libgdrapi's list, from the code (src/cuda_imports.h through tools/print_cuda_imports.c)."""
    out = subprocess.run(["make", "-s", "-C", "libgdrapi", "print-cuda-imports"], cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    imports = []
    for line in out.splitlines():
        fields = line.split()
        if fields[1] == "dlsym":
            imports.append(Import(fields[0], "dlsym", fields[2]))
        else:
            imports.append(Import(fields[0], "proc", fields[4], fields[2], int(fields[3])))
    assert imports, out
    return imports


def dlsym_literals() -> set[str]:
    """cu* names that C sources outside the library pass to dlsym() as literals (dmabuf_probe, ...)."""
    names = set()
    for source in REPO_ROOT.glob("tests/**/*.c"):
        names |= set(re.findall(r'dlsym\(\s*\w+\s*,\s*"(cu\w+)"\s*\)', source.read_text(errors="replace")))
    return names


def softgpu_header_imports() -> set[str]:
    """What a program built against softgpu's cuda.h imports when it calls every function there."""
    here = REPO_ROOT / "tests" / "softgpu" / "libcuda"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(here / "tools" / "gen-cudah-check.py"), tmp], check=True,
                       capture_output=True)  # fmt: skip
        obj = Path(tmp) / "symbols.o"
        subprocess.run(["cc", f"-I{here / 'include'}", "-c", str(Path(tmp) / "symbols.c"), "-o", str(obj)],
                       check=True, capture_output=True)  # fmt: skip
        out = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[-1].startswith("cu")}


def required_list() -> set[str]:
    text = (REPO_ROOT / "tests" / "softgpu" / "libcuda" / "required-symbols.txt").read_text()
    return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}


def base_name(symbol: str) -> str:
    return re.sub(r"_v\d+$", "", symbol)


ProcMap = dict[tuple[str, int], "str | None"]


def proc_map(library: Path, bases: Sequence[str], up_to: int, env: dict[str, str] | None = None) -> ProcMap:
    """(base, version) -> the exported symbol cuGetProcAddress returns (None: not found), every CUDA version."""
    queries = [[base, version] for base in bases for version in CUDA_VERSIONS if version <= up_to]
    answers = probe("procs", library, queries, env=env)
    return {(a["name"], a["version"]): (a["symbol"] if a["result"] == 0 and a["status"] == 0 else None)
            for a in answers}  # fmt: skip


@dataclass
class Row:
    source: str
    names: int
    cells: list[str]


@pytest.fixture(scope="module")
def every_real() -> list[DriverLibraries]:
    return [driver_libraries(suite) for suite in SUITES]


def test_every_entry_point_exists_in_the_real_library(every_real: list[DriverLibraries]) -> None:
    ours = exported(SOFTGPU_LIBCUDA)
    softgpu_version = probe("version", SOFTGPU_LIBCUDA)
    bases = sorted({base_name(s) for s in ours})
    softgpu_map = proc_map(SOFTGPU_LIBCUDA, bases, softgpu_version)
    # The CUDA version in which softgpu's cuGetProcAddress first hands out each symbol.
    introduced: dict[str, int] = {}
    for (_, version), symbol in sorted(softgpu_map.items(), key=lambda item: item[0][1]):
        if symbol is not None:
            introduced.setdefault(symbol, version)
    imports = libgdrapi_imports()
    literals = dlsym_literals()
    programs = {program.name: imported(program) for program in PROGRAMS}
    header = softgpu_header_imports()
    required = required_list()
    softgpu_errors = [e for e in probe("errors", SOFTGPU_LIBCUDA, list(range(1000))) if e["name"]]

    rows = [Row("libgdrapi dlsym (cuda_imports.h)", len({i.symbol for i in imports if i.kind == "dlsym"}), []),
            Row("libgdrapi cuGetProcAddress (cuda_imports.h)", sum(i.kind == "proc" for i in imports), []),
            Row("dlsym literals in tests/", len(literals), []),
            Row("test programs' link-time imports", len(set().union(*programs.values())), []),
            Row("softgpu libcuda exports", len(ours), []),
            Row("softgpu required-symbols.txt", len(required), []),
            Row("softgpu cuda.h mapped names", len(header), []),
            Row("softgpu cuGetProcAddress (name, version)", 0, []),
            Row("softgpu error names and strings", len(softgpu_errors), [])]  # fmt: skip
    problems: list[str] = []
    headings = []
    for real in every_real:
        env = {"LD_LIBRARY_PATH": real.library_path}
        theirs = exported(real.libcuda)
        version = probe("version", real.libcuda, env=env)
        label = f"{real.version} (CUDA {cuda_text(version)})"
        headings.append(label)

        def newer(symbol: str, version: int = version) -> bool:
            """softgpu says CUDA introduced it after this driver's version."""
            return introduced.get(symbol, 0) > version

        def judge(
            row: Row,
            names: set[str],
            allow_newer: bool,
            what: str,
            theirs: set[str] = theirs,
            label: str = label,
            version: int = version,
        ) -> None:
            missing = sorted(n for n in names if n not in theirs)
            later = [n for n in missing if allow_newer and newer(n)]
            wrong = [n for n in missing if n not in later]
            early = sorted(n for n in names & theirs if allow_newer and newer(n))
            cell = f"{len(names) - len(missing)} present"
            if later:
                cell += f", {len(later)} newer than {cuda_text(version)} ({', '.join(later)})"
            if wrong:
                cell += f", {len(wrong)} MISSING"
                problems.append(f"{label}: {what} missing from the real library: {', '.join(wrong)}")
            if early:
                cell += f", {len(early)} EARLIER"
                problems.append(
                    f"{label}: {what} exported by the real library although softgpu's cuGetProcAddress "
                    f"introduces them after {cuda_text(version)}: {', '.join(early)}"
                )
            row.cells.append(cell)

        judge(rows[0], {i.symbol for i in imports if i.kind == "dlsym"}, False, "libgdrapi's dlsym names")
        # Through cuGetProcAddress, the real driver must hand out exactly the variant we declare.
        procs = [i for i in imports if i.kind == "proc"]
        answers = probe("procs", real.libcuda, [[i.name, i.version] for i in procs], env=env)
        mismatched = [f"{i.backend}:{i.name}@{i.version} -> {a['symbol']} (we declare {i.symbol})"
                      for i, a in zip(procs, answers) if a["symbol"] != i.symbol or i.symbol not in theirs]  # fmt: skip
        rows[1].cells.append(
            f"{len(procs) - len(mismatched)} same variant" + (f", {len(mismatched)} DIFFER" if mismatched else "")
        )
        if mismatched:
            problems.append(f"{label}: cuGetProcAddress answers differ from cuda_imports.h: {'; '.join(mismatched)}")
        judge(rows[2], literals, False, "dlsym literals")
        for name, names in programs.items():
            if names - theirs:
                problems.append(
                    f"{label}: {name} imports what the real library lacks (it would not start): "
                    f"{', '.join(sorted(names - theirs))}"
                )
        judge(rows[3], set().union(*programs.values()), False, "the test programs' imports")
        judge(rows[4], ours, True, "softgpu exports")
        judge(rows[5], required, True, "required-symbols.txt names")
        judge(rows[6], header, True, "names softgpu's cuda.h maps to")

        real_map = proc_map(real.libcuda, bases, version, env=env)
        pairs = [key for key, symbol in softgpu_map.items() if key[1] <= version and symbol is not None]
        differ = [f"{b}@{v}: softgpu {softgpu_map[(b, v)]}, real {real_map.get((b, v))}"
                  for b, v in pairs if real_map.get((b, v)) != softgpu_map[(b, v)]]  # fmt: skip
        rows[7].names = max(rows[7].names, len(pairs))
        rows[7].cells.append(
            f"{len(pairs) - len(differ)} of {len(pairs)} same" + (f", {len(differ)} DIFFER" if differ else "")
        )
        if differ:
            problems.append(f"{label}: softgpu's cuGetProcAddress maps differently: {'; '.join(differ[:20])}")

        codes = [e["code"] for e in softgpu_errors]
        real_errors = {e["code"]: (e["name"], e["text"]) for e in probe("errors", real.libcuda, codes, env=env)}
        error_differ = [f"{e['code']}: softgpu {(e['name'], e['text'])}, real {real_errors[e['code']]}"
                        for e in softgpu_errors if (e["name"], e["text"]) != real_errors[e["code"]]]  # fmt: skip
        rows[8].cells.append(
            f"{len(softgpu_errors) - len(error_differ)} same"
            + (f", {len(error_differ)} DIFFER" if error_differ else "")
        )
        if error_differ:
            problems.append(f"{label}: error names/strings differ: {'; '.join(error_differ)}")

    width = max(len(row.source) for row in rows)
    lines = [f"{'our entry points':{width}}  {'names':>5}  " + "  |  ".join(headings)]
    lines += [f"{row.source:{width}}  {row.names:>5}  " + "  |  ".join(row.cells) for row in rows]
    print("\n".join(lines))
    assert not problems, "\n".join(lines + [""] + problems)


# --- nvidia-smi without a driver, and doctor ---------------------------------


class RealSmiProbe(Probe):
    """This host, with nvidia-smi being the real binary run without a driver."""

    def __init__(self, real: DriverLibraries) -> None:
        super().__init__()
        self.real = real

    def read(self, path: str) -> str | None:
        return None if path.startswith("/proc/driver/nvidia") else super().read(path)

    def command(self, argv: Sequence[str]) -> Output | None:
        if argv[0] != "nvidia-smi":
            return super().command(argv)
        result = run_without_driver([self.real.nvidia_smi, *argv[1:]], env={"LD_LIBRARY_PATH": self.real.library_path})
        return Output(result.returncode, result.stdout + result.stderr)


def smi_capture(real: DriverLibraries, args: Sequence[str], with_nvml: bool = True) -> dict[str, Any]:
    env = {"LD_LIBRARY_PATH": real.library_path} if with_nvml else {"LD_LIBRARY_PATH": ""}
    result = run_without_driver([real.nvidia_smi, *args], env=env)
    return {"driver": real.version, "args": list(args), "nvml": with_nvml, "returncode": result.returncode,
            "stdout": result.stdout, "stderr": result.stderr}  # fmt: skip


def golden_cases(real: DriverLibraries) -> Iterator[tuple[Path, dict[str, Any]]]:
    major = real.version.split(".")[0]
    for case, args in SMI_ARGS.items():
        yield GOLDEN / f"{major}-no-driver-{case}.json", smi_capture(real, args)
    yield GOLDEN / f"{major}-no-nvml-summary.json", smi_capture(real, SMI_ARGS["summary"], with_nvml=False)


@pytest.mark.probes_host  # the doctor's probes run what they find (dkms)
def test_real_nvidia_smi_without_driver_is_what_doctor_expects(real: DriverLibraries) -> None:
    for path, captured in golden_cases(real):
        print(f"{path.name}: exit {captured['returncode']}: {captured['stdout'] + captured['stderr']!r}")
        if UPDATE:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(captured, indent=2) + "\n")
        assert path.exists(), f"no {path}: GDRKIT_UPDATE_GOLDEN=1 to capture it"
        recorded = json.loads(path.read_text())
        # The exact bytes, minus the driver version the file was captured with.
        now = {k: v for k, v in captured.items() if k != "driver"}
        then = {k: v for k, v in recorded.items() if k != "driver"}
        assert now == then, f"nvidia-smi {real.version} now says otherwise than {path.name}"
    findings = {f.check: f for f in doctor.diagnose(RealSmiProbe(real))}
    print(doctor.as_table(list(findings.values())))
    smi = findings["nvidia-smi"]
    assert smi.status == doctor.FAIL and "exit status 9" in smi.detail and "not loaded" in smi.detail, smi
    assert "modprobe nvidia" in smi.fix, smi
    for check in ("gpudirect rdma", "bar1"):
        assert findings[check].status == doctor.SKIP and "exit status 9" in findings[check].detail, findings[check]
