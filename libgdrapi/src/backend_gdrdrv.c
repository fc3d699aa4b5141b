// SPDX-License-Identifier: MIT
/*
 * The gdrdrv backend: pins and maps through /dev/gdrdrv (include/uapi/gdrdrv.h).
 * Works with any gdrdrv from 2.0 on, ours or GDRCopy's, using each ioctl
 * only from the driver version that has it.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "uapi/gdrdrv.h"
#include "gdrcopy_version.h"
#include "backend.h"
#include "backend_gdrdrv.h"
#include "internal.h"

/* The uapi header's literal interface version stands alone: keep them equal. */
#if GDRDRV_MAKE_VERSION(GDRCOPY_VERSION_MAJOR, GDRCOPY_VERSION_MINOR) != GDRDRV_VERSION
#error "uapi/gdrdrv.h: GDRDRV_VERSION differs from gdrcopy_version.h"
#endif

static const struct gdrdrv_sys_paths default_paths = {
	.device = "/dev/" GDRDRV_DEVICE_NAME,
	.sys_misc_dev = "/sys/class/misc/" GDRDRV_DEVICE_NAME "/dev",
	.proc_devices = "/proc/devices",
	.sys_module = "/sys/module/" GDRDRV_DEVICE_NAME,
	.proc_params = "/proc/driver/" GDRDRV_DEVICE_NAME "/params",
	.osrelease = "/proc/sys/kernel/osrelease",
};

const struct gdrdrv_sys_paths *gdrdrv_sys_paths = &default_paths;

struct gdrdrv_instance {
	int fd;
	uint32_t version;	/* (major << 16) | minor, from GET_VERSION */
	bool ours;		/* a misc device: this project's gdrdrv, not GDRCopy's */
};

struct gdrdrv_buffer {
	uint64_t handle;
};

static struct gdrdrv_instance *instance_of(struct gdr *g)
{
	return g->backend_priv;
}

static uint64_t handle_of(struct gdr_memh *mh)
{
	return ((struct gdrdrv_buffer *)mh->backend_priv)->handle;
}

#define VERSION_MAJOR(v) ((unsigned int)((v) >> GDRDRV_MAJOR_VERSION_SHIFT))
#define VERSION_MINOR(v) ((unsigned int)((v) & GDRDRV_MINOR_VERSION_MASK))

/*
 * The device number /dev/gdrdrv must have.  Our gdrdrv is a misc device
 * (major 10, a dynamic minor), named in /sys/class/misc/gdrdrv/dev; GDRCopy's
 * registers a whole character major (register_chrdev), named in
 * /proc/devices, and any minor under it reaches the driver.
 */
struct expected_devt {
	bool known;		/* the driver is registered, so the numbers below are real */
	bool any_minor;		/* /proc/devices: only the major says anything */
	unsigned int major, minor;
	const char *source;	/* the file they came from */
};

static bool read_misc_devt(struct expected_devt *exp)
{
	FILE *f = fopen(gdrdrv_sys_paths->sys_misc_dev, "re");
	unsigned int major, minor;
	int n;

	if (!f)
		return false;
	n = fscanf(f, "%u:%u", &major, &minor);
	fclose(f);
	if (n != 2)
		return false;
	*exp = (struct expected_devt){ .known = true, .major = major, .minor = minor,
				       .source = gdrdrv_sys_paths->sys_misc_dev };
	return true;
}

