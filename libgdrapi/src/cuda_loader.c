// SPDX-License-Identifier: MIT
/*
 * The one libcuda.so.1 loader (cuda_loader.h).  dlopen()ed ("libcuda.so.1",
 * the name the driver package always installs), never linked: the library
 * must load on machines without CUDA.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cuda_loader.h"
#include "internal.h"

#define CU_GET_PROC_ADDRESS_DEFAULT 0

/*
 * Why cuInit failed, in words a user can act on.  The CUDA driver library
 * says only "no CUDA-capable device is detected" (CUDA_ERROR_NO_DEVICE)
 * both where the NVIDIA kernel driver is not loaded and where it is but
 * this process sees no GPU; the two need different fixes.  Measured with
 * Debian's libcuda1 535 and 550 on a host without the kernel driver:
 * cuInit returns 100 and /proc/driver/nvidia/version does not exist.
 */
#define CUDA_ERROR_STUB_LIBRARY 34
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_SYSTEM_DRIVER_MISMATCH 803
#define CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE 804
#define NVIDIA_DRIVER_VERSION_FILE "/proc/driver/nvidia/version"

struct gdr_cuda_api gdr_cuda;

/* What we find with dlsym() first. */
static struct {
#define BOOT_FIELD(symbol) void *symbol;
	GDR_CUDA_DLSYM(BOOT_FIELD)
#undef BOOT_FIELD
} boot;

/* Guards the references and the load; gdr_cuda is written only by the first reference. */
static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int cuda_users;
static void *cuda_library;
static int driver_version;

/*
 * cuGetProcAddress has had two signatures: (symbol, pfn, version, flags) and,
 * from CUDA 12, _v2 with an extra status pointer.  We pass all five
 * arguments; the four-argument one ignores the last.
 */
typedef CUresult (*get_proc_address_fn)(const char *symbol, void **pfn, int version, unsigned long long flags,
					 int *status);

/* `name` through cuGetProcAddress, else the exported `symbol` of the signature we call; NULL when neither. */
static void *resolve(get_proc_address_fn get_proc, const char *name, const char *symbol)
{
	void *fn = NULL;
	int status = 0;

	if (get_proc && get_proc(name, &fn, GDR_CUDA_PROC_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
			CUDA_SUCCESS && fn)
		return fn;
	return dlsym(cuda_library, symbol);
}

static void unload(void)
{
	dlclose(cuda_library);
	cuda_library = NULL;
	memset(&gdr_cuda, 0, sizeof(gdr_cuda));
	memset(&boot, 0, sizeof(boot));
	driver_version = 0;
}

/* Caller holds cuda_lock. */
static int load(char *why)
{
	CUresult (*get_version)(int *version);
	get_proc_address_fn get_proc;

	cuda_library = dlopen(GDR_CUDA_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	if (!cuda_library) {
		const char *err = dlerror();

		snprintf(why, GDR_BACKEND_WHY_LEN, "cannot load %s (%s): install the NVIDIA driver's CUDA library",
			 GDR_CUDA_LIBRARY, err ? err : "not found");
		return ENOENT;
	}
#define BOOT(symbol) boot.symbol = dlsym(cuda_library, #symbol);
	GDR_CUDA_DLSYM(BOOT)
#undef BOOT
	get_version = (CUresult (*)(int *))boot.cuDriverGetVersion;
	if (!get_version || get_version(&driver_version) != CUDA_SUCCESS) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "%s has no working cuDriverGetVersion: reinstall the NVIDIA driver",
			 GDR_CUDA_LIBRARY);
		unload();
		return ENOSYS;
	}
	get_proc = (get_proc_address_fn)(boot.cuGetProcAddress_v2 ? boot.cuGetProcAddress_v2 : boot.cuGetProcAddress);
	/* Missing ones stay NULL: gdr_cuda_require() refuses only the backends that call them. */
#define RESOLVE(name, symbol, user, params) *(void **)&gdr_cuda.name = resolve(get_proc, #name, #symbol);
	GDR_CUDA_PROCS(RESOLVE)
#undef RESOLVE
	return 0;
}

