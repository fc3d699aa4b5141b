// SPDX-License-Identifier: MIT
/* The fake gdrdrv and fake CUDA driver; see fakes.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uapi/gdrdrv.h"
#include "backend_gdrdrv.h"
#include "internal.h"
#include "fakes.h"

int __real_open(const char *path, int flags, ...);
int __real_close(int fd);
int __real_ioctl(int fd, unsigned long request, ...);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void *addr, size_t len);
void *__real_dlopen(const char *file, int mode);
void *__real_dlsym(void *handle, const char *name);
int __real_dlclose(void *handle);

int __wrap_open(const char *path, int flags, ...);
int __wrap_close(int fd);
int __wrap_ioctl(int fd, unsigned long request, ...);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_munmap(void *addr, size_t len);
void *__wrap_dlopen(const char *file, int mode);
void *__wrap_dlsym(void *handle, const char *name);
int __wrap_dlclose(void *handle);

#define MAX_FDS 4096
#define MAX_PINS 4096

struct fake_pin {
	bool used;
	uint64_t handle;
	unsigned long start;	/* 64 KiB aligned */
	size_t size;		/* multiple of 64 KiB */
	unsigned long offset;	/* addr & 0xffff */
	uint32_t requested;
	uint32_t type;		/* GDRDRV_MR_NONE while unmapped */
	void *map_addr;
	size_t map_len;
	uint32_t cb_flag;
};

struct fake_file {
	bool open;
	uint64_t next_handle;
	struct fake_pin *pins;	/* MAX_PINS */
	int used_slots;		/* pins[] beyond this were never used */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_gdrdrv_config cfg;
static struct fake_file files[MAX_FDS];
static unsigned int ioctl_counts[256];
static unsigned int open_count;
static int last_open_flags;
static uint64_t last_token;
static void *next_map_at;	/* fake_gdrdrv_next_map_at() */
static uint32_t last_va_space, last_flags;
static unsigned int attr_queries[8];

static struct fake_cuda_config cuda_cfg;
static bool dmabuf_fd[MAX_FDS];
static unsigned long long last_export_flags;
static unsigned int primary_retains, primary_releases;
static bool cuda_loaded;
static struct { unsigned long base; size_t size; } cuda_ranges[64];
static unsigned int cuda_range_count;
static char cuda_token;	/* its address is the fake libcuda handle */

struct fake_gdrdrv_config fake_gdrdrv_default(void)
{
	struct fake_gdrdrv_config c = {
		.version = FAKE_VERSION(2, 6),
		.minimum_api = FAKE_VERSION(2, 0),
		.default_type = GDRDRV_MR_WC,
		.persistent = true,
		.tsc_khz = 2000000,
	};
	return c;
}

void fake_reset(const struct fake_gdrdrv_config *c)
{
	int fd;

	pthread_mutex_lock(&lock);
	cfg = *c;
	for (fd = 0; fd < MAX_FDS; fd++) {
		if (!files[fd].open && !files[fd].pins)
			continue;
		free(files[fd].pins);
		memset(&files[fd], 0, sizeof(files[fd]));
	}
	memset(ioctl_counts, 0, sizeof(ioctl_counts));
	memset(attr_queries, 0, sizeof(attr_queries));
	open_count = 0;
	last_open_flags = 0;
	last_token = 0;
	next_map_at = NULL;
	last_va_space = last_flags = 0;
	memset(&cuda_cfg, 0, sizeof(cuda_cfg));
	last_export_flags = 0;
	primary_retains = primary_releases = 0;
	cuda_range_count = 0;
	pthread_mutex_unlock(&lock);
	fake_vulkan_reset();
}

static bool is_fake_fd(int fd)
{
	return fd >= 0 && fd < MAX_FDS && files[fd].open;
}

int __wrap_open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	int fd;

	if (flags & O_CREAT) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (strcmp(path, gdrdrv_sys_paths->device) != 0)
		return __real_open(path, flags, mode);

	pthread_mutex_lock(&lock);
	open_count++;
	last_open_flags = flags;
	if (cfg.open_errno) {
		pthread_mutex_unlock(&lock);
		errno = cfg.open_errno;
		return -1;
	}
	/* A real character device (1:3) so fstat() shows a major. */
	fd = __real_open("/dev/null", O_RDWR | (flags & O_CLOEXEC));
	if (fd >= 0 && fd < MAX_FDS) {
		files[fd].open = true;
		files[fd].next_handle = 0;
		files[fd].pins = calloc(MAX_PINS, sizeof(struct fake_pin));
	}
	pthread_mutex_unlock(&lock);
	return fd;
}

