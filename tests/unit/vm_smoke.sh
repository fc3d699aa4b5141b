#!/bin/sh
# Boot Debian's 6.1 kernel in qemu (TCG) with softgpu.ko and gdrdrv.ko and run
# vm_smoke (static) against them, twice: with an ivshmem BAR (the WC path)
# and with softgpu in RAM mode (the CPU-cached path).
# Usage: vm_smoke.sh BUILD_DIR  (after make vm-smoke; needs busybox-static, qemu)
set -eu
build=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
kver=6.1.0-56-amd64
work=$(mktemp -d /tmp/gdrapi-vm-XXXXXX)
trap 'rm -rf "$work" /dev/shm/gdrapi-vm-vram.$$' EXIT

mkdir -p "$work/root/bin" "$work/root/dev" "$work/root/proc" "$work/root/sys"
cp /bin/busybox "$work/root/bin/busybox"
cp "$build/vm_smoke" "$work/root/vm_smoke"
# A dynamic (sanitizer) build brings its loader and libraries along.
for lib in $(ldd "$build/vm_smoke" 2>/dev/null | grep -o '/[^ ]*'); do
	mkdir -p "$work/root$(dirname "$lib")"
	cp -L "$lib" "$work/root$lib"
done
cp "$top/tests/softgpu/kmod/softgpu.ko" "$top/gdrdrv/gdrdrv.ko" "$work/root/"
cat >"$work/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
insmod /softgpu.ko $(cat /proc/cmdline | tr ' ' '\n' | sed -n 's/^softgpu\.//p')
insmod /gdrdrv.ko dbg_enabled=1
if [ ! -e /dev/gdrdrv ]; then
	# Our gdrdrv is a misc device (numbers in sysfs); GDRCopy's has a major in /proc/devices.
	devt=$(cat /sys/class/misc/gdrdrv/dev 2>/dev/null || awk '$2 == "gdrdrv" {print $1 ":0"}' /proc/devices)
	mknod -m 666 /dev/gdrdrv c "${devt%%:*}" "${devt##*:}"
fi
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2 /vm_smoke
echo "VM SMOKE EXIT $?"
rmmod gdrdrv && rmmod softgpu && echo "VM MODULES UNLOADED"
dmesg | grep -iE 'warning|bug|oops|pat|gdrdrv' | head -20
poweroff -f
INIT
chmod +x "$work/root/init"
(cd "$work/root" && find . | cpio -o -H newc 2>/dev/null | gzip >"$work/initrd.gz")

run() {
	extra=$1
	shift
	qemu-system-x86_64 -machine q35,accel=tcg -m 1024 -smp 2 -nographic -no-reboot \
		-kernel /boot/vmlinuz-$kver -initrd "$work/initrd.gz" \
		-append "console=ttyS0 rdinit=/init panic=-1 quiet $extra" "$@" 2>&1 | tr -d '\r'
}
status=0
echo "== ivshmem BAR (write-combined) =="
out=$(run "" -object memory-backend-file,id=vram,size=256M,mem-path=/dev/shm/gdrapi-vm-vram.$$,share=on \
	-device ivshmem-plain,memdev=vram)
echo "$out" | grep -E 'VM |FAIL|note:|mapping type|ERR|WARN|Call Trace|Sanitizer|runtime error' || true
echo "$out" | grep -q 'VM SMOKE EXIT 0' || status=1
echo "== RAM, CPU-cacheable (coherent platform) =="
out=$(run "softgpu.force_ram=1")
echo "$out" | grep -E 'VM |FAIL|note:|mapping type|ERR|WARN|Call Trace|Sanitizer|runtime error' || true
echo "$out" | grep -q 'VM SMOKE EXIT 0' || status=1
exit $status
