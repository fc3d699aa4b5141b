"""`./toolkit molecule`: the role's multi-host test (ansible/roles/gdrcopy/molecule/default).

1. hosts: the prepared images of debian-bookworm and debian-trixie the matrix
   also runs in (the suite's root with its kernel and exact headers, dkms and
   build tools; gdrkit.stage.image builds them), plus python3-apt for
   Ansible's apt module;
2. packages: HEAD's .deb packages built for each suite (DKMS set and the rest)
   through the package pipeline, so checked and linted as `build-deb` does;
3. repository: `./toolkit publish`'s code signs them into a repository with a
   throwaway key, served over HTTP on 127.0.0.1 (the hosts share the host's
   network), so apt checks the signatures as on a real node;
4. `molecule test`: destroy, syntax, create, prepare, converge, idempotence,
   verify, side_effect (state: absent, then the file system compared with
   the one before the role), destroy.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from gdrkit.containers import Engine
from gdrkit.distro.families import DebianFamily, debian_release
from gdrkit.fleet import ansible
from gdrkit.stage import image, packages
from gdrkit.system import die, log, step, verbose
from gdrkit.version import REPO_ROOT

SUITES = ("bookworm", "trixie")
# Ansible's apt and package_facts modules need python3-apt on the host.
HOST_PACKAGES = ("python3-apt",)
WORK = REPO_ROOT / "build" / "molecule"
SCENARIO = "default"
# The role in check mode on this machine itself (molecule/check/molecule.yml): no container, no packages.
CHECK_SCENARIO = "check"
SCENARIOS = (SCENARIO, CHECK_SCENARIO)
# molecule.yml's variables.
IMAGE_VAR = "GDRCOPY_MOLECULE_IMAGE_{suite}"
REPO_URL_VAR = "GDRCOPY_MOLECULE_REPO_URL"
VERSION_VAR = "GDRCOPY_MOLECULE_VERSION"
FINGERPRINT_VAR = "GDRCOPY_MOLECULE_KEY_FINGERPRINT"
# Molecule's action lines ("INFO     [default > converge] Executed: Successful") and Ansible's recap lines.
ACTION_LINE = re.compile(r"^(?:INFO|ERROR)\s+\[[\w-]+ > (\w[\w-]*)\] (Executing|Executed: \w+)")
RECAP_LINE = re.compile(r"^(\S+)\s+:\s+(ok=\d+\s+changed=\d+\s+unreachable=\d+\s+failed=\d+.*)$")


def host_layer_script(suite: str) -> str:
    """What a Molecule host adds to the matrix's image, in the family's own package-manager words (pure)."""
    fam = DebianFamily(release=debian_release(suite))
    steps = [fam.refresh_command, (*fam.install_command, *HOST_PACKAGES), fam.clean_command]
    return " && ".join(shlex.join(s) for s in steps if s)


def matrix_image(engine: Engine, suite: str) -> str:
    """The prepared image of Debian `suite` (gdrkit.stage.image), the one the matrix's debian-<suite> row runs in."""
    spec = image.debian_suite_spec(suite)
    prepared = image.prepare(engine, spec, offline=True)
    if not prepared.image:
        raise die(
            f"the image of {spec.name} could not be built: {prepared.skipped or prepared.failed[-3000:]}",
            "Debian's mirror must be reachable once",
        )
    return prepared.image


def host_image(engine: Engine, suite: str) -> str:
    """The Molecule host image of `suite`: the matrix's image plus HOST_PACKAGES, committed once."""
    base = matrix_image(engine, suite)
    script = host_layer_script(suite)
    digest = hashlib.sha256(f"{base}\n{script}\nflat".encode()).hexdigest()[:12]
    tag = f"gdrkit-molecule/debian-{suite}:{digest}"
    if engine.has_image(tag):
        return tag
    log(f"molecule: preparing host image {tag} from {base}")
    result, container = engine.run(base, script, keep=True, stream=verbose(), shell_flags="-euo pipefail")
    try:
        if result.status != 0:
            raise die(f"preparing {tag} failed:\n{result.output[-3000:]}", "Debian's mirror must be reachable once")
        # Flattened: the matrix's image lists its runs' bind mounts as volumes (Engine.flatten says why).
        engine.flatten(container, tag)
    finally:
        engine.remove(container)
    return tag


