#!/bin/bash
# packages/build-rpm-packages.sh: GDRCopy's script of this name, for
# automation written for GDRCopy 2.6 (same options, same file names).
# The packages are built by `./toolkit build-rpm` (packages/gdrcopy.yaml,
# templates/), exactly as `./toolkit build-packages` builds them; this script
# only maps the options and names the results.
#
# Results:
#   dist/<package>-<version>-<release>.<dist>.<arch>.rpm  the toolkit's names (<dist>: el9, sle15)
#   ./<package>-<version>-<release>.<tag>.<arch>.rpm  GDRCopy's names, in the
#       current directory: <tag> is the release the packages are for, as
#       GDRCopy names it on a host of that release (el<N> on RHEL and its
#       rebuilds, <ID>-<VERSION_ID> on SUSE), and the release's own tag (el9,
#       sle15) on a host of another (Debian builds el9's); the DKMS package's release
#       reads <release>dkms, as GDRCopy's does (gdrcopy-kmod-2.6+dropin1-1dkms.el9.noarch.rpm),
#       and gdrcopy-devel's name says noarch, as GDRCopy's package is.
# gdrcopy-kmod ships gdrcopy.service and /usr/libexec/gdrcopy/gdrcopy, so
# `systemctl enable gdrcopy` works as with GDRCopy's packages.
set -euo pipefail

usage() {
    cat <<EOF
Usage: [CUDA=<path>] [NVIDIA_SRC_DIR=<path>] $0 [-m] [-h]

Builds gdrcopy, gdrcopy-devel and gdrcopy-kmod (.rpm) with ./toolkit build-rpm,
into dist/, and copies them here under GDRCopy's names.

  -m    also build the prebuilt-module package gdrcopy-kmod-<kernel> for the
        running kernel (an EL or SLE kernel with its kernel-devel installed)
  -h    this help
  CUDA=<path>            accepted for compatibility; the build needs no CUDA toolkit
  NVIDIA_SRC_DIR=<path>  with -m: the NVIDIA driver's kernel sources (with nv-p2p.h);
                         without it gdrdrv is built from its own P2P declarations
On a host without apt (RHEL, SUSE) the build dependencies are neither
installed nor checked: install rpm-build, gcc and make first.
EOF
}

with_kmod=0
OPTIND=1
while getopts "hm" opt; do
    case "$opt" in
        h)
            usage
            exit 0
            ;;
        m) with_kmod=1 ;;
        *)
            usage >&2
            exit 2
            ;;
    esac
done
shift $((OPTIND - 1))

here="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
top="$(dirname "$here")"
toolkit="$top/toolkit"
dest="$PWD"

os_field() {
    # One field of /etc/os-release, unquoted.
    [ -r /etc/os-release ] || return 0
    sed -n "s/^$1=//p" /etc/os-release | tr -d "\"'" | head -n 1
}

# GDRCopy's distribution tag: el<N> on RHEL and its rebuilds, else
# <ID>-<VERSION_ID> from /etc/os-release.
host_tag=""
for file in /etc/redhat-release /etc/centos-release; do
    if [ -r "$file" ]; then
        major="$(sed -n 's/.*release \([0-9][0-9]*\).*/\1/p' "$file" | head -n 1)"
        [ -z "$major" ] || host_tag=".el$major"
        break
    fi
done
if [ -z "$host_tag" ] && [ -n "$(os_field ID)" ]; then
    host_tag=".$(os_field ID)-$(os_field VERSION_ID)"
fi

family=rhel
case " $(os_field ID) $(os_field ID_LIKE) " in
    *suse*) family=suse ;;
esac
# The release the toolkit builds for (its glibc, Python and dist tag): this
# host's where the toolkit knows it, else the family's default (on a Debian
# or Ubuntu host: el9).
release=""
case "$family$host_tag" in
    rhel.el8 | rhel.el9 | rhel.el10) release="${host_tag#.}" ;;
    suse*) [ "$(os_field VERSION_ID | cut -d. -f1)" != 15 ] || release=sle15 ;;
esac
# The files are named for the release they are for: GDRCopy's tag where this
# host is of that release, else the release's own (el9, sle15), never the
# build host's (a Debian host's packages are el9's, not debian-12's).
if [ -n "$release" ]; then
    tag="$host_tag"
else
    release="$([ "$family" = suse ] && echo sle15 || echo el9)"
    tag=".$release"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

args=(build-rpm --release "$release" --no-lint --output "$work")
if [ "$with_kmod" = 1 ]; then
    # The running kernel's module: refused, with what to do, where that
    # kernel is not one of the release's or its devel tree is missing.
    args+=(--kernel "$(uname -r)")
    [ -z "${NVIDIA_SRC_DIR:-}" ] || args+=(--nvidia-src-dir "$NVIDIA_SRC_DIR")
else
    args+=(--no-kmod)
fi
# The toolkit installs build dependencies with apt; elsewhere they are the host's.
command -v dpkg-query >/dev/null 2>&1 || args+=(--no-deps)
echo "+ $toolkit ${args[*]}"
env -u CUDA "$toolkit" "${args[@]}"

shopt -s nullglob
rpms=()
for rpm in "$work"/*.rpm "$work"/*/*.rpm; do
    # debug/: the -debuginfo packages, kept in dist/debug/ with the toolkit's names.
    case "$rpm" in "$work"/debug/*) mkdir -p "$top/dist/debug" && cp -p "$rpm" "$top/dist/debug/" ;; *) rpms+=("$rpm") ;; esac
done
if [ ${#rpms[@]} = 0 ]; then
    echo "build-rpm-packages.sh: the toolkit built no .rpm" >&2
    exit 1
fi
mkdir -p "$top/dist"
for rpm in "${rpms[@]}"; do
    name="$(basename "$rpm" .rpm)"
    cp -p "$rpm" "$top/dist/"
    arch="${name##*.}"
    nvr="${name%.*}"
    # The toolkit's own dist tag (.el9, .sle15) gives way to GDRCopy's, after "dkms".
    nvr="$(printf '%s\n' "$nvr" | sed -E 's/\.(el[0-9]+|sle[0-9]+)$//')"
    case "$nvr" in
        gdrcopy-kmod-[0-9]*-*-*) ;; # a prebuilt module package: gdrcopy-kmod-<kver>-...
        gdrcopy-kmod-*) nvr="${nvr}dkms" ;;
        # GDRCopy's -devel is noarch (ours holds libdir's pkg-config and CMake files).
        gdrcopy-devel-*) arch=noarch ;;
    esac
    ref="$nvr$tag.$arch.rpm"
    cp -p "$rpm" "$dest/$ref"
    echo "$dest/$ref"
done
