"""The Ansible role against the facts it repeats, its playbooks' syntax, and the Molecule plumbing (quick).

The role's vars name packages, paths and doctor's exit statuses that have
their home elsewhere (packages/gdrcopy.yaml, gdrkit.publish.repo,
gdrkit.gdrcopy_doctor.cli, the distro registry): these tests fail when one side moves.
The multi-host and VM runs themselves are test_ansible_molecule.py (soak).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from gdrkit.distro import debian, families
from gdrkit.fleet import ansible, molecule, vmload
from gdrkit.gdrcopy_doctor import cli
from gdrkit.packaging import model, render
from gdrkit.publish import repo
from gdrkit.system import ensure_debian_packages

ROLE = ansible.ROLE_DIR
KVER = "6.1.0-57-amd64"


def role_vars() -> dict[str, Any]:
    data = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert isinstance(data, dict)
    return data


def package_names(kind: str) -> set[str]:
    description = model.load()
    return {str(e["name"]).replace("{kver}", KVER) for e in description.raw_packages[kind]}


def fill_kernel(names: list[str]) -> list[str]:
    return [n.replace("{{ ansible_facts['kernel'] }}", KVER) for n in names]


@pytest.mark.parametrize("kind, key", [("deb", "gdrcopy_deb_packages"), ("rpm", "gdrcopy_rpm_packages")])
def test_role_package_names_are_the_packages_yaml_ones(kind: str, key: str) -> None:
    packages = role_vars()[key]
    built = package_names(kind)
    for choice in ("dkms", "prebuilt", "python"):
        assert set(fill_kernel(packages[choice])) <= built, (choice, packages[choice], built)
    # state: absent removes every package we build, and nothing else.
    pattern = re.compile(packages["all"])
    assert {name for name in built if pattern.match(name)} == built
    assert not pattern.match("gdrcopy-something-else") and not pattern.match("libgdrapi-dev")


def test_role_repository_facts_are_the_publishers() -> None:
    facts = role_vars()
    assert facts["gdrcopy_key_file"] == repo.KEY_FILE
    assert facts["gdrcopy_keyring"] == repo.KEYRING_PATH
    assert facts["gdrcopy_rpm_repo_name"] == repo.PACKAGE
    template = (ROLE / "templates" / "gdrcopy.sources.j2").read_text()
    assert f"Components: {repo.COMPONENT}\n" in template
    # The published .sources and the role's name the same repository of the release.
    assert "URIs: http://h/x/apt/bookworm\n" in repo.sources_file("http://h/x", "bookworm", "KEY")
    assert "}}/apt/{{ gdrcopy_repo_suite }}\n" in template
    assert "trusted" not in template.lower()


def test_role_knows_doctor_and_every_family_modprobe_dir() -> None:
    facts = role_vars()
    assert facts["gdrcopy_doctor"] == f"/usr/bin/{render.DOCTOR_PROGRAM}"
    assert (facts["gdrcopy_doctor_healthy"], facts["gdrcopy_doctor_failed"], facts["gdrcopy_doctor_no_gpu"]) == (
        cli.HEALTHY,
        cli.FAILED,
        cli.NO_GPU,
    )
    layouts: list[families.Family] = [families.RhelFamily(), families.family("suse")]
    layouts += [families.DebianFamily(release=families.debian_release(s)) for s in ("bullseye", "trixie")]
    for fam in layouts:
        assert f"{fam.modprobedir}/gdrdrv.conf" in facts["gdrcopy_packaged_modprobe_confs"], fam.name
    # The packaged rule's name sorts before the role's, so the role's MODE and GROUP win.
    assert "60-gdrdrv.rules" < Path(facts["gdrcopy_udev_rule"]).name


def test_role_platforms_are_the_registrys_releases() -> None:
    """meta/main.yml's platforms: Debian's suites with a release, the Ubuntu releases, the EL and SUSE majors
    their families know."""
    meta = yaml.safe_load((ROLE / "meta" / "main.yml").read_text())
    platforms = {p["name"]: [str(v) for v in p["versions"]] for p in meta["galaxy_info"]["platforms"]}
    assert platforms["Debian"] == [s.name for s in debian.SUITES.values() if s.release]
    assert platforms["Ubuntu"] == [r.codename for r in debian.DEBIAN_RELEASES.values() if r.os_id == "ubuntu"]
    assert set(platforms["EL"]) <= set(families.family("rhel").kube_bases)
    assert set(platforms["SLES"]) == set(families.family("suse").kube_bases)
    assert set(platforms) == {"Debian", "Ubuntu", "EL", "SLES"}, "a platform the registry has no family for"


def test_defaults_are_the_packaged_node_settings() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    node = model.load().device_node
    assert (defaults["gdrcopy_node_mode"], defaults["gdrcopy_node_group"]) == (node.mode, node.group)


@pytest.mark.parametrize("playbook", ["site.yml", "local.yml"])
def test_playbooks_pass_ansible_syntax_check(playbook: str) -> None:
    done = subprocess.run(
        [ansible.bindir() / "ansible-playbook", "--syntax-check", "-i", "localhost,", playbook],
        cwd=ansible.ANSIBLE_DIR,
        env=dict(os.environ, **ansible.environment()),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


SAMPLE_LOG = """\
INFO     [default > converge] Executing
PLAY RECAP *********************************************************************
gdrcopy-bookworm           : ok=21   changed=7    unreachable=0    failed=0    skipped=9    rescued=0    ignored=0
gdrcopy-trixie             : ok=21   changed=7    unreachable=0    failed=0    skipped=9    rescued=0    ignored=0
INFO     [default > converge] Executed: Successful
INFO     [default > idempotence] Executing
INFO     [default > idempotence] Executed: Successful
ERROR    [default > verify] Executed: Failed
"""


def test_molecule_summary_names_each_action_and_host() -> None:
    lines = molecule.summarize(SAMPLE_LOG)
    assert lines[0] == "converge: successful"
    assert lines[1].split()[:3] == ["gdrcopy-bookworm", "ok=21", "changed=7"]
    assert lines[3:] == ["idempotence: successful", "verify: failed"]


def test_host_layer_uses_the_familys_package_manager_words() -> None:
    fam = families.DebianFamily(release=families.debian_release("trixie"))
    script = molecule.host_layer_script("trixie")
    assert script.startswith(" ".join(fam.refresh_command)) and all(p in script for p in molecule.HOST_PACKAGES)


def test_only_the_needed_collections_are_unpacked(tmp_path: Path) -> None:
    wheel = tmp_path / "ansible-0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in (*ansible.COLLECTIONS, "community.general"):
            path = f"ansible_collections/{name.replace('.', '/')}"
            archive.writestr(f"{path}/MANIFEST.json", "{}")
            archive.writestr(f"{path}/plugins/modules/x.py", "")
    root = tmp_path / "collections"
    ansible.unpack_collections(wheel, root)
    assert ansible.have_collections(root)
    assert not (root / "ansible_collections" / "community" / "general").exists()


def test_guest_ansible_is_requirements_pin() -> None:
    requirements = (ansible.ANSIBLE_DIR.parent / "requirements" / "fleet.txt").read_text()
    assert vmload.ansible_core_pin() in requirements.splitlines()


def load_fingerprint_module() -> Any:
    import importlib.util

    path = ROLE / "library" / "gdrcopy_key_fingerprints.py"
    spec = importlib.util.spec_from_file_location("gdrcopy_key_fingerprints", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_key_fingerprint_module_agrees_with_gpg(tmp_path: Path) -> None:
    """The role reads the repository key's fingerprint itself (no gpg on hosts): it must be gpg's."""
    ensure_debian_packages(["gpg"])
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = dict(os.environ, GNUPGHOME=str(home))

    def gpg(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["gpg", "--batch", *args], env=env, capture_output=True, check=True)

    gpg("--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key", "test@example.org", "ed25519", "sign")
    gpg("--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key", "rsa@example.org", "rsa2048", "sign")
    listed = gpg("--with-colons", "--list-keys").stdout.decode()
    want = [line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr:")]
    module = load_fingerprint_module()
    assert module.key_fingerprints(gpg("--armor", "--export", "test@example.org").stdout) == [want[0]]
    assert module.key_fingerprints(gpg("--export", "rsa@example.org").stdout) == [want[1]]
    with pytest.raises(ValueError):
        module.key_fingerprints(b"not a key")


CHECKS_PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - ansible.builtin.include_role:
        name: gdrcopy
        tasks_from: checks.yml
"""

