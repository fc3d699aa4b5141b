"""The Kubernetes manifests: committed = rendered, valid against the Kubernetes schemas (offline), consistent,
every image fully qualified and pinned by the digest of the image lock.

kubernetes-validate (PyPI) holds the Kubernetes OpenAPI schemas; strict mode
makes an unknown field an error.  The kustomize overlays are rendered (the
kustomize subset they use) and what they render validated too.  Most tests
render from a lock that has every image (LOCKED, digests made up here), so
that every file exists; the committed files come from deploy/kubernetes/images.lock.
"""

from __future__ import annotations

import copy
import hashlib
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from gdrkit import version
from gdrkit.kube import images, lock, manifests
from gdrkit.packaging import model
from gdrkit.system import UserError
from gdrkit.version import REPO_ROOT

KMM_KERNELS = ("6.1.0-57-amd64", "6.12.57+deb13-amd64")


def fake_digest(reference: str) -> str:
    return "sha256:" + hashlib.sha256(reference.encode()).hexdigest()


def locked_images(specs: list[images.ImageSpec]) -> dict[str, lock.LockedImage]:
    return {
        spec.tag: lock.LockedImage(spec.tag, fake_digest(spec.tag), spec.kind, spec.node.tag, spec.kernel, "c" * 40)
        for spec in specs
    }


# Every node OS's driver image and two KMM images.
LOCKED = locked_images(
    [images.ImageSpec("driver", node, "") for node in images.node_oses()]
    + [images.ImageSpec("kmm", manifests.default_node(), kver) for kver in KMM_KERNELS]
)


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return manifests.render(locked=LOCKED)


def objects(files: dict[str, str], path: str) -> list[dict]:  # type: ignore[type-arg]
    return [doc for doc in yaml.safe_load_all(files[path]) if doc]


def test_committed_manifests_are_the_rendered_ones() -> None:
    assert manifests.stale() == [], "run ./toolkit k8s-manifests and commit deploy/kubernetes/"


def test_every_committed_image_is_fully_qualified_and_pinned_by_digest() -> None:
    committed = manifests.committed()
    references = manifests.image_references(committed)
    print("\n".join(f"{path}: {reference}" for path, reference in references))
    if not references:
        pytest.skip(
            f"deploy/kubernetes/ names no image: {lock.LOCK_PATH.name} has no digest yet (./toolkit build-image,"
            " then ./toolkit k8s-manifests)"
        )
    assert manifests.unpinned(committed) == []
    # Each pinned digest is the one build-image recorded for that image.
    digests = {entry.digest for entry in lock.load().values()}
    assert {lock.split_reference(reference)[2] for _, reference in references} <= digests


def test_the_lock_holds_what_build_image_records() -> None:
    locked = lock.load()
    if not locked:
        pytest.skip(f"{lock.LOCK_PATH} has no image yet: ./toolkit build-image records them")
    for reference, entry in locked.items():
        assert lock.reference_problem(entry.pinned) == "", reference
        assert entry.kind in images.KINDS and entry.os


def test_references_without_registry_or_digest_are_refused_with_what_to_do() -> None:
    digest = "sha256:" + "a" * 64
    assert lock.reference_problem(f"registry.example.org/gdrcopy/gdrdrv:2.6.1-debian12@{digest}") == ""
    assert lock.reference_problem(f"localhost:5000/gdrdrv@{digest}") == ""
    unqualified = lock.reference_problem(f"gdrcopy/gdrdrv:2.6.1-debian12@{digest}")
    assert (
        "names no registry" in unqualified and "docker.io" in unqualified and "build-image --repository" in unqualified
    )
    assert "names no registry" in lock.reference_problem(f"gdrdrv@{digest}")
    undigested = lock.reference_problem("registry.example.org/gdrcopy/gdrdrv:2.6.1-debian12")
    assert "not pinned by digest" in undigested and "k8s-manifests" in undigested
    assert "not pinned by digest" in lock.reference_problem("registry.example.org/x:1@sha256:abc")