/* The character major a register_chrdev() gdrdrv has, from /proc/devices. */
static bool read_chrdev_major(struct expected_devt *exp)
{
	FILE *f = fopen(gdrdrv_sys_paths->proc_devices, "re");
	bool in_char_section = false, found = false;
	char line[256];

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char name[128];
		int number;

		if (strncmp(line, "Character devices:", 18) == 0) {
			in_char_section = true;
			continue;
		}
		if (strncmp(line, "Block devices:", 14) == 0)
			in_char_section = false;
		if (in_char_section && sscanf(line, "%d %127s", &number, name) == 2 && number >= 0 &&
		    strcmp(name, GDRDRV_DEVICE_NAME) == 0) {
			*exp = (struct expected_devt){ .known = true, .any_minor = true, .major = (unsigned int)number,
						       .source = gdrdrv_sys_paths->proc_devices };
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

static struct expected_devt expected_devt(void)
{
	struct expected_devt exp = { .known = false };

	if (!read_misc_devt(&exp))
		read_chrdev_major(&exp);
	return exp;
}

static bool devt_matches(const struct expected_devt *exp, dev_t rdev)
{
	return major(rdev) == exp->major && (exp->any_minor || minor(rdev) == exp->minor);
}

static bool module_present(void)
{
	return access(gdrdrv_sys_paths->sys_module, F_OK) == 0;
}

static void describe_group(gid_t gid, char *buf, size_t len)
{
	struct group grp, *result = NULL;
	char storage[1024];

	if (getgrgid_r(gid, &grp, storage, sizeof(storage), &result) == 0 && result)
		snprintf(buf, len, "%s", grp.gr_name);
	else
		snprintf(buf, len, "%u", (unsigned int)gid);
}

/* "10:123" or "237 (any minor)": the numbers the node should have, for messages. */
static void describe_devt(const struct expected_devt *exp, char *buf, size_t len)
{
	if (exp->any_minor)
		snprintf(buf, len, "major %u", exp->major);
	else
		snprintf(buf, len, "%u:%u", exp->major, exp->minor);
}

/*
 * The node exists but is not gdrdrv's (left from an earlier load, made by
 * hand with old numbers, or another device bind-mounted over it).
 */
static int explain_stale_node(const struct stat *st, const struct expected_devt *exp, const char *what, char *why)
{
	const char *dev = gdrdrv_sys_paths->device;
	char want[48];

	describe_devt(exp, want, sizeof(want));
	if (!S_ISCHR(st->st_mode))
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "stale node: %s is not a character device%s but gdrdrv is char %s (%s): recreate it: rm %s; mknod -m 666 %s c %u %u (or reload the module: rmmod gdrdrv; modprobe gdrdrv)",
			 dev, what, want, exp->source, dev, dev, exp->major, exp->minor);
	else
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "stale node: %s is char %u:%u%s but gdrdrv is char %s (%s), so it leads to another driver or none: recreate it: rm %s; mknod -m 666 %s c %u %u (or reload the module: rmmod gdrdrv; modprobe gdrdrv)",
			 dev, major(st->st_rdev), minor(st->st_rdev), what, want, exp->source, dev, dev, exp->major,
			 exp->minor);
	return ENODEV;
}

/* Turn open()'s errno into the errno gdr_open reports and a sentence saying what to do. */
static int explain_open_failure(int err, char *why)
{
	const char *dev = gdrdrv_sys_paths->device;
	struct expected_devt exp = expected_devt();
	struct stat st;

	switch (err) {
	case ENOENT:
		if (exp.known)
			snprintf(why, GDR_BACKEND_WHY_LEN,
				 "the gdrdrv module is loaded (char %u:%u in %s) but %s does not exist: udev/devtmpfs did not create it; create it with 'mknod -m 666 %s c %u %u' or reload the module (rmmod gdrdrv; modprobe gdrdrv); in a container, pass the device in (docker --device %s)",
				 exp.major, exp.minor, exp.source, dev, dev, exp.major, exp.minor, dev);
		else if (module_present())
			snprintf(why, GDR_BACKEND_WHY_LEN,
				 "%s does not exist and gdrdrv is in %s but registered no device (none in %s or %s): it failed to initialise; check 'dmesg | grep gdrdrv' and reload it (rmmod gdrdrv; modprobe gdrdrv)",
				 dev, gdrdrv_sys_paths->sys_module, gdrdrv_sys_paths->sys_misc_dev,
				 gdrdrv_sys_paths->proc_devices);
		else
			snprintf(why, GDR_BACKEND_WHY_LEN,
				 "the gdrdrv kernel module is not loaded (no %s, not in %s): install the gdrdrv-dkms or gdrcopy-kmod package and run 'modprobe gdrdrv'; in a container, the host loads it and the container gets --device %s",
				 gdrdrv_sys_paths->sys_module, gdrdrv_sys_paths->sys_misc_dev, dev);
		return ENOENT;
	case EACCES:
	case EPERM:
		if (stat(dev, &st) == 0) {
			char group[128];

			describe_group(st.st_gid, group, sizeof(group));
			snprintf(why, GDR_BACKEND_WHY_LEN,
				 "permission denied opening %s (mode %04o, owner uid %u, group %s): add the user to group '%s' or make it accessible with 'chmod 666 %s'; in a container, allow the device (docker --device %s)",
				 dev, (unsigned int)(st.st_mode & 07777), (unsigned int)st.st_uid, group, group, dev,
				 dev);
		} else {
			snprintf(why, GDR_BACKEND_WHY_LEN, "permission denied opening %s: %s", dev, strerror(err));
		}
		return EACCES;
	case ENXIO:
	case ENODEV:
		if (stat(dev, &st) == 0 && exp.known)
			return explain_stale_node(&st, &exp, ", which reaches no driver", why);
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "%s reaches no driver (%s) and gdrdrv is not loaded: run 'modprobe gdrdrv' (udev then recreates the node)",
			 dev, strerror(err));
		return ENODEV;
	default:
		snprintf(why, GDR_BACKEND_WHY_LEN, "opening %s failed: %s", dev, strerror(err));
		return err;
	}
}

