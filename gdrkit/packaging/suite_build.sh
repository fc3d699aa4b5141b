#!/bin/sh
# Build (or lint) .deb packages inside a Debian suite's root (gdrkit/packaging/suiteroot.py).
#
#   suite_build.sh outside ROOT WORKDIR build TREE EPOCH JOBS
#   suite_build.sh outside ROOT WORKDIR lint
#
# "outside" runs on the build host in a private mount namespace (unshare):
# WORKDIR is bind-mounted at /build of ROOT, /proc mounted, and this script
# runs again "inside", chrooted, with a clean environment.  The mounts go
# with the namespace, whatever happens.  "build": dpkg-buildpackage in
# /build/TREE, the packages land in /build.  "lint": that suite's lintian
# on /build/*.deb (its report on stdout; exit 0 whatever it finds).
set -eu

mode=$1
shift
case "$mode" in
outside)
    root=$1
    work=$2
    shift 2
    mkdir -p "$root/build"
    mount --bind "$work" "$root/build"
    mount -t proc proc "$root/proc"
    cp "$0" "$work/.suite_build.sh"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 TZ=UTC \
        /bin/sh /build/.suite_build.sh inside "$@"
    ;;
inside)
    action=$1
    shift
    case "$action" in
    build)
        tree=$1
        SOURCE_DATE_EPOCH=$2
        jobs=$3
        DEB_BUILD_OPTIONS="parallel=$jobs nocheck"
        export SOURCE_DATE_EPOCH DEB_BUILD_OPTIONS
        cd "/build/$tree"
        dpkg-buildpackage -b -us -uc --no-sign "-j$jobs"
        ;;
    lint)
        lintian --version
        suppress=""
        [ ! -f /build/.lintian-suppress ] || suppress="--suppress-tags-from-file /build/.lintian-suppress"
        # shellcheck disable=SC2086 # $suppress is empty or two words
        lintian --no-tag-display-limit $suppress /build/*.deb || true
        ;;
    *)
        echo "suite_build.sh: unknown action $action" >&2
        exit 2
        ;;
    esac
    ;;
*)
    echo "usage: suite_build.sh outside ROOT WORKDIR build TREE EPOCH JOBS | outside ROOT WORKDIR lint" >&2
    exit 2
    ;;
esac
