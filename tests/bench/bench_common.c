// SPDX-License-Identifier: MIT
/* Helpers shared by the gdrcopy benchmark programs; see bench_common.h. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "bench_common.h"

static struct {
	const char *tool;
	char *argv_line;
	bool json;
} bench;

void bench_init(const char *tool, int argc, char **argv)
{
	size_t len = 1;
	int i;

	bench.tool = tool;
	for (i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	bench.argv_line = calloc(1, len);
	if (!bench.argv_line)
		bench_die("out of memory");
	for (i = 0; i < argc; i++) {
		if (i)
			strcat(bench.argv_line, " ");
		strcat(bench.argv_line, argv[i]);
	}
	/* Text and records may interleave with child output; keep order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
}

void bench_set_json(bool on)
{
	bench.json = on;
}

bool bench_json(void)
{
	return bench.json;
}

void bench_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(bench.json ? stderr : stdout, fmt, ap);
	va_end(ap);
}

void bench_warn(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("WARNING: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void bench_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("ERROR: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_FAILURE);
}

/* --- JSON records ---------------------------------------------------- */

static void record_append(struct bench_record *rec, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void record_append(struct bench_record *rec, const char *fmt, ...)
{
	size_t room = sizeof(rec->buf) - rec->len;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(rec->buf + rec->len, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room)
		bench_die("internal: JSON record longer than %zu bytes", sizeof(rec->buf));
	rec->len += n;
}

static void record_escaped(struct bench_record *rec, const char *s)
{
	record_append(rec, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			record_append(rec, "\\%c", c);
		else if (c < 0x20)
			record_append(rec, "\\u%04x", c);
		else
			record_append(rec, "%c", c);
	}
	record_append(rec, "\"");
}

void bench_record_begin(struct bench_record *rec, const char *test)
{
	rec->len = 0;
	rec->buf[0] = '\0';
	record_append(rec, "{\"tool\": ");
	record_escaped(rec, bench.tool);
	record_append(rec, ", \"argv\": ");
	record_escaped(rec, bench.argv_line ? bench.argv_line : "");
	record_append(rec, ", \"test\": ");
	record_escaped(rec, test);
}

void bench_record_str(struct bench_record *rec, const char *key, const char *value)
{
	record_append(rec, ", ");
	record_escaped(rec, key);
	record_append(rec, ": ");
	record_escaped(rec, value);
}

void bench_record_u64(struct bench_record *rec, const char *key, uint64_t value)
{
	record_append(rec, ", ");
	record_escaped(rec, key);
	record_append(rec, ": %llu", (unsigned long long)value);
}

void bench_record_i64(struct bench_record *rec, const char *key, int64_t value)
{
	record_append(rec, ", ");
	record_escaped(rec, key);
	record_append(rec, ": %lld", (long long)value);
}

void bench_record_double(struct bench_record *rec, const char *key, double value)
{
	record_append(rec, ", ");
	record_escaped(rec, key);
	/* JSON has no NaN/Inf. */
	if (value != value || value > 1e300 || value < -1e300)
		record_append(rec, ": null");
	else
		record_append(rec, ": %.6g", value);
}

void bench_record_u64_array(struct bench_record *rec, const char *key, const uint64_t *values,
			    unsigned int n)
{
	unsigned int i;

	record_append(rec, ", ");
	record_escaped(rec, key);
	record_append(rec, ": [");
	for (i = 0; i < n; i++)
		record_append(rec, "%s%llu", i ? ", " : "", (unsigned long long)values[i]);
	record_append(rec, "]");
}

void bench_record_end(struct bench_record *rec)
{
	record_append(rec, "}");
	if (bench.json) {
		fputs(rec->buf, stdout);
		fputc('\n', stdout);
		fflush(stdout);
	}
}

/* --- Option parsing -------------------------------------------------- */

size_t bench_parse_size(char opt, const char *arg)
{
	unsigned long long value, scale = 1;
	char *end;

	errno = 0;
	if (!arg || !*arg || *arg == '-')
		goto bad;
	value = strtoull(arg, &end, 0);
	if (errno || end == arg)
		goto bad;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		scale = 1ULL << 10;
		break;
	case 'M':
		scale = 1ULL << 20;
		break;
	case 'G':
		scale = 1ULL << 30;
		break;
	default:
		goto bad;
	}
	if (*end && end[1] && strcasecmp(end + 1, "iB") && strcasecmp(end + 1, "B"))
		goto bad;
	if (value > SIZE_MAX / scale)
		goto bad;
	return (size_t)(value * scale);
bad:
	bench_die("-%c %s: expected a byte count such as 4096, 0x1000, 64K or 16M", opt,
		  arg ? arg : "");
}