/* GET_VERSION failed (the node's numbers were right, or unknown): a pre-2.0 gdrdrv or another driver. */
static int explain_handshake_failure(int err, char *why)
{
	const char *dev = gdrdrv_sys_paths->device;

	if (err == ENOTTY || err == EINVAL) {
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "the driver behind %s does not answer GET_VERSION (%s): it is not gdrdrv, or a gdrdrv older than 2.0; install gdrdrv %u.%u or newer",
			 dev, strerror(err), MINIMUM_GDRDRV_MAJOR_VERSION, MINIMUM_GDRDRV_MINOR_VERSION);
		return ENOTTY;
	}
	snprintf(why, GDR_BACKEND_WHY_LEN, "GET_VERSION on %s failed: %s", dev, strerror(err));
	return err;
}

static int gdrdrv_open(struct gdr *g, char *why)
{
	struct gdrdrv_get_version ver = { 0 };
	struct expected_devt exp = expected_devt();
	struct gdrdrv_instance *inst;
	struct stat st;
	int fd, rc;

	/*
	 * A node of another device is not opened at all: opening a tty or a
	 * disk has effects of its own.  Whatever was opened is checked again
	 * (a plain file, or a node replaced in between).
	 */
	if (exp.known && stat(gdrdrv_sys_paths->device, &st) == 0 &&
	    (S_ISBLK(st.st_mode) || (S_ISCHR(st.st_mode) && !devt_matches(&exp, st.st_rdev))))
		return explain_stale_node(&st, &exp, "", why);

	fd = open(gdrdrv_sys_paths->device, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return explain_open_failure(errno, why);

	if (exp.known && fstat(fd, &st) == 0 && (!S_ISCHR(st.st_mode) || !devt_matches(&exp, st.st_rdev))) {
		rc = explain_stale_node(&st, &exp, " (the file opened)", why);
		goto fail;
	}
	if (ioctl(fd, GDRDRV_IOC_GET_VERSION, &ver) < 0) {
		rc = explain_handshake_failure(errno, why);
		goto fail;
	}
	if (ver.gdrdrv_version < MINIMUM_GDRDRV_VERSION) {
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "gdrdrv %u.%u is loaded but libgdrapi %d.%d needs gdrdrv %u.%u or newer: upgrade the gdrdrv module",
			 VERSION_MAJOR(ver.gdrdrv_version), VERSION_MINOR(ver.gdrdrv_version), GDR_API_MAJOR_VERSION,
			 GDR_API_MINOR_VERSION, MINIMUM_GDRDRV_MAJOR_VERSION, MINIMUM_GDRDRV_MINOR_VERSION);
		rc = EPROTO;
		goto fail;
	}
	if (ver.minimum_gdr_api_version > GDR_API_VERSION) {
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "gdrdrv %u.%u needs libgdrapi %u.%u or newer but this is libgdrapi %d.%d: upgrade libgdrapi (in a container, use an image whose libgdrapi the host's driver accepts)",
			 VERSION_MAJOR(ver.gdrdrv_version), VERSION_MINOR(ver.gdrdrv_version),
			 VERSION_MAJOR(ver.minimum_gdr_api_version), VERSION_MINOR(ver.minimum_gdr_api_version),
			 GDR_API_MAJOR_VERSION, GDR_API_MINOR_VERSION);
		rc = EPROTO;
		goto fail;
	}

	inst = calloc(1, sizeof(*inst));
	if (!inst) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "out of memory");
		rc = ENOMEM;
		goto fail;
	}
	inst->fd = fd;
	inst->version = ver.gdrdrv_version;
	/* Only our gdrdrv registers a misc device (GDRCopy's has a /proc/devices major). */
	inst->ours = exp.known && !exp.any_minor;
	g->backend_priv = inst;
	gdr_info("gdrdrv %u.%u: GET_INFO_V2 %s; PIN_BUFFER_V2, GET_ATTR and REQ_MAPPING_TYPE %s",
		 VERSION_MAJOR(inst->version), VERSION_MINOR(inst->version),
		 inst->version >= GDRDRV_VERSION_WITH_GET_INFO_V2 ? "used" : "not available (driver < 2.4)",
		 inst->version >= GDRDRV_VERSION_WITH_PIN_V2 ? "used" : "not available (driver < 2.5)");
	return 0;
