// SPDX-License-Identifier: MIT
/*
 * Streams, PTX modules and kernel launches, by emulation.
 *
 * cuModuleLoadData reads the `.entry` names and parameter lists out of PTX
 * text.  cuLaunchKernel copies the arguments (sizes come from the PTX) and
 * runs the matching emulated kernel (emulated_kernels.h) on a new thread;
 * launches on one stream run one after another.  Synchronize calls join
 * the thread and report what the kernel returned.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emulated_kernels.h"
#include "internal.h"

#define SG_STREAM_MAGIC 0x5254534dU	/* "MSTR" */
#define SG_MODULE_MAGIC 0x444f4d53U	/* "SMOD" */
#define SG_FUNC_MAGIC 0x434e5546U	/* "FUNC" */
#define SG_MAX_PARAMS 64

/* The legacy and per-thread default-stream handles of cuda.h. */
#define SG_STREAM_LEGACY ((CUstream)0x1)
#define SG_STREAM_PER_THREAD ((CUstream)0x2)

struct CUstream_st {
	uint32_t magic;
	CUcontext ctx;
	unsigned int flags;
	pthread_mutex_t lock;
	pthread_t thread;
	int running;		/* a launch thread exists and is not joined */
	CUresult error;		/* what the last finished launch returned */
	struct CUstream_st *next;
};

struct sg_param {
	size_t offset;
	size_t size;
	size_t align;
};

struct CUfunc_st {
	uint32_t magic;
	struct CUmod_st *module;
	char *name;
	const struct softgpu_emulated_kernel *kernel;
	unsigned int nparams;
	struct sg_param params[SG_MAX_PARAMS];
	size_t param_bytes;
	struct CUfunc_st *next;
};

struct CUmod_st {
	uint32_t magic;
	struct CUfunc_st *functions;
};

struct sg_launch {
	const struct softgpu_emulated_kernel *kernel;
	struct softgpu_launch_config config;
	void *params[SG_MAX_PARAMS];
	unsigned char *arg_copy;
	CUstream stream;
};

static struct CUstream_st *sg_stream_list;

/* ---- GPU-side helpers for emulated kernels ---- */

const struct softgpu_emulated_kernel *softgpu_find_emulated_kernel(const char *name)
{
	const struct softgpu_emulated_kernel *k;

	for (k = softgpu_emulated_kernels; k->name; k++)
		if (!strcmp(k->name, name))
			return k;
	return NULL;
}

/* Is [addr, addr + size) mapped host memory (a cuMemHostAlloc allocation)? */
static int sg_is_mapped_host(uint64_t addr, size_t size)
{
	struct sg_host_alloc *h;
	int ok;

	sg_lock();
	h = sg_find_host_locked(addr);
	ok = h && addr + size <= (uint64_t)(uintptr_t)h->ptr + h->size;
	sg_unlock();
	return ok;
}

static int sg_gpu_copy(uint64_t dst, uint64_t src, size_t size, int to_gpu)
{
	uint64_t gpu = to_gpu ? dst : src, host = to_gpu ? src : dst;
	struct softgpu_copy req = {
		.va = gpu, .host = host, .size = size,
		.direction = to_gpu ? SOFTGPU_COPY_TO_GPU : SOFTGPU_COPY_FROM_GPU,
	};
	int err;

	if (sg_is_mapped_host(gpu, size)) {
		memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, size);
		return CUDA_SUCCESS;
	}
	err = sg_ioctl(SOFTGPU_IOC_COPY, &req);
	if (err) {
		sg_debug("emulated kernel: access to 0x%llx (%zu bytes) failed: %s",
			 (unsigned long long)gpu, size, strerror(err));
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	}
	return CUDA_SUCCESS;
}

int softgpu_gpu_read(CUdeviceptr src, void *dst, size_t size)
{
	return sg_gpu_copy((uint64_t)(uintptr_t)dst, src, size, 0);
}

int softgpu_gpu_write(CUdeviceptr dst, const void *src, size_t size)
{
	return sg_gpu_copy(dst, (uint64_t)(uintptr_t)src, size, 1);
}

