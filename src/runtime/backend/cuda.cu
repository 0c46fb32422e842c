// CUDA devices: the device registry (enumerate, allocate, copy). Compiled by nvcc as C++;
// entry points are extern "C" through backend.h. Errors are translated here, once, keeping
// CUDA's own text.
#include <cuda_runtime.h>

#include "runtime/backend/backend.h"
#include "runtime/check.h"

#define CUDA_REQUIRE(expr, code, what)                                                             \
    do {                                                                                           \
        cudaError_t e_ = (expr);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return SPMD_ERROR((code), "%s failed: %s (%s)", (what), cudaGetErrorString(e_),        \
                              cudaGetErrorName(e_));                                               \
    } while (0)

static spmd_status cuda_probe(int *count)
{
    int n = 0; // left unwritten when there is no driver
    cudaError_t e = cudaGetDeviceCount(&n);
    *count = 0;
    if (e != cudaSuccess)
        return SPMD_ERROR(SPMD_ERR_BACKEND,
                          "no usable GPU: cudaGetDeviceCount failed: %s (%s); use "
                          "SPMD_PLATFORM=cpu, or check the NVIDIA driver and CUDA_VISIBLE_DEVICES",
                          cudaGetErrorString(e), cudaGetErrorName(e));
    if (n <= 0)
        return SPMD_ERROR(SPMD_ERR_BACKEND,
                          "no usable GPU: the CUDA runtime sees 0 devices; use SPMD_PLATFORM=cpu, "
                          "or check CUDA_VISIBLE_DEVICES");
    *count = n;
    return SPMD_OK;
}

static spmd_status cuda_bind_thread(int hw)
{
    CUDA_REQUIRE(cudaSetDevice(hw), SPMD_ERR_BACKEND, "cudaSetDevice");
    return SPMD_OK;
}

static spmd_status cuda_alloc(int hw, size_t bytes, void **ptr)
{
    CUDA_REQUIRE(cudaSetDevice(hw), SPMD_ERR_BACKEND, "cudaSetDevice");
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation)
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "cudaMalloc of %zu bytes on GPU %d: %s", bytes,
                          hw, cudaGetErrorString(e));
    CUDA_REQUIRE(e, SPMD_ERR_BACKEND, "cudaMalloc");
    *ptr = p;
    return SPMD_OK;
}

static void cuda_free(int hw, void *ptr)
{
    if (!ptr)
        return;
    if (cudaSetDevice(hw) == cudaSuccess)
        cudaFree(ptr);
}

static spmd_status cuda_copy(int hw, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    if (!bytes)
        return SPMD_OK;
    CUDA_REQUIRE(cudaSetDevice(hw), SPMD_ERR_BACKEND, "cudaSetDevice");
    CUDA_REQUIRE(cudaMemcpy(dst, src, bytes, kind), SPMD_ERR_BACKEND, "cudaMemcpy");
    return SPMD_OK;
}

static spmd_status cuda_copy_to_device(int hw, void *dst, const void *src, size_t bytes)
{
    return cuda_copy(hw, dst, src, bytes, cudaMemcpyHostToDevice);
}

static spmd_status cuda_copy_to_host(int hw, void *dst, const void *src, size_t bytes)
{
    return cuda_copy(hw, dst, src, bytes, cudaMemcpyDeviceToHost);
}

static spmd_status cuda_copy_on_device(int hw, void *dst, const void *src, size_t bytes)
{
    return cuda_copy(hw, dst, src, bytes, cudaMemcpyDeviceToDevice);
}

extern "C" const spmd__backend spmd__backend_cuda = {
    "cuda",
    SPMD_PLATFORM_CUDA,
    0,
    cuda_probe,
    cuda_bind_thread,
    cuda_alloc,
    cuda_free,
    cuda_copy_to_device,
    cuda_copy_to_host,
    cuda_copy_on_device,
};