fail:
	close(fd);
	return rc;
}

static void gdrdrv_close(struct gdr *g)
{
	struct gdrdrv_instance *inst = instance_of(g);

	close(inst->fd);
	free(inst);
	g->backend_priv = NULL;
}

/* OP_PIN_TOKENS: a legacy PIN_BUFFER that passed a non-zero p2p_token or va_space. */
enum buffer_op { OP_PIN, OP_PIN_TOKENS, OP_MAP, OP_OTHER };

/* What an errno from a gdrdrv ioctl or mmap on a buffer usually means. */
static void log_buffer_error(const char *what, enum buffer_op op, const struct gdr_memh *mh, unsigned long addr,
			     size_t size, int err)
{
	const char *hint = "";

	switch (err) {
	case EACCES:
		hint = ": this gdr_t was opened by another process (a fork parent, or the fd came over a socket); call gdr_open in this process";
		break;
	case EPERM:
		/* gdrdrv's allow_p2p_tokens: the NVIDIA driver resolves a token in any process. */
		if (op == OP_PIN_TOKENS)
			hint = ": gdrdrv refuses non-zero P2P tokens (p2p_token/va_space), because the NVIDIA driver would honour another process's token, unless the administrator loads it with the module parameter allow_p2p_tokens=1 (off in the packages); pin with tokens 0, which pins this process's own memory";
		break;
	case ENOSPC:
		if (op == OP_PIN || op == OP_PIN_TOKENS)
			hint = ": this gdr_t holds as many pins, or pinned bytes, as gdrdrv allows one open file (module parameters max_pins_per_file and max_pinned_bytes_per_file, see /proc/driver/gdrdrv/params); unpin buffers no longer needed, or ask the administrator to raise the limit";
		break;
	case EDQUOT:
		if (op == OP_PIN || op == OP_PIN_TOKENS)
			hint = ": this user's processes hold as many pins, or pinned bytes, as gdrdrv allows one user, the users of a user namespace counting also as its creator (module parameters max_pins_per_user and max_pinned_bytes_per_user, see /proc/driver/gdrdrv/params); unpin buffers no longer needed, or ask the administrator to raise the limit";
		break;
	case ENOMEM:
		hint = ": BAR1 space or the driver's handle space is exhausted, or the caller's memory cgroup is at its limit (gdrdrv charges each pin's kernel memory to it); unpin buffers no longer needed and check BAR1 usage with 'nvidia-smi -q -d MEMORY'";
		break;
	case EINVAL:
		if (op == OP_PIN || op == OP_PIN_TOKENS)
			hint = ": the NVIDIA driver would not pin the range; it must be GPU memory from cuMemAlloc or cuMemCreate (gpuDirectRDMACapable) on a GPU with GPUDirect RDMA; P2P tokens must be 0 when gdrdrv uses persistent mapping, and FORCE_PCIE needs a driver and platform that support it";
		else if (op == OP_MAP && (mh->pinned_addr & GPU_PAGE_OFFSET))
			hint = ": gdrdrv maps whole GPU pages only and this buffer does not start on a 64 KiB boundary; pin from an aligned address and add the offset to the mapped pointer";
		else if (op == OP_MAP)
			hint = ": the size may exceed the pinned range, or the GPU memory behind the pin was freed (see gdr_get_callback_flag)";
		break;
	}
	gdr_err("%s [%#lx, +%zu) failed: %s%s", what, addr, size, strerror(err), hint);
}

/* GET_ATTR on a driver that has it (2.5+); EINVAL when the driver does not know attr. */
static int query_attr(struct gdrdrv_instance *inst, uint32_t attr, uint32_t *value)
{
	struct gdrdrv_get_attr q = { .attr = attr };

	if (ioctl(inst->fd, GDRDRV_IOC_GET_ATTR, &q) < 0)
		return errno;
	*value = q.val;
	return 0;
}

/*
 * A FORCE_PCIE pin failed with err: find out why, so that each reason has
 * its own errno (gdrapi.h, README.md) and its own advice.  Consumers try
 * FORCE_PCIE first and fall back to flags 0 on any error; this tells them,
 * and whoever reads the log, whether the fallback lost anything.
 */
