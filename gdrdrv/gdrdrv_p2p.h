/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Which declarations of the NVIDIA P2P API gdrdrv is built against.  The
 * Makefile passes GDRDRV_HAVE_NV_P2P_H when it found the NVIDIA driver's
 * sources (NVIDIA_SRC_DIR on the include path); without it we use our own
 * declarations, nv_p2p_abi.h.
 *
 * Symbol resolution (the Makefile again): the kernels we target have
 * CONFIG_MODVERSIONS, and they refuse a module whose import of a symbol
 * carries no CRC or a CRC other than the exporter's.  So modpost must learn
 * the provider's CRCs at build time, from one of:
 *   - P2P_SYMVERS=<Module.symvers of the provider> (softgpu's, or the one the
 *     NVIDIA driver build left next to its sources);
 *   - otherwise a symbols-only companion module, p2p-symbols/, compiled from
 *     the same header as gdrdrv.  Built from the NVIDIA driver's nv-p2p.h its
 *     CRCs are those of the nvidia.ko built from those sources.  It is named
 *     "nvidia" so that gdrdrv.ko's recorded dependency is the real driver;
 *     it is never installed or loaded.
 */
#ifndef GDRDRV_P2P_H
#define GDRDRV_P2P_H

#ifdef GDRDRV_HAVE_NV_P2P_H
#include <nv-p2p.h>
#else
#include "nv_p2p_abi.h"
#endif

#if ((NVIDIA_P2P_PAGE_TABLE_VERSION >> 16) != 1) && \
	((NVIDIA_P2P_PAGE_TABLE_VERSION >> 16) != 2)
#error "gdrdrv supports nv-p2p page tables of major version 1 or 2 only"
#endif

/* Persistent pins: the API proper, or the older run-time capability. */
#if defined(NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API)
#define GDRDRV_P2P_PERSISTENT_API 1
#elif defined(NVIDIA_P2P_CAP_PERSISTENT_PAGES)
#define GDRDRV_P2P_PERSISTENT_CAP_VAR 1
#endif

#endif /* GDRDRV_P2P_H */
