// SPDX-License-Identifier: MIT
/*
 * What GDRCopy buys a UCX user: the latency of small copies between host
 * memory and GPU memory through UCX's own transports, gdr_copy (a CPU copy
 * through libgdrapi's mapping) against cuda_copy (cuMemcpyAsync and a stream
 * synchronisation), on UCX's public UCT API.  The GPU memory is cuMemCreate
 * memory with a POSIX fd handle (what NCCL's and NVSHMEM's allocators hand
 * out, and what libgdrapi's vulkan backend pins without a module); the host
 * side is pinned (cuMemAllocHost), cuda_copy's best case.
 *
 *   ucx_copy_lat [ROUNDS [CALLS]]     (default 5 rounds of 2000 calls)
 *
 * Per round, for each size from 8 B to 8 KiB, the two transports take turns
 * (interleaved, so drift on a shared machine hits both), each timing CALLS
 * put_short (host -> GPU) and CALLS get_short (GPU -> host) calls.  Before
 * timing, each transport's put is read back with cuMemcpyDtoH and its get
 * compared with what cuMemcpyHtoD wrote.  Prints one line per measurement:
 *   UCX-LAT: tl=gdr_copy op=put size=8 round=1 us=0.214
 * and "UCX-LAT: unavailable tl=... why=..." for a transport that cannot
 * run (gdr_copy without a libgdrapi backend that pins this memory).  Exit 0
 * when every transport that ran moved correct data.
 */
#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uct/api/uct.h>

#define GPU_BYTES (2u << 20)
#define LARGEST 8192u

struct tl {
	const char *component;	/* the UCT component's name */
	const char *name;	/* its transport */
	bool up;
	uct_component_h comp;
	uct_md_h md;
	uct_worker_h worker;
	ucs_async_context_t *async;
	uct_iface_h iface;
	uct_ep_h ep;
	uct_mem_h memh;
	uct_rkey_bundle_t rkey;
	char why[256];
};

static bool down(struct tl *t, const char *what, ucs_status_t status)
{
	snprintf(t->why, sizeof(t->why), "%s: %s", what, ucs_status_string(status));
	return false;
}

static bool find_md(struct tl *t)
{
	uct_component_h *components;
	unsigned count;
	ucs_status_t status = uct_query_components(&components, &count);

	if (status != UCS_OK)
		return down(t, "uct_query_components", status);
	for (unsigned i = 0; i < count; i++) {
		uct_component_attr_t attr = { .field_mask = UCT_COMPONENT_ATTR_FIELD_NAME };
		uct_md_config_t *config;

		if (uct_component_query(components[i], &attr) != UCS_OK || strcmp(attr.name, t->component))
			continue;
		status = uct_md_config_read(components[i], NULL, NULL, &config);
		if (status == UCS_OK) {
			/* The memory domain has the component's name (ucx_info -d lists "gdr_copy", "cuda_cpy"). */
			status = uct_md_open(components[i], t->component, config, &t->md);
			uct_config_release(config);
		}
		t->comp = components[i];
		uct_release_component_list(components);
		return status == UCS_OK ? true : down(t, "uct_md_open", status);
	}
	uct_release_component_list(components);
	snprintf(t->why, sizeof(t->why), "no %s component: this UCX was built without it", t->component);
	return false;
}