static int explain_force_pcie_failure(struct gdrdrv_instance *inst, const struct gdr_pin_request *req, int err)
{
	struct gdrdrv_pin_buffer_v2 plain = { .addr = req->addr, .size = req->size };
	struct gdrdrv_unpin_buffer unpin;
	uint32_t persistent = 1, supported = 1;

	/* Not about the flag: another process's file, or an unreadable argument. */
	if (err == EACCES || err == EFAULT) {
		log_buffer_error("gdrdrv PIN_BUFFER_V2", OP_PIN, NULL, req->addr, req->size, err);
		return err;
	}
	if (query_attr(inst, GDRDRV_ATTR_USE_PERSISTENT_MAPPING, &persistent) == 0 && !persistent) {
		gdr_err("gdr_pin_buffer_v2: GDR_PIN_FLAG_FORCE_PCIE needs persistent mappings, which gdrdrv does not use (module parameter use_persistent_mapping=0, or an NVIDIA driver without persistent pins): load gdrdrv with use_persistent_mapping=1 on an NVIDIA driver that has them, or pin with flags 0");
		return ENOPROTOOPT;
	}
	if (query_attr(inst, GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE, &supported) == 0 && !supported) {
		gdr_err("gdr_pin_buffer_v2: gdrdrv was built against NVIDIA driver sources without NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING (older than 570): rebuild gdrdrv against the sources of an NVIDIA 570 or newer driver (NVIDIA_SRC_DIR, or reinstall the DKMS package), or pin with flags 0");
		return EOPNOTSUPP;
	}
	/* The driver can force PCIe: did the NVIDIA driver refuse the flag, or the range itself? */
	if (ioctl(inst->fd, GDRDRV_IOC_PIN_BUFFER_V2, &plain) < 0) {
		int plain_err = errno;

		/* The range itself: its reason, as a pin with flags 0 would give it. */
		log_buffer_error("gdrdrv PIN_BUFFER_V2 (also without GDR_PIN_FLAG_FORCE_PCIE)", OP_PIN, NULL,
				 req->addr, req->size, plain_err);
		return plain_err;
	}
	unpin.handle = plain.handle;
	ioctl(inst->fd, GDRDRV_IOC_UNPIN_BUFFER, &unpin);
	gdr_err("gdr_pin_buffer_v2: the NVIDIA driver refused a forced PCIe BAR1 mapping of [%#lx, +%zu) (%s) although it pins the range without GDR_PIN_FLAG_FORCE_PCIE; BAR1 may be too small or the GPU may not offer BAR1 mappings to this platform (check 'nvidia-smi -q -d MEMORY'); pin with flags 0",
		req->addr, req->size, strerror(err));
	return ENXIO;
}

static int gdrdrv_pin(struct gdr *g, struct gdr_memh *mh, const struct gdr_pin_request *req)
{
	struct gdrdrv_instance *inst = instance_of(g);
	struct gdrdrv_buffer *buf;
	uint64_t handle;

	if (inst->version >= GDRDRV_VERSION_WITH_PIN_V2) {
		struct gdrdrv_pin_buffer_v2 pin = {
			.addr = req->addr, .size = req->size, .flags = req->flags,
		};

		/* Drivers from 2.5 pin persistently, where tokens mean nothing. */
		if (ioctl(inst->fd, GDRDRV_IOC_PIN_BUFFER_V2, &pin) < 0) {
			int err = errno;

			if (req->flags & GDR_PIN_FLAG_FORCE_PCIE)
				return explain_force_pcie_failure(inst, req, err);
			log_buffer_error("gdrdrv PIN_BUFFER_V2", OP_PIN, NULL, req->addr, req->size, err);
			return err;
		}
		handle = pin.handle;
	} else {
		struct gdrdrv_pin_buffer pin = {
			.addr = req->addr, .size = req->size, .p2p_token = req->p2p_token, .va_space = req->va_space,
		};

		if (req->flags != GDR_PIN_FLAG_DEFAULT) {
			gdr_err("gdr_pin_buffer_v2: gdrdrv %u.%u takes no pin flags (they need gdrdrv 2.5 or newer); upgrade gdrdrv or pin with GDR_PIN_FLAG_DEFAULT",
				VERSION_MAJOR(inst->version), VERSION_MINOR(inst->version));
			/* The only flag there is, FORCE_PCIE, has its own errno for this (gdrapi.h). */
			return EPROTONOSUPPORT;
		}
		if (ioctl(inst->fd, GDRDRV_IOC_PIN_BUFFER, &pin) < 0) {
			int err = errno;

			log_buffer_error("gdrdrv PIN_BUFFER", req->p2p_token || req->va_space ? OP_PIN_TOKENS : OP_PIN, NULL,
					 req->addr, req->size, err);
			return err;
		}
		handle = pin.handle;
	}

	buf = calloc(1, sizeof(*buf));
	if (!buf) {
		struct gdrdrv_unpin_buffer unpin = { .handle = handle };

		ioctl(inst->fd, GDRDRV_IOC_UNPIN_BUFFER, &unpin);
		return ENOMEM;
	}
	buf->handle = handle;
	mh->backend_priv = buf;
	mh->pinned_addr = req->addr;
	mh->pinned_size = req->size;
	mh->pin_flags = req->flags;
	return 0;
}

