/* SPDX-License-Identifier: MIT */
/* The Vulkan backend's extra entry points, used by the gdr_alloc_mapped() extension. */
#ifndef GDRAPI_BACKEND_VULKAN_H
#define GDRAPI_BACKEND_VULKAN_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

struct gdr;

extern const struct gdr_backend_ops gdr_backend_vulkan;

/* g must use gdr_backend_vulkan.  0 or a positive errno, logged. */
int gdr_vulkan_alloc(struct gdr *g, size_t size, uint64_t *gpu_ptr, void **cpu_ptr);
int gdr_vulkan_free(struct gdr *g, uint64_t gpu_ptr);

#endif /* GDRAPI_BACKEND_VULKAN_H */