def test_check_finds_every_unpinned_image_in_todays_form(files: dict[str, str]) -> None:
    """What the manifests named before the lock: a tag without registry, in every kind of file."""
    old = {
        "loader/daemonset.yaml": files["loader/daemonset.yaml"].replace(
            LOCKED[manifests.driver_image(manifests.default_node())].pinned, "gdrcopy/gdrdrv:2.6.1-debian12"
        ),
        "overlays/debian13/kustomization.yaml": "images:\n  - name: gdrcopy/gdrdrv\n    newName: gdrcopy/gdrdrv\n"
        '    newTag: "2.6.1-debian13"\n',
        "gpu-operator/values.yaml": 'gdrcopy:\n  repository: gdrcopy\n  image: gdrdrv\n  version: "2.6.1"\n',
        "kmm/module.yaml": "spec:\n  kernelMappings:\n    - containerImage: registry.example.org/g/gdrdrv-kmm:2.6.1-x\n",
        "examples/pod-cdi.yaml": "spec:\n  containers:\n    - image: registry.example.org/app:latest\n",
    }
    problems = manifests.unpinned(old)
    assert [p.split(":")[0] for p in problems] == list(old), problems
    assert manifests.unpinned(files) == []


def test_rendering_leaves_out_what_the_lock_does_not_pin() -> None:
    driver = manifests.driver_image(manifests.default_node())
    only_base = {driver: LOCKED[driver]}
    rendering = manifests.render_all(locked=only_base)
    assert sorted(rendering.files) == [
        "examples/pod-cdi.yaml",
        "gpu-operator/values.yaml",
        "loader/daemonset.yaml",
        "loader/kustomization.yaml",
        "loader/namespace.yaml",
    ]
    assert "overlays/debian13/kustomization.yaml" in rendering.left_out
    assert "build-image --os debian13 --kind driver" in rendering.left_out["overlays/debian13/kustomization.yaml"]
    assert "--kind kmm" in rendering.left_out["kmm/module.yaml"]
    nothing = manifests.render_all(locked={})
    assert nothing.files == {} and "no digest of " + driver in nothing.left_out["loader/"]
    # A kernel asked for without its image in the lock is named.
    asked = manifests.render_all(["5.14.0-1.el9.x86_64"], locked=LOCKED)
    assert "kmm/module.yaml (5.14.0-1.el9.x86_64)" in asked.left_out


def test_write_removes_generated_files_no_longer_rendered(tmp_path: Path, files: dict[str, str]) -> None:
    manifests.write(tmp_path, files)
    (tmp_path / "mine.yaml").write_text("kind: Mine\n")
    kept = {path: text for path, text in files.items() if not path.startswith("overlays/")}
    _, removed = manifests.write(tmp_path, kept)
    assert sorted(str(p.relative_to(tmp_path)) for p in removed) == sorted(
        p for p in files if p.startswith("overlays/")
    )
    assert (tmp_path / "mine.yaml").exists() and not (tmp_path / "overlays").exists()
    assert manifests.stale(tmp_path, kept) == ["mine.yaml"]


def test_lock_round_trip_and_refusals(tmp_path: Path) -> None:
    path = tmp_path / "images.lock"
    assert lock.load(path) == {}
    lock.record(LOCKED.values(), path)
    assert lock.load(path) == LOCKED
    assert path.read_text().startswith("# The Kubernetes images' digests")
    unqualified = lock.LockedImage("gdrcopy/gdrdrv:1", "sha256:" + "a" * 64, "driver", "debian12", "", "")
    with pytest.raises(UserError, match="names no registry"):
        lock.record([unqualified], path)
    path.write_text("images:\n  registry.example.org/g/gdrdrv:1:\n    digest: sha256:abc\n    kind: driver\n")
    with pytest.raises(UserError, match="not sha256:<64 hex digits>"):
        lock.load(path)
    path.write_text(f"images:\n  gdrcopy/gdrdrv:1:\n    digest: sha256:{'a' * 64}\n    kind: driver\n")
    with pytest.raises(UserError, match="not a fully qualified"):
        lock.load(path)


