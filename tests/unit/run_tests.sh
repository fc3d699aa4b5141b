#!/bin/sh
# Run the unit test programs and the ABI checks; print "N passed, N failed"
# last and exit non-zero on any failure.  Usage: run_tests.sh BUILD_DIR TEST...
set -u
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
lib="$here/../../libgdrapi"
passed=0
failed=0

# One cmocka program, TAP output: count its "ok" and "not ok" lines; a crash is a failure.
run_one() {
	name=$1
	out="$build/$name.tap"
	err="$build/$name.stderr"
	CMOCKA_MESSAGE_OUTPUT=TAP "$build/$name" >"$out" 2>"$err"
	rc=$?
	ok=$(grep -c '^ok ' "$out")
	skipped=$(grep -c '^not ok .*# SKIP' "$out")
	bad=$(grep '^not ok ' "$out" | grep -vc '# SKIP')
	planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$out" | head -n1)
	grep '^not ok ' "$out" | sed "s/^/$name: /"
	planned=$((${planned:-0} - skipped))
	if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
		echo "$name: exited with status $rc after $ok passing tests (crash?); see $err"
		bad=$((bad + 1))
	fi
	if [ -n "$planned" ] && [ $((ok + bad)) -lt "$planned" ]; then
		echo "$name: only $((ok + bad)) of $planned tests reported"
		bad=$((bad + planned - ok - bad))
	fi
	[ "$bad" -ne 0 ] && grep -v '^ok ' "$out" | head -n 40
	[ "$bad" -ne 0 ] && tail -n 40 "$err"
	echo "$name: $ok passed, $bad failed, $skipped skipped"
	passed=$((passed + ok))
	failed=$((failed + bad))
}

# check NAME EXPECTED COMMAND...: the command's output must be exactly EXPECTED.
check() {
	name=$1
	expected=$2
	shift 2
	got=$("$@" 2>&1)
	if [ "$got" = "$expected" ]; then
		passed=$((passed + 1))
		echo "abi: ok - $name"
	else
		failed=$((failed + 1))
		echo "abi: not ok - $name"
		echo "  expected: $expected"
		echo "  got:      $got"
	fi
}

for t in "$@"; do
	run_one "$t"
done

ours="version 2.6 type Write Combining v1 22 v2 22"
stub="version 0.0 type stub v1 111 v2 222"
check "program linked against the unversioned stand-in runs on the stand-in" "$stub" \
	env LD_LIBRARY_PATH="$build/abi/ref" "$build/abi/app_ref"
check "program linked against the unversioned stand-in binds every symbol, gdr_get_info (v1) included, to ours" "$ours" \
	env LD_LIBRARY_PATH="$lib/build" "$build/abi/app_ref"
check "program linked against ours runs on an unversioned library" "$stub" \
	env LD_LIBRARY_PATH="$build/abi/ref" "$build/abi/app_ours"
check "program linked against ours runs on ours" "$ours" \
	env LD_LIBRARY_PATH="$lib/build" "$build/abi/app_ours"
# Exactly the symbols (and versions) of libgdrapi.symbols, nothing internal.
expected_symbols=$(sed -n 's/^ \([^ ]*\) .*/\1/p' "$lib/libgdrapi.symbols" | sort | tr '\n' ' ')
exported_symbols() {
	nm -D --defined-only "$1" | awk '$2 == "T" || $2 == "A" {
		name = $3
		if ($2 == "A") { name = name "@" name }
		else if (name ~ /@@/) { sub(/@@/, "@", name) } else if (name !~ /@/) { name = name "@Base" }
		print name }' | sort | tr '\n' ' '
}
check "exported symbols are exactly libgdrapi.symbols" "$expected_symbols" \
	exported_symbols "$lib/build/libgdrapi.so.2"
soname_and_deps() {
	soname=$(readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	if readelf -d "$1" | grep -q 'NEEDED.*libcuda'; then deps=libcuda-linked; else deps=no-libcuda; fi
	echo "$soname $deps"
}
check "soname is libgdrapi.so.2 and libcuda is not linked" "libgdrapi.so.2 no-libcuda" \
	soname_and_deps "$lib/build/libgdrapi.so.2"
needed_versions() {
	readelf -V "$1" | awk '/File: libgdrapi/ {f = 1; next} /File:/ {f = 0} f && /Name:/ {print $3}' | tr '\n' ' '
	echo "."
}
check "a program using only the 2.6 interface needs no symbol version from us" "." \
	needed_versions "$build/abi/app_ours"
check "a program using the copy-engine extension needs GDRAPI_2.6.1" "GDRAPI_2.6.1 ." \
	needed_versions "$build/abi/app_ext"
check "the extension works on ours" "copied 7" env LD_LIBRARY_PATH="$lib/build" "$build/abi/app_ext"
# On a library without it: a clean symbol-lookup error, not an ld.so assertion.
ext_on_reference() {
	env LD_LIBRARY_PATH="$build/abi/ref" "$build/abi/app_ext" 2>&1 | grep -o 'undefined symbol: gdr_copy_to_mapped_memory, version GDRAPI_2.6.1'
}
check "the extension on an older library fails with a clear lookup error" \
	"undefined symbol: gdr_copy_to_mapped_memory, version GDRAPI_2.6.1" ext_on_reference

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
