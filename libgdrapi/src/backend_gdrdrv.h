/* SPDX-License-Identifier: MIT */
/* What the gdrdrv backend lets the unit tests change: where it looks for its device and the system's facts. */
#ifndef GDRAPI_BACKEND_GDRDRV_H
#define GDRAPI_BACKEND_GDRDRV_H

struct gdrdrv_sys_paths {
	const char *device;		/* /dev/gdrdrv */
	const char *sys_misc_dev;	/* /sys/class/misc/gdrdrv/dev: "major:minor" of our misc device */
	const char *proc_devices;	/* /proc/devices: the major GDRCopy's gdrdrv (register_chrdev) has */
	const char *sys_module;		/* /sys/module/gdrdrv: exists while loaded */
	const char *proc_params;	/* /proc/driver/gdrdrv/params: the flavour it was built for */
	const char *osrelease;		/* /proc/sys/kernel/osrelease: the running kernel's release */
};
extern const struct gdrdrv_sys_paths *gdrdrv_sys_paths;

#endif /* GDRAPI_BACKEND_GDRDRV_H */
