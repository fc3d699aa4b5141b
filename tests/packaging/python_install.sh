#!/bin/bash
# The Python package as users get it: python3-gdrcopy (.deb) with the
# system's python3, and the py3-none-any wheel pip-installed into a venv,
# both over the libgdrapi package's libgdrapi.so.2.
#
#   python_install.sh VERSION API_VERSION
#
# VERSION is the release (2.6.1; its packages are 2.6+dropin1-1), API_VERSION what
# gdrcopy.library_version() must report (2.6).  Runs as root, offline, in a
# container of a Debian suite with python3, python3-numpy and python3-venv
# installed; the .deb files in /pkgs/debs, the wheel in /pkgs/wheel.
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"
declare_nvidia_target

version=$1
api_version=$2
debs=()
for name in libgdrapi python3-gdrcopy; do
	file=$(compgen -G "/pkgs/debs/${name}_$(deb_version "$version")_*.deb") || fail "no ${name}_$(deb_version "$version")_*.deb in /pkgs/debs"
	debs+=("$file")
done
wheel=$(compgen -G "/pkgs/wheel/gdrcopy-${version}-py3-none-any.whl") || fail "no gdrcopy-${version}-py3-none-any.whl in /pkgs/wheel"
# Run from / so that nothing but the installed package can be imported.
cd /
report='import gdrcopy; print(gdrcopy.__version__, gdrcopy.library_version())'

check "apt installs ${debs[*]##*/} offline (dependencies from the suite's python3)"
apt-get install -y --no-install-recommends "${debs[@]}"
[ "$(dpkg-query -W -f='${Status}' python3-gdrcopy)" = "install ok installed" ] || fail "python3-gdrcopy is not installed"

check "the system python3 imports gdrcopy from the package and reports the library version"
got=$(python3 -c "$report")
echo "python3 $(python3 -c 'import sys; print(sys.version.split()[0])'): $got"
[ "$got" = "$version $api_version" ] || fail "python3 reported '$got', expected '$version $api_version'"
module=$(python3 -c 'import gdrcopy; print(gdrcopy.__file__)')
dpkg -S "$module" | grep -q '^python3-gdrcopy:' || fail "$module is not python3-gdrcopy's file"
read -r source library < <(python3 -c 'import gdrcopy; i = gdrcopy.library_info(); print(i["source"], i["path"])')
echo "library: $source $library"
[ "$source" = system ] || fail "the package's bindings loaded a '$source' library, not the system's"
dpkg -S "$(basename "$library")" | grep -q '^libgdrapi:' || fail "$library (found by its soname) is not libgdrapi's file"

check "without gdrdrv or a GPU, open() raises GdrError saying what is missing"
python3 - <<'EOF'
import gdrcopy
try:
    gdrcopy.open()
except gdrcopy.GdrError as error:
    print(f"open() raised: {error}")
    assert "gdr_open" in str(error), error
else:
    raise SystemExit("gdrcopy.open() succeeded in a container without gdrdrv or a GPU")
EOF

check "NumPy views are available with the suite's python3-numpy"
python3 -c 'import numpy, gdrcopy; print("numpy", numpy.__version__)'

check "the wheel installs with pip into a venv (no index) and uses the system's libgdrapi.so.2"
python3 -m venv /tmp/venv
/tmp/venv/bin/pip install --no-index --no-cache-dir --disable-pip-version-check "$wheel"
got=$(/tmp/venv/bin/python -c "$report")
echo "venv: $got"
[ "$got" = "$version $api_version" ] || fail "the venv's python reported '$got', expected '$version $api_version'"
case $(/tmp/venv/bin/python -c 'import gdrcopy; print(gdrcopy.__file__)') in
/tmp/venv/*) ;;
*) fail "the venv imported gdrcopy from outside the venv" ;;
esac

check "purging python3-gdrcopy removes the module; the venv's copy still works"
apt-get purge -y python3-gdrcopy
if python3 -c 'import gdrcopy' 2>/dev/null; then
	fail "gdrcopy still imports after the purge"
fi
[ ! -e "$(dirname "$module")" ] || fail "$(dirname "$module") is left after the purge"
[ "$(/tmp/venv/bin/python -c "$report")" = "$version $api_version" ] || fail "the venv's gdrcopy broke with the purge"

echo SCENARIO PASSED
