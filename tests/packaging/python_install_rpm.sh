#!/bin/bash
# python3-gdrcopy (.rpm) in an RPM-based container: dnf installs it with the
# gdrcopy package from /pkgs (dependencies from the image's repositories),
# and the system's python3 imports it and reports the library version.
#
#   python_install_rpm.sh VERSION API_VERSION
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"

version=$1
api_version=$2
rpms=()
for name in gdrcopy python3-gdrcopy; do
	file=$(compgen -G "/pkgs/${name}-${version}-*.rpm") || fail "no ${name}-${version}-*.rpm in /pkgs"
	rpms+=("$file")
done
cd /

check "dnf installs ${rpms[*]##*/}"
dnf install -y "${rpms[@]}"

check "the system python3 imports gdrcopy and reports the library version"
got=$(python3 -c 'import gdrcopy; print(gdrcopy.__version__, gdrcopy.library_version())')
echo "python3: $got"
[ "$got" = "$version $api_version" ] || fail "python3 reported '$got', expected '$version $api_version'"
rpm -qf "$(python3 -c 'import gdrcopy; print(gdrcopy.__file__)')" | grep -q '^python3-gdrcopy-' || fail "gdrcopy was not imported from python3-gdrcopy's files"

echo SCENARIO PASSED
