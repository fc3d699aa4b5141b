# shellcheck shell=bash
# Shared by the H200 scripts (run.sh, pingpong.sh, pingpong_shapes.sh, diagnose.sh, ab_libs.sh, pplat_floor.sh, ...): sourced.

# The Vulkan loader from .device/debs (that machine has the NVIDIA ICD but no
# loader and reaches no registry): unpacked with dpkg -x, nothing else changes.
install_vulkan_loader() {
	if ! compgen -G ".device/debs/*.deb" >/dev/null; then
		echo "no .device/debs/*.deb: apt-get download libvulkan1 libvulkan-dev libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 into .device/debs where a mirror is reachable, and carry .device" >&2
		return 1
	fi
	for deb in .device/debs/*.deb; do dpkg -x "$deb" /; done
	ldconfig
	export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
}

# The commit the caller sent, as "commit ..." (the machine's copy of the tree
# may carry stale git metadata: callers set TREE_COMMIT).
tree_commit_line() {
	echo "commit ${TREE_COMMIT:-$(git log -1 --format='%h (from git metadata there, maybe stale: set TREE_COMMIT)' 2>/dev/null)}"
}

# tools/h200/pingpong.cu built into DIR/pingpong against this tree's libgdrapi
# (make lib first); its output is appended to DIR/build.log.  Fails with the log's tail.
build_pingpong() {
	nvcc -O2 -arch=sm_90 -o "$1/pingpong" tools/h200/pingpong.cu -Iinclude -Llibgdrapi/build -lgdrapi \
		-L/usr/local/nvidia/lib64 -lcuda -ldl >> "$1/build.log" 2>&1 || { tail -40 "$1/build.log"; return 1; }
}