def test_every_object_validates_against_the_kubernetes_schemas(files: dict[str, str]) -> None:
    verdicts = manifests.validate_all(files)
    print("\n".join(v.line() for v in verdicts))
    assert not [v for v in verdicts if v.status == "invalid"]
    valid = {(v.path, v.kind) for v in verdicts if v.status == "valid"}
    assert {
        ("loader/daemonset.yaml", "DaemonSet"),
        ("loader/namespace.yaml", "Namespace"),
        ("examples/pod-cdi.yaml", "Pod"),
    } <= valid
    # Every overlay renders to a valid DaemonSet with its OS's image.
    for node in images.node_oses():
        if node.family.package_type == "deb" and node != manifests.default_node():
            assert (f"overlays/{node.tag} => loader/daemonset.yaml", "DaemonSet") in valid
    skipped = [v for v in verdicts if v.status == "not validated"]
    assert all(v.detail for v in skipped)
    assert any(v.kind == "Module" and "custom resource" in v.detail for v in skipped)


def test_the_validator_rejects_what_is_wrong(files: dict[str, str]) -> None:
    daemonset = objects(files, "loader/daemonset.yaml")[0]
    broken = copy.deepcopy(daemonset)
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["periodSecond"] = 10  # typo
    wrong_type = copy.deepcopy(daemonset)
    wrong_type["spec"]["template"]["spec"]["initContainers"][0]["securityContext"]["privileged"] = "yes"
    verdicts = manifests.validate({"a.yaml": yaml.safe_dump(broken), "b.yaml": yaml.safe_dump(wrong_type)})
    assert [v.status for v in verdicts] == ["invalid", "invalid"], [v.line() for v in verdicts]
    assert "periodSecond" in verdicts[0].detail


def test_loader_daemonset_contract(files: dict[str, str]) -> None:
    pod = objects(files, "loader/daemonset.yaml")[0]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    (main,) = pod["containers"]
    assert init["securityContext"] == {"privileged": True} and init["args"] == ["load"]
    assert main["securityContext"]["runAsNonRoot"] is True and "privileged" not in main["securityContext"]
    assert main["args"] == ["watch"]
    # Readiness is the GPU Operator validator's own check.
    assert main["readinessProbe"]["exec"]["command"] == ["sh", "-c", manifests.VALIDATOR_CHECK]
    assert manifests.VALIDATOR_CHECK == "lsmod | grep -E '^gdrdrv\\s'"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"][0]["key"] for t in terms] == [key for key, _ in manifests.GPU_NODE_LABELS]
    image = f"registry.example.org/gdrcopy/gdrdrv:{version.VERSION}-debian12"
    assert init["image"] == main["image"] == LOCKED[image].pinned
    env = {e["name"]: e["value"] for e in init["env"]}
    assert env["NVIDIA_DRIVER_ROOT"] == "/host" and env["GDRCOPY_CDI_DIR"] == "/var/run/cdi"


def test_cdi_name_is_the_descriptions(files: dict[str, str]) -> None:
    kind, device = model.load().device_node.kubernetes_cdi
    assert (kind, device) == ("nvidia.com/gdrcopy", "all")
    pod = objects(files, "examples/pod-cdi.yaml")[0]
    assert pod["metadata"]["annotations"]["cdi.k8s.io/gdrcopy"] == f"{kind}={device}"
    # The packages keep their own kind: no clash with a spec of NVIDIA's kind.
    assert model.load().device_node.cdi[0] != kind


def test_operator_values_pin_the_image_build_image_made(files: dict[str, str]) -> None:
    values = yaml.safe_load(files["gpu-operator/values.yaml"])["gdrcopy"]
    spec = images.ImageSpec("driver", manifests.default_node(), "")
    # A digest as version: the operator pulls <repository>/<image>@<version> as it is.
    assert values["enabled"] is True
    assert f"{values['repository']}/{values['image']}" == lock.split_reference(spec.tag)[0]
    assert values["version"] == LOCKED[spec.tag].digest