GOOD_FPR = "0123456789ABCDEF0123456789ABCDEF01234567"


@pytest.mark.parametrize(
    "url, fingerprint, allow_http, accepted",
    [
        ("https://pkgs.example.org/gdrcopy", GOOD_FPR, False, True),
        ("https://pkgs.example.org/gdrcopy", "0123 4567 89ab cdef 0123  4567 89AB CDEF 0123 4567", False, True),
        ("file:///srv/gdrcopy", "", False, True),
        ("http://pkgs.example.org/gdrcopy", GOOD_FPR, True, True),
        ("http://pkgs.example.org/gdrcopy", GOOD_FPR, False, False),
        ("https://pkgs.example.org/gdrcopy", "", False, False),
        ("https://pkgs.example.org/gdrcopy", "DEADBEEF", False, False),
        ("ftp://pkgs.example.org/gdrcopy", GOOD_FPR, True, False),
    ],
)
def test_role_refuses_http_and_unpinned_keys(
    tmp_path: Path, url: str, fingerprint: str, allow_http: bool, accepted: bool
) -> None:
    playbook = tmp_path / "checks.yml"
    playbook.write_text(CHECKS_PLAYBOOK)
    extra = {
        "gdrcopy_repo_url": url,
        "gdrcopy_repo_key_fingerprint": fingerprint,
        "gdrcopy_allow_insecure_http": allow_http,
    }
    done = subprocess.run(
        [ansible.bindir() / "ansible-playbook", "-i", "localhost,", "-e", json.dumps(extra), str(playbook)],
        cwd=ansible.ANSIBLE_DIR,
        env=dict(os.environ, **ansible.environment()),
        capture_output=True,
        text=True,
    )
    output = done.stdout + done.stderr
    assert (done.returncode == 0) == accepted, output
    if not accepted:
        assert "gdrcopy_repo_key_fingerprint must be" in output, output


