#!/bin/sh
# Run in the booted matrix guest: prove the module under test is the one DKMS
# built from the package, then run the packaged sanity test.
modinfo -n gdrdrv | grep -q /updates/ || {
	echo "gdrdrv is not the DKMS-built module: $(modinfo -n gdrdrv)"
	exit 1
}
command -v gdrcopy_sanity | grep -qx /usr/bin/gdrcopy_sanity || {
	echo 'gdrcopy_sanity is not the packaged one'
	exit 1
}
gdrcopy_sanity
