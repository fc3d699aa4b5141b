#!/bin/sh
# check-symbols.sh LIB LIST: fail unless LIB defines every symbol in LIST,
# every function include/cuda.h declares (under the name it maps to), and
# nothing but cu* names.
set -eu
lib=$1
list=$2
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "W" { print $3 }' | sort -u >"$tmp/defined"

grep -v '^#' "$list" | grep -v '^$' | sort -u >"$tmp/required"

# What a program compiled against our cuda.h imports when it uses every function.
python3 "$here/tools/gen-cudah-check.py" "$tmp" >/dev/null
${CC:-cc} -I"$here/include" -c "$tmp/symbols.c" -o "$tmp/symbols.o"
nm -u "$tmp/symbols.o" | awk '{ print $2 }' | sort -u >"$tmp/header"

status=0
missing=$(comm -23 "$tmp/required" "$tmp/defined")
if [ -n "$missing" ]; then
	echo "check-symbols: $lib lacks entry points listed in $list:" >&2
	echo "$missing" | sed 's/^/  /' >&2
	status=1
fi
missing=$(comm -23 "$tmp/header" "$tmp/defined")
if [ -n "$missing" ]; then
	echo "check-symbols: $lib lacks entry points that include/cuda.h declares:" >&2
	echo "$missing" | sed 's/^/  /' >&2
	status=1
fi
extra=$(nm -D --defined-only "$lib" | awk '{ print $3 }' | grep -v '^cu' || true)
if [ -n "$extra" ]; then
	echo "check-symbols: $lib exports non-CUDA symbols (fix the visibility):" >&2
	echo "$extra" | sed 's/^/  /' >&2
	status=1
fi
if [ $status -eq 0 ]; then
	echo "check-symbols: OK: $(wc -l <"$tmp/required") listed and $(wc -l <"$tmp/header") header entry points defined; $(wc -l <"$tmp/defined") exported, all cu*"
fi
exit $status