static bool open_tl(struct tl *t, void *gpu)
{
	uct_tl_resource_desc_t *tls;
	unsigned count, i;
	ucs_status_t status;

	if (!find_md(t))
		return false;
	status = uct_md_query_tl_resources(t->md, &tls, &count);
	if (status != UCS_OK)
		return down(t, "uct_md_query_tl_resources", status);
	for (i = 0; i < count && strcmp(tls[i].tl_name, t->name); i++)
		;
	if (i == count) {
		uct_release_tl_resource_list(tls);
		snprintf(t->why, sizeof(t->why), "memory domain %s lists no %s transport (libgdrapi's gdr_open failed?)",
			 t->component, t->name);
		return false;
	}
	status = ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &t->async);
	if (status == UCS_OK)
		status = uct_worker_create(t->async, UCS_THREAD_MODE_SINGLE, &t->worker);
	uct_iface_config_t *config = NULL;
	if (status == UCS_OK)
		status = uct_md_iface_config_read(t->md, tls[i].tl_name, NULL, NULL, &config);
	if (status == UCS_OK) {
		uct_iface_params_t params = {
			.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE,
			.open_mode = UCT_IFACE_OPEN_MODE_DEVICE,
			.mode.device = { .tl_name = tls[i].tl_name, .dev_name = tls[i].dev_name },
		};
		status = uct_iface_open(t->md, t->worker, &params, config, &t->iface);
		uct_config_release(config);
	}
	uct_release_tl_resource_list(tls);
	if (status != UCS_OK)
		return down(t, "uct_iface_open", status);

	uct_iface_attr_t attr;
	status = uct_iface_query(t->iface, &attr);
	if (status != UCS_OK)
		return down(t, "uct_iface_query", status);
	uint8_t dev_addr[attr.device_addr_len + 1], iface_addr[attr.iface_addr_len + 1];
	status = uct_iface_get_device_address(t->iface, (uct_device_addr_t *)dev_addr);
	if (status == UCS_OK)
		status = uct_iface_get_address(t->iface, (uct_iface_addr_t *)iface_addr);
	if (status == UCS_OK) {
		uct_ep_params_t ep = {
			.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
				      UCT_EP_PARAM_FIELD_IFACE_ADDR,
			.iface = t->iface,
			.dev_addr = (uct_device_addr_t *)dev_addr,
			.iface_addr = (uct_iface_addr_t *)iface_addr,
		};
		status = uct_ep_create(&ep, &t->ep);
	}
	if (status != UCS_OK)
		return down(t, "uct_ep_create", status);

	/* gdr_copy pins and maps the memory here (gdr_pin_buffer + gdr_map); cuda_copy needs no key. */
	t->rkey.rkey = UCT_INVALID_RKEY;
	if (strcmp(t->name, "gdr_copy") == 0) {
		uct_md_attr_t md_attr;

		status = uct_md_mem_reg(t->md, gpu, GPU_BYTES, UCT_MD_MEM_ACCESS_ALL, &t->memh);
		if (status != UCS_OK)
			return down(t, "uct_md_mem_reg of cuMemCreate memory", status);
		status = uct_md_query(t->md, &md_attr);
		uint8_t packed[md_attr.rkey_packed_size + 1];
		if (status == UCS_OK)
			status = uct_md_mkey_pack(t->md, t->memh, packed);
		if (status == UCS_OK)
			status = uct_rkey_unpack(t->comp, packed, &t->rkey);
		if (status != UCS_OK)
			return down(t, "packing the remote key", status);
	}
	return true;
}

