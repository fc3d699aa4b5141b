// SPDX-License-Identifier: MIT
/*
 * gdrdrv_holder: keep gdrdrv busy the way an application does, so that the
 * package fault tests can upgrade and remove the packages under it.
 *
 *   gdrdrv_holder READY_FILE
 *
 * Allocates GPU memory (cuMemAlloc), opens /dev/gdrdrv through libgdrapi,
 * pins and maps the buffer, writes a pattern through the mapping and reads it
 * back, then creates READY_FILE (holding its pid) and waits for SIGUSR1 or
 * SIGTERM.  On the signal it checks the pattern again through the same
 * mapping (the module under it must not have changed), then unmaps, unpins,
 * closes and frees.  Exit status 0 only if every step and both checks
 * passed; each step prints one line.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>
#include <gdrapi.h>

#define BUFFER_SIZE (4 * GPU_PAGE_SIZE)

static int fail(const char *what, int code)
{
	fprintf(stderr, "holder: %s failed (%d)\n", what, code);
	return 1;
}

static uint32_t pattern_word(size_t index, uint32_t seed)
{
	return (uint32_t)(index * 2654435761u) ^ seed;
}

static void fill(uint32_t *words, size_t count, uint32_t seed)
{
	for (size_t i = 0; i < count; i++)
		words[i] = pattern_word(i, seed);
}

static size_t mismatches(const uint32_t *words, size_t count, uint32_t seed)
{
	size_t bad = 0;

	for (size_t i = 0; i < count; i++)
		bad += words[i] != pattern_word(i, seed);
	return bad;
}

/* Write the pattern through the mapping, read it back into fresh memory, compare. */
static int check_roundtrip(gdr_mh_t mh, void *map, uint32_t seed, int write_first)
{
	size_t count = BUFFER_SIZE / sizeof(uint32_t);
	uint32_t *host = malloc(BUFFER_SIZE);
	size_t bad;

	if (!host)
		return fail("malloc", errno);
	if (write_first) {
		fill(host, count, seed);
		if (gdr_copy_to_mapping(mh, map, host, BUFFER_SIZE)) {
			free(host);
			return fail("gdr_copy_to_mapping", -1);
		}
	}
	memset(host, 0, BUFFER_SIZE);
	if (gdr_copy_from_mapping(mh, host, map, BUFFER_SIZE)) {
		free(host);
		return fail("gdr_copy_from_mapping", -1);
	}
	bad = mismatches(host, count, seed);
	free(host);
	if (bad) {
		fprintf(stderr, "holder: %zu of %zu words differ from the pattern\n", bad, count);
		return 1;
	}
	return 0;
}

static int write_ready_file(const char *path)
{
	char text[32];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int length = snprintf(text, sizeof(text), "%ld\n", (long)getpid());

	if (fd < 0)
		return fail("creating the ready file", errno);
	if (write(fd, text, (size_t)length) != length) {
		close(fd);
		return fail("writing the ready file", errno);
	}
	return close(fd) ? fail("closing the ready file", errno) : 0;
}

int main(int argc, char **argv)
{
	const uint32_t seed = 0x6764726eu ^ (uint32_t)getpid();
	CUdevice device;
	CUcontext context;
	CUdeviceptr dptr;
	gdr_mh_t mh;
	gdr_t g;
	void *map = NULL;
	sigset_t wait_for;
	int signal_number = 0;
	int status = 0;
	CUresult res;

	if (argc != 2) {
		fprintf(stderr, "usage: %s READY_FILE\n", argv[0]);
		return 2;
	}
	/* Block the release signals before anything else so none is lost. */
	sigemptyset(&wait_for);
	sigaddset(&wait_for, SIGUSR1);
	sigaddset(&wait_for, SIGTERM);
	sigprocmask(SIG_BLOCK, &wait_for, NULL);

	if ((res = cuInit(0)) != CUDA_SUCCESS)
		return fail("cuInit", (int)res);
	if ((res = cuDeviceGet(&device, 0)) != CUDA_SUCCESS)
		return fail("cuDeviceGet", (int)res);
	if ((res = cuDevicePrimaryCtxRetain(&context, device)) != CUDA_SUCCESS)
		return fail("cuDevicePrimaryCtxRetain", (int)res);
	if ((res = cuCtxSetCurrent(context)) != CUDA_SUCCESS)
		return fail("cuCtxSetCurrent", (int)res);
	if ((res = cuMemAlloc(&dptr, BUFFER_SIZE)) != CUDA_SUCCESS)
		return fail("cuMemAlloc", (int)res);

	g = gdr_open();
	if (!g)
		return fail("gdr_open", -1);
	if (gdr_pin_buffer(g, (unsigned long)dptr, BUFFER_SIZE, 0, 0, &mh))
		return fail("gdr_pin_buffer", -1);
	if (gdr_map(g, mh, &map, BUFFER_SIZE))
		return fail("gdr_map", -1);
	if (check_roundtrip(mh, map, seed, 1))
		return 1;
	printf("holder: pinned and mapped %lu bytes through %s, pattern verified\n", BUFFER_SIZE,
	       gdr_get_backend_name(g));
	fflush(stdout);
	if (write_ready_file(argv[1]))
		return 1;

	if (sigwait(&wait_for, &signal_number))
		return fail("sigwait", errno);
	printf("holder: signal %d: releasing\n", signal_number);
	if (check_roundtrip(mh, map, seed, 0))
		status = 1;
	else
		printf("holder: the pattern is intact through the same mapping\n");
	if (gdr_unmap(g, mh, map, BUFFER_SIZE))
		status = fail("gdr_unmap", -1);
	if (gdr_unpin_buffer(g, mh))
		status = fail("gdr_unpin_buffer", -1);
	if (gdr_close(g))
		status = fail("gdr_close", -1);
	if ((res = cuMemFree(dptr)) != CUDA_SUCCESS)
		status = fail("cuMemFree", (int)res);
	cuDevicePrimaryCtxRelease(device);
	printf("holder: released (%s)\n", status ? "with errors" : "clean");
	return status;
}
