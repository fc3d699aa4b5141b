# shellcheck shell=bash
# Shared by the package fault scenarios (sourced by each; bash).
#
# Every scenario prints `CHECK: ...` before each thing it checks, stops at the
# first failure with `FAILED: ...`, and ends with `SCENARIO PASSED`.  The
# checks of the final state are here, so that every scenario means the same
# thing by "consistent".

# The packages of a DKMS install (the prebuilt-module package conflicts with it).
DKMS_SET=(libgdrapi gdrcopy-tests gdrdrv-dkms gdrcopy)
MODULE=gdrdrv

check() { echo "CHECK: $*"; }

# The scenario images have no NVIDIA driver, and gdrdrv's make refuses to
# guess which one it is for (gdrdrv/Makefile): say it, as a node whose driver
# comes later would (the fix its error names), in DKMS's per-module file.
declare_nvidia_target() {
	[ -e /etc/dkms/gdrdrv.conf ] && return 0
	mkdir -p /etc/dkms
	# shellcheck disable=SC2016  # dkms expands ${MAKE[0]} when it reads the file
	echo 'MAKE[0]="${MAKE[0]} NVIDIA_IS_OPENSOURCE=y GDRDRV_P2P_PT_MAJOR=2"' >/etc/dkms/gdrdrv.conf
}
fail() {
	echo "FAILED: $*"
	exit 1
}

# Sets DEBS to the .deb files of the DKMS set in directory $1, one per package.
# (Arrays, not process substitution: the test VM has no /dev/fd.)
DEBS=()
debs_in() {
	local name file
	DEBS=()
	for name in "${DKMS_SET[@]}"; do
		file=$(compgen -G "$1/${name}_*.deb") || fail "no ${name}_*.deb in $1"
		DEBS+=("$file")
	done
}

# The .deb version of our release $1 (2.6.1 -> 2.6+dropin1-1): the scheme of
# gdrkit/version.py (package_version), release 1.  Versions of another
# shape (NVIDIA's 2.6) get just the release.
deb_version() {
	if [[ $1 =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]]; then
		echo "${BASH_REMATCH[1]}.${BASH_REMATCH[2]}+dropin${BASH_REMATCH[3]}-1"
	else
		echo "$1-1"
	fi
}

# The release a .deb version of ours is for (2.6+dropin1-1 -> 2.6.1): what DKMS
# and the module call it.  Other shapes lose just the Debian revision.
release_of_deb_version() {
	local upstream=${1%-*}
	if [[ $upstream =~ ^([0-9]+)\.([0-9]+)\+dropin([0-9]+)$ ]]; then
		echo "${BASH_REMATCH[1]}.${BASH_REMATCH[2]}.${BASH_REMATCH[3]}"
	else
		echo "$upstream"
	fi
}

# dpkg's status letters and version of package $1 ("ii 2.6+dropin1-1"), or "absent".
package_state() {
	dpkg-query -W -f='${db:Status-Abbrev}${Version}' "$1" 2>/dev/null | tr -s ' ' || echo absent
}

# pids of the processes whose command line matches the ERE $1 (none: empty).
pids_matching() {
	pgrep -f -- "$1" || true
}

# Wait up to $2 seconds for a process matching $1; print its pid.
wait_for_process() {
	local pattern=$1 seconds=$2 tick pid
	# Every 20 ms: short-lived processes (a compiler on one file) must be
	# caught while they run.
	for ((tick = 0; tick < seconds * 50; tick++)); do
		pid=$(pids_matching "$pattern" | head -n 1)
		if [ -n "$pid" ]; then
			echo "$pid"
			return 0
		fi
		sleep 0.02
	done
	return 1
}

# Wait up to $2 seconds until no process matches $1 (a killed process can
# take a while to exit on a loaded machine); fail if one still does.
expect_gone() {
	local pattern=$1 seconds=$2 tick
	for ((tick = 0; tick < seconds * 10; tick++)); do
		[ -n "$(pids_matching "$pattern")" ] || return 0
		sleep 0.1
	done
	fail "still running ${seconds} s after the kill: $(pgrep -f -- "$pattern" | xargs -r ps -o pid=,stat=,args= -p)"
}

# Every descendant of pid $1 (children first found, depth first).
descendants() {
	local child
	for child in $(pgrep -P "$1" || true); do
		echo "$child"
		descendants "$child"
	done
}

