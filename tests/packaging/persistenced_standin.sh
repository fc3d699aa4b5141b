#!/bin/sh
# Stand-in for nvidia-persistenced in the systemd VM (pkgkit.systemd): loads
# the NVIDIA driver if it is not (as the real one does through nvidia-modprobe)
# and keeps its device open, so that the driver stays loaded whatever loads
# and unloads around it, as on a GPU node.  softgpu, loaded as the module
# nvidia, has the device /dev/softgpu.
set -eu
modprobe nvidia
# The descriptor stays open in sleep, which it is passed to.
exec 3</dev/softgpu
exec sleep infinity