static int gdrdrv_unpin(struct gdr *g, struct gdr_memh *mh)
{
	struct gdrdrv_unpin_buffer unpin = { .handle = handle_of(mh) };
	int rc = 0;

	if (ioctl(instance_of(g)->fd, GDRDRV_IOC_UNPIN_BUFFER, &unpin) < 0) {
		rc = errno;
		log_buffer_error("gdrdrv UNPIN_BUFFER", OP_OTHER, mh, mh->pinned_addr, mh->pinned_size, rc);
	}
	/* The record goes either way: the handle is no use to the caller after this. */
	free(mh->backend_priv);
	mh->backend_priv = NULL;
	return rc;
}

/* Read a buffer's state with the newest GET_INFO the driver has (or the old one when v1 is asked for). */
static int query_info(struct gdr *g, struct gdr_memh *mh, gdr_info_v2_t *info, bool v1)
{
	struct gdrdrv_instance *inst = instance_of(g);

	memset(info, 0, sizeof(*info));
	if (!v1 && inst->version >= GDRDRV_VERSION_WITH_GET_INFO_V2) {
		struct gdrdrv_get_info_v2 q = { .handle = handle_of(mh) };

		if (ioctl(inst->fd, GDRDRV_IOC_GET_INFO_V2, &q) < 0)
			return errno;
		info->va = q.va;
		info->mapped_size = q.mapped_size;
		info->page_size = q.page_size;
		info->tm_cycles = q.tm_cycles;
		info->cycles_per_ms = q.tsc_khz;
		info->mapping_type = q.mapping_type < GDR_MAPPING_TYPE_MAX ? (gdr_mapping_type_t)q.mapping_type
									    : GDR_MAPPING_TYPE_NONE;
	} else {
		struct gdrdrv_get_info q = { .handle = handle_of(mh) };

		if (ioctl(inst->fd, GDRDRV_IOC_GET_INFO, &q) < 0)
			return errno;
		info->va = q.va;
		info->mapped_size = q.mapped_size;
		info->page_size = q.page_size;
		info->tm_cycles = q.tm_cycles;
		info->cycles_per_ms = q.tsc_khz;
		/* Old drivers only say "mapped" and "write-combined". */
		if (!q.mapped)
			info->mapping_type = GDR_MAPPING_TYPE_NONE;
		else
			info->mapping_type = q.wc_mapping ? GDR_MAPPING_TYPE_WC : GDR_MAPPING_TYPE_CACHING;
	}
	return 0;
}

static const char *type_name(gdr_mapping_type_t type)
{
	const char *name = gdr_mapping_type_name(type);

	return name ? name : "unknown";
}

