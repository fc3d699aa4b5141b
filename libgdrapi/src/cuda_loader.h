/* SPDX-License-Identifier: MIT */
/*
 * The process's one libcuda.so.1, shared by every backend that uses CUDA
 * (cuda_loader.c).  A backend takes a reference in open() and drops it in
 * close(); the first reference dlopen()s the library and resolves every
 * entry point of cuda_imports.h into gdr_cuda, the last dlclose()s it.
 *
 *   gdr_cuda_acquire(why)       load (or share) libcuda; read the driver version
 *   gdr_cuda_driver_version()   for the backend's own minimum
 *   gdr_cuda_require(user, why) every entry point that user calls exists; cuInit
 *   gdr_cuda_release()          after a failed require too
 *
 * Between a successful require and the release, the backend calls
 * gdr_cuda.<function> directly.
 */
#ifndef GDRAPI_CUDA_LOADER_H
#define GDRAPI_CUDA_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "cuda_external_memory.h"
#include "cuda_imports.h"

/* The CUDA driver API types we need (values and layouts from the CUDA driver API). */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUextMemory_st *CUexternalMemory;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

#define CUDA_SUCCESS 0
#define GDR_CUDA_LIBRARY "libcuda.so.1"

struct gdr_cuda_api {
#define GDR_CUDA_API_FIELD(name, symbol, user, params) CUresult (*name) params;
	GDR_CUDA_PROCS(GDR_CUDA_API_FIELD)
#undef GDR_CUDA_API_FIELD
};

/* Valid while a reference is held; NULL entries are ones this driver lacks. */
extern struct gdr_cuda_api gdr_cuda;

/* 0, or an errno with why[GDR_BACKEND_WHY_LEN] saying what to do; no reference is held then. */
int gdr_cuda_acquire(char *why);
void gdr_cuda_release(void);
/* cuDriverGetVersion's answer, e.g. 13030 for CUDA 13.3. */
int gdr_cuda_driver_version(void);
/* user is GDR_CUDA_USER_*: 0, or an errno with why; the reference stays held either way. */
int gdr_cuda_require(unsigned int user, char *why);

/* "invalid argument" and the like: the driver's words for err. */
const char *gdr_cuda_strerror(CUresult err);

/*
 * A context for the calling thread: its current one, else the device's
 * primary context, retained and made current.  CUDA calls that need a
 * context go between borrow and detach; release drops the retain, which
 * may come later (an allocation keeps the primary context alive).
 */
struct gdr_cuda_ctx {
	CUcontext ctx;		/* the context in use */
	CUdevice dev;
	bool retained;		/* ctx is dev's primary context, retained by borrow */
};
CUresult gdr_cuda_ctx_borrow(struct gdr_cuda_ctx *c, CUdevice dev);
/* The thread has no current context again if borrow gave it one. */
void gdr_cuda_ctx_detach(const struct gdr_cuda_ctx *c);
void gdr_cuda_ctx_release(struct gdr_cuda_ctx *c);

#endif /* GDRAPI_CUDA_LOADER_H */
