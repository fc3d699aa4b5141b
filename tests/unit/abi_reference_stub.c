// SPDX-License-Identifier: MIT
/*
 * Stands in for GDRCopy 2.6's libgdrapi.so.2 at link time: the same soname
 * and symbols, no symbol versions, recognisably wrong answers.  A program
 * linked against it records unversioned references, exactly as programs
 * built against the reference do; the ABI check then runs that program on
 * our library.
 */
#include "gdrapi.h"

#undef gdr_get_info

gdr_t gdr_open(void) { return (gdr_t)0; }
int gdr_close(gdr_t g) { (void)g; return 111; }
int gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, uint64_t t, uint32_t v, gdr_mh_t *h)
{ (void)g; (void)addr; (void)size; (void)t; (void)v; (void)h; return 111; }
int gdr_pin_buffer_v2(gdr_t g, unsigned long addr, size_t size, uint32_t f, gdr_mh_t *h)
{ (void)g; (void)addr; (void)size; (void)f; (void)h; return 111; }
int gdr_unpin_buffer(gdr_t g, gdr_mh_t h) { (void)g; (void)h; return 111; }
int gdr_get_callback_flag(gdr_t g, gdr_mh_t h, int *f) { (void)g; (void)h; (void)f; return 111; }
int gdr_get_info(gdr_t g, gdr_mh_t h, void *info) { (void)g; (void)h; (void)info; return 111; }
int gdr_get_info_v2(gdr_t g, gdr_mh_t h, gdr_info_v2_t *info) { (void)g; (void)h; (void)info; return 222; }
int gdr_map(gdr_t g, gdr_mh_t h, void **va, size_t s) { (void)g; (void)h; (void)va; (void)s; return 111; }
int gdr_map_v2(gdr_t g, gdr_mh_t h, void **va, size_t s, int f)
{ (void)g; (void)h; (void)va; (void)s; (void)f; return 111; }
int gdr_unmap(gdr_t g, gdr_mh_t h, void *va, size_t s) { (void)g; (void)h; (void)va; (void)s; return 111; }
int gdr_copy_to_mapping(gdr_mh_t h, void *d, const void *s, size_t n) { (void)h; (void)d; (void)s; (void)n; return 111; }
int gdr_copy_from_mapping(gdr_mh_t h, void *d, const void *s, size_t n) { (void)h; (void)d; (void)s; (void)n; return 111; }
void gdr_runtime_get_version(int *major, int *minor) { *major = 0; *minor = 0; }
int gdr_driver_get_version(gdr_t g, int *major, int *minor) { (void)g; (void)major; (void)minor; return 111; }
int gdr_get_attribute(gdr_t g, gdr_attr_t a, int *v) { (void)g; (void)a; (void)v; return 111; }
int gdr_get_mapping_type_string(gdr_mapping_type_t t, const char **s) { (void)t; *s = "stub"; return 0; }