@dataclass(frozen=True)
class Published:
    directory: Path
    version: str  # the packages' full version, e.g. 2.6.1-1


def repo_key_file() -> str:
    from gdrkit.publish import repo

    return repo.KEY_FILE


def key_fingerprint(key_file: Path) -> str:
    """The fingerprint of the one primary key in `key_file`, as gpg reads it (the role's trusted key)."""
    out = subprocess.run(
        ["gpg", "--show-keys", "--with-colons", str(key_file)], capture_output=True, text=True, check=False
    )
    fingerprints = [line.split(":")[9] for line in out.stdout.splitlines() if line.startswith("fpr:")]
    if out.returncode != 0 or not fingerprints:
        raise die(f"gpg cannot read the key {key_file}: {out.stderr.strip()}", "is gnupg installed?")
    return fingerprints[0]


def build_and_publish(
    out: Path, url: str, work: Path, suites: tuple[str, ...] = SUITES, ref: str = "HEAD"
) -> Published:
    """`ref`'s .deb packages for each suite, signed with a throwaway key into `out` (served at `url`)."""
    from gdrkit.packaging import build, pipeline
    from gdrkit.publish import repo
    from gdrkit.publish.model import Target
    from gdrkit.system import ensure_debian_packages

    ensure_debian_packages(["reprepro", "gnupg"])
    source = build.source_at(ref)
    inputs = {}
    version = ""
    for suite in suites:
        request = pipeline.Request(kinds=("deb",), with_kmod=False, suite=suite, output=work / "dist" / suite)
        plan = pipeline.plan_request(request, source)
        debs = packages.checked_packages(plan)
        inputs[Target("deb", suite)] = [repo.read_package(p) for p in debs]
        version = plan.jobs[0].plan.full_version
    signer = repo.throwaway_signer(work / "gnupg", "molecule@invalid")
    repo.publish(out, inputs, signer, url)
    return Published(out, version)


@dataclass(frozen=True)
class MoleculeRun:
    status: int
    output: str
    log_file: Path
    seconds: float

    def summary(self) -> list[str]:
        return summarize(self.output)


def summarize(output: str) -> list[str]:
    """Each Molecule action with its outcome, then the recap line of every host it ran on (pure)."""
    lines: list[str] = []
    recaps: list[str] = []
    action = ""
    for text in output.splitlines():
        found = ACTION_LINE.match(text)
        if found:
            action, state = found.groups()
            if state != "Executing":
                lines.append(f"{action}: {state.split(': ')[1].lower()}")
                lines += recaps
            recaps = []
            continue
        recap = RECAP_LINE.match(text)
        if recap and action:
            recaps.append(f"  {recap.group(1):18} {' '.join(recap.group(2).split())}")
    return lines


