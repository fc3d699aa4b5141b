#!/bin/bash
# Install the built packages in a matrix container and check that DKMS built
# gdrdrv; first provide softgpu, the stand-in for the NVIDIA driver.  Prints
# `GDRKIT-STEP <step> <status>` for softgpu, install and dkms.
#
# Usage: install_packages.sh ABI [--refresh CMD] --install CMD -- FILE...
#   ABI        the kernel to build for; "" for the newest in /lib/modules
#   --refresh  refresh the package lists first (words of one command)
#   --install  the package manager's command that installs package files (words)
# The source tree is mounted at /src.
set -u

abi=$1
shift
refresh=() install=()
while [ $# -gt 0 ]; do
	case $1 in
	--refresh) read -r -a refresh <<<"$2"; shift 2 ;;
	--install) read -r -a install <<<"$2"; shift 2 ;;
	--) shift; break ;;
	*) echo "install_packages.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
if [ -z "$abi" ]; then
	# shellcheck disable=SC2012  # kernel release names are plain words
	abi=$(ls /lib/modules | sort -V | tail -n 1)
fi

mark() { echo "GDRKIT-STEP $1 $2"; }

# softgpu stands in for the NVIDIA driver: its module for the entry's kernel, its
# libcuda.so.1, and its P2P header and Module.symvers where NVIDIA's DKMS sources
# live, so the packaged gdrdrv finds it the way it finds a real driver.
(make -C /src -j2 softgpu_install KVER="$abi" prefix=/usr/local &&
	make -C /src/tests/softgpu/kmod install-nvidia-src KVER="$abi" &&
	depmod -a "$abi" && ldconfig) >/tmp/softgpu-build.log 2>&1
rc=$?
[ $rc = 0 ] || tail -n 40 /tmp/softgpu-build.log
mark softgpu $rc

rc=0
if [ ${#refresh[@]} -gt 0 ]; then
	"${refresh[@]}" || rc=$?
fi
[ $rc = 0 ] && { "${install[@]}" "$@" || rc=$?; }
mark install $rc
[ $rc = 0 ] || exit 1

# The package's postinst builds for the kernels it finds; in a container
# `uname -r` is the host's, so ask for the entry's kernel explicitly when needed.
dkms status -m gdrdrv -k "$abi" | grep -q installed || dkms autoinstall -k "$abi"
dkms status -m gdrdrv -k "$abi"
dkms status -m gdrdrv -k "$abi" | grep -q installed
rc=$?
mark dkms $rc
exit $rc