int __wrap_close(int fd)
{
	pthread_mutex_lock(&lock);
	if (is_fake_fd(fd)) {
		/* The driver's release: drop every pin of the file. */
		free(files[fd].pins);
		memset(&files[fd], 0, sizeof(files[fd]));
	}
	if (fd >= 0 && fd < MAX_FDS)
		dmabuf_fd[fd] = false;
	pthread_mutex_unlock(&lock);
	return __real_close(fd);
}

static struct fake_pin *find_pin(struct fake_file *f, uint64_t handle)
{
	int i;

	for (i = 0; i < f->used_slots; i++)
		if (f->pins[i].used && f->pins[i].handle == handle)
			return &f->pins[i];
	return NULL;
}

static int do_pin(struct fake_file *f, __u64 addr, __u64 size, __u64 *handle)
{
	unsigned long start = addr & ~(unsigned long)GDRDRV_GPU_PAGE_OFFSET;
	unsigned long end = (addr + size + GDRDRV_GPU_PAGE_OFFSET) & ~(unsigned long)GDRDRV_GPU_PAGE_OFFSET;
	size_t host_shift = gdr_host_page()->shift;
	uint64_t step;
	int i;

	if (addr == 0 || addr + size < addr || end <= start)
		return EINVAL;	/* the driver's range check: nothing to pin, or the range wraps */
	if (cfg.pin_errno)
		return cfg.pin_errno;
	for (i = 0; i < f->used_slots; i++)
		if (!f->pins[i].used)
			break;
	if (i == MAX_PINS)
		return ENOMEM;
	if (i == f->used_slots)
		f->used_slots++;
	memset(&f->pins[i], 0, sizeof(f->pins[i]));
	f->pins[i].used = true;
	f->pins[i].handle = f->next_handle;
	f->pins[i].start = start;
	f->pins[i].size = end - start;
	f->pins[i].offset = addr & GDRDRV_GPU_PAGE_OFFSET;
	step = (end - start) >> host_shift;
	f->next_handle += step ? step : 1;
	*handle = f->pins[i].handle;
	return 0;
}