int gdr_cuda_acquire(char *why)
{
	int rc = 0;

	pthread_mutex_lock(&cuda_lock);
	if (cuda_users == 0)
		rc = load(why);
	if (rc == 0)
		cuda_users++;
	pthread_mutex_unlock(&cuda_lock);
	return rc;
}

void gdr_cuda_release(void)
{
	pthread_mutex_lock(&cuda_lock);
	if (--cuda_users == 0)
		unload();
	pthread_mutex_unlock(&cuda_lock);
}

int gdr_cuda_driver_version(void)
{
	return driver_version;
}

static const char *cuda_error_name(CUresult err)
{
	const char *str = NULL;

	if (gdr_cuda.cuGetErrorName && gdr_cuda.cuGetErrorName(err, &str) == CUDA_SUCCESS && str)
		return str;
	return "CUDA error";
}

const char *gdr_cuda_strerror(CUresult err)
{
	const char *str = NULL;

	if (gdr_cuda.cuGetErrorString && gdr_cuda.cuGetErrorString(err, &str) == CUDA_SUCCESS && str)
		return str;
	return "unknown CUDA error";
}

static const char *cuda_init_hint(CUresult err)
{
	if (err == CUDA_ERROR_STUB_LIBRARY)
		return "libcuda.so.1 is the CUDA toolkit's stub, not the driver's: take the toolkit's stubs directory out of LD_LIBRARY_PATH";
	if (access(NVIDIA_DRIVER_VERSION_FILE, F_OK) != 0)
		return "the NVIDIA kernel driver is not loaded (no " NVIDIA_DRIVER_VERSION_FILE "): install the driver for this kernel and load it (modprobe nvidia)";
	if (err == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH || err == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
		return "libcuda.so.1 and the loaded NVIDIA kernel driver are different versions: reload the driver (or reboot) after an upgrade";
	if (err == CUDA_ERROR_NO_DEVICE)
		return "the NVIDIA driver is loaded but this process sees no GPU: check CUDA_VISIBLE_DEVICES, and that a container was given the /dev/nvidia* devices";
	return "nvidia-smi and the kernel log (NVRM lines) say more";
}

int gdr_cuda_require(unsigned int user, char *why)
{
	CUresult cr;

#define REQUIRE(name, symbol, entry_user, params)                                                             \
	if ((GDR_CUDA_USER_##entry_user == GDR_CUDA_USER_LOADER || (GDR_CUDA_USER_##entry_user & user)) &&   \
	    !gdr_cuda.name) {                                                                                 \
		snprintf(why, GDR_BACKEND_WHY_LEN, "%s has no %s: the CUDA driver is too old; upgrade it",     \
			 GDR_CUDA_LIBRARY, #symbol);                                                          \
		return ENOSYS;                                                                                \
	}
	GDR_CUDA_PROCS(REQUIRE)
#undef REQUIRE
	cr = gdr_cuda.cuInit(0);
	if (cr != CUDA_SUCCESS) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "cuInit failed: %s (error %d: %s); %s", cuda_error_name(cr), cr,
			 gdr_cuda_strerror(cr), cuda_init_hint(cr));
		return ENODEV;
	}
	return 0;
}

CUresult gdr_cuda_ctx_borrow(struct gdr_cuda_ctx *c, CUdevice dev)
{
	CUresult cr;

	c->dev = dev;
	c->retained = false;
	if (gdr_cuda.cuCtxGetCurrent(&c->ctx) != CUDA_SUCCESS)
		c->ctx = NULL;
	if (c->ctx)
		return CUDA_SUCCESS;
	cr = gdr_cuda.cuDevicePrimaryCtxRetain(&c->ctx, dev);
	if (cr != CUDA_SUCCESS) {
		c->ctx = NULL;
		return cr;
	}
	c->retained = true;
	gdr_cuda.cuCtxSetCurrent(c->ctx);
	return CUDA_SUCCESS;
}

void gdr_cuda_ctx_detach(const struct gdr_cuda_ctx *c)
{
	if (c->retained)
		gdr_cuda.cuCtxSetCurrent(NULL);
}

void gdr_cuda_ctx_release(struct gdr_cuda_ctx *c)
{
	if (c->retained)
		gdr_cuda.cuDevicePrimaryCtxRelease(c->dev);
	c->retained = false;
}
