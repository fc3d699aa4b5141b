/*
 * What the CUDA runtime answers to cudaGetDeviceCount: UCX (before it lists
 * gdr_copy) and libfabric's CUDA hmem (before it uses GDRCopy) ask it first.
 * Run with SOFTGPU_DEBUG=1 over softgpu's libcuda to see the driver calls it
 * could not make.  Prints one "CUDART: ..." line; exits 0 when a GPU counted.
 */
#include <cuda_runtime.h>
#include <stdio.h>

int main(void)
{
	int count = -1, runtime = 0, driver = 0;

	cudaRuntimeGetVersion(&runtime);
	cudaError_t result = cudaGetDeviceCount(&count);
	cudaDriverGetVersion(&driver);
	printf("CUDART: runtime %d, driver %d: cudaGetDeviceCount returned %d (%s: %s), count %d\n", runtime, driver,
	       (int)result, cudaGetErrorName(result), cudaGetErrorString(result), count);
	return result != cudaSuccess || count < 1;
}
