/* SPDX-License-Identifier: MIT */
/* Installed beside gdrapi.h, as GDRCopy 2.6 does: the architecture the library was built for. */
#ifndef GDRCONFIG_H
#define GDRCONFIG_H

#if defined(__x86_64__) || defined(__i386__)
#define GDRAPI_X86 1
#elif defined(__powerpc64__)
#define GDRAPI_POWER 1
#elif defined(__aarch64__)
#define GDRAPI_ARM64 1
#else
#error "GDRCopy supports x86, POWER and Arm64 only"
#endif

#endif /* GDRCONFIG_H */
