// SPDX-License-Identifier: MIT
/*
 * CUDA C++, built with nvcc as NVSHMEM programs are.  NVSHMEM's start-up and a put through its host API, one PE, against whichever
 * libgdrapi the environment offers (tools/h200/consumers.sh runs it per cell).
 * NVSHMEM's proxy transports load libgdrapi.so.2 at start-up and judge its
 * runtime version; with NVSHMEM_DEBUG=INFO its log says what it decided.  The
 * put's bytes are checked, and the program exits 1 on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#define BYTES (1 << 20)

static int check(cudaError_t rc, const char *what)
{
	if (rc == cudaSuccess)
		return 0;
	fprintf(stderr, "nvshmem-check: %s: %s\n", what, cudaGetErrorString(rc));
	return 1;
}

int main(void)
{
	unsigned char *host = static_cast<unsigned char *>(malloc(BYTES));
	unsigned char *back = static_cast<unsigned char *>(malloc(BYTES));
	unsigned char *source = nullptr, *symmetric;
	cudaStream_t stream;
	int bad = 0;

	if (!host || !back)
		return 1;
	/* NVSHMEM takes the device current at start-up. */
	if (check(cudaSetDevice(0), "cudaSetDevice"))
		return 1;
	nvshmem_init();
	printf("nvshmem-check: PE %d of %d up\n", nvshmem_my_pe(), nvshmem_n_pes());
	symmetric = static_cast<unsigned char *>(nvshmem_malloc(BYTES));
	if (!symmetric) {
		fprintf(stderr, "nvshmem-check: nvshmem_malloc failed\n");
		return 1;
	}
	for (size_t i = 0; i < BYTES; i++)
		host[i] = (unsigned char)(i * 131 + 7);
	if (check(cudaStreamCreate(&stream), "cudaStreamCreate") || check(cudaMalloc((void **)&source, BYTES), "cudaMalloc") ||
	    check(cudaMemcpy(source, host, BYTES, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU"))
		return 1;
	nvshmemx_putmem_on_stream(symmetric, source, BYTES, nvshmem_my_pe(), stream);
	nvshmemx_quiet_on_stream(stream);
	if (check(cudaStreamSynchronize(stream), "cudaStreamSynchronize") ||
	    check(cudaMemcpy(back, symmetric, BYTES, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU"))
		return 1;
	for (size_t i = 0; i < BYTES; i++)
		bad += back[i] != host[i];
	printf("nvshmem-check: putmem of %d bytes to PE %d: %s\n", BYTES, nvshmem_my_pe(), bad ? "WRONG DATA" : "ok");
	nvshmem_free(symmetric);
	cudaFree(source);
	nvshmem_finalize();
	printf("nvshmem-check: %s\n", bad ? "FAIL" : "PASS");
	return bad ? 1 : 0;
}
