# shellcheck shell=bash
# Reading modules' P2P symbol versions, for the scripts that judge gdrdrv
# against a real NVIDIA driver (gdrkit/matrix/real_nvidia.sh,
# tests/realnvidia/gdrdrv_beside_nvidia.sh).  Sourced; the caller sets $tmp
# (a scratch directory) and defines ok and fail (one line each to the report).
: "${tmp:?module_crcs.sh is sourced after tmp names a scratch directory}"

# An uncompressed copy of a module file (trixie's modules are .ko.xz).
plain_ko() {
	local ko=$1 out
	out=$tmp/$(basename "${ko%.xz}")
	out=${out%.zst}
	case $ko in
	*.xz) xz -dc "$ko" >"$out" ;;
	*.zst) zstd -q -dc "$ko" >"$out" ;;
	*) cp "$ko" "$out" ;;
	esac
	echo "$out"
}

# "symbol 0xcrc" for each nvidia_p2p_* a module exports.  Since Linux 5.19 a
# __crc_ symbol is the CRC's offset in __kcrctab; before, its value was the CRC.
exported_crcs() {
	local ko=$1 value type sym crc
	objcopy -O binary --only-section=__kcrctab "$ko" "$tmp/kcrctab"
	nm "$ko" | awk '$3 ~ /^__crc_nvidia_p2p_/ {print $1, $2, substr($3, 7)}' |
		while read -r value type sym; do
			if [ "$type" = A ]; then
				crc=$value
			else
				crc=$(od -An -tx4 -j $((16#$value)) -N4 "$tmp/kcrctab" | tr -d ' \n')
			fi
			printf '%s 0x%08x\n' "$sym" $((16#$crc))
		done | sort
}

# "symbol 0xcrc" for each nvidia_p2p_* a module imports (its __versions).
imported_crcs() {
	modprobe --dump-modversions "$1" | awk '$2 ~ /^nvidia_p2p_/ {print $2, $1}' |
		while read -r sym crc; do printf '%s 0x%08x\n' "$sym" $((crc)); done | sort
}

# The verdict on gdrdrv.ko's nvidia_p2p_* imports against the real nvidia.ko's
# exports: a table, then one ok or fail line starting with $3 (may be empty).
# Fewer than 3 imported CRCs fails too: a module built without modversions
# would otherwise pass by comparing nothing.
compare_p2p_crcs() {
	local gko=$1 nko=$2 what=${3:+$3: } sym crc real verdict bad=0 count
	imported_crcs "$gko" >"$tmp/imports"
	exported_crcs "$(plain_ko "$nko")" >"$tmp/exports"
	printf '%-34s %-12s %-12s %s\n' symbol gdrdrv.ko nvidia.ko verdict
	while read -r sym crc; do
		real=$(awk -v s="$sym" '$1 == s {print $2}' "$tmp/exports")
		verdict=same
		[ "$crc" = "$real" ] || { verdict=DIFFERENT; bad=$((bad + 1)); }
		printf '%-34s %-12s %-12s %s\n' "$sym" "$crc" "${real:-missing}" "$verdict"
	done <"$tmp/imports"
	count=$(wc -l <"$tmp/imports")
	if [ "$count" -lt 3 ]; then
		fail "${what}gdrdrv.ko imports only $count nvidia_p2p_* symbols with a CRC"
	elif [ "$bad" -ne 0 ]; then
		fail "${what}$bad of $count nvidia_p2p_* CRCs differ from the real nvidia.ko's"
	else
		ok "${what}all $count nvidia_p2p_* CRCs equal the real nvidia.ko's exports"
	fi
}
