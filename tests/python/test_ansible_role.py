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
    layouts: list[families.Family] = [families.RhelFamily()]
    layouts += [families.DebianFamily(release=families.debian_release(s)) for s in ("bullseye", "trixie")]
    for fam in layouts:
        assert f"{fam.modprobedir}/gdrdrv.conf" in facts["gdrcopy_packaged_modprobe_confs"], fam.name
    # The packaged rule's name sorts before the role's, so the role's MODE and GROUP win.
    assert "60-gdrdrv.rules" < Path(facts["gdrcopy_udev_rule"]).name


def test_role_platforms_are_the_registrys_releases() -> None:
    """meta/main.yml's platforms: Debian's suites with a release, the Ubuntu releases, EL majors the rhel family knows."""
    meta = yaml.safe_load((ROLE / "meta" / "main.yml").read_text())
    platforms = {p["name"]: [str(v) for v in p["versions"]] for p in meta["galaxy_info"]["platforms"]}
    assert platforms["Debian"] == [s.name for s in debian.SUITES.values() if s.release]
    assert platforms["Ubuntu"] == [r.codename for r in debian.DEBIAN_RELEASES.values() if r.os_id == "ubuntu"]
    assert set(platforms["EL"]) <= set(families.family("rhel").kube_bases)
    assert set(platforms) == {"Debian", "Ubuntu", "EL"}, "a platform the registry has no family for"


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
    requirements = (ansible.ANSIBLE_DIR.parent / "requirements.txt").read_text()
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