static int fake_ioctl_locked(struct fake_file *f, unsigned long request, void *arg)
{
	unsigned int nr = _IOC_NR(request);
	bool v25 = cfg.version >= FAKE_VERSION(2, 5);
	struct fake_pin *pin;

	if (_IOC_TYPE(request) != GDRDRV_IOCTL)
		return EINVAL;
	ioctl_counts[nr & 0xff]++;
	switch (request) {
	case GDRDRV_IOC_GET_VERSION: {
		struct gdrdrv_get_version *v = arg;

		if (cfg.version_errno)
			return cfg.version_errno;
		v->gdrdrv_version = cfg.version;
		v->minimum_gdr_api_version = cfg.minimum_api;
		return 0;
	}
	case GDRDRV_IOC_PIN_BUFFER: {
		struct gdrdrv_pin_buffer *p = arg;

		last_token = p->p2p_token;
		last_va_space = p->va_space;
		last_flags = 0;
		if (cfg.persistent && (p->p2p_token || p->va_space))
			return EINVAL;	/* tokens are deprecated in persistent mode */
		if (cfg.refuse_p2p_tokens && (p->p2p_token || p->va_space))
			return EPERM;
		return do_pin(f, p->addr, p->size, &p->handle);
	}
	case GDRDRV_IOC_PIN_BUFFER_V2: {
		struct gdrdrv_pin_buffer_v2 *p = arg;

		if (!v25)
			return ENOTTY;
		last_flags = p->flags;
		if (p->flags & ~GDRDRV_PIN_BUFFER_FLAGS_ALL)
			return EINVAL;
		/* As gdrdrv: FORCE_PCIE needs persistent pins and the NVIDIA flag at build time. */
		if ((p->flags & GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE) && (!cfg.force_pcie || !cfg.persistent))
			return EINVAL;
		if ((p->flags & GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE) && cfg.force_pcie_refused_errno)
			return cfg.force_pcie_refused_errno;
		return do_pin(f, p->addr, p->size, &p->handle);
	}
	case GDRDRV_IOC_UNPIN_BUFFER: {
		struct gdrdrv_unpin_buffer *p = arg;

		pin = find_pin(f, p->handle);
		if (!pin)
			return EINVAL;
		pin->used = false;	/* a real driver zaps a live mapping here */
		return 0;
	}
	case GDRDRV_IOC_GET_CB_FLAG: {
		struct gdrdrv_get_cb_flag *p = arg;

		pin = find_pin(f, p->handle);
		if (!pin)
			return EINVAL;
		p->flag = pin->cb_flag;
		return 0;
	}
	case GDRDRV_IOC_GET_INFO: {
		struct gdrdrv_get_info *p = arg;

		pin = find_pin(f, p->handle);
		if (!pin)
			return EINVAL;
		p->va = pin->start;
		p->mapped_size = pin->size;
		p->page_size = GDRDRV_GPU_PAGE_SIZE;
		p->tsc_khz = cfg.tsc_khz;
		p->tm_cycles = 1234;
		p->mapped = pin->type != GDRDRV_MR_NONE;
		p->wc_mapping = pin->type == GDRDRV_MR_WC;
		return 0;
	}
	case GDRDRV_IOC_GET_INFO_V2: {
		struct gdrdrv_get_info_v2 *p = arg;

		if (cfg.version < FAKE_VERSION(2, 4))
			return ENOTTY;
		pin = find_pin(f, p->handle);
		if (!pin)
			return EINVAL;
		p->va = pin->start;
		p->mapped_size = pin->size;
		p->page_size = GDRDRV_GPU_PAGE_SIZE;
		p->tsc_khz = cfg.tsc_khz;
		p->tm_cycles = 1234;
		p->mapping_type = pin->type;
		return 0;
	}
	case GDRDRV_IOC_GET_ATTR: {
		struct gdrdrv_get_attr *p = arg;

		if (!v25)
			return ENOTTY;
		if (p->attr < 8)
			attr_queries[p->attr]++;
		if (cfg.attr_errno)
			return cfg.attr_errno;
		if (p->attr == GDRDRV_ATTR_USE_PERSISTENT_MAPPING)
			p->val = cfg.persistent;
		else if (p->attr == GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE)
			p->val = cfg.force_pcie && cfg.persistent;
		else if (p->attr == GDRDRV_ATTR_VMA_INHERITED_ON_FORK && cfg.knows_vma_attr)
			p->val = cfg.vma_inherited;
		else
			return EINVAL;
		return 0;
	}
	case GDRDRV_IOC_REQ_MAPPING_TYPE: {
		struct gdrdrv_req_mapping_type *p = arg;

		if (!v25)
			return ENOTTY;
		pin = find_pin(f, p->handle);
		if (!pin || p->mapping_type >= GDRDRV_MR_TYPE_COUNT)
			return EINVAL;
		if (pin->type != GDRDRV_MR_NONE)
			return EBUSY;
		if (cfg.unsupported_types & (1u << p->mapping_type))
			return EOPNOTSUPP;
		pin->requested = p->mapping_type;
		return 0;
	}
	default:
		return ENOTTY;
	}
}

