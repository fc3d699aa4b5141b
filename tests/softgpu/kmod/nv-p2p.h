/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * softgpu's P2P declarations under the names of the NVIDIA driver's own
 * header.  `make install-nvidia-src` puts this, softgpu_p2p.h and softgpu's
 * Module.symvers where NVIDIA's DKMS sources live (/usr/src/nvidia-softgpu),
 * so that a packaged gdrdrv finds softgpu exactly as it finds a real driver:
 * by NVIDIA-source detection, building against the provider's header and
 * taking symbol versions from the provider's Module.symvers.
 */
#ifndef SOFTGPU_NV_P2P_H
#define SOFTGPU_NV_P2P_H

#include "softgpu_p2p.h"

/* softgpu builds 2.0 page tables (its pt_version knob can pretend otherwise). */
#define NVIDIA_P2P_PAGE_TABLE_VERSION SOFTGPU_P2P_PAGE_TABLE_VERSION_2_0
#define NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API
#define NVIDIA_P2P_DMA_MAPPING_VERSION 0x00020003

#endif /* SOFTGPU_NV_P2P_H */
