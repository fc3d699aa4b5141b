// SPDX-License-Identifier: MIT
/*
 * Contexts: the primary context of device 0 and cuCtxCreate'd ones, each
 * thread's context stack, and synchronization.
 *
 * A context here is bookkeeping only (softgpu has one address space per
 * process), but its life is real: destroying a context, or releasing the
 * primary context for the last time, frees the memory allocated in it, as
 * CUDA does.  Destroyed context objects are kept (marked dead) so a stale
 * handle is reported, not dereferenced after free.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SG_CTX_STACK_DEPTH 32

static __thread CUcontext sg_ctx_stack[SG_CTX_STACK_DEPTH];
static __thread int sg_ctx_depth;

int sg_ctx_valid(CUcontext ctx)
{
	return ctx && ctx->magic == SG_CTX_MAGIC && ctx->alive;
}

CUcontext sg_current_ctx(void)
{
	return sg_ctx_depth ? sg_ctx_stack[sg_ctx_depth - 1] : NULL;
}

/* The calling thread's current context, which memory operations need. */
CUresult sg_require_ctx(CUcontext *ctx_out)
{
	CUresult rc = sg_check_init();
	CUcontext ctx;

	if (rc != CUDA_SUCCESS)
		return rc;
	ctx = sg_current_ctx();
	if (!ctx) {
		sg_debug("no current context: call cuCtxCreate, or "
			 "cuDevicePrimaryCtxRetain + cuCtxSetCurrent, first");
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (!sg_ctx_valid(ctx)) {
		sg_debug("the current context was destroyed");
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	}
	if (ctx_out)
		*ctx_out = ctx;
	return CUDA_SUCCESS;
}

static void sg_ctx_pop_everywhere_in_this_thread(CUcontext ctx)
{
	int i, j = 0;

	for (i = 0; i < sg_ctx_depth; i++)
		if (sg_ctx_stack[i] != ctx)
			sg_ctx_stack[j++] = sg_ctx_stack[i];
	sg_ctx_depth = j;
}

/* Release what a dying context owns: wait for its work, free its memory. */
static void sg_ctx_teardown(CUcontext ctx)
{
	sg_ctx_sync(ctx);
	sg_ctx_streams_reset(ctx);
	sg_ctx_free_memory(ctx);
	ctx->alive = 0;
}

SG_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult rc = sg_check_device(dev);
	CUcontext ctx = &sg.primary_ctx;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	sg_lock();
	if (ctx->primary_refs++ == 0) {
		ctx->magic = SG_CTX_MAGIC;
		ctx->device = dev;
		ctx->primary = 1;
		ctx->alive = 1;
	}
	sg_unlock();
	*pctx = ctx;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	CUresult rc = sg_check_device(dev);
	CUcontext ctx = &sg.primary_ctx;
	int last;

	if (rc != CUDA_SUCCESS)
		return rc;
	sg_lock();
	if (ctx->primary_refs == 0) {
		sg_unlock();
		sg_debug("cuDevicePrimaryCtxRelease without a matching retain");
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	last = --ctx->primary_refs == 0;
	sg_unlock();
	if (last)
		sg_ctx_teardown(ctx);
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	CUresult rc = sg_check_device(dev);
	CUcontext ctx = &sg.primary_ctx;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (ctx->alive)
		sg_ctx_teardown(ctx);
	sg_lock();
	ctx->primary_refs = 0;
	ctx->flags = 0;
	sg_unlock();
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	CUresult rc = sg_check_device(dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (flags & ~(unsigned int)CU_CTX_FLAGS_MASK)
		return CUDA_ERROR_INVALID_VALUE;
	sg.primary_ctx.flags = flags;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	CUresult rc = sg_check_device(dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = sg.primary_ctx.flags;
	*active = sg.primary_ctx.primary_refs > 0;
	return CUDA_SUCCESS;
}

static CUresult sg_ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	CUresult rc = sg_check_device(dev);
	CUcontext ctx;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pctx || (flags & ~(unsigned int)CU_CTX_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	if (sg_ctx_depth == SG_CTX_STACK_DEPTH)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx->magic = SG_CTX_MAGIC;
	ctx->device = dev;
	ctx->flags = flags;
	ctx->alive = 1;
	/* A new context is pushed onto the calling thread's stack. */
	sg_ctx_stack[sg_ctx_depth++] = ctx;
	*pctx = ctx;
	return CUDA_SUCCESS;
}

/* CUDA 3.2 .. 12.x: cuCtxCreate(pctx, flags, dev). */
SG_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return sg_ctx_create(pctx, flags, dev);
}

/* CUDA 11.4+: with execution-affinity parameters, none of which softgpu has. */
SG_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
				  int numParams, unsigned int flags, CUdevice dev)
{
	if (paramsArray && numParams > 0) {
		sg_debug("cuCtxCreate: execution affinity is not supported by softgpu");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return sg_ctx_create(pctx, flags, dev);
}

/* CUDA 12.5+, the default name in CUDA 13. */
SG_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
				  unsigned int flags, CUdevice dev)
{
	if (ctxCreateParams && ((ctxCreateParams->execAffinityParams &&
				 ctxCreateParams->numExecAffinityParams > 0) ||
				ctxCreateParams->cigParams)) {
		sg_debug("cuCtxCreate: execution affinity and CIG are not supported by softgpu");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return sg_ctx_create(pctx, flags, dev);
}

SG_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!ctx || ctx->magic != SG_CTX_MAGIC || ctx->primary)
		return CUDA_ERROR_INVALID_VALUE;
	/* CUDA 13.0 answers this with 201 or 709, depending on the run. */
	if (!ctx->alive)
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	sg_ctx_teardown(ctx);
	sg_ctx_pop_everywhere_in_this_thread(ctx);
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!sg_ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (sg_ctx_depth == SG_CTX_STACK_DEPTH)
		return CUDA_ERROR_OUT_OF_MEMORY;
	sg_ctx_stack[sg_ctx_depth++] = ctx;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!sg_ctx_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	sg_ctx_depth--;
	if (pctx)
		*pctx = sg_ctx_stack[sg_ctx_depth];
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!ctx) {
		if (sg_ctx_depth)
			sg_ctx_depth--;
		return CUDA_SUCCESS;
	}
	/*
	 * A destroyed context may be made current, as with the real driver;
	 * calls that need it then fail with CUDA_ERROR_CONTEXT_IS_DESTROYED.
	 */
	if (ctx->magic != SG_CTX_MAGIC)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (sg_ctx_depth)
		sg_ctx_stack[sg_ctx_depth - 1] = ctx;
	else
		sg_ctx_stack[sg_ctx_depth++] = ctx;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = sg_current_ctx();
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
	CUcontext ctx;
	CUresult rc = sg_require_ctx(&ctx);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = ctx->device;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuCtxSynchronize(void)
{
	CUcontext ctx;
	CUresult rc = sg_require_ctx(&ctx);

	if (rc != CUDA_SUCCESS)
		return rc;
	return sg_ctx_sync(ctx);
}
