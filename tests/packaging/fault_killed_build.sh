#!/bin/bash
# Fault (a): the DKMS build of gdrdrv is killed half way through
# `apt-get install` of the DKMS set; the documented recovery must end in a
# fully installed, consistent state.
#
#   fault_killed_build.sh compiler|everything VERSION KERNEL
#
# compiler:   only the compiler working on gdrdrv.c is killed (an OOM kill):
#             the postinst fails, gdrdrv-dkms is left half-configured, and
#             `apt-get -f install` recovers.
# everything: apt-get and every process under it (dpkg, the postinst, dkms,
#             make, the compiler) are killed at once, as by a lost session or
#             power: `dpkg --configure -a` recovers.
#
# Runs as root in a container of the fault image, the packages in /pkgs/new.
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"
declare_nvidia_target

mode=$1
version=$2
kernel=$3
build_dir=/var/lib/dkms/$MODULE/$version/build
debs_in /pkgs/new
debs=("${DEBS[@]}")

check "apt-get install of ${DKMS_SET[*]} starts; the gdrdrv build gets killed half way ($mode)"
apt-get install -y --no-install-recommends "${debs[@]}" >/tmp/apt.log 2>&1 &
apt_pid=$!
compiler=$(wait_for_process "cc1 .*/$MODULE\.c( |$)" 600) || {
	cat /tmp/apt.log
	fail "the compiler never started on $MODULE.c"
}
# Freeze the compiler the moment it is seen: on a fast machine it finishes
# gdrdrv.c within a second, and a kill after it exited kills nothing.
kill -STOP "$compiler" 2>/dev/null || {
	cat /tmp/apt.log
	fail "the compiler on $MODULE.c (pid $compiler) exited before it could be stopped: poll faster"
}
case "$mode" in
compiler)
	kill -KILL "$compiler"
	echo "killed the compiler (pid $compiler)"
	;;
everything)
	# Freeze the whole tree first (until no new process appears in it), so
	# that nothing forks, exits or reaps in between; then kill it at once.
	frozen=("$apt_pid")
	kill -STOP "$apt_pid"
	while :; do
		read -r -a tree <<<"$(descendants "$apt_pid" | tr '\n' ' ')"
		[ "${#tree[@]}" != "$((${#frozen[@]} - 1))" ] || break
		kill -STOP "${tree[@]}" 2>/dev/null || true
		frozen=("$apt_pid" "${tree[@]}")
	done
	kill -KILL "${frozen[@]}" 2>/dev/null || true
	echo "killed apt-get and its ${#tree[@]} descendants: ${tree[*]}"
	;;
*)
	fail "unknown mode $mode"
	;;
esac
status=0
wait "$apt_pid" || status=$?
cat /tmp/apt.log

check "the install did not complete (apt-get status $status) and the build stopped half way"
[ "$status" != 0 ] || fail "apt-get succeeded although its build was killed"
[ ! -e "$build_dir/$MODULE.ko" ] || fail "$MODULE.ko was built before the kill: not half way"
expect_gone "cc1 .*/$MODULE\.c( |$)" 30
echo "make.log at the kill: $(wc -l <"$build_dir/make.log" 2>/dev/null || echo 0) lines"
state=$(package_state gdrdrv-dkms)
echo "gdrdrv-dkms is '$state'; dpkg --audit says:"
dpkg --audit || true
case "$state" in
"iF "* | "iU "* | "iH "*) ;;
*) fail "gdrdrv-dkms is '$state', expected half-configured or unpacked" ;;
esac
if [ "$mode" = compiler ]; then
	check "the postinst said what failed and how to recover"
	grep -F "$MODULE: the DKMS build of $MODULE $version failed or was interrupted" /tmp/apt.log
	grep -F "then run: dpkg --configure -a" /tmp/apt.log

	check "apt-get -f install recovers"
	apt-get -f install -y 2>&1 | tee /tmp/recover.log
else
	check "dpkg --configure -a recovers"
	dpkg --configure -a 2>&1 | tee /tmp/recover.log
	check "apt-get -f install then has nothing left to do"
	apt-get -f install -y 2>&1 | tee -a /tmp/recover.log
	grep -E '^0 upgraded, 0 newly installed, 0 to remove' /tmp/recover.log
fi
expect_installed "$version" "$kernel"
echo SCENARIO PASSED