def test_kmm_module_maps_kernels_to_the_kmm_images(files: dict[str, str]) -> None:
    module = objects(files, "kmm/module.yaml")[0]
    expected = manifests.kmm_images(locked=LOCKED)
    assert sorted(expected) == sorted(KMM_KERNELS)
    assert manifests.check_kmm_module(module, expected) == []
    tag = f"registry.example.org/gdrcopy/gdrdrv-kmm:{version.VERSION}-6.12.57_deb13-amd64"
    assert expected["6.12.57+deb13-amd64"] == LOCKED[tag].pinned
    one = manifests.render(["6.1.0-57-amd64"], locked=LOCKED)
    assert (
        manifests.check_kmm_module(
            objects(one, "kmm/module.yaml")[0], manifests.kmm_images(["6.1.0-57-amd64"], locked=LOCKED)
        )
        == []
    )
    params = module["spec"]["moduleLoader"]["container"]["modprobe"]["parameters"]
    assert "node_mode=0660" in params and "use_persistent_mapping=1" in params
    wrong = copy.deepcopy(module)
    wrong["spec"]["moduleLoader"]["container"]["kernelMappings"][0]["containerImage"] = "other:1"
    assert manifests.check_kmm_module(wrong, expected)


def test_kustomize_subset_refuses_fields_it_does_not_apply(files: dict[str, str]) -> None:
    patched = dict(files)
    patched["overlays/debian13/kustomization.yaml"] += "patches:\n  - path: p.yaml\n"
    with pytest.raises(UserError, match="does not apply"):
        manifests.build_kustomization(patched, "overlays/debian13")
    missing = dict(files)
    missing["loader/kustomization.yaml"] += "  - nothere.yaml\n"
    with pytest.raises(UserError, match="names nothere.yaml"):
        manifests.build_kustomization(missing, "loader")


def node_access(files: dict[str, str]) -> dict[str, object]:
    """Where each path says who may open /dev/gdrdrv: the loader's and the operator's env, KMM's parameters."""
    init = objects(files, "loader/daemonset.yaml")[0]["spec"]["template"]["spec"]["initContainers"][0]
    values = yaml.safe_load(files["gpu-operator/values.yaml"])["gdrcopy"]
    kmm = objects(files, "kmm/module.yaml")[0]["spec"]["moduleLoader"]["container"]["modprobe"]["parameters"]
    pod = objects(files, "examples/pod-cdi.yaml")[0]["spec"]["securityContext"]
    return {
        "loader": {e["name"]: e["value"] for e in init["env"] if e["name"].startswith("GDRCOPY_NODE_")},
        "operator": {e["name"]: e["value"] for e in values["env"]},
        "kmm": [p for p in kmm if p.startswith("node_")],
        "example": pod,
    }


def test_every_kubernetes_path_gives_the_node_one_group_and_mode(files: dict[str, str]) -> None:
    gid = manifests.NODE_GID
    want_env = {"GDRCOPY_NODE_GID": str(gid), "GDRCOPY_NODE_MODE": "0660"}
    found = node_access(files)
    assert found["loader"] == found["operator"] == want_env, found
    assert found["kmm"] == ["node_mode=0660", f"node_gid={gid}"], found
    # The example pod is the intended kind: non-root, in that group.
    example = found["example"]
    assert isinstance(example, dict) and example["runAsNonRoot"] is True and example["supplementalGroups"] == [gid]
    # The loader's init container sees the host's /dev, where it sets the group.
    pod = objects(files, "loader/daemonset.yaml")[0]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    dev_dir = {e["name"]: e["value"] for e in init["env"]}["GDRCOPY_DEV_DIR"]
    mount = next(m for m in init["volumeMounts"] if m["mountPath"] == dev_dir)
    assert next(v for v in pod["volumes"] if v["name"] == mount["name"])["hostPath"]["path"] == "/dev"


def test_node_gid_is_configurable_and_root_group_refused() -> None:
    found = node_access(manifests.render(locked=LOCKED, node_gid=2000))
    assert found["kmm"] == ["node_mode=0660", "node_gid=2000"]
    with pytest.raises(UserError, match="--node-gid 0 is not a group id"):
        manifests.render(locked=LOCKED, node_gid=0)
    import inspect

    from gdrkit.tasks import kube

    assert inspect.signature(kube.k8s_manifests.body).parameters["node_gid"].default == manifests.NODE_GID


# ---- docs/kubernetes.md against the tree ----

