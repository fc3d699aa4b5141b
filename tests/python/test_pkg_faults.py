"""Package faults, each ending in a consistent state that the scenario checks.

(a) the DKMS build killed half way through `apt-get install`: the compiler
    alone (an OOM kill; `apt-get -f install` recovers), or apt-get and every
    process under it (a lost session; `dpkg --configure -a` recovers);
(b) kernel installed without headers: the packages install, the postinst
    names the headers package and the command; after the headers,
    `dkms autoinstall` completes;
(c) upgrade and removal while gdrdrv is loaded and in use (a process holds
    /dev/gdrdrv open with a pinned and mapped buffer), in the VM: the busy
    module is never unloaded, the scripts say the new module loads at the
    next reload or reboot, the packages are consistent, and the reload works
    once the process lets go;
(d) downgrade to the previous release, then purge: nothing left behind;
(e) upgrade from the reference GDRCopy's own 2.6-1 packages (rebuilt to
    their layout, pkgkit.reference): its SysV script and rc links
    go, gdrdrv is loaded with /dev/gdrdrv after every step (VM), nothing of
    it outlives the purge.  The RPM side (%posttrans, %dir) is checked on the
    rendered spec here and in a scratch root by test_pkg_build.py.

(a), (b), (d) and (e) run in containers (slow tier); (c) and (e) boot the
kernel under TCG and build gdrdrv there with DKMS (soak tier).  The scenarios are the
scripts in tests/packaging/; pkgkit.faults runs them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from gdrkit.distro import families
from gdrkit.packaging import build, model, render
from pkgkit import faults, reference, scenarios
from pkgkit.faults import DebSets
from gdrkit.system import UserError, run
from gdrkit.version import REPO_ROOT


def _report(name: str, outcome: faults.Outcome) -> None:
    print(f"\n{name}:\n  " + "\n  ".join(outcome.checks()))
    assert outcome.passed, outcome.output[-8000:]


@pytest.fixture(scope="module")
def kernel() -> str:
    return scenarios.bookworm_kernels()[0]


# --- fast: the scripts themselves ---------------------------------------------


def _shellcheck() -> str:
    path = shutil.which("shellcheck")
    if path is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    return path


def test_scenario_scripts_pass_shellcheck() -> None:
    scripts = sorted(str(p) for p in [*faults.SCRIPTS.glob("*.sh"), *reference.FIXTURE_DIR.glob("*.sh")])
    assert len(scripts) >= 6, scripts
    result = run([_shellcheck(), "-x", *scripts], capture=True, check=False, cwd=faults.SCRIPTS.parents[1])
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_maintainer_scripts_pass_shellcheck(tmp_path: Path) -> None:
    plan = model.plan(families.family("debian"), kernels=("6.1.0-56-amd64",))
    files = render.render(plan)
    scripts = []
    for rel, rendered in files.items():
        if rel.endswith((".postinst", ".prerm", ".postrm", ".preinst")):
            path = tmp_path / Path(rel).name
            # What debhelper puts at #DEBHELPER# is its own, not ours.
            path.write_text(rendered.text.replace("#DEBHELPER#", ""))
            scripts.append(str(path))
    assert len(scripts) >= 4, scripts
    result = run([_shellcheck(), "-s", "sh", *scripts], capture=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


SCRIPTLET = re.compile(r"^%(pre|post|preun|postun|posttrans|triggerin|triggerun)\b.*$", re.MULTILINE)
SECTION = re.compile(r"^%(pre|post|preun|postun|posttrans|triggerin|triggerun|files|changelog)\b", re.MULTILINE)


def rpm_scriptlets(spec: str) -> dict[str, str]:
    """The shell scriptlets of an RPM spec by header line, with our macros expanded (pure)."""
    found = {}
    for match in SCRIPTLET.finditer(spec):
        if "-p " in match.group(0):
            continue  # run by another interpreter (ldconfig)
        end = SECTION.search(spec, match.end() + 1)
        body = spec[match.end() : end.start() if end else len(spec)]
        for macro, value in (
            ("%{gdrdrv_version}", "2.6.1"),
            ("%{version}", "2.6.1"),
            ("%{modprobe}", "modprobe"),
            ("%%", "%"),
        ):
            body = body.replace(macro, value)
        found[match.group(0)] = "#!/bin/sh\n" + body
    return found


@pytest.mark.parametrize("family_name", ["rhel", "suse"])
def test_rendered_rpm_scriptlets_pass_shellcheck(family_name: str, tmp_path: Path) -> None:
    plan = model.plan(families.family(family_name), kernels=("6.1.0-56-amd64",))
    spec = render.render(plan)["gdrcopy.spec"].text
    scriptlets = rpm_scriptlets(spec)
    assert len(scriptlets) >= 6, list(scriptlets)
    shellcheck = _shellcheck()
    for header, body in scriptlets.items():
        # SC2015 (A && B || C): the spec's `[ -d /run/systemd/system ] && ... || :` idiom, on purpose.
        result = run([shellcheck, "-s", "sh", "-e", "SC2015", "-"], input_text=body, capture=True, check=False)
        assert result.returncode == 0, f"{family_name} {header}:\n{result.stdout}"


def test_previous_release_packages_report_their_own_version() -> None:
    header = "#define GDRCOPY_VERSION_MAJOR 2\n#define GDRCOPY_VERSION_MINOR 6\n#define GDRCOPY_VERSION_PATCH 1\n"
    stamped = build.stamp_version_text(header, "2.6.0")
    assert stamped == header.replace("PATCH 1", "PATCH 0")
    assert build.stamp_version_text(header, "2.6.1") == header


def test_a_later_minor_release_stamps_the_uapi_version_too(tmp_path: Path) -> None:
    # The stand-in for NVIDIA's 2.7 failed its DKMS build when only the version header
    # was stamped: gdrdrv.c refuses a uapi GDRDRV_VERSION that differs from it.
    for rel in (build.VERSION_HEADER, build.UAPI_HEADER):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, tmp_path / rel)
    build.stamp_version(tmp_path, "2.7.0")
    version = (tmp_path / build.VERSION_HEADER).read_text()
    assert "#define GDRCOPY_VERSION_MAJOR 2\n" in version and "#define GDRCOPY_VERSION_MINOR 7\n" in version
    assert "#define GDRDRV_VERSION GDRDRV_MAKE_VERSION(2, 7)\n" in (tmp_path / build.UAPI_HEADER).read_text()
    with pytest.raises(UserError, match="GDRDRV_VERSION"):
        build.stamp_uapi_version_text("#define GDRDRV_VERSION 0x20006\n", "2.7.0")


def test_the_deb_removes_the_reference_sysv_script_and_links_on_upgrade() -> None:
    plan = model.plan(families.family("debian"))
    files = render.render(plan)
    # No debian/*.maintscript: debhelper's call would name gdrdrv-dkms:all, and
    # NVIDIA's script belongs to gdrdrv-dkms:amd64 (Architecture: any).
    assert not [name for name in files if name.endswith(".maintscript")]
    call = f'dpkg-maintscript-helper rm_conffile /etc/init.d/gdrdrv "{plan.full_version}~" \\\n'
    for script in ("preinst", "postinst", "postrm"):
        text = files[f"debian/gdrdrv-dkms.{script}"].text
        assert call in text and '"$(gdrdrv_init_script_owner)" -- "$@"' in text, script
        assert '\ngdrdrv_rm_init_script "$@"' in text or '\tgdrdrv_rm_init_script "$@"' in text, script
    # Every version before this one, the reference's 2.6-1 included.
    run(["dpkg", "--compare-versions", reference.PACKAGE_VERSION, "lt", f"{plan.full_version}~"])
    postinst = files["debian/gdrdrv-dkms.postinst"].text
    configure = postinst[postinst.index("configure)") : postinst.index("common.postinst gdrdrv")]
    assert configure.index('gdrdrv_rm_init_script "$@"') < configure.index("gdrdrv_remove_sysv_links")
    assert f'dpkg --compare-versions "$2" lt "{plan.full_version}~"' in configure
    assert "gdrdrv_remove_sysv_links" in configure, "the links must go before the DKMS build can fail"
    assert "update-rc.d gdrdrv remove" in postinst
    purge = files["debian/gdrdrv-dkms.postrm"].text.split("purge)")[1]
    # lintian refuses update-rc.d in the postrm of a package without an init script.
    assert 'rm -f "$link"' in purge and "update-rc.d" not in purge


@pytest.mark.parametrize(
    ("owners", "expected"),
    [
        ("gdrdrv-dkms:amd64: /etc/init.d/gdrdrv", "gdrdrv-dkms:amd64"),
        ("gdrdrv-dkms: /etc/init.d/gdrdrv", "gdrdrv-dkms"),
        ("diversion by x from: /etc/init.d/gdrdrv\ngdrdrv-dkms:arm64: /etc/init.d/gdrdrv", "gdrdrv-dkms:arm64"),
        ("", "gdrdrv-dkms:all"),
    ],
)
def test_the_init_script_is_removed_as_the_package_instance_that_owns_it(
    owners: str, expected: str, tmp_path: Path
) -> None:
    # dpkg-query -S answers as dpkg does for NVIDIA's gdrdrv-dkms:amd64, an
    # Architecture: all package, a diverted file, and no owner at all.
    preinst = render.render(model.plan(families.family("debian")))["debian/gdrdrv-dkms.preinst"].text
    functions = preinst[preinst.index("gdrdrv_init_script_owner() {") : preinst.index("gdrdrv_rm_init_script() {")]
    (tmp_path / "dpkg-query").write_text(f"#!/bin/sh\nprintf '%s\\n' '{owners}' | grep . || exit 1\n")
    (tmp_path / "dpkg-query").chmod(0o755)
    result = run(
        ["sh", "-c", functions + "gdrdrv_init_script_owner"],
        capture=True,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "DPKG_MAINTSCRIPT_PACKAGE": "gdrdrv-dkms",
             "DPKG_MAINTSCRIPT_ARCH": "all"},
    )  # fmt: skip
    assert result.stdout.strip() == expected


def test_the_deb_postinst_loads_gdrdrv_again_after_debhelper_and_never_unloads() -> None:
    postinst = render.render(model.plan(families.family("debian")))["debian/gdrdrv-dkms.postinst"].text
    after_debhelper = postinst.split("#DEBHELPER#")[1]
    assert "gdrdrv_load_if_unloaded" in after_debhelper
    assert "policy-rc.d" in postinst and "deb-systemd-invoke start gdrdrv.service" in postinst
    assert not unloading_commands(postinst)


@pytest.mark.parametrize("family_name", ["rhel", "suse"])
def test_rpm_module_packages_load_gdrdrv_again_in_posttrans_and_own_their_directories(family_name: str) -> None:
    plan = model.plan(families.family(family_name), kernels=("6.1.0-56-amd64",))
    spec = render.render(plan)["gdrcopy.spec"].text
    scriptlets = rpm_scriptlets(spec)
    for package in plan.packages:
        if package.is_module:
            body = scriptlets[f"%posttrans -n {package.name}"]
            assert body.rstrip().endswith("gdrdrv_load_if_unloaded"), package.name
            assert not unloading_commands(body)
    files = {name: spec.split(f"%files -n {name}\n")[1].split("\n\n")[0] for name in ("gdrcopy-devel", "gdrcopy-kmod")}
    assert "%dir /usr/lib64/cmake\n" in files["gdrcopy-devel"]
    assert "%dir /etc/cdi\n" in files["gdrcopy-kmod"]


# --- the built packages (slow: they are built once per session) ---------------------

UNLOADS = re.compile(r"\b(rmmod|modprobe\s+-r|(deb-systemd-invoke|systemctl)\s+(\S+\s+)*(stop|restart))\b")


def unloading_commands(script: str) -> list[str]:
    """Lines of a shell script that would unload gdrdrv or stop its unit; messages that
    name such a command for the user (echo and its continuation lines) are not (pure)."""
    found = []
    for line in script.splitlines():
        text = line.strip()
        if text.startswith(("#", "echo ", '"')):
            continue
        if UNLOADS.search(text):
            found.append(text)
    return found


def test_unloading_commands_are_told_from_messages() -> None:
    script = 'echo "then run: rmmod gdrdrv" >&2\n\t"rmmod gdrdrv && modprobe gdrdrv" >&2\n# rmmod\n'
    assert unloading_commands(script) == []
    assert unloading_commands("deb-systemd-invoke stop 'gdrdrv.service' >/dev/null || true") != []
    assert unloading_commands("[ -d /sys/module/gdrdrv ] && modprobe -r gdrdrv || :") != []


@pytest.mark.slow
def test_no_maintainer_script_of_the_built_dkms_package_stops_or_unloads_gdrdrv(
    deb_sets: DebSets, tmp_path: Path
) -> None:
    # Not even through the unit: stopping gdrdrv.service unloads gdrdrv (rmmod).
    (deb,) = deb_sets.new.glob("gdrdrv-dkms_*.deb")
    run(["dpkg-deb", "-e", deb, tmp_path / "control"])
    scripts = {
        p.name: p.read_text()
        for p in (tmp_path / "control").iterdir()
        if p.name in ("preinst", "postinst", "prerm", "postrm")
    }
    assert {"postinst", "prerm"} <= set(scripts), sorted(scripts)
    print("\nmaintainer scripts of", deb.name, ":", ", ".join(sorted(scripts)))
    for name, text in scripts.items():
        assert not unloading_commands(text), f"{name} unloads gdrdrv or stops its unit: {unloading_commands(text)}"


# --- containers (slow) ----------------------------------------------------------


# Killing every DKMS process, not just the compiler, is the rarer case and costs
# another minute of .ci/run: the soak tier runs it.
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["compiler", pytest.param("everything", marks=pytest.mark.soak)])
def test_a_dkms_build_killed_half_way_is_recovered(deb_sets: DebSets, kernel: str, mode: str) -> None:
    outcome = faults.run_in_container(
        kernel, "fault_killed_build.sh", mode, deb_sets.version, kernel, new_debs=deb_sets.new
    )
    _report(f"(a) DKMS build killed half way ({mode})", outcome)


@pytest.mark.slow
def test_b_missing_headers_install_with_a_clear_message_then_autoinstall(deb_sets: DebSets, kernel: str) -> None:
    outcome = faults.run_in_container(kernel, "fault_no_headers.sh", deb_sets.version, kernel, new_debs=deb_sets.new)
    _report("(b) kernel headers missing at install", outcome)


# Soak: a downgrade is the rarer path, and a minute of .ci/run.
@pytest.mark.soak
def test_d_downgrade_to_the_previous_release_then_purge(deb_sets: DebSets, kernel: str) -> None:
    outcome = faults.run_in_container(
        kernel, "fault_downgrade.sh", deb_sets.previous, deb_sets.version, kernel,
        new_debs=deb_sets.new, old_debs=deb_sets.old,
    )  # fmt: skip
    _report("(d) downgrade to the previous release", outcome)


# Both in the soak tier: test_pkg_lifecycle.py walks the same upgrade (and the
# way back) in .ci/run, its nvidia-edit-ours-purge path the edited script.
@pytest.mark.soak
@pytest.mark.parametrize("init_script", ["unmodified", "modified"])
def test_e_upgrade_from_the_reference_packages_then_purge(
    deb_sets: DebSets, reference_debs: Path, kernel: str, init_script: str
) -> None:
    args = ["container", deb_sets.version, kernel] + (["modified"] if init_script == "modified" else [])
    outcome = faults.run_in_container(
        kernel, "reference_upgrade.sh", *args, new_debs=deb_sets.new, old_debs=reference_debs
    )
    _report(f"(e) upgrade from the reference's 2.6-1 packages ({init_script} init script), container", outcome)


# --- the VM (soak) ------------------------------------------------------------------


@pytest.mark.soak
def test_c_upgrade_and_removal_while_gdrdrv_is_loaded_and_in_use(
    deb_sets: DebSets, kernel: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    work = tmp_path_factory.mktemp("busy-module")
    source = build.source_at("HEAD")
    vm_root = faults.prepare_vm_root(kernel, source, deb_sets.previous, deb_sets.new, deb_sets.old, work)
    try:
        outcome, problems = faults.run_in_vm(
            vm_root, "fault_busy_module.sh", deb_sets.previous, deb_sets.version, log_dir=work / "logs"
        )
        _report("(c) upgrade and removal under a busy gdrdrv (VM)", outcome)
        assert not problems, f"{problems}\n{outcome.output[-6000:]}"
    finally:
        shutil.rmtree(vm_root.root_dir, ignore_errors=True)


@pytest.mark.soak
def test_e_upgrade_from_the_reference_packages_with_gdrdrv_loaded(
    deb_sets: DebSets, reference_debs: Path, kernel: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    work = tmp_path_factory.mktemp("reference-upgrade")
    source = build.source_at("HEAD")
    vm_root = faults.prepare_vm_root(
        kernel,
        source,
        reference.VERSION,
        deb_sets.new,
        reference_debs,
        work,
        old_module_version=reference.MODULE_VERSION,
    )
    try:
        # Two DKMS builds under TCG (the upgrade, then configuring again), 15-25 min each on a busy host.
        outcome, problems = faults.run_in_vm(
            vm_root,
            "reference_upgrade.sh",
            "vm",
            deb_sets.version,
            kernel,
            log_dir=work / "logs",
            timeout_s=2 * faults.VM_TIMEOUT_S,
        )
        _report("(e) upgrade from the reference's 2.6-1 packages with gdrdrv loaded (VM)", outcome)
        assert not problems, f"{problems}\n{outcome.output[-6000:]}"
    finally:
        shutil.rmtree(vm_root.root_dir, ignore_errors=True)
