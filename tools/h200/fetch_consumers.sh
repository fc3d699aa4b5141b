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
#
# With --optin, only what tools/h200/consumers_optin.sh needs (issue 35's judge):
#   debs/                                   the Vulkan loader packages
#   src/ucx-$UCX_TAG-configured.tar.gz      UCX from its own repository, autogen.sh run here
#   src/nccl-$NCCL_TAG.tar.gz               an NCCL release to build there from source
# UCX_REPO / NCCL_REPO: a local clone to `git archive` from (default: a shallow
# clone of the tag from GitHub).
set -euo pipefail
cd "$(dirname "$0")/../.."
UCX_WHEEL=${UCX_WHEEL:-libucx-cu13}
UCX_TAG=${UCX_TAG:-v1.19.1}
NCCL_TAG=${NCCL_TAG:-v2.27.7-1}
mkdir -p .device/debs .device/src
if ! ls .device/debs/*.deb >/dev/null 2>&1; then
	(cd .device/debs && apt-get download libvulkan1 libvulkan-dev libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi

# archive_tag REPO_URL LOCAL_CLONE TAG PREFIX OUT: the tag's tree as PREFIX/ in the tarball OUT.
archive_tag() {
	local url=$1 clone=$2 tag=$3 prefix=$4 out=$5 tmp_clone
	if [ -z "$clone" ]; then
		tmp_clone=$(mktemp -d)
		git clone -q --depth 1 --branch "$tag" "$url" "$tmp_clone"
		clone=$tmp_clone
	fi
	git -C "$clone" archive --format=tar --prefix="$prefix/" "$tag" | gzip -9 > "$out"
	if [ -n "${tmp_clone:-}" ]; then rm -rf "$tmp_clone"; fi
}

if [ "${1:-}" = --optin ]; then
	ucx_out=.device/src/ucx-$UCX_TAG-configured.tar.gz
	if [ ! -f "$ucx_out" ]; then
		for tool in autoconf automake libtoolize; do
			command -v "$tool" >/dev/null || apt-get install -y -qq autoconf automake libtool >/dev/null
		done
		work=$(mktemp -d)
		archive_tag https://github.com/openucx/ucx.git "${UCX_REPO:-}" "$UCX_TAG" ucx "$work/ucx.tar.gz"
		tar -C "$work" -xzf "$work/ucx.tar.gz"
		# The GPU machine has autoconf but no libtool: generate UCX's configure here.
		(cd "$work/ucx" && ./autogen.sh >/dev/null 2>&1)
		tar -C "$work" -czf "$ucx_out" ucx
		rm -rf "$work"
	fi
	nccl_out=.device/src/nccl-$NCCL_TAG.tar.gz
	[ -f "$nccl_out" ] || archive_tag https://github.com/NVIDIA/nccl.git "${NCCL_REPO:-}" "$NCCL_TAG" nccl "$nccl_out"
	du -sh .device/debs "$ucx_out" "$nccl_out"
	exit 0
fi
mkdir -p .device/ucx-wheel .device/layouts

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
