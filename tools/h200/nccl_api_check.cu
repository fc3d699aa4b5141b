// SPDX-License-Identifier: MIT
/*
 * NCCL's own GDRCopy start-up and collectives on NCCL's C API, against
 * whichever libgdrapi the environment offers, for NCCL releases that come
 * without PyTorch: the machine's system NCCL (-lnccl) and releases built
 * there from source (tools/h200/consumers_optin.sh).  The same judge as
 * nccl_check.py: one process, one GPU, ncclCommInitAll (with
 * NCCL_GDRCOPY_ENABLE=1 NCCL pins its work FIFO through libgdrapi there, so a
 * pin that fails fails the init), then all-reduce and all-gather of 8 B to
 * 64 MiB, every result compared with what was sent.
 *
 *   nccl_api_check        prints "nccl-check: ..." lines; exit 0 only when all passed
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

static int cuda_ok(cudaError_t rc, const char *what)
{
	if (rc == cudaSuccess)
		return 1;
	printf("nccl-check: collective failed: %s: %s\n", what, cudaGetErrorString(rc));
	return 0;
}

static int nccl_ok(ncclResult_t rc, const char *what)
{
	if (rc == ncclSuccess)
		return 1;
	printf("nccl-check: collective failed: %s: %s (%d)\n", what, ncclGetErrorString(rc), (int)rc);
	return 0;
}

int main(void)
{
	const size_t largest = 64u << 20;
	int version = 0, device = 0, sizes = 0, wrong = 0;
	float *host = (float *)malloc(largest), *back = (float *)malloc(largest);
	float *send = NULL, *recv = NULL;
	cudaStream_t stream;
	ncclComm_t comm;

	ncclGetVersion(&version);
	if (!host || !back || !cuda_ok(cudaSetDevice(0), "cudaSetDevice") ||
	    !cuda_ok(cudaMalloc((void **)&send, largest), "cudaMalloc") ||
	    !cuda_ok(cudaMalloc((void **)&recv, largest), "cudaMalloc") ||
	    !cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate") ||
	    !nccl_ok(ncclCommInitAll(&comm, 1, &device), "ncclCommInitAll"))
		return 1;
	/* 8 B, 64 B, ... 16 MiB, then 64 MiB: as nccl_check.py. */
	for (size_t size = 8; size; size = size == largest ? 0 : size * 8 > largest ? largest : size * 8) {
		size_t count = size / sizeof(float) ? size / sizeof(float) : 1, bytes = count * sizeof(float);

		for (size_t i = 0; i < count; i++)
			host[i] = (float)((i * 7 + size) % 8191);
		if (!cuda_ok(cudaMemcpy(send, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy") ||
		    !nccl_ok(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream), "ncclAllReduce") ||
		    !cuda_ok(cudaStreamSynchronize(stream), "all-reduce") ||
		    !cuda_ok(cudaMemcpy(back, recv, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy"))
			return 1;
		int ok = memcmp(back, host, bytes) == 0;
		if (!cuda_ok(cudaMemset(recv, 0, bytes), "cudaMemset") ||
		    !nccl_ok(ncclAllGather(send, recv, count, ncclFloat, comm, stream), "ncclAllGather") ||
		    !cuda_ok(cudaStreamSynchronize(stream), "all-gather") ||
		    !cuda_ok(cudaMemcpy(back, recv, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy"))
			return 1;
		ok = ok && memcmp(back, host, bytes) == 0;
		wrong += !ok;
		sizes++;
		printf("nccl-check: all_reduce+all_gather %zu B: %s\n", bytes, ok ? "ok" : "WRONG DATA");
	}
	ncclCommDestroy(comm);
	printf("nccl-check: %d sizes, %s (NCCL %d)\n", sizes, wrong ? "FAIL" : "PASS", version);
	return wrong ? 1 : 0;
}