def test_readme_and_argument_specs_name_every_variable() -> None:
    """Every default is in the README's variable table and in argument_specs, and nothing else is."""
    defaults = set(yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()))
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())
    assert set(specs["argument_specs"]["main"]["options"]) == defaults
    readme = (ROLE / "README.md").read_text()
    table = set(re.findall(r"^\| `(gdrcopy_\w+)` \|", readme, re.MULTILINE))
    assert table == defaults, table ^ defaults
    assert "## Example play" in readme and "roles:\n    - role: gdrcopy" in readme


def test_main_tags_each_part_and_runs_the_checks_always() -> None:
    main = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    tagged = {task.get("ansible.builtin.import_tasks"): task["tags"] for task in main if "tags" in task}
    assert tagged == {
        None: ["always"],
        "checks.yml": ["always"],
        "install.yml": ["install"],
        "node.yml": ["configure"],
        "load.yml": ["load"],
        "absent.yml": ["remove"],
    }
    # Static imports: the tags reach every task of the file (include_tasks would need apply).
    for path in (ROLE / "tasks").glob("*.yml"):
        assert "include_tasks" not in path.read_text(), path.name


def run_playbook(playbook: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ansible.bindir() / "ansible-playbook", "-i", "localhost,", *args, str(playbook)],
        cwd=ansible.ANSIBLE_DIR,
        env={**os.environ, **ansible.environment(), **(env or {})},
        capture_output=True,
        text=True,
    )


