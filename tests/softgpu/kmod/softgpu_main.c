// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * softgpu: a test-only stand-in for an NVIDIA GPU at the peer-to-peer
 * boundary.  It exports the nvidia_p2p_* API that gdrdrv calls, backed by a
 * qemu ivshmem-plain BAR (or RAM), and /dev/softgpu for user space to
 * allocate and fill the memory.  Never load it next to a real nvidia.ko.
 *
 * The module parameters below are the test knobs; all are writable at run
 * time through /sys/module/softgpu/parameters/ and apply to later calls.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "softgpu.h"

unsigned int softgpu_pt_version = SOFTGPU_P2P_PAGE_TABLE_VERSION_2_0;
module_param_named(pt_version, softgpu_pt_version, uint, 0644);
MODULE_PARM_DESC(pt_version,
		 "Page-table version reported, (major << 16) | minor: 0x00020000 (driver 580+, default) or 0x00010002 (515-575)");

unsigned int softgpu_pt_page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
module_param_named(pt_page_size, softgpu_pt_page_size, uint, 0644);
MODULE_PARM_DESC(pt_page_size,
		 "Page-size code reported in page tables: 0 = 4KB, 1 = 64KB (default; the pages are 64 KiB whatever this says), 2 = 128KB");

int softgpu_cpu_cacheable = -1;
module_param_named(cpu_cacheable, softgpu_cpu_cacheable, int, 0644);
MODULE_PARM_DESC(cpu_cacheable,
		 "CPU-cacheable flag in 2.x page tables: -1 = when RAM-backed (default), 0 = never, 1 = always");

unsigned long softgpu_bar1_limit;
module_param_named(bar1_limit, softgpu_bar1_limit, ulong, 0644);
MODULE_PARM_DESC(bar1_limit,
		 "Most bytes pinned at once; pins beyond it fail with ENOMEM like an exhausted BAR1 (0 = no limit, default)");

unsigned int softgpu_fail_nth;
module_param_named(fail_nth, softgpu_fail_nth, uint, 0644);
MODULE_PARM_DESC(fail_nth,
		 "Fail the Nth nvidia_p2p_get_pages*() call from now with fail_errno, then disarm (0 = off, default)");

unsigned int softgpu_fail_errno = ENOMEM;
module_param_named(fail_errno, softgpu_fail_errno, uint, 0644);
MODULE_PARM_DESC(fail_errno, "Positive errno the injected failure returns (default: ENOMEM = 12)");

unsigned int softgpu_fail_put_nth;
module_param_named(fail_put_nth, softgpu_fail_put_nth, uint, 0644);
MODULE_PARM_DESC(fail_put_nth,
		 "Fail the Nth nvidia_p2p_put_pages() call on a live legacy pin from now with EIO, leaving the pin (and its free callback) in place, then disarm (0 = off, default)");

unsigned int softgpu_pt_extra_entries;
module_param_named(pt_extra_entries, softgpu_pt_extra_entries, uint, 0644);
MODULE_PARM_DESC(pt_extra_entries,
		 "Page tables list this many 64 KiB pages past the pinned length, from the same mapping (pins fail with EINVAL where there are none), as a driver rounding a pin up would (default 0)");

bool softgpu_persistent_api = true;
module_param_named(persistent_api, softgpu_persistent_api, bool, 0644);
MODULE_PARM_DESC(persistent_api,
		 "Support persistent pins; off makes them fail with ENOTSUPP, as on MIG or vGPU (default: on)");

/* Fixed, so test output is stable; version-4/variant-1 shaped. */
u8 softgpu_uuid[SOFTGPU_UUID_LEN] = {
	0x50, 0x0f, 0x7a, 0x3e, 0x9c, 0x21, 0x4d, 0x6b,
	0x8e, 0x11, 0x50, 0x47, 0x50, 0x55, 0x00, 0x01,
};

static int __init softgpu_init(void)
{
	int ret;

	if (softgpu_fail_errno == 0 || softgpu_fail_errno >= MAX_ERRNO) {
		pr_err("softgpu: fail_errno=%u is not an errno\n", softgpu_fail_errno);
		return -EINVAL;
	}
	ret = softgpu_backing_init();
	if (ret)
		return ret;
	ret = softgpu_dev_init();
	if (ret) {
		softgpu_backing_exit();
		return ret;
	}
	return 0;
}

static void __exit softgpu_exit(void)
{
	softgpu_dev_exit();
	softgpu_p2p_exit();
	softgpu_backing_exit();
}

module_init(softgpu_init);
module_exit(softgpu_exit);

MODULE_DESCRIPTION("softgpu: test stand-in for the NVIDIA P2P API (not for production)");
MODULE_LICENSE("Dual MIT/GPL");
