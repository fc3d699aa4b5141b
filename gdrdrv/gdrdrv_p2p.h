/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Which declarations of the NVIDIA P2P API gdrdrv is built against, and how
 * its symbols get resolved.  The Makefile decides and passes:
 *
 *   GDRDRV_HAVE_NV_P2P_H  build against the NVIDIA driver's nv-p2p.h
 *                         (NVIDIA_SRC_DIR is on the include path); without
 *                         it, against our own nv_p2p_abi.h.
 *   GDRDRV_P2P_WEAK       no Module.symvers of a provider was available at
 *                         build time (see below).
 *
 * Symbol resolution.  modpost must know every symbol a module imports.  When
 * a provider's Module.symvers is at hand (P2P_SYMVERS=..., softgpu's or the
 * NVIDIA build's), it is passed as KBUILD_EXTRA_SYMBOLS and the references
 * are ordinary ones with symbol CRCs.  Without one, the reference driver
 * builds a companion module of stubs so that modpost resolves the names; but
 * the CRCs recorded then come from the stubs' declarations, which need not
 * match the real provider's, and the kernel refuses the module ("disagrees
 * about version of symbol").  We instead declare the P2P functions weak:
 * modpost accepts unresolved weak symbols without a CRC, the module loader
 * still binds them to the provider when it is loaded (and records the module
 * dependency), and gdrdrv checks at init that they were bound, failing with
 * a clear message when the provider is missing.
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

#ifdef GDRDRV_P2P_WEAK
#define GDRDRV_P2P_DECLARE_WEAK(sym) extern typeof(sym) sym __weak
GDRDRV_P2P_DECLARE_WEAK(nvidia_p2p_get_pages);
GDRDRV_P2P_DECLARE_WEAK(nvidia_p2p_put_pages);
GDRDRV_P2P_DECLARE_WEAK(nvidia_p2p_free_page_table);
#ifdef GDRDRV_P2P_PERSISTENT_API
GDRDRV_P2P_DECLARE_WEAK(nvidia_p2p_get_pages_persistent);
GDRDRV_P2P_DECLARE_WEAK(nvidia_p2p_put_pages_persistent);
#endif
#ifdef GDRDRV_P2P_PERSISTENT_CAP_VAR
GDRDRV_P2P_DECLARE_WEAK(nvidia_p2p_cap_persistent_pages);
#endif
/* True when the module loader bound the weak reference to a provider. */
#define gdrdrv_p2p_bound(sym) (&(sym) != NULL)
#else
#define gdrdrv_p2p_bound(sym) true
#endif

#endif /* GDRDRV_P2P_H */
