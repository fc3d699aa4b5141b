"""The package description, the family registry and the maintainer scripts (no builds)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from gdrkit.distro import families
from gdrkit.packaging import model, render
from gdrkit.system import BAD_INPUT, InputError, UserError, ensure_debian_packages
from gdrkit.version import REPO_ROOT

EPOCH = 1767225600


def test_every_family_is_registered_with_its_package_type() -> None:
    registry = families.Family.registry
    assert {"debian", "rhel", "suse"} <= set(registry)
    assert {registry[n].package_type for n in ("debian", "rhel", "suse")} == {"deb", "rpm"}


def test_os_release_selects_the_family() -> None:
    assert families.family_for_os_release({"ID": "ubuntu"}).name == "debian"  # type: ignore[union-attr]
    assert families.family_for_os_release({"ID": "rocky", "ID_LIKE": "rhel centos fedora"}).name == "rhel"  # type: ignore[union-attr]
    assert families.family_for_os_release({"ID": "opensuse-leap", "ID_LIKE": "suse"}).name == "suse"  # type: ignore[union-attr]
    assert families.family_for_os_release({"ID": "plan9"}) is None


@pytest.mark.parametrize(
    ("os_release", "codename", "usr_merged"),
    [
        ('ID=debian\nVERSION_ID="11"\nVERSION_CODENAME=bullseye\n', "bullseye", False),
        ('ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n', "bookworm", False),
        ('ID=debian\nVERSION_ID="13"\nVERSION_CODENAME=trixie\n', "trixie", True),
        # testing and sid carry the next codename and no VERSION_ID
        ('PRETTY_NAME="Debian GNU/Linux forky/sid"\nID=debian\nVERSION_CODENAME=forky\n', "forky", True),
        ('ID=debian\nVERSION_ID="15"\nVERSION_CODENAME=duke\n', "duke", True),
        ('ID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\nVERSION_CODENAME=jammy\n', "jammy", False),
        ('ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n', "noble", True),
        ('ID=ubuntu\nVERSION_ID="25.10"\nVERSION_CODENAME=questing\n', "questing", True),
        # a derivative is the release it is built on, not its own version
        ('ID=linuxmint\nID_LIKE="ubuntu debian"\nVERSION_ID="21.3"\nUBUNTU_CODENAME=jammy\n', "jammy", False),
    ],
)
def test_os_release_selects_the_debian_release_and_its_layout(os_release: str, codename: str, usr_merged: bool) -> None:
    release = families.debian_release_for_os_release(families.parse_os_release(os_release))
    assert release is not None and (release.codename, release.usr_merged) == (codename, usr_merged)
    fam = families.DebianFamily(release=release)
    below = "/usr/lib" if usr_merged else "/lib"
    assert (fam.unitdir, fam.udevrulesdir, fam.modprobedir, fam.modulesdir) == (
        f"{below}/systemd/system",
        f"{below}/udev/rules.d",
        f"{below}/modprobe.d",
        f"{below}/modules",
    )


def test_hosts_that_are_no_debian_release_and_unknown_suites_are_told_apart() -> None:
    assert families.debian_release_for_os_release({"ID": "rocky", "VERSION_ID": "9.4"}) is None
    assert families.debian_release("unstable") == families.debian_release("sid")
    with pytest.raises(UserError, match="bookworm"):
        families.debian_release("hamm")


def test_unknown_family_is_a_user_error_naming_the_known_ones() -> None:
    with pytest.raises(UserError, match="debian"):
        families.family("gentoo")


def test_kmod_packages_are_one_per_kernel_and_placeholders_are_filled() -> None:
    plan = model.plan(families.family("debian"), kernels=("6.1.0-56-amd64", "6.12.57+deb13-amd64"))
    names = [p.name for p in plan.packages]
    assert "gdrdrv-modules-6.1.0-56-amd64" in names and "gdrdrv-modules-6.12.57+deb13-amd64" in names
    for package in plan.packages:
        for text in (package.name, package.summary, *package.contents, *package.depends):
            assert not re.search(r"(?<![$%]){[a-z_]+}", text), text


def test_versions_upgrade_the_reference_packages() -> None:
    plan = model.plan(families.family("debian"))
    # dpkg's own comparison: ours must sort above NVIDIA's 2.6-1.
    assert subprocess.run(["dpkg", "--compare-versions", plan.full_version, "gt", "2.6-1"]).returncode == 0
    # rpm's own comparison, against the reference's gdrcopy 2.6-1 and gdrcopy-kmod 2.6-1dkms
    # (a fresh machine has no rpm until a package build installs it).
    ensure_debian_packages(["rpm"])
    for old in ("2.6-1", "2.6-1dkms"):
        lua = f'%{{lua: print(rpm.vercmp("{plan.version}-{plan.release}", "{old}"))}}'
        assert subprocess.run(["rpm", "--eval", lua], capture_output=True, text=True).stdout.strip() == "1"


def test_unknown_placeholder_is_an_error() -> None:
    with pytest.raises(UserError, match="unknown placeholder"):
        model.fill("{nope}", {})
    assert model.fill("${misc:Depends} %{version} {kver}", {"kver": "k"}) == "${misc:Depends} %{version} k"


@pytest.mark.parametrize(
    ("release", "supported"),
    [
        ("3.10.0-1160.el7.x86_64", False),
        ("4.9.0-19-amd64", False),
        ("4.18.0-553.el8.x86_64", True),
        ("5.14.0-427.el9.x86_64", True),
        ("6.1.0-56-amd64", True),
        ("6.18.0", True),
        ("10.2.1", True),
    ],
)
def test_build_exclusive_kernel_regex(release: str, supported: bool) -> None:
    regex = model.load().kernel_module.build_exclusive_kernel()
    # dkms evaluates it with bash's =~; check with bash, not Python.
    result = subprocess.run(["bash", "-c", f'[[ "$1" =~ {regex} ]]', "_", release])
    assert (result.returncode == 0) is supported


def test_contents_check_reports_both_directions() -> None:
    plan = model.plan(families.family("rhel"))
    devel = plan.package("gdrcopy-devel")
    files = [
        "/usr/include/gdrapi.h",
        "/usr/lib64/pkgconfig/gdrapi.pc",
        "/usr/lib64/cmake/gdrapi/gdrapiConfig.cmake",
    ]
    assert model.check_contents(devel, files, {}) == []
    problems = model.check_contents(devel, files[:-1] + ["/usr/bin/stray"], {})
    assert any("/usr/bin/stray is not in its description" in p for p in problems)
    assert any("nothing matches '/usr/lib64/cmake/*'" in p for p in problems)


def _write_dkms_conf(tmp_path: Path) -> Path:
    plan = model.plan(families.family("debian"), source_date_epoch=EPOCH)
    text = render.system_files(plan)["pkgroot/usr/src/gdrdrv-2.6.1/dkms.conf".replace("2.6.1", plan.version)].text
    path = tmp_path / "dkms.conf"
    path.write_text(text)
    return path


def _source(conf: Path, dkms_tree: Path) -> str:
    script = (
        'kernelver=6.1.0-56-amd64; kernel_source_dir=/lib/modules/$kernelver/build; . "$1"; '
        'echo "MAKE=${MAKE[0]}"; echo "DEPS=${BUILD_DEPENDS[*]}"; echo "AUTO=$AUTOINSTALL"'
    )
    env = {"dkms_tree": str(dkms_tree), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        ["bash", "-c", f"dkms_tree={dkms_tree}; {script}", "_", str(conf)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout


def test_dkms_conf_orders_after_a_dkms_managed_nvidia_only(tmp_path: Path) -> None:
    conf = _write_dkms_conf(tmp_path)
    tree = tmp_path / "dkms"
    tree.mkdir()
    out = _source(conf, tree)
    assert "DEPS=\n" in out
    assert "MAKE=make KVER=6.1.0-56-amd64 KDIR=/lib/modules/6.1.0-56-amd64/build" in out
    assert "AUTO=yes" in out
    (tree / "nvidia-current").mkdir()
    assert "DEPS=nvidia-current\n" in _source(conf, tree)


@pytest.mark.parametrize("family", ["debian", "rhel", "suse"])
def test_dkms_conf_is_what_current_dkms_expects(family: str) -> None:
    # DKMS 3.1.8+ warns about CLEAN (it cleans by itself); the kernel minimum is
    # BUILD_EXCLUSIVE_KERNEL_MIN, not a regex (issue 24).
    plan = model.plan(families.family(family), source_date_epoch=EPOCH)
    conf = next(f.text for path, f in render.system_files(plan).items() if path.endswith("/dkms.conf"))
    settings = [line.split("=", 1)[0] for line in conf.splitlines() if line and not line.startswith(("#", " ", "\t"))]
    assert "CLEAN" not in settings and "BUILD_EXCLUSIVE_KERNEL" not in settings
    assert f'BUILD_EXCLUSIVE_KERNEL_MIN="{plan.description.kernel_module.min_kernel}"' in conf.splitlines()


def _run_script(tmp_path: Path, rel: str, *args: str, dkms_status: str = "") -> list[str]:
    plan = model.plan(families.family("debian"), source_date_epoch=EPOCH)
    script = tmp_path / "script"
    text = render.render(plan)[rel].text.replace("#DEBHELPER#", "")
    script.write_text(text)
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    calls = tmp_path / "calls"
    fake = bindir / "dkms"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n[ "$1" = status ] && printf "%s" "{dkms_status}"\nexit 0\n')
    fake.chmod(0o755)
    subprocess.run(["sh", "-e", str(script), *args], check=True, env={"PATH": f"{bindir}:/usr/bin:/bin"})
    return calls.read_text().splitlines() if calls.exists() else []


def test_deb_prerm_removes_the_dkms_tree_on_remove_and_upgrade(tmp_path: Path) -> None:
    version = model.plan(families.family("debian")).version
    status = f"gdrdrv/{version}, 6.1.0-56-amd64, x86_64: installed\n"
    for action in ("remove", "upgrade"):
        calls = _run_script(tmp_path, "debian/gdrdrv-dkms.prerm", action, dkms_status=status)
        assert f"remove -m gdrdrv -v {version} --all" in calls
        (tmp_path / "calls").unlink()


def test_deb_prerm_tolerates_a_tree_dkms_does_not_know(tmp_path: Path) -> None:
    calls = _run_script(tmp_path, "debian/gdrdrv-dkms.prerm", "remove", dkms_status="")
    assert not any(call.startswith("remove") for call in calls)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            ("  - name: libgdrapi\n", "  - name: libgdrapi\n    depend: [libc6]\n"),
            "deb[libgdrapi]: unknown key 'depend'",
        ),
        (("device_node:\n", "device_node:\n  owner: root\n"), "device_node: unknown key 'owner'"),
        (("project:\n", "packages: []\nproject:\n"), "the top level: unknown key 'packages'"),
    ],
)
def test_unknown_keys_in_the_description_are_refused(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    """A misspelt key would otherwise be dropped silently: the error names the key and the file."""
    text = model.DESCRIPTION_FILE.read_text()
    assert change[0] in text
    path = tmp_path / "gdrcopy.yaml"
    path.write_text(text.replace(*change, 1))
    with pytest.raises(UserError) as error:
        model.load(path)
    assert message in str(error.value) and str(path) in str(error.value)


@pytest.mark.parametrize("family_name", families.names())
def test_the_runtime_package_carries_the_unversioned_library_link(family_name: str) -> None:
    """NCCL, aws-ofi-nccl, DPDK and libfabric < 2.4 dlopen("libgdrapi.so"): the runtime package must have it.

    NVIDIA's RPM gdrcopy and DEB libgdrapi carry it; a development package that
    alone has it leaves those consumers without GDRCopy, said only in a debug log.
    """
    family = families.family(family_name)
    plan = model.plan(family)
    runtime = plan.package(model.load().runtime_package(family.package_type))
    link = f"{family.libdir}/libgdrapi.so"
    assert link in runtime.contents and f"{family.libdir}/libgdrapi.so.2*" in runtime.contents, runtime.contents
    others = [p.name for p in plan.packages if p.name != runtime.name and link in p.contents]
    assert others == [], f"{link} also in {others}: two packages would own one file"


@pytest.mark.parametrize("family_name", families.names())
def test_the_runtime_package_ships_the_node_settings_with_vulkan_off(family_name: str) -> None:
    """Issue 35: /etc/gdrcopy.conf, where the library looks (node_config.h), as a conffile, saying no."""
    from gdrkit.gdrcopy_doctor.consumers import NODE_CONFIG, allows_vulkan

    header = (REPO_ROOT / "libgdrapi" / "src" / "node_config.h").read_text()
    assert f'#define GDR_NODE_CONFIG_FILE "{NODE_CONFIG}"' in header
    family = families.family(family_name)
    plan = model.plan(family)
    runtime = plan.package(model.load().runtime_package(family.package_type))
    assert NODE_CONFIG in runtime.contents
    assert [p.name for p in plan.packages if NODE_CONFIG in p.contents] == [runtime.name]
    files = render.render(plan)
    text = files[f"pkgroot{NODE_CONFIG}"].text
    assert allows_vulkan(text) is False, text
    # The consumers and settings it is safe and unsafe for are in its comments.
    for said in ("Safe with yes", "Unsafe with yes", "NCCL_CUMEM_ENABLE=0", "UCX", "NVSHMEM_DISABLE_CUDA_VMM=1"):
        assert said in text, said
    if family.package_type == "rpm":
        assert f"%config(noreplace) {NODE_CONFIG}" in files[family.templates["rpm/gdrcopy.spec.j2"]].text
    else:
        # dh_installdeb makes every file under /etc a conffile.
        assert NODE_CONFIG.lstrip("/") in files[f"debian/{runtime.name}.install"].text.splitlines()


def test_a_description_whose_runtime_package_lacks_the_link_is_refused(tmp_path: Path) -> None:
    text = model.DESCRIPTION_FILE.read_text()
    runtime = model.load().runtime_package("deb")
    path = tmp_path / "gdrcopy.yaml"
    path.write_text(text.replace('      - "{libdir}/libgdrapi.so"\n', "", 1))
    with pytest.raises(UserError) as error:
        model.load(path)
    assert f"the deb runtime package {runtime} lacks '{{libdir}}/libgdrapi.so'" in str(error.value)
    assert 'dlopen("libgdrapi.so")' in (error.value.hint or "")


@pytest.mark.parametrize(
    "change, message, hint",
    [
        (("  release: 1\n", "  release: one\n"), "project.release: 'one' is a string, not an integer", "release: 1"),
        (('  mode: "0660"\n', "  mode: 0660\n"), "device_node.mode: 432 is an integer, not a string", '"0660"'),
        (
            ('  min_kernel: "4.18"\n', "  min_kernel: 4.18\n"),
            "kernel_module.min_kernel: 4.18 is a number, not a string",
            '"4.18"',
        ),
        (
            ('    depends: ["${shlibs:Depends}", "${misc:Depends}"]\n', "    depends: libc6\n"),
            "deb[libgdrapi].depends: 'libc6' is a string, not a list",
            "[libc6]",
        ),
        (("  home: https://", "  home: http://"), "project.home: ", "https://"),
    ],
)
def test_a_wrong_typed_field_is_refused_with_its_name_line_and_fix(
    tmp_path: Path, change: tuple[str, str], message: str, hint: str
) -> None:
    """The issue's case: a wrong type used to give a TypeError that named no field."""
    text = model.DESCRIPTION_FILE.read_text()
    assert change[0] in text
    path = tmp_path / "gdrcopy.yaml"
    changed = text.replace(*change, 1)
    path.write_text(changed)
    line = changed[: changed.index(change[1])].count("\n") + 1
    with pytest.raises(InputError) as error:
        model.load(path)
    assert f"{path}:{line}: {message}" in str(error.value), str(error.value)
    assert hint in str(error.value.hint) and error.value.code == BAD_INPUT