unsigned int bench_parse_uint(char opt, const char *arg)
{
	unsigned long value;
	char *end;

	errno = 0;
	if (!arg || !*arg || *arg == '-')
		goto bad;
	value = strtoul(arg, &end, 0);
	if (errno || end == arg || *end || value > UINT_MAX)
		goto bad;
	return (unsigned int)value;
bad:
	bench_die("-%c %s: expected a non-negative integer", opt, arg ? arg : "");
}

struct bench_alloc bench_parse_alloc(const char *arg)
{
	struct bench_alloc alloc;

	if (!strcasecmp(arg, "gdr_alloc_mapped")) {
#ifdef GDRAPI_HAVE_ALLOC_MAPPED
		alloc.fn = NULL;
		alloc.name = "gdr_alloc_mapped";
		return alloc;
#else
		bench_die("-a gdr_alloc_mapped: this program was built against a gdrapi.h "
			  "without gdr_alloc_mapped()");
#endif
	}
	if (parse_gpu_alloc(arg, &alloc.fn, &alloc.name))
		bench_die("-a %s: expected " BENCH_ALLOC_CHOICES, arg);
	return alloc;
}

int bench_parse_map_flag(const char *arg)
{
	int flag;

	if (parse_map_flags(arg, &flag))
		bench_die("-M %s: expected default, wc, cache or device", arg);
	return flag;
}

bool bench_common_option(int c, const char *arg, int *dev_id, struct bench_alloc *alloc, int *map_flag)
{
	switch (c) {
	case 'd':
		*dev_id = (int)bench_parse_uint('d', arg);
		return true;
	case 'a':
		*alloc = bench_parse_alloc(arg);
		return true;
	case 'M':
		*map_flag = bench_parse_map_flag(arg);
		return true;
	case BENCH_JSON_OPTION:
		bench_set_json(true);
		return true;
	default:
		return false;
	}
}

const char *bench_mapping_type_name(gdr_mapping_type_t type)
{
	switch (type) {
	case GDR_MAPPING_TYPE_WC:
		return "wc";
	case GDR_MAPPING_TYPE_CACHING:
		return "cache";
	case GDR_MAPPING_TYPE_DEVICE:
		return "device";
	default:
		return "none";
	}
}

/* --- CUDA ------------------------------------------------------------ */

void bench_cu_check(CUresult res, const char *call, const char *file, int line)
{
	if (res == CUDA_SUCCESS)
		return;
	fflush(stdout);
	fprintf(stderr, "ERROR: %s failed: %s (%d) %s [%s:%d]\n", call, cuda_error_name(res),
		(int)res, cuda_error_string(res), file, line);
	if (res == CUDA_ERROR_NO_DEVICE || res == CUDA_ERROR_NOT_INITIALIZED ||
	    res == CUDA_ERROR_STUB_LIBRARY || res == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
		fprintf(stderr, "%s.\n", cuda_init_hint(res));
	exit(EXIT_FAILURE);
}

CUdevice bench_select_gpu(int dev_id, bool require_gdr)
{
	CUdevice dev;
	int n_devices = 0, n;

	BENCH_CU(cuInit(0));
	BENCH_CU(cuDeviceGetCount(&n_devices));
	for (n = 0; n < n_devices; n++) {
		int domain = 0, bus = 0, device = 0;
		char name[256];

		BENCH_CU(cuDeviceGet(&dev, n));
		BENCH_CU(cuDeviceGetName(name, sizeof(name), dev));
		BENCH_CU(cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev));
		BENCH_CU(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev));
		BENCH_CU(cuDeviceGetAttribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev));
		bench_say("GPU id:%d; name: %s; Bus id: %04x:%02x:%02x\n", n, name, domain, bus,
			  device);
	}
	if (dev_id < 0 || dev_id >= n_devices)
		bench_die("-d %d: there %s %d GPU%s (ids 0..%d)", dev_id,
			  n_devices == 1 ? "is" : "are", n_devices, n_devices == 1 ? "" : "s",
			  n_devices - 1);
	bench_say("selecting device %d\n", dev_id);
	/* The list went through bench_say so that JSON mode keeps stdout clean. */
	dev = gpu_init(dev_id, false, false, NULL);

	if (require_gdr) {
		int supported = 0;

		/*
		 * Drivers older than CUDA 11.3 do not know the attribute; then
		 * the pin itself is the test.
		 */
		if (cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
					 dev) == CUDA_SUCCESS && !supported)
			bench_die("GPU %d does not support GPUDirect RDMA "
				  "(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED is 0), so gdrcopy "
				  "cannot pin its memory. Use a data-center or professional GPU.",
				  dev_id);
	}
	return dev;
}

