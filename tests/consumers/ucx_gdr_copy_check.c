/*
 * Moves data between host memory and GPU memory through UCX's gdr_copy
 * transport, on UCX's public UCT API, and checks every byte.
 *
 * The GPU memory comes from cuMemAlloc (softgpu's libcuda in our VMs), or
 * from cuMemCreate with a POSIX fd handle (what our vulkan backend can pin
 * without a module, on the H200: tools/h200/consumers.sh); UCX
 * registers it with its gdr_copy memory domain (gdr_pin_buffer + gdr_map of
 * the libgdrapi it was built against), and the transport's put_short and
 * get_short copy through that mapping (gdr_copy_to_mapping /
 * gdr_copy_from_mapping).  The bytes are then read back, and written first,
 * with cuMemcpy, so the check does not trust UCX's own path for both ends.
 *
 *   ucx_gdr_copy_check [BYTES [cuMemAlloc|cuMemCreate]]   (default 2 MiB, cuMemAlloc; at least 64 KiB)
 *
 * Prints "UCX-GDR: ..." lines; exits 0 only when every check passed.
 */
#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uct/api/uct.h>

#define TRANSPORT "gdr_copy"

static int failed(const char *what, const char *why)
{
	printf("UCX-GDR: FAILED %s: %s\n", what, why);
	return 1;
}

static int cuda_failed(const char *what, CUresult result)
{
	const char *name = "unknown CUDA error";

	cuGetErrorName(result, &name);
	return failed(what, name);
}

static int ucs_failed(const char *what, ucs_status_t status)
{
	return failed(what, ucs_status_string(status));
}

/* A byte pattern that differs per offset and per pass, so a stale or shifted copy shows. */
static void fill(uint8_t *buffer, size_t length, unsigned pass)
{
	for (size_t i = 0; i < length; i++)
		buffer[i] = (uint8_t)(i * 131u + pass * 17u + (i >> 12));
}

static size_t first_difference(const uint8_t *a, const uint8_t *b, size_t length)
{
	for (size_t i = 0; i < length; i++)
		if (a[i] != b[i])
			return i;
	return length;
}

struct transport {
	uct_component_h component;
	uct_md_h md;
	uct_worker_h worker;
	ucs_async_context_t *async;
	uct_iface_h iface;
	uct_ep_h ep;
};

/* The gdr_copy component and its one memory domain, as ucx_info -d lists them. */
static int open_md(struct transport *t, uct_component_h *components, unsigned count)
{
	for (unsigned i = 0; i < count; i++) {
		uct_component_attr_t attr = { .field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
							    UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT };
		if (uct_component_query(components[i], &attr) != UCS_OK || strcmp(attr.name, TRANSPORT))
			continue;
		uct_md_resource_desc_t resources[attr.md_resource_count + 1];
		attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
		attr.md_resources = resources;
		ucs_status_t status = uct_component_query(components[i], &attr);
		if (status != UCS_OK)
			return ucs_failed("uct_component_query", status);
		/*
		 * UCX lists the domain only when gdr_open works and the CUDA
		 * runtime counts a GPU (cudaGetDeviceCount).  Opening it by its
		 * name needs neither listing: that is how a program can still use
		 * it where only the runtime's count fails.
		 */
		const char *md_name = attr.md_resource_count ? resources[0].md_name : TRANSPORT;
		printf("UCX-GDR: component gdr_copy lists %u memory domain(s)%s\n", attr.md_resource_count,
		       attr.md_resource_count ? "" : "; opening gdr_copy by name");
		uct_md_config_t *config;
		status = uct_md_config_read(components[i], NULL, NULL, &config);
		if (status != UCS_OK)
			return ucs_failed("uct_md_config_read", status);
		status = uct_md_open(components[i], md_name, config, &t->md);
		uct_config_release(config);
		if (status != UCS_OK)
			return ucs_failed("uct_md_open", status);
		t->component = components[i];
		printf("UCX-GDR: memory domain %s opened\n", md_name);
		return 0;
	}
	return failed("uct_query_components", "no gdr_copy component: UCX was built without GDRCopy");
}