def test_remove_tag_without_state_absent_is_refused(tmp_path: Path) -> None:
    playbook = tmp_path / "remove.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  connection: local\n  tasks:\n"
        "    - ansible.builtin.set_fact:\n        os_family: Debian\n        distribution_release: bookworm\n"
        "        distribution_major_version: '12'\n        cacheable: true\n"
        "      tags: [always]\n"
        "    - ansible.builtin.include_role:\n        name: gdrcopy\n      tags: [always]\n"
    )
    done = run_playbook(playbook, "--tags", "remove", "-e", "gdrcopy_repo_url=https://h/x")
    assert done.returncode != 0 and "removes GDRCopy only with -e gdrcopy_state=absent" in done.stdout, done.stdout


def test_ansible_galaxy_installs_the_role_archive(tmp_path: Path) -> None:
    """The archive the role's README makes (git archive of the role's directory), installed by ansible-galaxy."""
    import tarfile

    archive = tmp_path / "gdrcopy-role.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(ROLE, arcname="gdrcopy", filter=lambda info: None if "__pycache__" in info.name else info)
    requirements = tmp_path / "requirements.yml"
    requirements.write_text(f"- src: file://{archive}\n  name: gdrcopy\n")
    galaxy = ansible.bindir() / "ansible-galaxy"
    done = subprocess.run(
        [galaxy, "role", "install", "-r", requirements, "-p", tmp_path / "roles"], capture_output=True, text=True
    )
    print(done.stdout)
    assert done.returncode == 0 and "- gdrcopy was installed successfully" in done.stdout, done.stdout + done.stderr
    listed = subprocess.run([galaxy, "role", "list", "-p", tmp_path / "roles"], capture_output=True, text=True)
    assert "- gdrcopy, " in listed.stdout, listed.stdout + listed.stderr
    # A play names it from where ansible-galaxy put it.
    playbook = tmp_path / "play.yml"
    playbook.write_text("- hosts: all\n  roles:\n    - role: gdrcopy\n")
    done = run_playbook(playbook, "--syntax-check", env={"ANSIBLE_ROLES_PATH": str(tmp_path / "roles")})
    assert done.returncode == 0, done.stdout + done.stderr


SUSE_CHECK_PLAYBOOK = """\
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: A SLE 15 SP6 host's facts (this host stays what it is)
      ansible.builtin.set_fact:
        os_family: Suse
        distribution: SLES
        distribution_major_version: "15"
        distribution_release: "6"
        kernel: 6.4.0-150600.23.25-default
        cacheable: true
    - name: The role
      ansible.builtin.include_role:
        name: gdrcopy
"""