int softgpu_gpu_load32(CUdeviceptr addr, uint32_t *value)
{
	if (addr % sizeof(*value))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	if (sg_is_mapped_host(addr, sizeof(*value))) {
		*value = __atomic_load_n((uint32_t *)(uintptr_t)addr, __ATOMIC_SEQ_CST);
		return CUDA_SUCCESS;
	}
	return softgpu_gpu_read(addr, value, sizeof(*value));
}

int softgpu_gpu_store32(CUdeviceptr addr, uint32_t value)
{
	if (addr % sizeof(value))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	if (sg_is_mapped_host(addr, sizeof(value))) {
		__atomic_store_n((uint32_t *)(uintptr_t)addr, value, __ATOMIC_SEQ_CST);
		return CUDA_SUCCESS;
	}
	return softgpu_gpu_write(addr, &value, sizeof(value));
}

int softgpu_gpu_load64(CUdeviceptr addr, uint64_t *value)
{
	if (addr % sizeof(*value))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	if (sg_is_mapped_host(addr, sizeof(*value))) {
		*value = __atomic_load_n((uint64_t *)(uintptr_t)addr, __ATOMIC_SEQ_CST);
		return CUDA_SUCCESS;
	}
	return softgpu_gpu_read(addr, value, sizeof(*value));
}

int softgpu_gpu_store64(CUdeviceptr addr, uint64_t value)
{
	if (addr % sizeof(value))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	if (sg_is_mapped_host(addr, sizeof(value))) {
		__atomic_store_n((uint64_t *)(uintptr_t)addr, value, __ATOMIC_SEQ_CST);
		return CUDA_SUCCESS;
	}
	return softgpu_gpu_write(addr, &value, sizeof(value));
}

uint64_t softgpu_globaltimer_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- Streams ---- */

static struct CUstream_st *sg_stream_new(CUcontext ctx, unsigned int flags)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->magic = SG_STREAM_MAGIC;
	s->ctx = ctx;
	s->flags = flags;
	pthread_mutex_init(&s->lock, NULL);
	sg_lock();
	s->next = sg_stream_list;
	sg_stream_list = s;
	sg_unlock();
	return s;
}

/*
 * Resolve a stream handle.  A created stream is bound to its context and is
 * used without a current one (the real driver's answer, see
 * tools/probe-contextless-on-h200.out); NULL and the special handles mean
 * the current context's default stream, so they need a current context.
 */
