#!/bin/bash
# Load gdrdrv.ko from this tree, as GDRCopy's ./insmod.sh does, for scripts
# that run `make ... all install` and then `./insmod.sh`:
#   - unload gdrdrv if it is loaded,
#   - insmod gdrdrv/gdrdrv.ko dbg_enabled=0 info_enabled=0 use_persistent_mapping=1,
#   - leave /dev/gdrdrv readable and writable by everyone (mode 0666).
# Not root: each command runs through sudo.
#
#   ./insmod.sh [PARAM=VALUE...]     extra module parameters, e.g. dbg_enabled=1
#   GDRDRV_NODE_MODE=0660 ./insmod.sh   a narrower node (then give it a group:
#                                       node_gid=<gid> and the udev rule, see docs/nodes.md)
#
# The kernel creates /dev/gdrdrv itself (a misc device); the mknod below is
# only for a /dev without devtmpfs or udev, as in some containers.
# For installed modules use `modprobe gdrdrv` or `./toolkit insmod`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$here/gdrdrv/gdrdrv.ko"
node=/dev/gdrdrv
mode="${GDRDRV_NODE_MODE:-0666}"

as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "insmod.sh: not root and no sudo to run: $*" >&2
        exit 1
    fi
}

case "$mode" in
    [0-7][0-7][0-7] | 0[0-7][0-7][0-7]) ;;
    *)
        echo "insmod.sh: GDRDRV_NODE_MODE=$mode is not an octal mode such as 0666" >&2
        exit 2
        ;;
esac
# The module reads node_mode as a number: a leading 0 makes it octal.
mode="0${mode#0}"

if [ ! -f "$module" ]; then
    echo "insmod.sh: $module is not built; run: make driver (needs the kernel's headers)" >&2
    exit 1
fi

if [ -d /sys/module/gdrdrv ] || grep -qw gdrdrv /proc/devices 2>/dev/null; then
    echo "unloading the loaded gdrdrv"
    as_root rmmod gdrdrv
fi

params=(dbg_enabled=0 info_enabled=0 use_persistent_mapping=1 "node_mode=$mode" "$@")
echo "insmod $module ${params[*]}"
if ! as_root insmod "$module" "${params[@]}"; then
    echo "insmod.sh: loading gdrdrv failed; it needs the NVIDIA driver loaded first (modprobe nvidia)," >&2
    echo "           and a gdrdrv built for this kernel and driver: see the kernel log (dmesg | tail)" >&2
    exit 1
fi

# devtmpfs or udev create the node; wait a moment for udev.
for _ in $(seq 50); do
    [ -c "$node" ] && break
    sleep 0.1
done
if [ ! -c "$node" ]; then
    if [ ! -r /sys/class/misc/gdrdrv/dev ]; then
        echo "insmod.sh: gdrdrv is loaded but registered no device; see dmesg" >&2
        exit 1
    fi
    IFS=: read -r major minor </sys/class/misc/gdrdrv/dev
    echo "creating $node (char $major:$minor): this /dev has no devtmpfs or udev"
    as_root rm -f "$node"
    as_root mknod "$node" c "$major" "$minor"
fi
as_root chmod "$mode" "$node"
ls -l "$node"
