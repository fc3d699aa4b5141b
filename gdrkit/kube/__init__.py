"""Kubernetes: the images (GPU Operator driver container, precompiled, KMM) and the manifests.

`images`     what `./toolkit build-image` builds, from our packages, with the
             Docker SDK (gdrkit.containers): the entrypoint
             `nvidia-gdrcopy-driver` (nvidia-gdrcopy-driver.sh) honours the GPU
             Operator's gdrcopy sidecar contract.
`manifests`  the standalone loader DaemonSet, the KMM `Module` and the CDI
             spec, rendered from templates/kube/ into deploy/kubernetes/ and
             validated offline against the Kubernetes schemas.
"""
