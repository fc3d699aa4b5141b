// SPDX-License-Identifier: MIT
/*
 * gdrcopy_apiperf: mean latency of gdr_pin_buffer, gdr_map_v2, gdr_get_info,
 * gdr_unmap and gdr_unpin_buffer for pin sizes 64 KiB, 128 KiB, ... up to
 * -s, with a 10-bin histogram of the pin latency (pinning cost varies the
 * most, from tens of microseconds to milliseconds).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define DEFAULT_MAX_SIZE (16UL * 1024 * 1024)
#define DEFAULT_ITERS 100
#define DEFAULT_WARMUP 10
#define HISTOGRAM_BINS 10

struct apiperf_opts {
	size_t max_size;
	int dev_id;
	unsigned int iters;
	unsigned int warmup;
	struct bench_alloc alloc;
	int map_flag;
};

enum api_call { CALL_PIN, CALL_MAP, CALL_INFO, CALL_UNMAP, CALL_UNPIN, CALL_COUNT };

static void usage(const char *prog)
{
	printf("Usage: %s [-h] [-s size] [-d gpu] [-n iters] [-w iters] [-a fn] [-M type] [-j]\n"
	       "\n"
	       "Latency of the gdrcopy pin/map/get_info/unmap/unpin calls for pin sizes\n"
	       "64 KiB, 128 KiB, ... up to the -s size.\n"
	       "\n"
	       "Options:\n"
	       "  -h          print this help text and exit\n"
	       "  -s size     largest pin size (default: %lu)\n"
	       "  -d gpu      GPU id (default: 0)\n"
	       "  -n iters    timed iterations per size (default: %d)\n"
	       "  -w iters    untimed warm-up iterations per size (default: %d)\n"
	       "  -a fn       GPU allocation function: " BENCH_ALLOC_CHOICES "\n"
	       "              (default: cuMemAlloc)\n"
	       "  -M type     mapping type to request: default, wc, cache or device (default: default)\n"
	       "  -%c          print one JSON object per pin size on stdout (JSON Lines);\n"
	       "              the human-readable text goes to stderr (default: off)\n"
	       "\n"
	       "Sizes accept K, M and G suffixes (powers of 1024).\n",
	       prog, DEFAULT_MAX_SIZE, DEFAULT_ITERS, DEFAULT_WARMUP, BENCH_JSON_OPTION);
}

static void parse_args(int argc, char **argv, struct apiperf_opts *o)
{
	int c;

	o->max_size = DEFAULT_MAX_SIZE;
	o->dev_id = 0;
	o->iters = DEFAULT_ITERS;
	o->warmup = DEFAULT_WARMUP;
	o->alloc = bench_parse_alloc("cuMemAlloc");
	o->map_flag = GDR_MAP_FLAG_DEFAULT;

	while ((c = getopt(argc, argv, "hs:d:n:w:a:M:j")) != -1) {
		switch (c) {
		case 'h':
			usage(argv[0]);
			exit(EXIT_SUCCESS);
		case 's':
			o->max_size = bench_parse_size('s', optarg);
			break;
		case 'n':
			o->iters = bench_parse_uint('n', optarg);
			break;
		case 'w':
			o->warmup = bench_parse_uint('w', optarg);
			break;
		default:
			if (!bench_common_option(c, optarg, &o->dev_id, &o->alloc, &o->map_flag))
				bench_die("unknown option; run %s -h for the list", argv[0]);
		}
	}
	if (optind < argc)
		bench_die("unexpected argument '%s'; run %s -h for the list", argv[optind], argv[0]);
	if (!o->iters)
		bench_die("-n 0: at least one timed iteration is needed");
	if (o->max_size < GPU_PAGE_SIZE)
		o->max_size = GPU_PAGE_SIZE;
}

/* One pin/map/get_info/unmap/unpin round; times[] gets each call's microseconds. */
static void one_round(gdr_t g, CUdeviceptr dptr, size_t size, int map_flag, bool check,
		      double times[CALL_COUNT])
{
	void *map_ptr = NULL;
	gdr_info_t info;
	gdr_mh_t mh;
	double t0, t1;
	int ret;

	t0 = bench_now_us();
	ret = gdr_pin_buffer(g, dptr, size, 0, 0, &mh);
	t1 = bench_now_us();
	if (ret)
		bench_die("gdr_pin_buffer of %zu bytes: %s", size, strerror(ret));
	times[CALL_PIN] = t1 - t0;

	t0 = bench_now_us();
	ret = gdr_map_v2(g, mh, &map_ptr, size, map_flag);
	t1 = bench_now_us();
	if (ret)
		bench_die("gdr_map_v2 of %zu bytes with -M %s: %s", size,
			  map_flags_name(map_flag), strerror(ret));
	times[CALL_MAP] = t1 - t0;

	t0 = bench_now_us();
	ret = gdr_get_info(g, mh, &info);
	t1 = bench_now_us();
	if (ret)
		bench_die("gdr_get_info: %s", strerror(ret));
	times[CALL_INFO] = t1 - t0;

	if (check) {
		/* Outside the timed calls: the mapping must reach the pinned memory. */
		uint32_t word = (uint32_t)size ^ 0x6a09e667u, seen = 0;
		size_t last = size - sizeof(word);

		if (!info.mapped || info.mapped_size < size)
			bench_die("gdr_get_info after gdr_map_v2: mapped=%u mapped_size=%llu, "
				  "expected a mapping of at least %zu bytes", info.mapped,
				  (unsigned long long)info.mapped_size, size);
		ret = gdr_copy_to_mapping(mh, (char *)map_ptr + last, &word, sizeof(word));
		if (ret)
			bench_die("gdr_copy_to_mapping: %s", strerror(ret));
		BENCH_CU(cuMemcpyDtoH(&seen, dptr + last, sizeof(seen)));
		if (seen != word)
			bench_die("a word written through the %zu-byte mapping did not reach GPU "
				  "memory (read 0x%08x, wrote 0x%08x)", size, seen, word);
	}

	t0 = bench_now_us();
	ret = gdr_unmap(g, mh, map_ptr, size);
	t1 = bench_now_us();
	if (ret)
		bench_die("gdr_unmap: %s", strerror(ret));
	times[CALL_UNMAP] = t1 - t0;

	t0 = bench_now_us();
	ret = gdr_unpin_buffer(g, mh);
	t1 = bench_now_us();
	if (ret)
		bench_die("gdr_unpin_buffer: %s", strerror(ret));
	times[CALL_UNPIN] = t1 - t0;
}