KUBE_DOC = REPO_ROOT / "docs" / "kubernetes.md"
DOCUMENTED_PATH = re.compile(r"deploy/kubernetes/[\w.+/<>-]*")
KUBECTL_APPLY = re.compile(r"kubectl apply -k (\S+)")
# What an image is built from: the packages' sources and the image's own files.
IMAGE_INPUTS = ("gdrdrv", "include", "libgdrapi", "tests/sanity", "tests/bench", "man", "packages", "templates",
                "python", "gdrkit/kube", "gdrkit/packaging", "gdrkit/gdrcopy_doctor")  # fmt: skip


def documented_problems(text: str, files: dict[str, str]) -> list[str]:
    """The paths below deploy/kubernetes/ a page names that neither the tree has nor k8s-manifests renders
    (from a lock with every image), and the `kubectl apply -k` directories that are no kustomize directory.

    `<os>`, `<kver>` in a path stand for one path segment."""
    root = REPO_ROOT / "deploy" / "kubernetes"
    known = {str(p.relative_to(root)) for p in root.rglob("*")} | set(files)
    known |= {str(Path(f).parent) for f in files} | {str(Path(f).parent.parent) for f in files}
    kustomize = set(manifests.kustomize_dirs(files))

    def found(documented: str, among: set[str]) -> bool:
        relative = documented.removeprefix("deploy/kubernetes/").rstrip("/")
        pattern = "[^/]+".join(re.escape(part) for part in re.split(r"<[^>/]+>", relative))
        return relative == "" or any(re.fullmatch(pattern, path) for path in among)

    problems = [f"{m.group(0)}: not in the tree, and k8s-manifests renders no such file or directory"
                for m in DOCUMENTED_PATH.finditer(text) if not found(m.group(0), known)]  # fmt: skip
    problems += [f"kubectl apply -k {m.group(1)}: no kustomization.yaml there, committed or rendered"
                 for m in KUBECTL_APPLY.finditer(text)
                 if not (m.group(1).startswith("deploy/kubernetes/") and found(m.group(1), kustomize))]  # fmt: skip
    return problems


def test_the_kubernetes_page_names_paths_the_tree_has_or_renders(files: dict[str, str]) -> None:
    text = KUBE_DOC.read_text()
    assert KUBECTL_APPLY.search(text), "docs/kubernetes.md has no kubectl apply -k to check"
    assert documented_problems(text, files) == []


def test_the_kubernetes_page_check_refuses_paths_that_do_not_exist(files: dict[str, str]) -> None:
    wrong = (
        "kubectl apply -k deploy/kubernetes/overlays/rhel9.4/extra\n"
        "kubectl apply -k deploy/kubernetes/examples\n"
        "see deploy/kubernetes/loader/daemonsets.yaml and deploy/kubernetes/images.lock\n"
    )
    assert documented_problems(wrong, files) == [
        "deploy/kubernetes/overlays/rhel9.4/extra: not in the tree, and k8s-manifests renders no such file or directory",
        "deploy/kubernetes/loader/daemonsets.yaml: not in the tree, and k8s-manifests renders no such file or directory",
        "kubectl apply -k deploy/kubernetes/overlays/rhel9.4/extra: no kustomization.yaml there, committed or rendered",
        "kubectl apply -k deploy/kubernetes/examples: no kustomization.yaml there, committed or rendered",
    ]


def test_the_committed_lock_pins_no_image_of_an_older_tree() -> None:
    """An image in the committed lock was built from a commit whose image inputs are HEAD's: else the
    committed manifests would pin a stale image (empty, the manifests wait for build-image)."""
    stale = []
    for reference, entry in lock.load().items():
        changed = subprocess.run(["git", "diff", "--name-only", entry.commit, "HEAD", "--", *IMAGE_INPUTS],
                                 cwd=REPO_ROOT, capture_output=True, text=True, check=False)  # fmt: skip
        if changed.returncode != 0 or changed.stdout.strip():
            stale.append(f"{reference} (built from {entry.commit[:12]}): {changed.stdout.split() or changed.stderr}")
    assert stale == [], "rebuild with ./toolkit build-image and render with ./toolkit k8s-manifests, or empty the lock"