def test_suse_path_in_check_mode_with_a_sle_hosts_facts(tmp_path: Path) -> None:
    """The role's SUSE branch, run in check mode on this host with a SLE 15 host's facts.

    Proves: the SUSE tasks are the ones chosen (zypper's, not apt's or dnf's),
    the key is checked against the trusted fingerprint by rpm_key, the zypper
    .repo names rpm/sle15 with every signature check on, allow_unsupported_modules
    is written, the packages zypper would install are the RPM family's, and a
    dry run on a fresh host fails nothing.  Does not prove: that zypper on a
    real SLE host accepts the repository and installs (no SUSE image can be
    pulled here); the files go to tmp_path, not /etc.
    """
    ensure_debian_packages(["rpm", "gpg"])  # rpm_key's tools, on this host
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    gpg_env = dict(os.environ, GNUPGHOME=str(home))
    subprocess.run(
        ["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key", "t@invalid",
         "ed25519", "sign"], env=gpg_env, capture_output=True, check=True,
    )  # fmt: skip
    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()
    exported = subprocess.run(["gpg", "--armor", "--export"], env=gpg_env, capture_output=True, check=True).stdout
    (repo_dir / repo.KEY_FILE).write_bytes(exported)
    fingerprint = molecule.key_fingerprint(repo_dir / repo.KEY_FILE)
    out = tmp_path / "etc"
    extra = {
        "gdrcopy_repo_url": f"file://{repo_dir}",
        "gdrcopy_repo_key_fingerprint": fingerprint,
        "gdrcopy_zypper_repo_file": str(out / "gdrcopy.repo"),
        "gdrcopy_suse_unsupported_conf": str(out / "unsupported.conf"),
        # package_facts reads this host's packages with the system Python's bindings.
        "ansible_python_interpreter": "/usr/bin/python3",
    }
    playbook = tmp_path / "suse.yml"
    playbook.write_text(SUSE_CHECK_PLAYBOOK)
    done = run_playbook(playbook, "--check", "--diff", "-e", json.dumps(extra), env={"GNUPGHOME": str(home)})
    output = done.stdout + done.stderr
    print(output[-6000:])
    assert done.returncode == 0 and re.search(r"localhost\s+: ok=\d+\s+changed=\d+ .*failed=0", output), output
    # The tasks that ran (not skipped): each TASK block with an ok or changed line (--diff lines in between).
    blocks = re.findall(r"^TASK \[gdrcopy : (.+?)\] \*+\n(.*?)(?=^TASK |^PLAY RECAP)", output, re.MULTILINE | re.DOTALL)
    ran = [name for name, body in blocks if re.search(r"^(ok|changed): ", body, re.MULTILINE)]
    assert "The repository's signing key, when it is the trusted one" in ran, ran
    assert "The repository, packages and metadata signature-checked (zypper)" in ran, ran
    assert not [t for t in ran if "(apt" in t or "(dnf)" in t or "apt repository" in t], ran
    assert f"+baseurl=file://{repo_dir}/rpm/sle15\n" in output
    for check in ("+gpgcheck=1", "+repo_gpgcheck=1", "+pkg_gpgcheck=1", "+allow_unsupported_modules 1"):
        assert check + "\n" in output, check
    wanted = ", ".join(role_vars()["gdrcopy_rpm_packages"]["dkms"])
    assert f"would add the repository file://{repo_dir} and install {wanted}" in output
    assert not out.exists(), "check mode wrote files"


def role_tasks_in_order(name: str = "main.yml") -> list[dict[str, Any]]:
    """The role's tasks as a run meets them: imports followed, blocks opened."""
    found: list[dict[str, Any]] = []
    for task in yaml.safe_load((ROLE / "tasks" / name).read_text()) or []:
        if "ansible.builtin.import_tasks" in task:
            found += role_tasks_in_order(task["ansible.builtin.import_tasks"])
        elif "block" in task:
            found.append({k: v for k, v in task.items() if k != "block"})
            for inner in task["block"]:
                found.append(inner)
        else:
            found.append(task)
    return found


def test_every_variable_a_task_reads_is_set_before_it() -> None:
    """A task's condition or arguments name only defaults, vars, its own vars, or results registered earlier.

    (A task that registered a result once went missing from load.yml, and only a real converge showed it.)
    """
    known = set(yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())) | set(role_vars())
    late = []
    for task in role_tasks_in_order():
        # Its own result: changed_when and failed_when read it.
        own = set(task.get("vars") or {}) | {task.get("register", "")}
        text = json.dumps({k: v for k, v in task.items() if k not in ("register", "vars", "name")})
        for used in sorted(set(re.findall(r"\bgdrcopy_\w+", text)) - known - own):
            # The role's module, by its name, is not a variable.
            if not used.startswith("gdrcopy_key_fingerprints"):
                late.append(f"{task.get('name')}: {used}")
        if "register" in task:
            known.add(task["register"])
    assert not late, late
