"""Install, upgrade and purge scenarios of the .deb packages in a container.

Each scenario is a bash script run in a fresh container of a locally built
bookworm image (dkms + kernel headers), with the package directories mounted
read-only.  The scripts stop at the first failing command (bash -e), print
what they check, and end with `SCENARIO PASSED`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gdrkit.packaging import containers

BOOKWORM_KERNEL = "6.1.0-56-amd64"
OTHER_KERNEL = "6.1.0-56-cloud-amd64"
# The packages a DKMS install uses (the prebuilt-module package conflicts with it).
DKMS_SET = ("libgdrapi", "gdrcopy-tests", "gdrdrv-dkms", "gdrcopy")

# Everything under these is the system's own churn, not a package's leftovers.
_SNAPSHOT = r"""
snapshot() {
	find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /run \
		-o -path /var/cache -o -path /var/log -o -path /var/lib/apt -o -path /var/lib/dpkg \
		-o -path /root \) -prune -o -print | sort \
		| grep -v -x -e /var/lib/dkms/mok.key -e /var/lib/dkms/mok.pub \
		| grep -v -E '^(/usr)?/lib/modules/[^/]+/modules\.[a-z.]+$'
	# Not leftovers: dkms's own signing key pair (made at its first build,
	# kept for the next) and depmod's indexes, which the image has none of
	# before a first depmod because it holds headers but no kernel image.
	# The indexes must not name gdrdrv any more (checked below).
}
no_gdrdrv_in_depmod_indexes() {
	! grep -l gdrdrv /lib/modules/*/modules.dep 2>/dev/null | grep -q .
}

"""


@dataclass(frozen=True)
class Outcome:
    passed: bool
    output: str


def _debs(directory: str, names: tuple[str, ...]) -> str:
    return " ".join(f"{directory}/{name}_*.deb" for name in names)


def fresh_install_script(version: str, kernel: str = BOOKWORM_KERNEL, other: str = OTHER_KERNEL) -> str:
    return _SNAPSHOT + f"""
snapshot > /tmp/before
echo "CHECK: apt installs {' '.join(DKMS_SET)} and DKMS builds gdrdrv for {kernel}"
apt-get install -y --no-install-recommends {_debs('/pkgs/new', DKMS_SET)}
dkms status
dkms status -m gdrdrv -v {version} -k {kernel} | grep -q ': installed'
ko=$(find /lib/modules/{kernel} -name 'gdrdrv.ko*' | head -n1)
test -n "$ko"
echo "CHECK: modinfo version of $ko"
modinfo -F version "$ko"
echo "CHECK: udev rule, modprobe.d and unit are installed"
test -f /lib/udev/rules.d/60-gdrdrv.rules
test -f /lib/modprobe.d/gdrdrv.conf
test -f /lib/systemd/system/gdrdrv.service
echo "CHECK: gdrcopy-tests does not depend on libcuda"
! dpkg-query -W -f='${{Depends}}' gdrcopy-tests | grep -qi cuda
echo "CHECK: headers of {other} installed later: DKMS builds for it too"
dpkg -i /opt/extra-debs/*.deb
dkms autoinstall -k {other}
dkms status -m gdrdrv -v {version} -k {other} | grep -q ': installed'
echo "CHECK: purge leaves no file behind"
apt-get purge -y {' '.join(DKMS_SET)}
dpkg -l | grep -E 'gdrdrv|gdrcopy|libgdrapi' | grep -v '^un' && exit 1 || true
! dkms status | grep -q gdrdrv
test ! -e /usr/src/gdrdrv-{version}
test ! -e /var/lib/dkms/gdrdrv
no_gdrdrv_in_depmod_indexes
dpkg -L $(dpkg-deb -f /opt/extra-debs/*.deb Package) > /tmp/headers-files
snapshot > /tmp/after
comm -13 /tmp/before /tmp/after | grep -vxF -f /tmp/headers-files \
	| grep -v -e '^/lib/modules/{other}' -e '^/usr/lib/modules/{other}' -e '^/usr/src/linux-headers-' \
	> /tmp/leftovers || true
echo "leftover paths: $(wc -l < /tmp/leftovers)"
cat /tmp/leftovers
test ! -s /tmp/leftovers
echo "checked $(wc -l < /tmp/before) paths of the file system before and after"
echo SCENARIO PASSED
"""


def upgrade_script(old: str, new: str, kernel: str = BOOKWORM_KERNEL) -> str:
    return _SNAPSHOT + f"""
snapshot > /tmp/before
echo "CHECK: install the previous version {old}"
apt-get install -y --no-install-recommends {_debs('/pkgs/old', DKMS_SET)}
dkms status -m gdrdrv -v {old} -k {kernel} | grep -q ': installed'
echo "CHECK: upgrade to {new}"
apt-get install -y --no-install-recommends {_debs('/pkgs/new', DKMS_SET)}
dkms status
dkms status -m gdrdrv -v {new} -k {kernel} | grep -q ': installed'
! dkms status -m gdrdrv -v {old} | grep -q .
test ! -e /usr/src/gdrdrv-{old}
test ! -e /var/lib/dkms/gdrdrv/{old}
test "$(dpkg-query -W -f='${{Version}}' gdrdrv-dkms)" = "{new}-1"
echo "CHECK: remove keeps nothing of the module, purge keeps nothing at all"
apt-get remove -y {' '.join(DKMS_SET)}
! dkms status | grep -q gdrdrv
# dpkg, not apt: the removed packages are in no repository apt knows.
dpkg --purge {' '.join(DKMS_SET)}
no_gdrdrv_in_depmod_indexes
snapshot > /tmp/after
comm -13 /tmp/before /tmp/after > /tmp/leftovers || true
echo "leftover paths: $(wc -l < /tmp/leftovers)"
cat /tmp/leftovers
test ! -s /tmp/leftovers
echo SCENARIO PASSED
"""


def run_scenario(script: str, new_debs: Path, old_debs: Path | None = None) -> Outcome:
    image = containers.ensure_image(containers.bookworm_dkms_recipe(BOOKWORM_KERNEL, OTHER_KERNEL))
    mounts = {new_debs.resolve(): "/pkgs/new"}
    if old_debs is not None:
        mounts[old_debs.resolve()] = "/pkgs/old"
    result = containers.run_script(image, script, mounts=mounts)
    passed = result.exit_code == 0 and "SCENARIO PASSED" in result.output
    return Outcome(passed, result.output)


def prepare_vm_root(debs: Path, source_tree: Path, dest: Path, *, names: tuple[str, ...] = DKMS_SET) -> Path:
    """A bookworm file system with our packages installed and gdrdrv built by DKMS.

    Exported to `dest`, for gdrkit.vm.boot() with the host's
    /boot/vmlinuz-<kver> and `dest`/lib/modules/<kver>: gdrdrv is the one
    DKMS installed from the gdrdrv-dkms package, gdrcopy_sanity the one of
    the gdrcopy-tests package.  softgpu (the test-only GPU, not packaged) is
    built from `source_tree` and installed under /usr/local.
    """
    image = containers.ensure_image(containers.bookworm_vm_recipe(BOOKWORM_KERNEL))
    # softgpu first: DKMS then builds gdrdrv against softgpu's symbol
    # versions, the way a host with a non-DKMS NVIDIA driver is set up
    # (P2P_SYMVERS in /etc/dkms/gdrdrv.conf, see dkms.conf).
    symvers = "/usr/local/share/softgpu/Module.symvers"
    script = f"""
cp -a /src /tmp/src
make -C /tmp/src softgpu_install KVER={BOOKWORM_KERNEL} prefix=/usr/local
install -D -m 644 /tmp/src/tests/softgpu/kmod/Module.symvers {symvers}
rm -rf /tmp/src
mkdir -p /etc/dkms
echo 'MAKE[0]="${{MAKE[0]}} P2P_SYMVERS={symvers}"' > /etc/dkms/gdrdrv.conf
apt-get install -y --no-install-recommends {_debs('/pkgs/new', names)}
dkms status -m gdrdrv -k {BOOKWORM_KERNEL} | grep -q ': installed'
ldconfig
depmod -a {BOOKWORM_KERNEL}
modinfo -n gdrdrv -k {BOOKWORM_KERNEL}
"""
    mounts = {debs.resolve(): "/pkgs/new", source_tree.resolve(): "/src"}
    return containers.export_filesystem(image, script, dest, mounts=mounts)