static int open_transport(struct transport *t)
{
	uct_component_h *components;
	unsigned count;
	ucs_status_t status = uct_query_components(&components, &count);
	if (status != UCS_OK)
		return ucs_failed("uct_query_components", status);
	int bad = open_md(t, components, count);
	uct_release_component_list(components);
	if (bad)
		return bad;

	uct_tl_resource_desc_t *tls;
	unsigned tl_count;
	status = uct_md_query_tl_resources(t->md, &tls, &tl_count);
	if (status != UCS_OK)
		return ucs_failed("uct_md_query_tl_resources", status);
	if (tl_count == 0 || strcmp(tls[0].tl_name, TRANSPORT)) {
		uct_release_tl_resource_list(tls);
		return failed("uct_md_query_tl_resources", "the gdr_copy memory domain has no gdr_copy transport");
	}
	printf("UCX-GDR: transport %s on device %s\n", tls[0].tl_name, tls[0].dev_name);

	status = ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &t->async);
	if (status == UCS_OK)
		status = uct_worker_create(t->async, UCS_THREAD_MODE_SINGLE, &t->worker);
	if (status != UCS_OK) {
		uct_release_tl_resource_list(tls);
		return ucs_failed("uct_worker_create", status);
	}
	uct_iface_config_t *config;
	status = uct_md_iface_config_read(t->md, tls[0].tl_name, NULL, NULL, &config);
	if (status != UCS_OK) {
		uct_release_tl_resource_list(tls);
		return ucs_failed("uct_md_iface_config_read", status);
	}
	uct_iface_params_t params = {
		.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE,
		.open_mode = UCT_IFACE_OPEN_MODE_DEVICE,
		.mode.device = { .tl_name = tls[0].tl_name, .dev_name = tls[0].dev_name },
	};
	status = uct_iface_open(t->md, t->worker, &params, config, &t->iface);
	uct_config_release(config);
	uct_release_tl_resource_list(tls);
	if (status != UCS_OK)
		return ucs_failed("uct_iface_open", status);

	uct_iface_attr_t attr;
	status = uct_iface_query(t->iface, &attr);
	if (status != UCS_OK)
		return ucs_failed("uct_iface_query", status);
	uint64_t wanted = UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_GET_SHORT | UCT_IFACE_FLAG_CONNECT_TO_IFACE;
	if ((attr.cap.flags & wanted) != wanted)
		return failed("uct_iface_query", "gdr_copy lacks put_short, get_short or connect-to-iface");

	uint8_t device_address[attr.device_addr_len + 1], iface_address[attr.iface_addr_len + 1];
	status = uct_iface_get_device_address(t->iface, (uct_device_addr_t *)device_address);
	if (status == UCS_OK)
		status = uct_iface_get_address(t->iface, (uct_iface_addr_t *)iface_address);
	if (status != UCS_OK)
		return ucs_failed("uct_iface_get_address", status);
	uct_ep_params_t ep_params = {
		.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR,
		.iface = t->iface,
		.dev_addr = (uct_device_addr_t *)device_address,
		.iface_addr = (uct_iface_addr_t *)iface_address,
	};
	status = uct_ep_create(&ep_params, &t->ep);
	if (status != UCS_OK)
		return ucs_failed("uct_ep_create", status);
	return 0;
}