/*
 * Ten equal bins over [min, max]; bin j covers [min + j*w, min + (j+1)*w),
 * the last one also holds max.  Labels are the bins' real bounds.
 */
static void histogram(const double *lat, unsigned int n, double min, double max,
		      uint64_t counts[HISTOGRAM_BINS], double *width)
{
	unsigned int i, bin;

	memset(counts, 0, HISTOGRAM_BINS * sizeof(counts[0]));
	*width = (max - min) / HISTOGRAM_BINS;
	for (i = 0; i < n; i++) {
		bin = *width > 0.0 ? (unsigned int)((lat[i] - min) / *width) : 0;
		if (bin >= HISTOGRAM_BINS)
			bin = HISTOGRAM_BINS - 1;
		counts[bin]++;
	}
}

static void run_size(gdr_t g, CUdeviceptr dptr, size_t size, const struct apiperf_opts *o,
		     double *pin_lat)
{
	double sum[CALL_COUNT] = { 0 }, mean[CALL_COUNT], times[CALL_COUNT];
	double min = 0.0, max = 0.0, width, median;
	uint64_t counts[HISTOGRAM_BINS];
	struct bench_record rec;
	struct bench_stats st;
	unsigned int i, c;

	for (i = 0; i < o->warmup; i++)
		one_round(g, dptr, size, o->map_flag, false, times);
	for (i = 0; i < o->iters; i++) {
		one_round(g, dptr, size, o->map_flag, i == 0, times);
		for (c = 0; c < CALL_COUNT; c++)
			sum[c] += times[c];
		pin_lat[i] = times[CALL_PIN];
		if (i == 0 || times[CALL_PIN] < min)
			min = times[CALL_PIN];
		if (i == 0 || times[CALL_PIN] > max)
			max = times[CALL_PIN];
	}
	for (c = 0; c < CALL_COUNT; c++)
		mean[c] = sum[c] / o->iters;
	histogram(pin_lat, o->iters, min, max, counts, &width);

	bench_say("Size(B)\tpin.Time(us)\tmap.Time(us)\tget_info.Time(us)\tunmap.Time(us)\t"
		  "unpin.Time(us)\n");
	bench_say("%zu\t%f\t%f\t%f\t%f\t%f\n", size, mean[CALL_PIN], mean[CALL_MAP],
		  mean[CALL_INFO], mean[CALL_UNMAP], mean[CALL_UNPIN]);
	bench_say("Histogram of gdr_pin_buffer latency for %zu bytes\n", size);
	if (width > 0.0) {
		for (c = 0; c < HISTOGRAM_BINS; c++)
			bench_say("[%.2f\t-\t%.2f]\t%llu\n", min + c * width,
				  c == HISTOGRAM_BINS - 1 ? max : min + (c + 1) * width,
				  (unsigned long long)counts[c]);
	} else {
		bench_say("[%.2f\t-\t%.2f]\t%llu\n", min, max, (unsigned long long)counts[0]);
	}

	st = bench_stats(pin_lat, o->iters);	/* sorts pin_lat: histogram is done */
	median = st.median;
	bench_record_begin(&rec, "gdr_api_latency");
	bench_record_u64(&rec, "size", size);
	bench_record_u64(&rec, "iters", o->iters);
	bench_record_u64(&rec, "warmup", o->warmup);
	bench_record_double(&rec, "pin_us", mean[CALL_PIN]);
	bench_record_double(&rec, "map_us", mean[CALL_MAP]);
	bench_record_double(&rec, "get_info_us", mean[CALL_INFO]);
	bench_record_double(&rec, "unmap_us", mean[CALL_UNMAP]);
	bench_record_double(&rec, "unpin_us", mean[CALL_UNPIN]);
	bench_record_double(&rec, "pin_min_us", min);
	bench_record_double(&rec, "pin_median_us", median);
	bench_record_double(&rec, "pin_max_us", max);
	bench_record_double(&rec, "pin_hist_bin_us", width);
	bench_record_u64_array(&rec, "pin_hist_counts", counts, width > 0.0 ? HISTOGRAM_BINS : 1);
	bench_record_str(&rec, "map_flag", map_flags_name(o->map_flag));
	bench_record_str(&rec, "alloc_fn", o->alloc.name);
	bench_record_u64(&rec, "gpu", (uint64_t)o->dev_id);
	bench_record_end(&rec);
}

