"""The Kubernetes manifests: committed = rendered, valid against the Kubernetes schemas (offline), consistent.

kubernetes-validate (PyPI) holds the Kubernetes OpenAPI schemas; strict mode
makes an unknown field an error.  The kustomize overlays are rendered (the
kustomize subset they use) and what they render validated too.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from gdrkit import version
from gdrkit.kube import images, manifests
from gdrkit.packaging import model
from gdrkit.system import UserError


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return manifests.render()


def objects(files: dict[str, str], path: str) -> list[dict]:  # type: ignore[type-arg]
    return [doc for doc in yaml.safe_load_all(files[path]) if doc]


def test_committed_manifests_are_the_rendered_ones() -> None:
    assert manifests.stale() == [], "run ./toolkit k8s-manifests and commit deploy/kubernetes/"


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
    assert init["image"] == main["image"] == f"gdrcopy/gdrdrv:{version.VERSION}-debian12"
    env = {e["name"]: e["value"] for e in init["env"]}
    assert env["NVIDIA_DRIVER_ROOT"] == "/host" and env["GDRCOPY_CDI_DIR"] == "/var/run/cdi"


def test_cdi_name_is_the_descriptions(files: dict[str, str]) -> None:
    kind, device = model.load().device_node.kubernetes_cdi
    assert (kind, device) == ("nvidia.com/gdrcopy", "all")
    pod = objects(files, "examples/pod-cdi.yaml")[0]
    assert pod["metadata"]["annotations"]["cdi.k8s.io/gdrcopy"] == f"{kind}={device}"
    # The packages keep their own kind: no clash with a spec of NVIDIA's kind.
    assert model.load().device_node.cdi[0] != kind


def test_operator_values_give_the_tag_build_image_makes(files: dict[str, str]) -> None:
    values = yaml.safe_load(files["gpu-operator/values.yaml"])["gdrcopy"]
    node = images.node_os("ubuntu22.04")
    # The operator's image: <repository>/<image>:<version>-<os>.
    operator_tag = f"{values['repository']}/{values['image']}:{values['version']}-{node.tag}"
    assert values["enabled"] is True
    assert operator_tag == images.ImageSpec("driver", node, "").tag


def test_kmm_module_maps_kernels_to_the_kmm_images() -> None:
    rendered = manifests.render(["6.12.57+deb13-amd64"])
    module = objects(rendered, "kmm/module.yaml")[0]
    expected = manifests.kmm_images(["6.12.57+deb13-amd64"])
    assert manifests.check_kmm_module(module, expected) == []
    assert expected["6.12.57+deb13-amd64"].endswith(f"gdrdrv-kmm:{version.VERSION}-6.12.57_deb13-amd64")
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
    found = node_access(manifests.render(node_gid=2000))
    assert found["kmm"] == ["node_mode=0660", "node_gid=2000"]
    with pytest.raises(UserError, match="--node-gid 0 is not a group id"):
        manifests.render(node_gid=0)
    from gdrkit.tasks import kube

    assert kube.k8s_manifests.body.__defaults__[-1] == manifests.NODE_GID