def test_the_project_home_is_written_once_and_everything_follows_it() -> None:
    """packages/gdrcopy.yaml's project.home: homepage, bug tracker, the maintainer's host, wheel and role."""
    text = model.DESCRIPTION_FILE.read_text()
    project = model.load().project
    home = project.homepage.rstrip("/")
    assert text.count(urlsplit(home).hostname or "?") == 1, "the home's host is written once, in project.home"
    assert project.bug_tracker == f"{home}/issues"
    assert project.maintainer.endswith(f"@{urlsplit(home).hostname}>")
    # The wheels' metadata is python/pyproject.toml's (pip builds python/ alone, so it cannot read ours).
    import tomllib

    wheel_project = tomllib.loads((REPO_ROOT / "python" / "pyproject.toml").read_text())["project"]
    assert wheel_project["urls"] == {"Homepage": project.homepage, "Bug Tracker": project.bug_tracker}
    (author,) = wheel_project["authors"]
    assert f"{author['name']} <{author['email']}>" == project.maintainer, "python/pyproject.toml's authors"
    role = yaml.safe_load((REPO_ROOT / "ansible" / "roles" / "gdrcopy" / "meta" / "main.yml").read_text())
    info = role["galaxy_info"]
    assert info["author"] == project.maintainer.split(" <")[0]
    assert info.get("issue_tracker_url") == project.bug_tracker, "the role's galaxy_info.issue_tracker_url"
    # A collection's galaxy.yml (if the role is packaged as one) names the same home and tracker.
    for galaxy in sorted((REPO_ROOT / "ansible").rglob("galaxy.yml")):
        collection = yaml.safe_load(galaxy.read_text())
        assert collection.get("homepage") == project.homepage, galaxy
        assert collection.get("issues") == project.bug_tracker, galaxy
