#!/bin/sh
# SPDX-License-Identifier: MIT
# Why a GDR_PIN_FLAG_FORCE_PCIE pin fails, end to end through the real gdrdrv
# and libgdrapi, inside the VM (tests/python/test_in_vm.py), with softgpu and
# gdrdrv loaded by the harness (dbg_enabled=1, persistent pins):
#   - the NVIDIA driver (softgpu) refuses the forced pin once (fail_nth=1,
#     fail_errno=524, the real driver's ENOTSUPP): ENXIO, and the log says
#     the range pins without the flag; nothing stays pinned;
#   - nothing refuses: the forced pin works (the fallback is not needed);
#   - gdrdrv reloaded with use_persistent_mapping=0: ENOPROTOOPT, and the log
#     names the module parameter; a pin without the flag still works.
# gdrcopy_copybw -F pins with the flag and reports the errno's text.
#
# Prints "force-pcie: CHECK <what>: ok|FAILED" per check and a last line
# "force-pcie: N passed, N failed"; exits 0 only when all passed.

set -u
sg=/sys/module/softgpu/parameters
refcount=/proc/driver/gdrdrv/nv_get_pages_refcount
passed=0
failed=0
out=$(mktemp)

check() {
	what=$1
	shift
	if "$@"; then
		echo "force-pcie: CHECK $what: ok"
		passed=$((passed + 1))
	else
		echo "force-pcie: CHECK $what: FAILED"
		sed 's/^/force-pcie:   /' "$out" | tail -n 15
		failed=$((failed + 1))
	fi
}

# copybw ARGS...: run it with the library's log on, output in $out; its status.
copybw() {
	GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=4 gdrcopy_copybw -s 64K -w 5 -r 5 "$@" >"$out" 2>&1
}

fails_with() {	# fails_with TEXT ARGS...: copybw ARGS fails and says TEXT
	text=$1
	shift
	! copybw "$@" && grep -qF -- "$text" "$out"
}

succeeds_saying() {	# succeeds_saying TEXT ARGS...
	text=$1
	shift
	copybw "$@" && grep -qF -- "$text" "$out"
}

no_pins_left() { [ "$(cat "$refcount")" = 0 ]; }

echo 524 >"$sg/fail_errno"
echo 1 >"$sg/fail_nth"
check "NVIDIA driver refuses the forced pin: ENXIO" fails_with "No such device or address" -F
check "... and the log says the range pins without the flag" \
	grep -qF "although it pins the range without GDR_PIN_FLAG_FORCE_PCIE" "$out"
check "... and nothing stays pinned" no_pins_left
echo 0 >"$sg/fail_nth"
echo 12 >"$sg/fail_errno"

check "forced pin accepted when nothing refuses" succeeds_saying "use force pcie: yes" -F

rmmod gdrdrv && modprobe gdrdrv dbg_enabled=1 use_persistent_mapping=0
check "gdrdrv reloaded with legacy pins" grep -qF "Use persistent mapping: no" /proc/driver/gdrdrv/params
check "legacy pins: ENOPROTOOPT" fails_with "Protocol not available" -F
check "... and the log names the module parameter" grep -qF "use_persistent_mapping=1" "$out"
check "... and the fallback, flags 0, works" succeeds_saying "use force pcie: no"
rmmod gdrdrv && modprobe gdrdrv dbg_enabled=1

rm -f "$out"
echo "force-pcie: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
