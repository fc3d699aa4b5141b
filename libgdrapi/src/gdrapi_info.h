/* SPDX-License-Identifier: MIT */
/*
 * The one implementation (gdrapi.c) behind gdr_get_info_v2 and the old
 * gdr_get_info symbol (gdrapi_v1.c); v1 asks the backend for the
 * GDRCopy <= 2.3 view where it has one.
 */
#ifndef GDRAPI_INFO_H
#define GDRAPI_INFO_H

#include <stdbool.h>

#include "gdrapi.h"

int gdr_get_info_common(gdr_t g, gdr_mh_t handle, gdr_info_v2_t *info, bool v1);

#endif /* GDRAPI_INFO_H */