int main(int argc, char **argv)
{
	struct bench_locality loc;
	struct apiperf_opts o;
	struct bench_gpu_buf gbuf;
	size_t rounded, size;
	double *pin_lat;
	CUdevice dev;
	gdr_t g;
	int ret;

	bench_init("gdrcopy_apiperf", argc, argv);
	parse_args(argc, argv, &o);

	dev = bench_select_gpu(o.dev_id, true);
	bench_get_locality(dev, &loc);
	bench_print_locality(&loc);

	rounded = (o.max_size + GPU_PAGE_SIZE - 1) & GPU_PAGE_MASK;
	g = bench_gdr_open(&o.alloc);
	bench_gpu_alloc(&gbuf, dev, rounded, &o.alloc, g);
	bench_say("device ptr: 0x%llx\n", (unsigned long long)gbuf.ptr);
	bench_say("allocated size: %zu\n", rounded);
	bench_say("gpu alloc fn: %s\n", o.alloc.name);

	pin_lat = calloc(o.iters, sizeof(*pin_lat));
	if (!pin_lat)
		bench_die("cannot allocate %u latency samples", o.iters);

	for (size = GPU_PAGE_SIZE; size <= rounded; size <<= 1)
		run_size(g, gbuf.ptr, size, &o, pin_lat);

	bench_gpu_free(&gbuf);
	bench_say("closing gdrdrv\n");
	ret = gdr_close(g);
	if (ret)
		bench_die("gdr_close: %s", strerror(ret));
	free(pin_lat);
	return EXIT_SUCCESS;
}
