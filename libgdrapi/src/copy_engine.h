/* SPDX-License-Identifier: MIT */
/*
 * What the rest of the library calls in the copy engine (copy.c); its
 * routines and their choice are copy.h's business.
 */
#ifndef GDRAPI_COPY_ENGINE_H
#define GDRAPI_COPY_ENGINE_H

#include <stddef.h>

#include "gdrapi.h"

int gdr_copy_to_type(gdr_mapping_type_t type, void *dst, const void *src, size_t size);
int gdr_copy_from_type(gdr_mapping_type_t type, void *dst, const void *src, size_t size);
/* Bookkeeping of live mappings per type, for the "mixed mappings" fence. */
void gdr_mapping_count_add(gdr_mapping_type_t type, int delta);
/* Detect CPU features and choose routines now (gdr_open calls it; otherwise first copy does). */
void gdr_copy_engine_init(void);

#endif /* GDRAPI_COPY_ENGINE_H */