def run_molecule(
    command: str, env: dict[str, str], log_file: Path, timeout_s: float = 3600, scenario: str = SCENARIO
) -> MoleculeRun:
    """`molecule <command>` in the role's directory; its output kept in `log_file` (streamed with GDRKIT_VERBOSE)."""
    argv = [str(ansible.bindir() / "molecule"), command, "-s", scenario]
    started = time.monotonic()
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("w") as handle:
        handle.write(f"$ {shlex.join(argv)}\n")
        proc = subprocess.Popen(
            argv, cwd=ansible.ROLE_DIR, env=dict(os.environ, **env), text=True, errors="replace",
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        chunks = []
        assert proc.stdout is not None
        for text in proc.stdout:
            chunks.append(text)
            handle.write(text)
            handle.flush()
            if verbose():
                print(text, end="", flush=True)
            if time.monotonic() - started > timeout_s:
                proc.kill()
                chunks.append(f"[killed after {timeout_s:.0f} s]\n")
                break
        status = proc.wait()
    return MoleculeRun(status, "".join(chunks), log_file, time.monotonic() - started)


def key_only_repository(out: Path, work: Path) -> str:
    """A repository holding only a throwaway signing key, in `out`; the key's fingerprint."""
    from gdrkit.publish import repo

    signer = repo.throwaway_signer(work / "gnupg", "molecule-check@invalid")
    key_file = out / repo.KEY_FILE
    key_file.write_text(signer.public_key())
    return key_fingerprint(key_file)


def check_here(command: str, work: Path, dry_run: bool) -> MoleculeRun | None:
    """molecule/check: the role with --check on this machine, from a key-only repository on loopback HTTP."""
    from gdrkit.publish.serve import serve

    if command not in ("check", "test", "syntax"):
        raise die(
            f"molecule {command} with --scenario {CHECK_SCENARIO}: that scenario only checks",
            "use --command check (it never converges this machine)",
        )
    if dry_run:
        print(f"[dry-run] a throwaway key in {work}/repo, served on 127.0.0.1")
        print(f"[dry-run] molecule {command} -s {CHECK_SCENARIO} in {ansible.ROLE_DIR}: the role with --check here")
        return None
    shutil.rmtree(work, ignore_errors=True)
    out = work / "repo"
    out.mkdir(parents=True)
    fingerprint = key_only_repository(out, work)
    with serve(out) as url:
        env = ansible.environment(
            **{REPO_URL_VAR: url, FINGERPRINT_VAR: fingerprint},
            # Molecule validates every scenario's file: the default one's images must be strings.
            **{IMAGE_VAR.format(suite=s.upper()): "unused-by-the-check-scenario" for s in SUITES},
            MOLECULE_EPHEMERAL_DIRECTORY=str(work / "ephemeral"),
        )
        with step(
            f"molecule {command} -s {CHECK_SCENARIO}: the role with --check on this machine", log_dir=work
        ) as current:
            run = run_molecule(command, env, current.log_file, scenario=CHECK_SCENARIO)
            if run.status != 0:
                print("\n".join(run.summary()))
                raise die(f"molecule {command} failed (exit {run.status}); log: {run.log_file}\n{run.output[-6000:]}")
    return run


def molecule(
    command: str = "test", work: Path = WORK, ref: str = "HEAD", dry_run: bool = False, scenario: str = SCENARIO
) -> MoleculeRun | None:
    """The whole `./toolkit molecule` flow; the run (None with dry_run)."""
    from gdrkit import containers
    from gdrkit.publish.serve import serve

    if scenario not in SCENARIOS:
        raise die(f"no Molecule scenario {scenario!r}", f"use one of: {', '.join(SCENARIOS)}")
    if scenario == CHECK_SCENARIO:
        return check_here(command, work.with_name(work.name + "-check"), dry_run)
    if dry_run:
        for suite in SUITES:
            print(f"[dry-run] host image of {suite}: the matrix's debian-{suite} image + {host_layer_script(suite)}")
        print(f"[dry-run] build {ref}'s .deb packages for {', '.join(SUITES)}; publish them signed into {work}/repo")
        print(f"[dry-run] serve {work}/repo on 127.0.0.1; molecule {command} -s {SCENARIO} in {ansible.ROLE_DIR}")
        ansible.ensure_collections(dry_run=True)
        return None
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ansible.ensure_collections()
    with containers.engine() as engine:
        images = {suite: host_image(engine, suite) for suite in SUITES}
    out = work / "repo"
    out.mkdir()
    with serve(out) as url:
        published = build_and_publish(out, url, work, SUITES, ref)
        env = ansible.environment(
            **{IMAGE_VAR.format(suite=s.upper()): tag for s, tag in images.items()},
            **{REPO_URL_VAR: url, VERSION_VAR: published.version},
            **{FINGERPRINT_VAR: key_fingerprint(out / repo_key_file())},
            MOLECULE_EPHEMERAL_DIRECTORY=str(work / "ephemeral"),
        )
        with step(f"molecule {command}: {', '.join(SUITES)} hosts from {url} (minutes)", log_dir=work) as current:
            run = run_molecule(command, env, current.log_file)
            if run.status != 0:
                print("\n".join(run.summary()))
                raise die(f"molecule {command} failed (exit {run.status}); log: {run.log_file}\n{run.output[-6000:]}")
    return run
