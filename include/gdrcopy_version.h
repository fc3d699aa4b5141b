/* SPDX-License-Identifier: MIT */
/*
 * The one place the GDRCopy version lives.
 *
 * MAJOR.MINOR is the interface version: the library reports it through
 * gdr_runtime_get_version(), the driver through GDRDRV_IOC_GET_VERSION, and
 * both must stay 2.6 to be a drop-in for GDRCopy 2.6.  PATCH counts our own
 * releases of that interface.  The library, module and programs carry
 * MAJOR.MINOR.PATCH; the packages MAJOR.MINOR+dropinPATCH (gdrkit/version.py),
 * which upgrades NVIDIA's 2.6-1 packages and can never equal an NVIDIA
 * version.  The Makefiles and the Python toolkit read these three lines;
 * keep their shape.
 */
#ifndef GDRCOPY_VERSION_H
#define GDRCOPY_VERSION_H

#define GDRCOPY_VERSION_MAJOR 2
#define GDRCOPY_VERSION_MINOR 6
#define GDRCOPY_VERSION_PATCH 1

#endif /* GDRCOPY_VERSION_H */
