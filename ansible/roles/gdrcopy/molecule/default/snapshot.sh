#!/bin/sh
# snapshot.sh FILE: every path of the root file system with its type and mode,
# sorted, into FILE; what changes with any install (package lists, caches,
# logs, dpkg's own state) left out, so two snapshots differ only by what an
# install or removal left behind.  Also left out: DKMS's own signing key,
# which dkms makes at its first build of any module and keeps (it signs every
# DKMS module and may be enrolled for Secure Boot: not ours to remove).
set -eu
out=$1
find / -xdev \
	\( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp -o -path /var/tmp \
	-o -path /var/cache -o -path /var/lib/apt -o -path /var/log -o -path /var/lib/dpkg \
	-o -path /root/.ansible -o -path /var/lib/systemd \) -prune \
	-o -path '/var/lib/dkms/mok.*' -prune \
	-o -printf '%y %m %p\n' | LC_ALL=C sort >"$out.new"
mv "$out.new" "$out"