static int read_int_file(const char *path)
{
	FILE *f = fopen(path, "r");
	int value;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &value) != 1)
		value = -1;
	fclose(f);
	return value;
}

void bench_get_locality(CUdevice dev, struct bench_locality *loc)
{
	char bus_id[32], path[128];
	unsigned int cpu = 0, node = 0;
	size_t i;

	loc->gpu_numa_node = -1;
	loc->cpu = -1;
	loc->cpu_numa_node = -1;
	if (cuDeviceGetPCIBusId(bus_id, sizeof(bus_id), dev) == CUDA_SUCCESS) {
		/* CUDA prints "0000:3B:00.0"; sysfs names are lower case. */
		for (i = 0; bus_id[i]; i++)
			bus_id[i] = (char)tolower((unsigned char)bus_id[i]);
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", bus_id);
		loc->gpu_numa_node = read_int_file(path);
	}
	if (syscall(SYS_getcpu, &cpu, &node, NULL) == 0) {
		loc->cpu = (int)cpu;
		loc->cpu_numa_node = (int)node;
	}
}

void bench_print_locality(const struct bench_locality *loc)
{
	bench_say("GPU NUMA node: %d; CPU: %d, NUMA node: %d", loc->gpu_numa_node, loc->cpu,
		  loc->cpu_numa_node);
	if (loc->gpu_numa_node >= 0 && loc->cpu_numa_node >= 0 &&
	    loc->gpu_numa_node != loc->cpu_numa_node)
		bench_say(" (remote: run under numactl -N %d -l for local numbers)",
			  loc->gpu_numa_node);
	bench_say("\n");
}

void bench_gpu_alloc(struct bench_gpu_buf *buf, CUdevice dev, size_t size,
		     const struct bench_alloc *alloc, gdr_t g)
{
	char why[256];
	CUresult res;

	memset(buf, 0, sizeof(*buf));
	buf->size = size;
	if (!alloc->fn) {
#ifdef GDRAPI_HAVE_ALLOC_MAPPED
		uint64_t gpu_ptr = 0;
		void *cpu_ptr = NULL;
		int ret = gdr_alloc_mapped(g, size, &gpu_ptr, &cpu_ptr);

		if (ret)
			bench_die("gdr_alloc_mapped of %zu bytes: %s%s", size, strerror(ret),
				  ret == ENOTSUP ? " (only the vulkan backend allocates; "
				  "set GDRCOPY_BACKEND=vulkan or use -a cuMemAlloc)" : "");
		buf->ptr = (CUdeviceptr)gpu_ptr;
		buf->g = g;
		return;
#endif
	}
	if (alloc->fn == gpu_vmm_alloc && !gpu_vmm_rdma_supported(dev, why, sizeof(why)))
		bench_die("-a cuMemCreate: %s; use -a cuMemAlloc", why);
	res = alloc->fn(&buf->mem, size, true, true);
	if (res != CUDA_SUCCESS)
		bench_die("%s of %zu bytes failed: %s (%s)", alloc->name, size, cuda_error_name(res),
			  cuda_error_string(res));
	buf->ptr = buf->mem.ptr;
}

void bench_gpu_free(struct bench_gpu_buf *buf)
{
#ifdef GDRAPI_HAVE_ALLOC_MAPPED
	if (buf->g) {
		int ret = gdr_free_mapped(buf->g, buf->ptr);

		if (ret)
			bench_die("gdr_free_mapped: %s", strerror(ret));
		buf->g = NULL;
		return;
	}
#endif
	BENCH_CU(gpu_mem_free(&buf->mem));
}

/* --- gdrcopy --------------------------------------------------------- */

