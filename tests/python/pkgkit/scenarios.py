"""Install, upgrade and purge scenarios of the .deb packages in a container.

Each scenario is a bash script run in a fresh container of a locally built
bookworm image (dkms + kernel headers), with the package directories mounted
read-only.  The scripts stop at the first failing command (bash -e), print
what they check, and end with `SCENARIO PASSED`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gdrkit import containers
from gdrkit.containers import ImageRecipe
from gdrkit.distro.families import DebianFamily, debian_release
from gdrkit.packaging import model

# Every scenario image is a bookworm root; the packages it installs are built for it.
SUITE = "bookworm"
FAMILY = DebianFamily(release=debian_release(SUITE))


def other_kernel(kernel: str) -> str:
    """The cloud flavour of `kernel`: the "another kernel" of the scenarios."""
    return kernel.replace("-amd64", "-cloud-amd64")


def bookworm_kernels() -> tuple[str, str]:
    """bookworm's current kernel ABI and its cloud flavour (the "another kernel" of the scenarios)."""
    from gdrkit.vm.suites import resolve_kernel

    abi = resolve_kernel("bookworm").abi
    return abi, other_kernel(abi)


def bookworm_dkms_recipe(kernel: str, other_kernel: str) -> ImageRecipe:
    """bookworm with dkms, build tools and `kernel` installed (image and headers); the headers
    of `other_kernel` and of `kernel` kept aside in /opt/extra-debs.

    One image for every package scenario, the fault scenarios (pkgkit.faults)
    included: the kernel image makes "headers missing" mean what it means on a host.
    """
    return ImageRecipe(
        suite=SUITE,
        include=("dkms", f"linux-image-{kernel}", f"linux-headers-{kernel}", "kmod", "procps", "build-essential", "ca-certificates"),
        extra_debs=(f"linux-headers-{other_kernel}", f"linux-headers-{kernel}"),
        # Nothing boots the image's initramfs (the VM brings its own): do not build one.
        dpkg_excludes=("/etc/kernel/postinst.d/initramfs-tools",),
    )


# The packages a DKMS install uses (the prebuilt-module package conflicts with it),
# as packages/gdrcopy.yaml lists them.
DKMS_SET = model.load().install_set("deb")

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


def fresh_install_script(version: str, kernel: str, other: str) -> str:
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
test -f {FAMILY.udevrulesdir}/60-gdrdrv.rules
test -f {FAMILY.modprobedir}/gdrdrv.conf
test -f {FAMILY.unitdir}/gdrdrv.service
echo "CHECK: gdrcopy-tests does not depend on libcuda"
! dpkg-query -W -f='${{Depends}}' gdrcopy-tests | grep -qi cuda
echo "CHECK: headers of {other} installed later: DKMS builds for it too"
dpkg -i /opt/extra-debs/linux-headers-{other}_*.deb
dkms autoinstall -k {other}
dkms status -m gdrdrv -v {version} -k {other} | grep -q ': installed'
echo "CHECK: purge leaves no file behind"
apt-get purge -y {' '.join(DKMS_SET)}
dpkg -l | grep -E 'gdrdrv|gdrcopy|libgdrapi' | grep -v '^un' && exit 1 || true
! dkms status | grep -q gdrdrv
test ! -e /usr/src/gdrdrv-{version}
test ! -e /var/lib/dkms/gdrdrv
no_gdrdrv_in_depmod_indexes
dpkg -L linux-headers-{other} > /tmp/headers-files
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


def upgrade_script(old: str, new: str, kernel: str) -> str:
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


def run_scenario(script: str, kernels: tuple[str, str], new_debs: Path, old_debs: Path | None = None) -> Outcome:
    image = containers.ensure_image(bookworm_dkms_recipe(*kernels))
    mounts = {new_debs.resolve(): "/pkgs/new"}
    if old_debs is not None:
        mounts[old_debs.resolve()] = "/pkgs/old"
    result = containers.run_script(image, script, mounts=mounts)
    passed = result.exit_code == 0 and "SCENARIO PASSED" in result.output
    return Outcome(passed, result.output)
