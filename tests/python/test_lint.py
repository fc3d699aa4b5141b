"""`./toolkit lint`: the tree passes every check, and each check fails on a planted finding.

The plants go into temporary copies of the parts of the tree a check reads,
never into the tree itself.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from gdrkit import lint
from gdrkit.system import UserError, ensure_debian_packages
from gdrkit.version import REPO_ROOT

# What mypy checks, as pyproject.toml lists it (one home for that list).
PYTHON_PARTS = ("pyproject.toml", *tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"])


def prepared(name: str) -> lint.Check:
    check = lint.select(name)[0]
    lint.prepare([check])
    return check


def copy(parts: tuple[str, ...], dest: Path) -> Path:
    lint.copy_tree(REPO_ROOT, parts, dest)
    return dest


def test_the_tree_passes_every_check() -> None:
    lint.prepare(lint.CHECKS)
    results = lint.lint(REPO_ROOT, lint.CHECKS)
    assert {name: findings for name, findings in results.items() if findings} == {}


def test_a_planted_mypy_error_fails(tmp_path: Path) -> None:
    root = copy(PYTHON_PARTS, tmp_path)
    assert lint.mypy(root) == []
    with (root / "gdrkit" / "version.py").open("a") as f:
        f.write('\n\ndef planted() -> int:\n    return "not an int"\n')
    findings = lint.mypy(root)
    assert any("gdrkit/version.py" in line and "Incompatible return value" in line for line in findings), findings


def test_a_planted_ruff_finding_fails(tmp_path: Path) -> None:
    root = copy(("pyproject.toml", "gdrkit"), tmp_path)
    assert lint.ruff(root) == []
    (root / "gdrkit" / "planted.py").write_text("import os\n")
    assert any("F401" in line for line in lint.ruff(root))


IMPORT_PARTS = ("pyproject.toml", "gdrkit", "include/gdrcopy_version.h")


def test_a_planted_upward_import_fails(tmp_path: Path) -> None:
    root = copy(IMPORT_PARTS, tmp_path)
    assert lint.imports(root) == []
    with (root / "gdrkit" / "kube" / "manifests.py").open("a") as f:
        f.write("\nfrom gdrkit.matrix import model as planted  # noqa: E402\n")
    findings = lint.imports(root)
    assert "gdrkit.kube is not allowed to import gdrkit.matrix:" in findings, findings
    assert any("gdrkit.kube.manifests -> gdrkit.matrix.model" in line for line in findings), findings


def test_a_planted_import_into_the_shipped_doctor_fails(tmp_path: Path) -> None:
    root = copy(IMPORT_PARTS, tmp_path)
    with (root / "gdrkit" / "gdrcopy_doctor" / "probe.py").open("a") as f:
        f.write("\nfrom gdrkit import system as planted  # noqa: E402\n")
    findings = lint.imports(root)
    assert any("gdrkit.gdrcopy_doctor.probe -> gdrkit.system" in line for line in findings), findings


def test_a_planted_import_circle_fails(tmp_path: Path) -> None:
    root = copy(IMPORT_PARTS, tmp_path)
    # suites is imported by rootfs: importing rootfs back closes a circle inside gdrkit.vm.
    with (root / "gdrkit" / "vm" / "suites.py").open("a") as f:
        f.write("\n\ndef planted() -> object:\n    from gdrkit.vm import rootfs\n\n    return rootfs\n")
    findings = lint.imports(root)
    assert "No cycles are allowed in gdrkit.vm." in findings, findings


def test_a_new_module_must_be_given_a_floor(tmp_path: Path) -> None:
    root = copy(IMPORT_PARTS, tmp_path)
    (root / "gdrkit" / "planted.py").write_text("")
    assert any("gdrkit.planted" in line for line in lint.imports(root))


def test_a_planted_formatting_change_fails(tmp_path: Path) -> None:
    root = copy(("pyproject.toml", "gdrkit"), tmp_path)
    assert lint.ruff(root) == []
    (root / "gdrkit" / "planted.py").write_text("x = {  'a':1 }\n")
    assert any("planted.py" in line for line in lint.ruff(root))


def test_a_planted_ansible_lint_finding_fails(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    lint.copy_tree(REPO_ROOT, ["pyproject.toml", "ansible"], root)
    tasks = root / "ansible" / "roles" / "gdrcopy" / "tasks" / "main.yml"
    # A bare command with no name and no changed_when: two rules (name, no-changed-when) object.
    tasks.write_text(tasks.read_text() + "\n- ansible.builtin.command: true\n")
    findings = lint.ansible_lint(root)
    assert any(line.startswith("ansible/roles/gdrcopy/tasks/main.yml:") for line in findings), findings


def test_a_planted_shellcheck_warning_fails(tmp_path: Path) -> None:
    prepared("shellcheck")
    script = tmp_path / "tools" / "planted"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\nset -eu\nprintf "%s\\n" "$1"\n')
    assert lint.shellcheck(tmp_path) == []
    script.write_text('#!/bin/sh\nset -eu\nmode= 0660\nprintf "%s\\n" "$mode"\n')
    findings = lint.shellcheck(tmp_path)
    assert any(line.startswith("tools/planted:3:") and "SC1007" in line for line in findings), findings


def test_shell_files_are_found_by_suffix_and_shebang_outside_the_golden_copies(tmp_path: Path) -> None:
    (tmp_path / "a.sh").write_text("echo a\n")
    (tmp_path / "b").write_text("#!/usr/bin/env bash\necho b\n")
    (tmp_path / "c.py").write_text("#!/usr/bin/env python3\n")
    (tmp_path / "tests/python/golden").mkdir(parents=True)
    (tmp_path / "tests/python/golden/postinst").write_text("#!/bin/sh\n")
    assert [p.name for p in lint.shell_files(tmp_path)] == ["a.sh", "b"]


def test_spec_scriptlets_are_shell_with_the_macros_replaced() -> None:
    spec = "\n".join([
        "%build", "make %{?_smp_mflags}",
        "%post -p /sbin/ldconfig",
        "%post -n kmod", "%if 0%{?suse_version}", "dkms add -v %{version}", "%endif", "printf '%%s\\n' x",
        "%files", "/usr/lib",
    ])  # fmt: skip
    assert list(lint.spec_scriptlets(spec)) == [
        ("%post -n kmod", "# RPM_MACRO 0RPM_MACRO\ndkms add -v RPM_MACRO\n# RPM_MACRO\nprintf '%s\\n' x\n")
    ]


def test_a_planted_compiler_warning_fails(tmp_path: Path) -> None:
    prepared("werror")
    root = copy(lint.WERROR_TREE, tmp_path)
    with (root / "libgdrapi" / "src" / "internal.c").open("a") as f:
        f.write("\nstatic int planted(void)\n{\n\tint unused;\n\n\treturn 0;\n}\n")
    findings = lint.werror(root)
    assert any("internal.c" in line and "planted" in line for line in findings), findings


def test_a_planted_abi_change_fails(tmp_path: Path) -> None:
    prepared("abi")
    root = copy(("include", "libgdrapi"), tmp_path)
    assert lint.abi(root) == []
    # A GDRCopy 2.6 function no longer exported: programs that call it no longer start.
    api = root / "libgdrapi" / "src" / "gdrapi.c"
    text = api.read_text()
    assert "GDR_EXPORT void gdr_runtime_get_version(" in text
    api.write_text(text.replace("GDR_EXPORT void gdr_runtime_get_version(", "void gdr_runtime_get_version(", 1))
    findings = lint.abi(root)
    assert findings and any("gdr_runtime_get_version" in line for line in findings), findings


def test_a_changed_public_struct_does_not_even_build(tmp_path: Path) -> None:
    prepared("abi")  # the library's build
    root = copy(("include", "libgdrapi"), tmp_path)
    header = root / "include" / "gdrapi.h"
    text = header.read_text()
    assert "\tuint64_t va;\n" in text
    header.write_text(text.replace("\tuint64_t va;\n", "\tuint64_t va;\n\tuint64_t planted;\n", 1))
    with pytest.raises(UserError, match=re.escape("offsetof(gdr_info_v2_t, mapped_size) is ABI")):
        lint.build_library(root, tmp_path / "out")


def test_a_planted_include_circle_fails(tmp_path: Path) -> None:
    prepared("deps")
    root = copy(("include", "libgdrapi"), tmp_path)
    assert lint.deps(root) == []
    # A leaf helper that calls back into the API: internal.c <-> gdrapi.c.
    with (root / "libgdrapi" / "src" / "internal.c").open("a") as f:
        f.write("\nint gdr_planted(void);\nint gdr_planted(void)\n{\n\treturn gdr_close(NULL);\n}\n")
    findings = lint.deps(root)
    assert any("circle" in line and "internal.c" in line and "gdrapi.c" in line for line in findings), findings


def test_unknown_checks_are_named() -> None:
    with pytest.raises(ValueError, match="unknown lint check nope; the checks are mypy"):
        lint.select("mypy,nope")


def test_a_planted_checkpatch_warning_fails(tmp_path: Path) -> None:
    ensure_debian_packages(["perl"])  # checkpatch.pl's interpreter
    prepared("checkpatch")
    root = copy(("gdrdrv", "include"), tmp_path)
    assert lint.checkpatch(root) == []
    source = root / "gdrdrv" / "gdrdrv.c"
    source.write_text(source.read_text() + "\nstatic int planted_global = 0;\n")
    findings = lint.checkpatch(root)
    assert any("gdrdrv/gdrdrv.c" in line and "INITIALISED_STATIC" in line for line in findings), findings


def test_a_planted_kernel_doc_warning_fails(tmp_path: Path) -> None:
    ensure_debian_packages(["perl"])  # kernel-doc's interpreter
    prepared("kernel-doc")
    root = copy(("gdrdrv", "include"), tmp_path)
    assert lint.kernel_doc(root) == []
    header = root / "include" / "uapi" / "gdrdrv.h"
    # A member the struct's kernel-doc does not describe.
    header.write_text(header.read_text().replace("\t__u32 flags;\n", "\t__u32 flags;\n\t__u32 planted;\n", 1))
    source = root / "gdrdrv" / "gdrdrv.c"
    # A documented function whose parameter is not.
    source.write_text(source.read_text() + "\n/**\n * planted() - nothing\n */\nint planted(int x);\n")
    findings = lint.kernel_doc(root)
    assert any("include/uapi/gdrdrv.h" in line and "'planted'" in line for line in findings), findings
    assert any("gdrdrv/gdrdrv.c" in line and "'x'" in line for line in findings), findings


def test_planted_broken_links_and_anchors_fail(tmp_path: Path) -> None:
    """A small tree of pages that link each other; the tree's own pages pass in the test above."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Top\n\n[install](docs/install.md#on-debian-12) [nodes](docs/nodes.md)\n")
    (tmp_path / "docs" / "install.md").write_text("# Install\n\n## On Debian 12\n\n[back](../README.md#top)\n")
    (tmp_path / "docs" / "nodes.md").write_text("# Nodes\n\n## The device node\n")
    check = lint.select("doc-links")[0]
    assert check.run(tmp_path) == []
    with (tmp_path / "docs" / "nodes.md").open("a") as f:
        f.write("\nSee [the guide](install.md#no-such-section), [gone](../packages/NOPE.md),\n"
                "[here](#the-device-node), [ok](../README.md#top) and\n"
                "[out](../../elsewhere.md); `[code](nowhere.md)` is code.\n")  # fmt: skip
    findings = check.run(tmp_path)
    assert len(findings) == 3, findings
    assert "install.md#no-such-section: install.md has no heading with the anchor #no-such-section" in findings[0]
    assert "no packages/NOPE.md in the tree" in findings[1]
    assert "../../elsewhere.md points outside the tree" in findings[2]
    assert all(line.startswith("docs/nodes.md:5: ") or line.startswith("docs/nodes.md:7: ") for line in findings)


def test_anchors_are_spelled_as_github_spells_them() -> None:
    from gdrkit import doclinks

    assert doclinks.slug("Backends: with or without the kernel module") == "backends-with-or-without-the-kernel-module"
    assert doclinks.slug("Mappings and `fork()`: `GDR_ATTR_VMA_INHERITED_ON_FORK`") == (
        "mappings-and-fork-gdr_attr_vma_inherited_on_fork"
    )
    assert doclinks.slug("Polling GPU memory (issue 26, 2026-12-03)") == "polling-gpu-memory-issue-26-2026-12-03"
    assert doclinks.slug("Runs 1–3 × 2 of [the page](x.md)") == "runs-13--2-of-the-page"
    # A repeated heading gets -1; headings in fenced code are not headings.
    assert doclinks.anchors("# A\n## A\n```\n# B\n```\n") == {"a", "a-1"}
