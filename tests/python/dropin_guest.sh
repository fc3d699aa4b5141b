#!/bin/bash
# Runs inside a test VM (tests/python/test_dropin.py), with softgpu and gdrdrv
# loaded and the tree built in /src: GDRCopy's ./insmod.sh and the RPMs'
# service script, as automation written for GDRCopy calls them.
#   dropin_guest.sh SERVICE_SCRIPT
# Prints one "CHECK: ..." line per step and exits non-zero on the first failure.
set -euo pipefail
service="$1"

fail() {
    echo "FAILED: $*"
    exit 1
}
param() {
    cat "/sys/module/gdrdrv/parameters/$1"
}
node_mode() {
    stat -c %a /dev/gdrdrv
}

cd /src

# insmod.sh: unloads the loaded gdrdrv, loads the tree's with GDRCopy's parameters, node 0666.
./insmod.sh
[ -d /sys/module/gdrdrv ] || fail "insmod.sh: gdrdrv is not loaded"
[ "$(param dbg_enabled)" = 0 ] || fail "insmod.sh: dbg_enabled=$(param dbg_enabled)"
[ "$(param use_persistent_mapping)" = 1 ] || fail "insmod.sh: use_persistent_mapping=$(param use_persistent_mapping)"
[ "$(node_mode)" = 666 ] || fail "insmod.sh: /dev/gdrdrv has mode $(node_mode)"
echo "CHECK: insmod.sh reloaded gdrdrv (dbg_enabled=0 use_persistent_mapping=1), /dev/gdrdrv mode $(node_mode)"

GDRDRV_NODE_MODE=0660 ./insmod.sh info_enabled=1
[ "$(node_mode)" = 660 ] || fail "insmod.sh with GDRDRV_NODE_MODE=0660: mode $(node_mode)"
[ "$(param info_enabled)" = 1 ] || fail "insmod.sh: the extra parameter info_enabled=1 was not passed"
echo "CHECK: insmod.sh again: GDRDRV_NODE_MODE=0660 gives mode $(node_mode), extra parameters reach the module"

# The service script: status, stop, status, start, restart.
"$service" status || fail "status with gdrdrv loaded exited $?"
"$service" stop || fail "stop exited $?"
[ ! -d /sys/module/gdrdrv ] || fail "stop left gdrdrv loaded"
[ ! -e /dev/gdrdrv ] || fail "stop left /dev/gdrdrv"
status=0
"$service" status || status=$?
[ "$status" = 3 ] || fail "status with gdrdrv unloaded exited $status, not 3"
echo "CHECK: gdrcopy stop unloaded gdrdrv and its node; status then exits 3"
"$service" start || fail "start exited $?"
[ -c /dev/gdrdrv ] || fail "start: no /dev/gdrdrv"
echo "CHECK: gdrcopy start loaded $(modinfo -n gdrdrv) by modprobe, /dev/gdrdrv mode $(node_mode)"
"$service" restart || fail "restart exited $?"
"$service" status || fail "status after restart exited $?"
echo "CHECK: gdrcopy restart and status pass"