static CUresult sg_stream_resolve(CUstream handle, struct CUstream_st **out)
{
	CUcontext ctx;
	CUresult rc;

	if (handle && handle != SG_STREAM_LEGACY && handle != SG_STREAM_PER_THREAD) {
		rc = sg_check_init();
		if (rc != CUDA_SUCCESS)
			return rc;
		if (handle->magic != SG_STREAM_MAGIC)
			return CUDA_ERROR_INVALID_HANDLE;
		*out = handle;
		return CUDA_SUCCESS;
	}
	rc = sg_require_ctx(&ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	sg_lock();
	if (!ctx->default_stream) {
		sg_unlock();
		ctx->default_stream = sg_stream_new(ctx, 0);
		if (!ctx->default_stream)
			return CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		sg_unlock();
	}
	*out = ctx->default_stream;
	return CUDA_SUCCESS;
}

/* Wait for the stream's launch, if any; return what it returned. */
CUresult sg_stream_wait(struct CUstream_st *s)
{
	CUresult rc;

	pthread_mutex_lock(&s->lock);
	if (s->running) {
		pthread_join(s->thread, NULL);
		s->running = 0;
	}
	rc = s->error;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

CUresult sg_ctx_sync(CUcontext ctx)
{
	CUresult first = CUDA_SUCCESS;
	struct CUstream_st *s, *snapshot[256];
	unsigned int n = 0, i;

	sg_lock();
	for (s = sg_stream_list; s && n < 256; s = s->next)
		if (s->ctx == ctx)
			snapshot[n++] = s;
	sg_unlock();
	for (i = 0; i < n; i++) {
		CUresult rc = sg_stream_wait(snapshot[i]);

		if (first == CUDA_SUCCESS)
			first = rc;
	}
	return first;
}

/* After fork: the launch threads, and their faults, stayed in the parent. */
void sg_streams_forget(void)
{
	struct CUstream_st *s;

	for (s = sg_stream_list; s; s = s->next) {
		pthread_mutex_init(&s->lock, NULL);
		s->running = 0;
		s->error = CUDA_SUCCESS;
	}
}

/* A context is going away: forget its streams' faults (it is a new one if revived). */
void sg_ctx_streams_reset(CUcontext ctx)
{
	struct CUstream_st *s;

	sg_lock();
	for (s = sg_stream_list; s; s = s->next)
		if (s->ctx == ctx)
			s->error = CUDA_SUCCESS;
	sg_unlock();
}

SG_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	CUcontext ctx;
	CUresult rc = sg_require_ctx(&ctx);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!phStream || (Flags & ~(unsigned int)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	*phStream = sg_stream_new(ctx, Flags);
	return *phStream ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Like the real driver: no current context needed, the stream names its own. */
SG_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
	struct CUstream_st **pp;
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!hStream || hStream == SG_STREAM_LEGACY || hStream == SG_STREAM_PER_THREAD ||
	    hStream->magic != SG_STREAM_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	/* CUDA lets queued work finish after the call; here it finishes first. */
	sg_stream_wait(hStream);
	sg_lock();
	for (pp = &sg_stream_list; *pp; pp = &(*pp)->next) {
		if (*pp == hStream) {
			*pp = hStream->next;
			break;
		}
	}
	sg_unlock();
	hStream->magic = 0;
	pthread_mutex_destroy(&hStream->lock);
	free(hStream);
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
	struct CUstream_st *s;
	CUresult rc = sg_stream_resolve(hStream, &s);

	if (rc != CUDA_SUCCESS)
		return rc;
	return sg_stream_wait(s);
}

SG_EXPORT CUresult cuStreamQuery(CUstream hStream)
{
	struct CUstream_st *s;
	CUresult rc = sg_stream_resolve(hStream, &s);
	int busy;

	if (rc != CUDA_SUCCESS)
		return rc;
	pthread_mutex_lock(&s->lock);
	busy = s->running && pthread_tryjoin_np(s->thread, NULL) != 0;
	if (s->running && !busy)
		s->running = 0;
	rc = busy ? CUDA_ERROR_NOT_READY : s->error;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- Modules ---- */

static const char *sg_skip_space(const char *p)
{
	while (*p && isspace((unsigned char)*p))
		p++;
	return p;
}

static int sg_is_ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.';
}

/* Size of a PTX scalar type (".u64" ...), or 0. */
static size_t sg_ptx_type_size(const char *t, size_t len)
{
	static const struct { const char *name; size_t size; } types[] = {
		{ ".u8", 1 }, { ".s8", 1 }, { ".b8", 1 },
		{ ".u16", 2 }, { ".s16", 2 }, { ".b16", 2 }, { ".f16", 2 },
		{ ".u32", 4 }, { ".s32", 4 }, { ".b32", 4 }, { ".f32", 4 },
		{ ".u64", 8 }, { ".s64", 8 }, { ".b64", 8 }, { ".f64", 8 },
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strlen(types[i].name) == len && !strncmp(types[i].name, t, len))
			return types[i].size;
	return 0;
}

/*
 * Parse one parameter declaration, e.g. ".param .u64 foo_param_0" or
 * ".param .align 8 .b8 foo_param_1[16]", from [p, end).
 */
static int sg_parse_param(const char *p, const char *end, struct sg_param *param)
{
	size_t elem = 0, align = 0, count = 1;
	int pointee = 0;

	while (p < end) {
		const char *tok;

		p = sg_skip_space(p);
		if (p >= end)
			break;
		tok = p;
		while (p < end && !isspace((unsigned char)*p) && *p != '[')
			p++;
		if (p - tok == 4 && !strncmp(tok, ".ptr", 4)) {
			/* ".ptr .global .align N" describes what it points to. */
			pointee = 1;
		} else if (p - tok == 6 && !strncmp(tok, ".align", 6)) {
			size_t n;

			p = sg_skip_space(p);
			n = strtoul(p, (char **)&p, 10);
			if (!pointee)
				align = n;
		} else if (sg_ptx_type_size(tok, (size_t)(p - tok))) {
			elem = sg_ptx_type_size(tok, (size_t)(p - tok));
		} else if (p < end && *p == '[') {
			count = strtoul(p + 1, (char **)&p, 10);
			while (p < end && *p != ']')
				p++;
			if (p < end)
				p++;
		}
	}
	if (!elem || !count)
		return -1;
	param->size = elem * count;
	param->align = align ? align : elem;
	return 0;
}

static void sg_free_module(struct CUmod_st *mod)
{
	while (mod->functions) {
		struct CUfunc_st *f = mod->functions;

		mod->functions = f->next;
		f->magic = 0;
		free(f->name);
		free(f);
	}
	mod->magic = 0;
	free(mod);
}

/* Read every `.entry NAME(params)` of @ptx into @mod. */
static CUresult sg_parse_ptx(const char *ptx, struct CUmod_st *mod)
{
	const char *p = ptx;

	while ((p = strstr(p, ".entry")) != NULL) {
		const char *name, *q, *close;
		struct CUfunc_st *f;
		size_t offset = 0;

		p += 6;
		if (!isspace((unsigned char)*p))
			continue;
		name = sg_skip_space(p);
		for (q = name; sg_is_ident_char(*q); q++)
			;
		if (q == name)
			return CUDA_ERROR_INVALID_PTX;
		f = calloc(1, sizeof(*f));
		if (!f)
			return CUDA_ERROR_OUT_OF_MEMORY;
		f->magic = SG_FUNC_MAGIC;
		f->module = mod;
		f->name = strndup(name, (size_t)(q - name));
		f->next = mod->functions;
		mod->functions = f;
		if (!f->name)
			return CUDA_ERROR_OUT_OF_MEMORY;
		p = sg_skip_space(q);
		if (*p != '(')
			continue;	/* no parameters */
		close = strchr(p, ')');
		if (!close)
			return CUDA_ERROR_INVALID_PTX;
		p++;
		while (p < close) {
			const char *comma = memchr(p, ',', (size_t)(close - p));
			const char *decl_end = comma ? comma : close;
			struct sg_param *param;

			if (sg_skip_space(p) >= decl_end)
				break;
			if (f->nparams == SG_MAX_PARAMS)
				return CUDA_ERROR_INVALID_PTX;
			param = &f->params[f->nparams];
			if (sg_parse_param(p, decl_end, param)) {
				sg_debug("cannot read parameter %u of PTX entry %s", f->nparams,
					 f->name);
				return CUDA_ERROR_INVALID_PTX;
			}
			offset = (offset + param->align - 1) / param->align * param->align;
			param->offset = offset;
			offset += param->size;
			f->nparams++;
			p = decl_end + 1;
		}
		f->param_bytes = offset;
		p = close;
	}
	return mod->functions ? CUDA_SUCCESS : CUDA_ERROR_INVALID_PTX;
}

SG_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	const unsigned char *bytes = image;
	struct CUmod_st *mod;
	CUresult rc = sg_require_ctx(NULL);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	/* ELF cubins and fatbins carry machine code softgpu cannot use. */
	if ((bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F') ||
	    (bytes[0] == 0x50 && bytes[1] == 0xed && bytes[2] == 0x55 && bytes[3] == 0xba) ||
	    (bytes[0] == 0xb1 && bytes[1] == 0x43 && bytes[2] == 0x62 && bytes[3] == 0x46)) {
		sg_debug("cuModuleLoadData: softgpu loads PTX text only, not cubin/fatbin images");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	mod = calloc(1, sizeof(*mod));
	if (!mod)
		return CUDA_ERROR_OUT_OF_MEMORY;
	mod->magic = SG_MODULE_MAGIC;
	rc = sg_parse_ptx(image, mod);
	if (rc != CUDA_SUCCESS) {
		sg_debug("cuModuleLoadData: no usable .entry in the PTX text");
		sg_free_module(mod);
		return rc;
	}
	*module = mod;
	return CUDA_SUCCESS;
}

/* A module is bound to its context: no current one needed (as on the real driver). */
SG_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!hmod || hmod->magic != SG_MODULE_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	sg_free_module(hmod);
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	struct CUfunc_st *f;
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!hmod || hmod->magic != SG_MODULE_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	for (f = hmod->functions; f; f = f->next)
		if (!strcmp(f->name, name))
			break;
	if (!f)
		return CUDA_ERROR_NOT_FOUND;
	f->kernel = softgpu_find_emulated_kernel(name);
	if (!f->kernel) {
		sg_debug("PTX entry %s has no emulation: softgpu cannot run GPU code; add it to "
			 "softgpu_emulated_kernels[] in tests/softgpu/libcuda/emulated_kernels.c",
			 name);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	*hfunc = f;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	CUresult rc = sg_require_ctx(NULL);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (!hfunc || hfunc->magic != SG_FUNC_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	switch (attrib) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		*pi = 1024;
		break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS:
		*pi = 32;
		break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION:
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
		*pi = 90;
		break;
	case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
	case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
	case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
	case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		*pi = 0;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* ---- Launches ---- */

static void *sg_launch_thread(void *arg)
{
	struct sg_launch *l = arg;
	int rc = l->kernel->run(l->params, &l->config);

	l->stream->error = (CUresult)rc;
	if (rc)
		sg_debug("emulated kernel %s returned %d", l->kernel->name, rc);
	free(l->arg_copy);
	free(l);
	return NULL;
}

/* Copy the arguments: from kernelParams, or from the packed buffer in @extra. */
static CUresult sg_copy_args(struct CUfunc_st *f, void **kernelParams, void **extra,
			     struct sg_launch *l)
{
	const unsigned char *packed = NULL;
	size_t packed_size = 0;
	unsigned int i;

	if (kernelParams && extra)
		return CUDA_ERROR_INVALID_VALUE;
	if (extra) {
		for (i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				packed = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				packed_size = *(size_t *)extra[i + 1];
			else
				return CUDA_ERROR_INVALID_VALUE;
		}
		if (f->nparams && (!packed || packed_size < f->param_bytes))
			return CUDA_ERROR_INVALID_VALUE;
	} else if (f->nparams && !kernelParams) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	l->arg_copy = calloc(1, f->param_bytes ? f->param_bytes : 1);
	if (!l->arg_copy)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (i = 0; i < f->nparams; i++) {
		const void *src = packed ? packed + f->params[i].offset : kernelParams[i];

		memcpy(l->arg_copy + f->params[i].offset, src, f->params[i].size);
		l->params[i] = l->arg_copy + f->params[i].offset;
	}
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				  unsigned int gridDimZ, unsigned int blockDimX,
				  unsigned int blockDimY, unsigned int blockDimZ,
				  unsigned int sharedMemBytes, CUstream hStream,
				  void **kernelParams, void **extra)
{
	struct CUstream_st *s;
	struct sg_launch *l;
	CUresult rc = sg_stream_resolve(hStream, &s);
	int err;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!f || f->magic != SG_FUNC_MAGIC || !f->kernel)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ ||
	    (unsigned long long)blockDimX * blockDimY * blockDimZ > 1024 || blockDimZ > 64)
		return CUDA_ERROR_INVALID_VALUE;
	l = calloc(1, sizeof(*l));
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	rc = sg_copy_args(f, kernelParams, extra, l);
	if (rc != CUDA_SUCCESS) {
		free(l);
		return rc;
	}
	l->kernel = f->kernel;
	l->stream = s;
	l->config = (struct softgpu_launch_config){
		.grid_dim = { gridDimX, gridDimY, gridDimZ },
		.block_dim = { blockDimX, blockDimY, blockDimZ },
		.shared_mem_bytes = sharedMemBytes,
		.stream = hStream,
	};
	/*
	 * Stream order: the previous launch on this stream finishes first.  A
	 * kernel fault stays with the stream, as a real context's does.
	 */
	rc = sg_stream_wait(s);
	if (rc != CUDA_SUCCESS) {
		free(l->arg_copy);
		free(l);
		return rc;
	}
	pthread_mutex_lock(&s->lock);
	err = pthread_create(&s->thread, NULL, sg_launch_thread, l);
	if (!err)
		s->running = 1;
	pthread_mutex_unlock(&s->lock);
	if (err) {
		free(l->arg_copy);
		free(l);
		sg_debug("cannot start a thread for kernel %s: %s", f->name, strerror(err));
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	}
	return CUDA_SUCCESS;
}