static void close_tl(struct tl *t)
{
	if (t->rkey.rkey != UCT_INVALID_RKEY && t->rkey.rkey)
		uct_rkey_release(t->comp, &t->rkey);
	if (t->memh)
		uct_md_mem_dereg(t->md, t->memh);
	if (t->ep)
		uct_ep_destroy(t->ep);
	if (t->iface)
		uct_iface_close(t->iface);
	if (t->worker)
		uct_worker_destroy(t->worker);
	if (t->async)
		ucs_async_context_destroy(t->async);
	if (t->md)
		uct_md_close(t->md);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Put then get `size` bytes once each and check both against CUDA's view. */
static bool check(struct tl *t, CUdeviceptr gpu, uint8_t *host, uint8_t *seen, unsigned size, unsigned pass)
{
	for (unsigned i = 0; i < size; i++)
		host[i] = (uint8_t)(i * 131 + size + pass);
	if (uct_ep_put_short(t->ep, host, size, gpu, t->rkey.rkey) != UCS_OK ||
	    cuMemcpyDtoH(seen, gpu, size) != CUDA_SUCCESS || memcmp(seen, host, size)) {
		printf("UCX-LAT: FAILED tl=%s put_short of %u B did not arrive\n", t->name, size);
		return false;
	}
	for (unsigned i = 0; i < size; i++)
		host[i] = (uint8_t)(i * 29 + size + pass);
	if (cuMemcpyHtoD(gpu, host, size) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS ||
	    uct_ep_get_short(t->ep, seen, size, gpu, t->rkey.rkey) != UCS_OK || memcmp(seen, host, size)) {
		printf("UCX-LAT: FAILED tl=%s get_short of %u B read wrong bytes\n", t->name, size);
		return false;
	}
	return true;
}

static CUresult alloc_shareable(CUdevice device, CUdeviceptr *gpu)
{
	CUmemAllocationProp prop = { 0 };
	CUmemAccessDesc access = { 0 };
	CUmemGenericAllocationHandle handle;
	CUresult result;

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = device;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	if ((result = cuMemCreate(&handle, GPU_BYTES, &prop, 0)) != CUDA_SUCCESS)
		return result;
	result = cuMemAddressReserve(gpu, GPU_BYTES, GPU_BYTES, 0, 0);
	if (result == CUDA_SUCCESS)
		result = cuMemMap(*gpu, GPU_BYTES, 0, handle, 0);
	cuMemRelease(handle);
	if (result != CUDA_SUCCESS)
		return result;
	access.location = prop.location;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return cuMemSetAccess(*gpu, GPU_BYTES, &access, 1);
}

int main(int argc, char **argv)
{
	unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 5, calls = argc > 2 ? (unsigned)atoi(argv[2]) : 2000;
	struct tl tls[] = { { .component = "gdr_copy", .name = "gdr_copy" },
			    { .component = "cuda_cpy", .name = "cuda_copy" } };
	const unsigned ntl = sizeof(tls) / sizeof(tls[0]);
	CUdeviceptr gpu = 0;
	uint8_t *host = NULL, *seen = malloc(LARGEST);
	CUcontext context;
	CUdevice device;
	int bad = 0, ran = 0;

	if (rounds < 1 || calls < 1) {
		fprintf(stderr, "usage: %s [ROUNDS [CALLS]]  (both at least 1)\n", argv[0]);
		return 2;
	}
	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
	    cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS || cuCtxSetCurrent(context) != CUDA_SUCCESS ||
	    alloc_shareable(device, &gpu) != CUDA_SUCCESS || cuMemAllocHost((void **)&host, LARGEST) != CUDA_SUCCESS ||
	    !seen) {
		printf("UCX-LAT: FAILED setting up CUDA (a GPU, cuMemCreate with a POSIX fd, pinned host memory)\n");
		return 1;
	}
	for (unsigned i = 0; i < ntl; i++) {
		tls[i].up = open_tl(&tls[i], (void *)gpu);
		if (!tls[i].up)
			printf("UCX-LAT: unavailable tl=%s why=%s\n", tls[i].name, tls[i].why);
		for (unsigned size = 8; tls[i].up && size <= LARGEST; size *= 2)
			if (!check(&tls[i], gpu, host, seen, size, i)) {
				tls[i].up = false;
				bad = 1;
			}
		ran += tls[i].up;
	}
	for (unsigned round = 1; round <= rounds && ran; round++)
		for (unsigned size = 8; size <= LARGEST; size *= 2)
			for (unsigned k = 0; k < ntl; k++) {
				/* Alternate which transport goes first, round by round. */
				struct tl *t = &tls[(k + round) % ntl];
				double start;

				if (!t->up)
					continue;
				start = now_us();
				for (unsigned c = 0; c < calls; c++)
					uct_ep_put_short(t->ep, host, size, gpu, t->rkey.rkey);
				printf("UCX-LAT: tl=%s op=put size=%u round=%u us=%.3f\n", t->name, size, round,
				       (now_us() - start) / calls);
				start = now_us();
				for (unsigned c = 0; c < calls; c++)
					uct_ep_get_short(t->ep, seen, size, gpu, t->rkey.rkey);
				printf("UCX-LAT: tl=%s op=get size=%u round=%u us=%.3f\n", t->name, size, round,
				       (now_us() - start) / calls);
			}
	for (unsigned i = 0; i < ntl; i++)
		close_tl(&tls[i]);
	cuMemFreeHost(host);
	cuMemUnmap(gpu, GPU_BYTES);
	cuMemAddressFree(gpu, GPU_BYTES);
	cuDevicePrimaryCtxRelease(device);
	free(seen);
	printf("UCX-LAT: %s\n", bad ? "FAILED" : ran ? "done" : "no transport ran");
	return bad;
}
