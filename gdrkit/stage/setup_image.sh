#!/bin/bash
# Prepare a matrix image: install what building, linting and installing our
# packages needs (the caller commits the container as the image).
#
# Usage: setup_image.sh [--scrub-built] [--refresh CMD] --install CMD
#                       [--repos PKGS] [--clean CMD] -- PACKAGE...
#   --scrub-built  remove what vm-test built and installed in a suite root:
#                  the image must hold only packages
#   --refresh      refresh the package lists first (words of one command)
#   --install      the package manager's install command (words)
#   --repos        packages that enable further repositories: installed, and
#                  the install retried, when the first install fails
#   --clean        drop downloaded package files afterwards (words)
# CMD values are split on blanks; none of the families' verbs contain any.
set -euo pipefail

scrub=0 refresh=() install=() repos=() clean=()
while [ $# -gt 0 ]; do
	case $1 in
	--scrub-built) scrub=1; shift ;;
	--refresh) read -r -a refresh <<<"$2"; shift 2 ;;
	--install) read -r -a install <<<"$2"; shift 2 ;;
	--repos) read -r -a repos <<<"$2"; shift 2 ;;
	--clean) read -r -a clean <<<"$2"; shift 2 ;;
	--) shift; break ;;
	*) echo "setup_image.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
if [ ${#install[@]} = 0 ] || [ $# = 0 ]; then
	echo "usage: setup_image.sh [options] --install CMD -- PACKAGE..." >&2
	exit 2
fi

if [ "$scrub" = 1 ]; then
	rm -rf /src /usr/local/lib/* /usr/local/bin/* /usr/local/include/* \
		/lib/modules/*/extra /lib/modules/*/kernel/drivers/misc/gdrdrv.ko*
	for k in /lib/modules/*; do
		[ -d "$k" ] && depmod -a "${k##*/}"
	done
fi
if [ ${#refresh[@]} -gt 0 ]; then
	"${refresh[@]}"
fi
if ! "${install[@]}" "$@"; then
	[ ${#repos[@]} -gt 0 ] || exit 1
	echo "setup_image.sh: installing ${repos[*]} for their repositories, then again" >&2
	"${install[@]}" "${repos[@]}"
	"${install[@]}" "$@"
fi
if [ ${#clean[@]} -gt 0 ]; then
	"${clean[@]}"
fi