gdr_t bench_gdr_open(const struct bench_alloc *alloc)
{
	enum gpu_alloc_kind kind = !alloc->fn ? GPU_ALLOC_GDR_MAPPED
				   : alloc->fn == gpu_vmm_alloc ? GPU_ALLOC_CUMEMCREATE : GPU_ALLOC_CUMEMALLOC;
	gdr_t g = gdr_open_for(kind);

	if (!g)
		bench_die("gdr_open failed (%s). Check that the gdrdrv module is loaded "
			  "(grep gdrdrv /proc/devices) and /dev/gdrdrv exists and is "
			  "read/writable (without it, -a cuMemCreate or -a gdr_alloc_mapped "
			  "lets the vulkan backend map GPU memory); set GDRCOPY_ENABLE_LOGGING=1 "
			  "GDRCOPY_LOG_LEVEL=1 for the library's reasons.",
			  strerror(errno));
	return g;
}

void bench_print_info(const gdr_info_t *info)
{
	const char *type_str = "unknown";

	gdr_get_mapping_type_string(info->mapping_type, &type_str);
	bench_say("info.va: %llx\n", (unsigned long long)info->va);
	bench_say("info.mapped_size: %llu\n", (unsigned long long)info->mapped_size);
	bench_say("info.page_size: %u\n", info->page_size);
	bench_say("info.mapped: %u\n", info->mapped);
	bench_say("info.wc_mapping: %u\n", info->wc_mapping);
	bench_say("info.mapping_type: %s\n", type_str);
}

void bench_pin(gdr_t g, CUdeviceptr ptr, size_t size, bool force_pcie, gdr_mh_t *mh)
{
	int ret = force_pcie ? gdr_pin_buffer_v2(g, ptr, size, GDR_PIN_FLAG_FORCE_PCIE, mh)
			     : gdr_pin_buffer(g, ptr, size, 0, 0, mh);

	if (ret)
		bench_die("gdr_pin_buffer%s of %zu bytes at 0x%llx: %s%s", force_pcie ? "_v2 with FORCE_PCIE" : "",
			  size, (unsigned long long)ptr, strerror(ret),
			  force_pcie ? " (GDRCOPY_ENABLE_LOGGING=1 says why; run without -F to pin as usual)" : "");
}

void bench_print_force_pcie(bool force_pcie)
{
	bench_say("use force pcie: %s\n", force_pcie ? "yes" : "no");
}

void bench_print_fences(const gdr_info_t *info, bool loads)
{
	const char *state = info->mapping_type == GDR_MAPPING_TYPE_WC ? "enabled" : "disabled";

	bench_say("store fences: %s\n", state);
	if (loads)
		bench_say("load fences (gdr_copy_from_mapping): %s\n", state);
}

/* --- Statistics ------------------------------------------------------ */

struct bench_buckets bench_plan_buckets(unsigned int iters, const char *what)
{
	struct bench_buckets b;

	if (iters == 0)
		bench_die("%s: the iteration count must be at least 1", what);
	if (iters > BENCH_MAX_BUCKETS && iters % BENCH_MAX_BUCKETS) {
		unsigned int rounded = (iters / BENCH_MAX_BUCKETS + 1) * BENCH_MAX_BUCKETS;

		bench_warn("%s: %u iterations rounded up to %u, a multiple of %u buckets", what,
			   iters, rounded, BENCH_MAX_BUCKETS);
		iters = rounded;
	}
	b.iters = iters;
	b.count = iters < BENCH_MAX_BUCKETS ? iters : BENCH_MAX_BUCKETS;
	b.per_bucket = iters / b.count;
	return b;
}

static int compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct bench_stats bench_stats(double *values, unsigned int n)
{
	struct bench_stats s = { 0.0, 0.0, 0.0 };

	if (!n)
		return s;
	qsort(values, n, sizeof(*values), compare_double);
	s.min = values[0];
	s.max = values[n - 1];
	if (n % 2)
		s.median = values[n / 2];
	else
		s.median = (values[n / 2 - 1] + values[n / 2]) / 2.0;
	return s;
}

/* --- Data patterns --------------------------------------------------- */

static inline uint32_t pattern_word(size_t index, uint32_t seed)
{
	return (uint32_t)(index * 2654435761u) ^ seed ^ 0x3F4C5E6Au;
}

void bench_fill_pattern(void *buf, size_t size, uint32_t seed)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i < size; i++)
		p[i] = (unsigned char)(pattern_word(i / 4, seed) >> (8 * (i % 4)));
}

long bench_check_pattern(const void *buf, size_t size, uint32_t seed)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < size; i++)
		if (p[i] != (unsigned char)(pattern_word(i / 4, seed) >> (8 * (i % 4))))
			return (long)i;
	return -1;
}