# The DKMS set of version $1 is installed and configured, and DKMS has built
# and installed gdrdrv $1 for kernel $2 and for nothing else; the module that
# modprobe would load for $2 is that one, and reports version $3 (default $1).
expect_installed() {
	local version=$1 kernel=$2 module_version=${3:-$1} name state audit status path loaded_version
	check "dpkg has nothing half-installed or half-configured"
	audit=$(dpkg --audit)
	[ -z "$audit" ] || fail "dpkg --audit: $audit"
	check "the DKMS set is installed and configured at $version"
	for name in "${DKMS_SET[@]}"; do
		state=$(package_state "$name")
		[ "$state" = "ii $(deb_version "$version")" ] || fail "$name is '$state', not 'ii $(deb_version "$version")'"
	done
	check "dkms status lists exactly gdrdrv $version installed for $kernel"
	status=$(dkms status -m "$MODULE")
	echo "$status"
	[ "$status" = "$MODULE/$version, $kernel, $(uname -m): installed" ] || fail "dkms status: '$status'"
	check "only version $version in the DKMS tree and under /usr/src"
	[ "$(cd /var/lib/dkms/$MODULE && echo [0-9]*)" = "$version" ] || fail "DKMS tree: $(ls /var/lib/dkms/$MODULE)"
	[ "$(echo /usr/src/$MODULE-*)" = "/usr/src/$MODULE-$version" ] || fail "sources: $(echo /usr/src/$MODULE-*)"
	check "modprobe finds the DKMS-built gdrdrv $version for $kernel (depmod is current)"
	path=$(modinfo -k "$kernel" -n "$MODULE") || fail "modinfo -k $kernel $MODULE"
	loaded_version=$(modinfo -k "$kernel" -F version "$MODULE")
	echo "$path: version $loaded_version"
	case "$path" in
	/lib/modules/"$kernel"/updates/dkms/*) ;;
	*) fail "gdrdrv for $kernel is $path, not the DKMS-installed one" ;;
	esac
	[ "$loaded_version" = "$module_version" ] || fail "module version $loaded_version, not $module_version"
	[ "$(find /lib/modules -name "$MODULE.ko*" | wc -l)" = 1 ] || fail "module files: $(find /lib/modules -name "$MODULE.ko*")"
	check "no DKMS build is still running"
	[ -z "$(pids_matching 'cc1 .*gdrdrv|dkms (build|install)')" ] || fail "left running: $(pgrep -af 'cc1|dkms')"
}

# None of the DKMS set is installed and no trace of gdrdrv is left in DKMS
# or under /lib/modules.
expect_removed() {
	local audit name state
	check "dpkg has nothing half-installed or half-configured"
	audit=$(dpkg --audit)
	[ -z "$audit" ] || fail "dpkg --audit: $audit"
	check "gdrdrv-dkms and the meta package are gone; dkms knows no gdrdrv"
	for name in gdrdrv-dkms gdrcopy; do
		state=$(package_state "$name")
		case "$state" in
		absent | "un "* | "rc "* | "pn "*) ;;
		*) fail "$name is '$state'" ;;
		esac
	done
	[ -z "$(dkms status -m "$MODULE")" ] || fail "dkms status: $(dkms status -m "$MODULE")"
	[ ! -e /var/lib/dkms/$MODULE ] || fail "/var/lib/dkms/$MODULE is left"
	check "no gdrdrv module file, and no depmod index names one"
	[ -z "$(find /lib/modules -name "$MODULE.ko*")" ] || fail "left: $(find /lib/modules -name "$MODULE.ko*")"
	! grep -l "/$MODULE.ko" /lib/modules/*/modules.dep 2>/dev/null | grep -q . || fail "a modules.dep still names gdrdrv"
}

# Every path of the file system but the system's own churn (for leftovers).
snapshot() {
	find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /run \
		-o -path /var/cache -o -path /var/log -o -path /var/lib/apt -o -path /var/lib/dpkg \
		-o -path /root \) -prune -o -print | sort |
		grep -v -x -e /var/lib/dkms/mok.key -e /var/lib/dkms/mok.pub |
		grep -v -E '^(/usr)?/lib/modules/[^/]+/modules\.[a-z.]+$'
	# Not leftovers: dkms's signing key pair (made at its first build and
	# kept) and depmod's indexes (expect_removed checks they name no gdrdrv).
}

# After `snapshot > $1`: fail on any path that is new since then.
expect_no_leftovers() {
	snapshot >/tmp/after
	comm -13 "$1" /tmp/after >/tmp/leftovers || true
	check "no path left behind ($(wc -l <"$1") paths compared, $(wc -l </tmp/leftovers) new)"
	cat /tmp/leftovers
	[ ! -s /tmp/leftovers ] || fail "left behind: $(head -n 5 /tmp/leftovers | tr '\n' ' ')"
}