static int gdrdrv_map(struct gdr *g, struct gdr_memh *mh, size_t size, gdr_mapping_type_t requested, void **va,
		      gdr_mapping_type_t *type)
{
	struct gdrdrv_instance *inst = instance_of(g);
	const struct gdr_host_page *page = gdr_host_page();
	size_t len = gdr_round_up_to_page(size);
	gdr_info_v2_t info;
	void *addr;
	int rc;

	if (inst->version >= GDRDRV_VERSION_WITH_PIN_V2) {
		/* Also for "no preference": that clears a request left from an earlier mapping. */
		struct gdrdrv_req_mapping_type req = { .handle = handle_of(mh), .mapping_type = requested };

		if (ioctl(inst->fd, GDRDRV_IOC_REQ_MAPPING_TYPE, &req) < 0) {
			rc = errno;
			if (rc == EOPNOTSUPP)
				gdr_err("gdr_map: gdrdrv cannot map buffer %#lx as %s on this platform or for this buffer; map with GDR_MAP_FLAG_DEFAULT to get the type it can do",
					mh->pinned_addr, type_name(requested));
			else
				log_buffer_error("gdrdrv REQ_MAPPING_TYPE", OP_OTHER, mh, mh->pinned_addr, size, rc);
			return rc;
		}
	}

	addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, inst->fd, (off_t)(handle_of(mh) << page->shift));
	if (addr == MAP_FAILED) {
		rc = errno;
		log_buffer_error("gdr_map: mmap of gdrdrv buffer", OP_MAP, mh, mh->pinned_addr, size, rc);
		return rc;
	}

	rc = query_info(g, mh, &info, false);
	if (rc) {
		gdr_err("gdr_map: GET_INFO after mapping failed: %s", strerror(rc));
		goto unmap;
	}
	if (info.mapping_type == GDR_MAPPING_TYPE_NONE) {
		gdr_err("gdr_map: gdrdrv reports buffer %#lx unmapped right after mmap; retry", mh->pinned_addr);
		rc = EAGAIN;
		goto unmap;
	}
	if (requested != GDR_MAPPING_TYPE_NONE && info.mapping_type != requested) {
		gdr_err("gdr_map: asked for a %s mapping but gdrdrv %u.%u made a %s one (selecting the type needs gdrdrv 2.5)",
			type_name(requested), VERSION_MAJOR(inst->version), VERSION_MINOR(inst->version),
			type_name(info.mapping_type));
		rc = EINVAL;
		goto unmap;
	}
	*va = addr;
	*type = info.mapping_type;
	return 0;
unmap:
	munmap(addr, len);
	return rc;
}

static int gdrdrv_unmap(struct gdr *g, struct gdr_memh *mh, void *va, size_t size)
{
	(void)g;
	if (munmap(va, gdr_round_up_to_page(size)) < 0) {
		int err = errno;

		gdr_err("gdr_unmap: munmap(%p, %zu) of buffer %#lx failed: %s", va, size, mh->pinned_addr, strerror(err));
		return err;
	}
	return 0;
}

static int gdrdrv_get_info(struct gdr *g, struct gdr_memh *mh, gdr_info_v2_t *info)
{
	int rc = query_info(g, mh, info, false);

	if (rc)
		log_buffer_error("gdrdrv GET_INFO", OP_OTHER, mh, mh->pinned_addr, mh->pinned_size, rc);
	return rc;
}

static int gdrdrv_get_info_v1(struct gdr *g, struct gdr_memh *mh, gdr_info_v2_t *info)
{
	int rc = query_info(g, mh, info, true);

	if (rc)
		log_buffer_error("gdrdrv GET_INFO", OP_OTHER, mh, mh->pinned_addr, mh->pinned_size, rc);
	return rc;
}

/* The running kernel is major.minor or newer; *known is false when its release cannot be read. */
static bool kernel_at_least(unsigned int major, unsigned int minor, bool *known)
{
	FILE *f = fopen(gdrdrv_sys_paths->osrelease, "re");
	unsigned int have_major, have_minor;
	int n = 0;

	if (f) {
		n = fscanf(f, "%u.%u", &have_major, &have_minor);
		fclose(f);
	}
	*known = n == 2;
	return *known && (have_major > major || (have_major == major && have_minor >= minor));
}

/*
 * From /proc/driver/gdrdrv/params: the flavour ("opensource", "proprietary",
 * or "" without that line) and our driver's "VMA inherited on fork:" line
 * (1 or 0; -1 without it).
 */
static void read_params(char flavour[32], int *inherited)
{
	static const char flavour_key[] = "Built for NVIDIA driver flavor:";
	static const char inherited_key[] = "VMA inherited on fork:";
	FILE *f = fopen(gdrdrv_sys_paths->proc_params, "re");
	char line[256], word[8];

	flavour[0] = '\0';
	*inherited = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, flavour_key, sizeof(flavour_key) - 1) == 0)
			sscanf(line + sizeof(flavour_key) - 1, " %31s", flavour);
		else if (strncmp(line, inherited_key, sizeof(inherited_key) - 1) == 0 &&
			 sscanf(line + sizeof(inherited_key) - 1, " %7s", word) == 1)
			*inherited = strcmp(word, "yes") == 0;
	}
	fclose(f);
}

