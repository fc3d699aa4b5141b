#!/bin/bash
# Run HERE (a machine that reaches PyPI and a Debian mirror), before
# consumers.sh on the H200 machine, which reaches neither.  Fills .device/ with
#   debs/        the Vulkan loader packages (as run.sh needs)
#   ucx-wheel/   UCX from PyPI's libucx-cu13 wheel: ucx_info and its shared libraries
#   src/         Debian's UCX source (bookworm: the suite our mirror serves sources of)
#   layouts/     the files of our runtime packages, as each package manager lays them
#                out: deb (libgdrapi_*.deb) and rpm (gdrcopy-2*.rpm), from dist/
#                (./toolkit build-packages first)
# Carry .device to the machine (under 64 MiB).
set -euo pipefail
cd "$(dirname "$0")/../.."
UCX_WHEEL=${UCX_WHEEL:-libucx-cu13}
mkdir -p .device/debs .device/src .device/ucx-wheel .device/layouts
if ! ls .device/debs/*.deb >/dev/null 2>&1; then
	(cd .device/debs && apt-get download libvulkan1 libvulkan-dev libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q -d "$tmp" --no-deps --only-binary=:all: --python-version 3.12 \
	--platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 "$UCX_WHEEL"
rm -rf .device/ucx-wheel/*
# Only what runs: the programs' and modules' shared objects, not the static archives.
unzip -q -o "$tmp"/libucx_*.whl 'libucx/bin/ucx_info' 'libucx/lib/*.so.0' -d .device/ucx-wheel

if ! ls .device/src/ucx_*.orig.tar.* >/dev/null 2>&1; then
	# A private apt state with deb-src lines, so the host's apt configuration stays as it is.
	apt_dir=$tmp/apt
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache"
	echo "deb-src http://deb.debian.org/debian bookworm main contrib non-free" > "$apt_dir/sources.list"
	apt_opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache")
	apt-get "${apt_opts[@]}" update -qq
	(cd .device/src && apt-get "${apt_opts[@]}" source --download-only ucx)
fi

if [ ! -f .device/src/ucx-configured.tar.gz ]; then
	# The H200 machine has autoconf but no libtool: generate UCX's configure here.
	for tool in autoconf automake libtoolize; do
		command -v "$tool" >/dev/null || apt-get install -y -qq autoconf automake libtool >/dev/null
	done
	# dpkg-source lays out the orig tarball with Debian's debian/, which configure.ac names.
	dpkg-source --no-check -x "$(find .device/src -name 'ucx_*.dsc' | head -n 1)" "$tmp/ucx" >/dev/null
	(cd "$tmp/ucx" && ./autogen.sh >/dev/null)
	tar -C "$tmp" -czf .device/src/ucx-configured.tar.gz ucx
fi

rm -rf .device/layouts/deb .device/layouts/rpm
mkdir -p .device/layouts/deb .device/layouts/rpm
deb=$(find dist -maxdepth 1 -name 'libgdrapi_*_amd64.deb' 2>/dev/null | head -n 1)
rpm=$(find dist -maxdepth 1 -name 'gdrcopy-2*.x86_64.rpm' 2>/dev/null | head -n 1)
if [ -n "$deb" ]; then dpkg-deb -x "$deb" .device/layouts/deb; else echo "no dist/libgdrapi_*_amd64.deb: ./toolkit build-deb first" >&2; fi
if [ -n "$rpm" ]; then
	command -v rpm2cpio >/dev/null || apt-get install -y -qq rpm2cpio cpio >/dev/null
	(cd .device/layouts/rpm && rpm2cpio "$OLDPWD/$rpm" | cpio -idm --quiet)
else
	echo "no dist/gdrcopy-2*.x86_64.rpm: ./toolkit build-rpm first" >&2
fi
find .device/layouts -name 'libgdrapi.so*' -printf '%p -> %l\n'
du -sh .device
