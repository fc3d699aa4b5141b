#!/bin/bash
# The compile sweep, in a matrix container: install kernel-headers packages
# one by one and compile gdrdrv (from /src) against each headers tree that
# appears.  Prints `GDRKIT-SWEEP <kernel> <status>`: 0 built, 1 failed to
# build (the build log's tail first), 2 the headers would not install.
#
# Usage: compile_sweep.sh [--refresh CMD] --list CMD
#        compile_sweep.sh [--refresh CMD] --install CMD --trees GLOB -- PACKAGE...
#   --refresh  refresh the package lists first (words of one command)
#   --list     only print what this command (words) lists: the headers packages on offer
#   --install  the package manager's install command (words)
#   --trees    the glob where installed headers trees appear
set -u

refresh=() list=() install=() trees=""
while [ $# -gt 0 ]; do
	case $1 in
	--refresh) read -r -a refresh <<<"$2"; shift 2 ;;
	--list) read -r -a list <<<"$2"; shift 2 ;;
	--install) read -r -a install <<<"$2"; shift 2 ;;
	--trees) trees=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "compile_sweep.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

if [ ${#refresh[@]} -gt 0 ]; then
	"${refresh[@]}" >/dev/null
fi
if [ ${#list[@]} -gt 0 ]; then
	exec "${list[@]}"
fi
if [ ${#install[@]} = 0 ] || [ -z "$trees" ]; then
	echo "usage: compile_sweep.sh [--refresh CMD] --install CMD --trees GLOB -- PACKAGE..." >&2
	exit 2
fi

built=" "
for package in "$@"; do
	if ! "${install[@]}" "$package" >/tmp/install.log 2>&1; then
		echo "GDRKIT-SWEEP $package 2"
		continue
	fi
	# The glob is meant to expand here: every headers tree installed so far.
	# shellcheck disable=SC2086
	for tree in $trees; do
		[ -d "$tree" ] || continue
		case $built in *" $tree "*) continue ;; esac
		built="$built$tree "
		kver=$(cat "$tree/include/config/kernel.release" 2>/dev/null) || kver=$tree
		make -C /src/gdrdrv clean >/dev/null 2>&1
		# No NVIDIA driver in the sweep's containers: name the target (the
		# open flavour, page table 2.x), or gdrdrv's make refuses to guess.
		if make -C /src/gdrdrv KVER="$kver" KDIR="$tree" NVIDIA_IS_OPENSOURCE=y GDRDRV_P2P_PT_MAJOR=2 \
			>/tmp/build.log 2>&1; then
			echo "GDRKIT-SWEEP $kver 0"
		else
			tail -n 20 /tmp/build.log
			echo "GDRKIT-SWEEP $kver 1"
		fi
	done
done