int __wrap_ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;
	int rc;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);

	pthread_mutex_lock(&lock);
	if (!is_fake_fd(fd)) {
		pthread_mutex_unlock(&lock);
		return __real_ioctl(fd, request, arg);
	}
	rc = fake_ioctl_locked(&files[fd], request, arg);
	pthread_mutex_unlock(&lock);
	if (rc) {
		errno = rc;
		return -1;
	}
	return 0;
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct fake_pin *pin;
	void *va;
	int err = 0;

	pthread_mutex_lock(&lock);
	if (fd >= 0 && fd < MAX_FDS && dmabuf_fd[fd]) {
		struct stat st;

		if (cuda_cfg.mmap_errno) {
			err = cuda_cfg.mmap_errno;
			goto fail;
		}
		/* dma_buf_mmap_internal(): the mapping must lie inside the buffer. */
		if (fstat(fd, &st) < 0 || off < 0 || len > (size_t)st.st_size ||
		    (size_t)off > (size_t)st.st_size - len) {
			err = EINVAL;
			goto fail;
		}
	}
	if (!is_fake_fd(fd)) {
		pthread_mutex_unlock(&lock);
		return __real_mmap(addr, len, prot, flags, fd, off);
	}
	if (len == 0) {
		err = EINVAL;	/* the kernel's, before any driver sees it */
		goto fail;
	}
	/* gdrdrv's mmap checks, in its order. */
	pin = find_pin(&files[fd], (uint64_t)off >> gdr_host_page()->shift);
	if (!pin || pin->type != GDRDRV_MR_NONE || pin->cb_flag || pin->offset || !(flags & MAP_SHARED) ||
	    len > pin->size) {
		err = EINVAL;
		goto fail;
	}
	/* One inaccessible page after the mapping, so that a copy running past it faults. */
	va = __real_mmap(next_map_at, len + gdr_host_page()->size, prot,
			 MAP_PRIVATE | MAP_ANONYMOUS | (next_map_at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
	next_map_at = NULL;
	if (va == MAP_FAILED) {
		err = errno;
		goto fail;
	}
	mprotect((char *)va + len, gdr_host_page()->size, PROT_NONE);
	pin->type = pin->requested != GDRDRV_MR_NONE ? pin->requested : cfg.default_type;
	pin->map_addr = va;
	pin->map_len = len;
	pthread_mutex_unlock(&lock);
	return va;
fail:
	pthread_mutex_unlock(&lock);
	errno = err;
	return MAP_FAILED;
}

int __wrap_munmap(void *addr, size_t len)
{
	int fd, i;

	pthread_mutex_lock(&lock);
	for (fd = 0; fd < MAX_FDS; fd++) {
		if (!files[fd].open)
			continue;
		for (i = 0; i < files[fd].used_slots; i++) {
			struct fake_pin *pin = &files[fd].pins[i];

			if (addr && pin->map_addr == addr) {
				/* The VMA's close: the buffer is unmapped, even if it was unpinned first. */
				pin->type = GDRDRV_MR_NONE;
				pin->map_addr = NULL;
				__real_munmap((char *)addr + pin->map_len, gdr_host_page()->size);	/* the guard */
			}
		}
	}
	pthread_mutex_unlock(&lock);
	return __real_munmap(addr, len);
}

unsigned int fake_ioctl_count(unsigned int nr)
{
	unsigned int n;

	pthread_mutex_lock(&lock);
	n = ioctl_counts[nr & 0xff];
	pthread_mutex_unlock(&lock);
	return n;
}

unsigned int fake_open_count(void)
{
	return open_count;
}

int fake_last_open_flags(void)
{
	return last_open_flags;
}

unsigned int fake_live_files(void)
{
	unsigned int n = 0;
	int fd;

	pthread_mutex_lock(&lock);
	for (fd = 0; fd < MAX_FDS; fd++)
		n += files[fd].open;
	pthread_mutex_unlock(&lock);
	return n;
}

static unsigned int count_pins(bool mapped_only)
{
	unsigned int n = 0;
	int fd, i;

	pthread_mutex_lock(&lock);
	for (fd = 0; fd < MAX_FDS; fd++) {
		if (!files[fd].open)
			continue;
		for (i = 0; i < files[fd].used_slots; i++)
			if (files[fd].pins[i].used && (!mapped_only || files[fd].pins[i].map_addr))
				n++;
	}
	pthread_mutex_unlock(&lock);
	return n;
}

unsigned int fake_live_pins(void)
{
	return count_pins(false);
}

unsigned int fake_live_mappings(void)
{
	unsigned int n = 0;
	int fd, i;

	pthread_mutex_lock(&lock);
	for (fd = 0; fd < MAX_FDS; fd++) {
		if (!files[fd].open)
			continue;
		for (i = 0; i < files[fd].used_slots; i++)
			n += files[fd].pins[i].map_addr != NULL;
	}
	pthread_mutex_unlock(&lock);
	return n;
}

uint64_t fake_last_pin_token(void)
{
	return last_token;
}

uint32_t fake_last_pin_va_space(void)
{
	return last_va_space;
}

uint32_t fake_last_pin_flags(void)
{
	return last_flags;
}

unsigned int fake_attr_queries(uint32_t attr)
{
	unsigned int n;

	pthread_mutex_lock(&lock);
	n = attr < 8 ? attr_queries[attr] : 0;
	pthread_mutex_unlock(&lock);
	return n;
}

void fake_gdrdrv_next_map_at(void *addr)
{
	pthread_mutex_lock(&lock);
	next_map_at = addr;
	pthread_mutex_unlock(&lock);
}

void fake_gdrdrv_invalidate(unsigned long addr)
{
	int fd, i;

	pthread_mutex_lock(&lock);
	for (fd = 0; fd < MAX_FDS; fd++) {
		if (!files[fd].open)
			continue;
		for (i = 0; i < files[fd].used_slots; i++) {
			struct fake_pin *pin = &files[fd].pins[i];

			if (pin->used && addr >= pin->start && addr < pin->start + pin->size)
				pin->cb_flag = 1;
		}
	}
	pthread_mutex_unlock(&lock);
}

/* ---- fake CUDA driver ---- */

typedef int CUresult;

static CUresult cu_driver_get_version(int *v)
{
	*v = cuda_cfg.driver_version;
	return 0;
}

static CUresult cu_init(unsigned int flags)
{
	(void)flags;
	return 0;
}

static CUresult cu_device_get(int *dev, int ordinal)
{
	if (ordinal != 0)
		return 101;	/* CUDA_ERROR_INVALID_DEVICE */
	*dev = 0;
	return 0;
}

static CUresult cu_device_get_count(int *count)
{
	*count = 1;
	return 0;
}

static CUresult cu_device_get_attribute(int *value, int attr, int dev)
{
	(void)dev;
	if (attr == 124)
		*value = cuda_cfg.dmabuf_supported;
	else if (attr == 100)
		*value = cuda_cfg.coherent;
	else
		*value = 0;
	return 0;
}

static bool is_gpu_range(unsigned long long base, size_t size)
{
	unsigned int i;

	for (i = 0; i < cuda_range_count; i++)
		if (base >= cuda_ranges[i].base && size <= cuda_ranges[i].size &&
		    base - cuda_ranges[i].base <= cuda_ranges[i].size - size)
			return true;
	return false;
}

static CUresult cu_mem_get_handle_for_address_range(void *handle, unsigned long long ptr, size_t size, int type,
						    unsigned long long flags)
{
	int fd;

	if (type != 1 || size == 0 || !is_gpu_range(ptr, size) || (ptr & 4095) || (size & 4095))
		return 1;	/* CUDA_ERROR_INVALID_VALUE */
	fd = memfd_create("fake-dmabuf", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
		return 2;	/* CUDA_ERROR_OUT_OF_MEMORY */
	pthread_mutex_lock(&lock);
	if (fd < MAX_FDS)
		dmabuf_fd[fd] = true;
	last_export_flags = flags;
	pthread_mutex_unlock(&lock);
	*(int *)handle = fd;
	return 0;
}

static CUresult cu_ctx_get_current(void **ctx)
{
	*ctx = cuda_cfg.have_context ? (void *)&cuda_token : NULL;
	return 0;
}

static CUresult cu_ctx_set_current(void *ctx)
{
	(void)ctx;
	return 0;
}

static CUresult cu_primary_retain(void **ctx, int dev)
{
	(void)dev;
	__atomic_fetch_add(&primary_retains, 1, __ATOMIC_RELAXED);
	*ctx = &cuda_token;
	return 0;
}

static CUresult cu_primary_release(int dev)
{
	(void)dev;
	__atomic_fetch_add(&primary_releases, 1, __ATOMIC_RELAXED);
	return 0;
}

static CUresult cu_pointer_get_attribute(void *data, int attr, unsigned long long ptr)
{
	if (attr != 9 || !is_gpu_range(ptr, 1))
		return 1;
	*(int *)data = 0;
	return 0;
}

static CUresult cu_get_error_string(CUresult err, const char **str)
{
	*str = err == 1 ? "invalid argument" : "fake CUDA error";
	return 0;
}

static CUresult cu_get_error_name(CUresult err, const char **str)
{
	*str = err == 1 ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_FAKE";
	return 0;
}

static void *fake_cuda_symbol(const char *name);

static CUresult cu_get_proc_address(const char *symbol, void **pfn, int version, unsigned long long flags,
				    int *status)
{
	(void)version;
	(void)flags;
	*pfn = fake_cuda_symbol(symbol);
	if (status)
		*status = *pfn ? 0 : 1;
	return *pfn ? 0 : 500;	/* CUDA_ERROR_NOT_FOUND */
}

static void *fake_cuda_symbol(const char *name)
{
	static const struct { const char *name; void *fn; } table[] = {
		{ "cuDriverGetVersion", (void *)cu_driver_get_version },
		{ "cuGetProcAddress_v2", (void *)cu_get_proc_address },
		{ "cuInit", (void *)cu_init },
		{ "cuDeviceGet", (void *)cu_device_get },
		{ "cuDeviceGetCount", (void *)cu_device_get_count },
		{ "cuDeviceGetAttribute", (void *)cu_device_get_attribute },
		{ "cuMemGetHandleForAddressRange", (void *)cu_mem_get_handle_for_address_range },
		{ "cuCtxGetCurrent", (void *)cu_ctx_get_current },
		{ "cuCtxSetCurrent", (void *)cu_ctx_set_current },
		{ "cuDevicePrimaryCtxRetain", (void *)cu_primary_retain },
		{ "cuDevicePrimaryCtxRelease", (void *)cu_primary_release },
		{ "cuPointerGetAttribute", (void *)cu_pointer_get_attribute },
		{ "cuGetErrorString", (void *)cu_get_error_string },
		{ "cuGetErrorName", (void *)cu_get_error_name },
	};
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(table[i].name, name) == 0)
			return table[i].fn;
	return fake_vulkan_cuda_symbol(name);
}

void *__wrap_dlopen(const char *file, int mode)
{
	if (file && strcmp(file, "libcuda.so.1") == 0) {
		if (!cuda_cfg.present)
			return NULL;
		cuda_loaded = true;
		return &cuda_token;
	}
	if (file && strcmp(file, "libvulkan.so.1") == 0)
		return fake_vulkan_dlopen();
	return __real_dlopen(file, mode);
}

void *__wrap_dlsym(void *handle, const char *name)
{
	if (handle == &cuda_token)
		return fake_cuda_symbol(name);
	if (fake_vulkan_is_handle(handle))
		return fake_vulkan_dlsym(name);
	return __real_dlsym(handle, name);
}

int __wrap_dlclose(void *handle)
{
	if (handle == &cuda_token) {
		cuda_loaded = false;
		return 0;
	}
	if (fake_vulkan_is_handle(handle))
		return 0;
	return __real_dlclose(handle);
}

void fake_cuda_set(const struct fake_cuda_config *c)
{
	pthread_mutex_lock(&lock);
	cuda_cfg = *c;
	pthread_mutex_unlock(&lock);
}

void fake_cuda_add_range(unsigned long base, size_t size)
{
	pthread_mutex_lock(&lock);
	cuda_ranges[cuda_range_count].base = base;
	cuda_ranges[cuda_range_count].size = size;
	cuda_range_count++;
	pthread_mutex_unlock(&lock);
}

unsigned int fake_cuda_live_fds(void)
{
	unsigned int n = 0;
	int fd;

	pthread_mutex_lock(&lock);
	for (fd = 0; fd < MAX_FDS; fd++)
		n += dmabuf_fd[fd];
	pthread_mutex_unlock(&lock);
	return n;
}

unsigned long long fake_cuda_last_export_flags(void)
{
	return last_export_flags;
}

unsigned int fake_cuda_primary_retains(void)
{
	return primary_retains;
}

unsigned int fake_cuda_primary_releases(void)
{
	return primary_releases;
}

bool fake_cuda_loaded(void)
{
	return cuda_loaded;
}

/* ---- log capture ---- */

static int saved_stderr = -1;
static int capture_fd = -1;
static char captured[16384];

void log_capture_begin(void)
{
	fflush(stderr);
	capture_fd = memfd_create("log-capture", MFD_CLOEXEC);
	saved_stderr = dup(STDERR_FILENO);
	dup2(capture_fd, STDERR_FILENO);
}

const char *log_capture_end(void)
{
	ssize_t n;

	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	__real_close(saved_stderr);
	lseek(capture_fd, 0, SEEK_SET);
	n = read(capture_fd, captured, sizeof(captured) - 1);
	captured[n > 0 ? n : 0] = '\0';
	__real_close(capture_fd);
	/* Show it in the test's own log too. */
	if (write(STDERR_FILENO, captured, strlen(captured)) < 0) {
		/* nothing to do */
	}
	return captured;
}
