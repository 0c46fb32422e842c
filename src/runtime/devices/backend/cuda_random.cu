// The kernel behind spmd_op_random on CUDA devices: each thread computes the values of its
// elements from the seed and their global indices with runtime/devices/backend/random_values.h, the
// code the host runs, compiled with --fmad=false (src/CMakeLists.txt) so that the bits match the
// host's.
#include <cuda_runtime.h>

#include "runtime/devices/backend/cuda.h"
#include "runtime/base/check.h"
#include "runtime/devices/backend/random_values.h"

namespace
{

constexpr int THREADS = 256;

struct random_layout {
    int ndim;
    int64_t global_shape[SPMD_MAX_RANK];
    int64_t start[SPMD_MAX_RANK];
    int64_t extent[SPMD_MAX_RANK];
};

__global__ void random_kernel(uint64_t seed, int normal, int code, random_layout l, void *out,
                              size_t n)
{
    size_t elem = code == 1 ? 8 : code == 2 ? 2 : 4;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        // local row-major index -> global row-major index
        size_t rest = i;
        uint64_t global = 0, scale = 1;
        for (int j = l.ndim - 1; j >= 0; j--) {
            uint64_t local = rest % (uint64_t)l.extent[j];
            rest /= (uint64_t)l.extent[j];
            global += (uint64_t)(l.start[j] + (int64_t)local) * scale;
            scale *= (uint64_t)l.global_shape[j];
        }
        spmd__random_store(seed, global, code, normal, (char *)out + i * elem);
    }
}

} // namespace

extern "C" spmd_status spmd__cuda_random(void *stream, uint64_t seed, int normal, int code,
                                         int ndim, const int64_t *global_shape,
                                         const int64_t *start, const int64_t *extent, void *out)
{
    random_layout l = {};
    l.ndim = ndim;
    size_t n = 1;
    for (int j = 0; j < ndim; j++) {
        l.global_shape[j] = global_shape[j];
        l.start[j] = start[j];
        l.extent[j] = extent[j];
        n *= (size_t)extent[j];
    }
    if (!n)
        return SPMD_OK;
    size_t blocks = (n + THREADS - 1) / THREADS;
    unsigned grid = (unsigned)(blocks < 8192 ? blocks : 8192);
    random_kernel<<<grid, THREADS, 0, (cudaStream_t)stream>>>(seed, normal, code, l, out, n);
    cudaError_t e = cudaGetLastError();
    SPMD_REQUIRE(e == cudaSuccess, SPMD_ERR_BACKEND, "random kernel launch failed: %s (%s)",
                 cudaGetErrorString(e), cudaGetErrorName(e));
    return SPMD_OK;
}
