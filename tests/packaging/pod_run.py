"""Run a command as in a pod or container on this node (doctor_deployments.sh; in a mount namespace).

    unshare -m python3 pod_run.py MARKS DEVICE COMMAND...

MARKS: containerd (a Kubernetes service-account mount and
KUBERNETES_SERVICE_HOST, as kubelet gives every containerd or CRI-O pod) or
docker (/.dockerenv).  DEVICE: yes (the node's /dev, /dev/gdrdrv in it) or
no (a /dev of its own without it).  Either way the image has no
/lib/modules or /usr/src.  The mounts are the namespace's; /.dockerenv is
removed after.  Python's ctypes makes the mounts: the test root has no
mount(8).  Exits with the command's status.
"""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import sys

LIBC = ctypes.CDLL(None, use_errno=True)


def tmpfs(target: str, name: str) -> None:
    if LIBC.mount(name.encode(), target.encode(), b"tmpfs", 0, None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno), target)


def main(marks: str, device: str, command: list[str]) -> int:
    env = dict(os.environ)
    tmpfs("/lib/modules", "pod-image")
    tmpfs("/usr/src", "pod-image")
    marker = ""
    if marks == "containerd":
        os.makedirs("/run/secrets", exist_ok=True)
        tmpfs("/run/secrets", "pod-secrets")
        account = "/run/secrets/kubernetes.io/serviceaccount"
        os.makedirs(account)
        with open(f"{account}/token", "w", encoding="ascii") as token:
            token.write("token\n")
        env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
    elif marks == "docker":
        marker = "/.dockerenv"
        open(marker, "w", encoding="ascii").close()
    else:
        raise SystemExit(f"pod_run.py: unknown marks {marks!r}: containerd or docker")
    if device == "no":
        tmpfs("/dev", "pod-dev")
        os.mknod("/dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    try:
        return subprocess.call(command, env=env)
    finally:
        if marker:
            os.unlink(marker)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
