#!/bin/sh
# snapshot.sh FILE: every path of the root file system with its type and mode,
# sorted, into FILE; what changes with any install (package lists, caches,
# logs, dpkg's own state) left out, so two snapshots differ only by what an
# install or removal left behind.
set -eu
out=$1
find / -xdev \
	\( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp -o -path /var/tmp \
	-o -path /var/cache -o -path /var/lib/apt -o -path /var/log -o -path /var/lib/dpkg \
	-o -path /root/.ansible -o -path /var/lib/systemd \) -prune \
	-o -printf '%y %m %p\n' | LC_ALL=C sort >"$out.new"
mv "$out.new" "$out"
