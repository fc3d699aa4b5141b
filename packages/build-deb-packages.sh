#!/bin/bash
# packages/build-deb-packages.sh: GDRCopy's script of this name, for
# automation written for GDRCopy 2.6 (same options, same file names).
# The packages are built by `./toolkit build-deb` (packages/gdrcopy.yaml,
# templates/), exactly as `./toolkit build-packages` builds them; this script
# only maps the options and names the results.
#
# Results:
#   dist/<package>_<version>_<arch>.deb          the toolkit's names
#   ./<package>_<version>_<arch>.<Distro><Release>.deb   GDRCopy's names, in the
#       current directory: <Distro><Release> from lsb_release (Debian12,
#       Ubuntu22_04; no suffix without lsb_release), gdrcopy-tests also with
#       +cuda<major>.<minor> when CUDA names a toolkit, and <arch> the host's
#       for the Architecture: all packages too (GDRCopy's are per-architecture).
set -euo pipefail

usage() {
    cat <<EOF
Usage: [CUDA=<path>] $0 [-d] [-t] [-k] [-h]

Builds gdrdrv-dkms, libgdrapi, gdrcopy-tests and gdrcopy (.deb) with
./toolkit build-deb, into dist/, and copies them here under GDRCopy's names.

  CUDA=<path>  a CUDA toolkit (e.g. /usr/local/cuda); optional: the programs
               build without one.  Its version is added to the gdrcopy-tests
               file name (+cudaX.Y), as GDRCopy does.
  -d           do not install or check the build dependencies
  -t           leave gdrcopy-tests out of the results here
  -k           leave gdrdrv-dkms out of the results here
  -h           this help
EOF
}

check_deps=1
want_tests=1
want_dkms=1
OPTIND=1
while getopts "hdtk" opt; do
    case "$opt" in
        h)
            usage
            exit 0
            ;;
        d) check_deps=0 ;;
        t) want_tests=0 ;;
        k) want_dkms=0 ;;
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

# CUDA only names the tests package; the build itself never uses a CUDA
# toolkit (the programs take libcuda.so.1 from the driver at run time).
cuda_suffix=""
if [ -n "${CUDA:-}" ]; then
    cuda_version=""
    if [ -x "$CUDA/bin/nvcc" ]; then
        cuda_version="$("$CUDA/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)"
    elif [ -r "$CUDA/version.json" ]; then
        cuda_version="$(grep -A2 '"cuda"' "$CUDA/version.json" | sed -n 's/.*"version" *: *"\([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)"
    fi
    if [ -n "$cuda_version" ]; then
        cuda_suffix="+cuda$cuda_version"
    else
        echo "note: no CUDA toolkit version found under CUDA=$CUDA; gdrcopy-tests gets no +cuda suffix" >&2
    fi
fi

# GDRCopy's distribution suffix: lsb_release's ID and release, or none.
release=""
if command -v lsb_release >/dev/null 2>&1; then
    release=".$(lsb_release -is | tr ' ' _)$(lsb_release -rs | tr . _)"
fi
arch="$(dpkg --print-architecture)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

args=(build-deb --no-kmod --no-lint --output "$work")
[ "$check_deps" = 1 ] || args+=(--no-deps)
echo "+ $toolkit ${args[*]}"
env -u CUDA "$toolkit" "${args[@]}"

shopt -s nullglob
debs=("$work"/*.deb)
if [ ${#debs[@]} = 0 ]; then
    echo "build-deb-packages.sh: the toolkit built no .deb" >&2
    exit 1
fi
mkdir -p "$top/dist"
for deb in "${debs[@]}"; do
    name="$(basename "$deb" .deb)"
    cp -p "$deb" "$top/dist/"
    package="${name%%_*}"
    case "$package" in
        gdrcopy-tests) [ "$want_tests" = 1 ] || continue ;;
        gdrdrv-dkms) [ "$want_dkms" = 1 ] || continue ;;
    esac
    ref="${name%_all}"
    [ "$ref" = "$name" ] || ref="${ref}_$arch"
    ref="$ref$release"
    if [ "$package" = gdrcopy-tests ] && [ -n "$cuda_suffix" ]; then
        cp -p "$deb" "$dest/$ref$cuda_suffix.deb"
        echo "$dest/$ref$cuda_suffix.deb"
    fi
    cp -p "$deb" "$dest/$ref.deb"
    echo "$dest/$ref.deb"
done