/*
 * GDR_ATTR_VMA_INHERITED_ON_FORK.  Our gdrdrv answers itself; it sets
 * VM_DONTCOPY in every flavour (gdrdrv/README.md), and so did each of its
 * versions before the attribute existed.  GDRCopy's drivers are not asked
 * (NVIDIA's number for the attribute is not known, and another meaning of
 * ours would be misread): theirs set VM_DONTCOPY except when built for the
 * proprietary NVIDIA driver on Linux 6.15 or newer, where vm_flags_set() is
 * GPL-only, so the answer follows from the flavour in
 * /proc/driver/gdrdrv/params and the kernel release.
 */
static int vma_inherited_on_fork(struct gdrdrv_instance *inst, int *value)
{
	char flavour[32];
	bool known, new_kernel;
	int said;

	if (inst->ours) {
		uint32_t v = 0;
		int err = inst->version >= GDRDRV_VERSION_WITH_PIN_V2 ?
				  query_attr(inst, GDRDRV_ATTR_VMA_INHERITED_ON_FORK, &v) : EINVAL;

		if (err && err != EINVAL) {
			gdr_err("gdr_get_attribute: gdrdrv GET_ATTR(VMA_INHERITED_ON_FORK) failed: %s", strerror(err));
			return err;
		}
		*value = err ? 0 : (int)v;
		return 0;
	}
	read_params(flavour, &said);
	/* Ours, where sysfs did not show its misc device (a container): params says. */
	if (said >= 0) {
		*value = said;
		return 0;
	}
	new_kernel = kernel_at_least(6, 15, &known);
	if (strcmp(flavour, "opensource") == 0)
		*value = 0;
	else
		*value = new_kernel || !known;
	gdr_info("GDR_ATTR_VMA_INHERITED_ON_FORK is %d: GDRCopy's gdrdrv, built for the %s NVIDIA driver, on Linux %s 6.15 (it sets VM_DONTCOPY except in the proprietary flavour from 6.15 on)",
		 *value, flavour[0] ? flavour : "(unknown: no params file)",
		 !known ? "(release unreadable) taken as" : new_kernel ? ">=" : "<");
	return 0;
}

static int gdrdrv_get_attr(struct gdr *g, gdr_attr_t attr, int *value)
{
	struct gdrdrv_instance *inst = instance_of(g);
	struct gdrdrv_get_attr q = { .attr = attr };

	if (attr == GDR_ATTR_USING_DMA_BUF_MMAP) {
		*value = 0;
		return 0;
	}
	if (attr == GDR_ATTR_VMA_INHERITED_ON_FORK)
		return vma_inherited_on_fork(inst, value);
	if (inst->version < GDRDRV_VERSION_WITH_PIN_V2) {
		/* Before 2.5 there was neither persistent mapping nor FORCE_PCIE. */
		*value = 0;
		return 0;
	}
	if (ioctl(inst->fd, GDRDRV_IOC_GET_ATTR, &q) < 0) {
		int err = errno;

		/* A driver that does not know the attribute does not have the feature. */
		if (err == EINVAL) {
			*value = 0;
			return 0;
		}
		gdr_err("gdr_get_attribute: gdrdrv GET_ATTR(%d) failed: %s", (int)attr, strerror(err));
		return err;
	}
	*value = (int)q.val;
	return 0;
}

static int gdrdrv_get_cb_flag(struct gdr *g, struct gdr_memh *mh, int *flag)
{
	struct gdrdrv_get_cb_flag q = { .handle = handle_of(mh) };

	if (ioctl(instance_of(g)->fd, GDRDRV_IOC_GET_CB_FLAG, &q) < 0) {
		int err = errno;

		log_buffer_error("gdrdrv GET_CB_FLAG", OP_OTHER, mh, mh->pinned_addr, mh->pinned_size, err);
		return err;
	}
	*flag = (int)q.flag;
	return 0;
}

static int gdrdrv_driver_version(struct gdr *g, int *major, int *minor)
{
	uint32_t version = instance_of(g)->version;

	*major = (int)VERSION_MAJOR(version);
	*minor = (int)VERSION_MINOR(version);
	return 0;
}

const struct gdr_backend_ops gdr_backend_gdrdrv = {
	.name = "gdrdrv",
	.map_makes_own_mapping = true,
	.open = gdrdrv_open,
	.close = gdrdrv_close,
	.pin = gdrdrv_pin,
	.unpin = gdrdrv_unpin,
	.map = gdrdrv_map,
	.unmap = gdrdrv_unmap,
	.get_info = gdrdrv_get_info,
	.get_info_v1 = gdrdrv_get_info_v1,
	.get_attr = gdrdrv_get_attr,
	.get_cb_flag = gdrdrv_get_cb_flag,
	.driver_version = gdrdrv_driver_version,
};
