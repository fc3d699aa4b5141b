"""Kubernetes: the images (GPU Operator driver container, precompiled, KMM) and the manifests.

`images`     what `./toolkit build-image` builds from our packages with the
             Docker SDK (gdrkit.containers).  Their entrypoint
             `nvidia-gdrcopy-driver` (nvidia-gdrcopy-driver.sh) honours the GPU
             Operator's gdrcopy sidecar contract; image_setup.sh lays each
             image out.  The images carry the packages' CDI spec
             (templates/system/cdi.yaml.j2) under the name nvidia.com/gdrcopy=all.
`lock`       the image lock, deploy/kubernetes/images.lock: the digest of each
             image build-image made (from the OCI archive it saves), and the
             rule every manifest's image reference follows: fully qualified
             and pinned by digest.
`manifests`  the standalone loader DaemonSet with its kustomize overlays, the
             KMM `Module`, an example pod and the operator's values, rendered
             from templates/kube/ and the lock into deploy/kubernetes/
             (`./toolkit k8s-manifests`) and validated offline against the
             Kubernetes schemas.
"""