static void close_transport(struct transport *t)
{
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

/* Host -> GPU with put_short at `offset`, checked with cuMemcpyDtoH; then GPU -> host with get_short. */
static int move_and_check(struct transport *t, uct_rkey_t rkey, CUdeviceptr gpu, size_t offset, size_t length,
			  unsigned pass, uint8_t *sent, uint8_t *seen)
{
	char what[96];

	fill(sent, length, pass);
	snprintf(what, sizeof(what), "put_short %zu bytes at offset %zu", length, offset);
	ucs_status_t status = uct_ep_put_short(t->ep, sent, (unsigned)length, gpu + offset, rkey);
	if (status != UCS_OK)
		return ucs_failed(what, status);
	memset(seen, 0, length);
	CUresult result = cuMemcpyDtoH(seen, gpu + offset, length);
	if (result != CUDA_SUCCESS)
		return cuda_failed("cuMemcpyDtoH", result);
	size_t bad = first_difference(sent, seen, length);
	if (bad != length) {
		printf("UCX-GDR: FAILED %s: byte %zu reads %u through CUDA, %u was put\n", what, bad, seen[bad],
		       sent[bad]);
		return 1;
	}
	printf("UCX-GDR: host->gpu %s: ok\n", what);

	fill(sent, length, pass + 1000);
	result = cuMemcpyHtoD(gpu + offset, sent, length);
	/*
	 * From pageable memory, cuMemcpyHtoD returns once the bytes are staged,
	 * before the DMA reaches GPU memory (CUDA's API sync behaviour; softgpu
	 * copies at once, the H200 does not): wait for it before reading.
	 */
	if (result == CUDA_SUCCESS)
		result = cuCtxSynchronize();
	if (result != CUDA_SUCCESS)
		return cuda_failed("cuMemcpyHtoD", result);
	memset(seen, 0, length);
	snprintf(what, sizeof(what), "get_short %zu bytes at offset %zu", length, offset);
	status = uct_ep_get_short(t->ep, seen, (unsigned)length, gpu + offset, rkey);
	if (status != UCS_OK)
		return ucs_failed(what, status);
	bad = first_difference(sent, seen, length);
	if (bad != length) {
		printf("UCX-GDR: FAILED %s: byte %zu reads %u through gdr_copy, CUDA wrote %u\n", what, bad,
		       seen[bad], sent[bad]);
		return 1;
	}
	printf("UCX-GDR: gpu->host %s: ok\n", what);
	return 0;
}

/* cuMemCreate memory that can be exported as a POSIX fd, mapped read-write at a reserved range. */
static CUresult alloc_shareable(CUdevice device, CUdeviceptr *gpu, size_t *size)
{
	CUmemAllocationProp prop = { 0 };
	CUmemAccessDesc access = { 0 };
	CUmemGenericAllocationHandle handle;
	size_t granularity;
	CUresult result;

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = device;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	result = cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (result != CUDA_SUCCESS)
		return result;
	*size = (*size + granularity - 1) / granularity * granularity;
	if ((result = cuMemCreate(&handle, *size, &prop, 0)) != CUDA_SUCCESS)
		return result;
	result = cuMemAddressReserve(gpu, *size, granularity, 0, 0);
	if (result == CUDA_SUCCESS && (result = cuMemMap(*gpu, *size, 0, handle, 0)) != CUDA_SUCCESS)
		cuMemAddressFree(*gpu, *size);
	cuMemRelease(handle);	/* the mapping holds the memory from here on */
	if (result != CUDA_SUCCESS)
		return result;
	access.location = prop.location;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return cuMemSetAccess(*gpu, *size, &access, 1);
}

static void free_shareable(CUdeviceptr gpu, size_t size)
{
	cuMemUnmap(gpu, size);
	cuMemAddressFree(gpu, size);
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 2u << 20;
	const char *allocator = argc > 2 ? argv[2] : "cuMemAlloc";
	bool shareable = strcmp(allocator, "cuMemCreate") == 0;
	if (size < 65536 || (!shareable && strcmp(allocator, "cuMemAlloc") != 0)) {
		fprintf(stderr, "usage: %s [BYTES [cuMemAlloc|cuMemCreate]]  (BYTES at least 65536: one GPU page)\n",
			argv[0]);
		return 2;
	}
	CUdevice device;
	CUcontext context;
	CUresult result = cuInit(0);
	if (result == CUDA_SUCCESS)
		result = cuDeviceGet(&device, 0);
	if (result == CUDA_SUCCESS)
		result = cuDevicePrimaryCtxRetain(&context, device);
	if (result == CUDA_SUCCESS)
		result = cuCtxSetCurrent(context);
	if (result != CUDA_SUCCESS)
		return cuda_failed("CUDA initialisation", result);

	struct transport t = { 0 };
	int bad = open_transport(&t);
	CUdeviceptr gpu = 0;
	uct_mem_h memh = NULL;
	uct_rkey_bundle_t rkey = { 0 };
	uint8_t *sent = malloc(size), *seen = malloc(size);
	if (!bad && (!sent || !seen))
		bad = failed("malloc", "out of memory");
	if (!bad && (result = shareable ? alloc_shareable(device, &gpu, &size) : cuMemAlloc(&gpu, size)) != CUDA_SUCCESS)
		bad = cuda_failed(allocator, result);
	if (!bad) {
		ucs_status_t status = uct_md_mem_reg(t.md, (void *)gpu, size, UCT_MD_MEM_ACCESS_ALL, &memh);
		if (status != UCS_OK)
			bad = ucs_failed(shareable ? "uct_md_mem_reg of cuMemCreate memory" : "uct_md_mem_reg of cuMemAlloc memory",
					 status);
	}
	if (!bad) {
		uct_md_attr_t md_attr;
		ucs_status_t status = uct_md_query(t.md, &md_attr);
		uint8_t packed[md_attr.rkey_packed_size + 1];
		if (status == UCS_OK)
			status = uct_md_mkey_pack(t.md, memh, packed);
		if (status == UCS_OK)
			status = uct_rkey_unpack(t.component, packed, &rkey);
		if (status != UCS_OK)
			bad = ucs_failed("packing the remote key", status);
		else
			printf("UCX-GDR: registered %zu bytes of %s memory at 0x%llx\n", size, allocator,
			       (unsigned long long)gpu);
	}
	/* The whole buffer, then odd sizes at odd offsets (the copy's unaligned head and tail). */
	const size_t spans[][2] = { { 0, size }, { 1, 4093 }, { 65536 - 3, 7 }, { size - 129, 129 } };
	for (unsigned i = 0; !bad && i < sizeof(spans) / sizeof(spans[0]); i++)
		bad = move_and_check(&t, rkey.rkey, gpu, spans[i][0], spans[i][1], i, sent, seen);

	if (rkey.rkey)
		uct_rkey_release(t.component, &rkey);
	if (memh && uct_md_mem_dereg(t.md, memh) != UCS_OK)
		bad = failed("uct_md_mem_dereg", "deregistering failed");
	if (gpu && shareable)
		free_shareable(gpu, size);
	else if (gpu)
		cuMemFree(gpu);
	close_transport(&t);
	cuDevicePrimaryCtxRelease(device);
	free(sent);
	free(seen);
	printf("UCX-GDR: %s\n", bad ? "FAILED" : "all data checks passed");
	return bad;
}
