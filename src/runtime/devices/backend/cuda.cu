// CUDA devices: the device registry (enumerate, allocate, copy), one stream and one cuBLAS
// handle per logical device, and gemm. Compiled by nvcc as C++; entry points are extern "C"
// through backend.h and cuda.h. Errors are translated here, once, keeping CUDA's own text.
//
// Device buffers are CUDA managed memory placed on their GPU: kernels and cuBLAS read them at
// device speed, and host code (an fn body written for CPU devices, the library's host paths)
// may still read them; the driver migrates the pages it touches.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "runtime/devices/backend/backend.h"
#include "runtime/devices/backend/cuda.h"
#include "runtime/base/check.h"

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
    // Host code reads device buffers while other devices' kernels run: that needs concurrent
    // managed access (every Linux GPU since Pascal; not Windows, not some virtual GPUs).
    for (int d = 0; d < n; d++) {
        int concurrent = 0;
        if (cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, d) !=
                cudaSuccess ||
            !concurrent)
            return SPMD_ERROR(SPMD_ERR_BACKEND,
                              "no usable GPU: GPU %d lacks concurrent managed memory access "
                              "(cudaDevAttrConcurrentManagedAccess), which libspmd's CUDA "
                              "devices need; use SPMD_PLATFORM=cpu",
                              d);
    }
    *count = n;
    return SPMD_OK;
}

static spmd_status cuda_bind_thread(int hw)
{
    CUDA_REQUIRE(cudaSetDevice(hw), SPMD_ERR_BACKEND, "cudaSetDevice");
    return SPMD_OK;
}

static cudaMemLocation on_gpu(int hw)
{
    cudaMemLocation loc = {};
    loc.type = cudaMemLocationTypeDevice;
    loc.id = hw;
    return loc;
}

// Small blocks (fn temporaries, tiny arrays) come and go with every call; cudaFree waits for
// the whole GPU, so they are kept per GPU and size class for reuse until spmd_finalize.
enum { SMALL_MAX = 64 * 1024, SMALL_MIN_SHIFT = 8, SMALL_CLASSES = 9, MAX_GPUS = 64 };

// The free blocks' addresses are kept in host memory, per GPU and size class.
struct small_cache {
    void **blocks;
    int count, capacity;
};

static small_cache small_free[MAX_GPUS][SMALL_CLASSES];
static pthread_mutex_t small_lock = PTHREAD_MUTEX_INITIALIZER;

static int small_class(size_t bytes)
{
    int c = 0;
    while (((size_t)1 << (SMALL_MIN_SHIFT + c)) < bytes)
        c++;
    return c;
}

static void *small_take(int hw, size_t bytes)
{
    if (bytes > SMALL_MAX || hw < 0 || hw >= MAX_GPUS)
        return nullptr;
    pthread_mutex_lock(&small_lock);
    small_cache *c = &small_free[hw][small_class(bytes)];
    void *p = c->count ? c->blocks[--c->count] : nullptr;
    pthread_mutex_unlock(&small_lock);
    return p;
}

static int small_keep(int hw, void *p, size_t bytes)
{
    if (bytes > SMALL_MAX || hw < 0 || hw >= MAX_GPUS)
        return 0;
    pthread_mutex_lock(&small_lock);
    small_cache *c = &small_free[hw][small_class(bytes)];
    int kept = 1;
    if (c->count == c->capacity) {
        int cap = c->capacity ? 2 * c->capacity : 64;
        void **grown = static_cast<void **>(realloc(c->blocks, (size_t)cap * sizeof *grown));
        if (grown) {
            c->blocks = grown;
            c->capacity = cap;
        } else
            kept = 0;
    }
    if (kept)
        c->blocks[c->count++] = p;
    pthread_mutex_unlock(&small_lock);
    return kept;
}

static spmd_status cuda_alloc(int hw, size_t bytes, void **ptr)
{
    void *p = small_take(hw, bytes);
    if (p) {
        *ptr = p;
        return SPMD_OK;
    }
    CUDA_REQUIRE(cudaSetDevice(hw), SPMD_ERR_BACKEND, "cudaSetDevice");
    size_t size = bytes <= SMALL_MAX ? (size_t)1 << (SMALL_MIN_SHIFT + small_class(bytes)) : bytes;
    cudaError_t e = cudaMallocManaged(&p, size, cudaMemAttachGlobal);
    if (e == cudaErrorMemoryAllocation)
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "cudaMallocManaged of %zu bytes on GPU %d: %s",
                          bytes, hw, cudaGetErrorString(e));
    CUDA_REQUIRE(e, SPMD_ERR_BACKEND, "cudaMallocManaged");
    // Large blocks live on this GPU; populating them there now spares the first kernel the
    // faults. Small ones are left where host code, which handles them, first touches them.
    // Both are hints: a failure costs speed, not correctness.
    if (size > SMALL_MAX) {
#if CUDART_VERSION >= 13000
        (void)cudaMemAdvise(p, size, cudaMemAdviseSetPreferredLocation, on_gpu(hw));
        (void)cudaMemPrefetchAsync(p, size, on_gpu(hw), 0, 0);
#else
        (void)cudaMemAdvise(p, size, cudaMemAdviseSetPreferredLocation, hw);
        (void)cudaMemPrefetchAsync(p, size, hw, 0);
#endif
        (void)cudaGetLastError();
    }
    *ptr = p;
    return SPMD_OK;
}

static void cuda_free(int hw, void *ptr, size_t bytes)
{
    if (!ptr || small_keep(hw, ptr, bytes))
        return;
    if (cudaSetDevice(hw) == cudaSuccess)
        cudaFree(ptr);
}

static void small_drain(void)
{
    pthread_mutex_lock(&small_lock);
    for (int hw = 0; hw < MAX_GPUS; hw++)
        for (int c = 0; c < SMALL_CLASSES; c++) {
            small_cache *sc = &small_free[hw][c];
            if (sc->count && cudaSetDevice(hw) == cudaSuccess)
                for (int i = 0; i < sc->count; i++)
                    cudaFree(sc->blocks[i]);
            free(sc->blocks);
            *sc = small_cache{};
        }
    pthread_mutex_unlock(&small_lock);
}

static spmd_status cuda_copy(int hw, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src)
        return SPMD_OK;
    CUDA_REQUIRE(cudaSetDevice(hw), SPMD_ERR_BACKEND, "cudaSetDevice");
    // Unified addressing: the runtime knows which side each pointer is on.
    CUDA_REQUIRE(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), SPMD_ERR_BACKEND, "cudaMemcpy");
    return SPMD_OK;
}

// ---- per logical device: stream and cuBLAS handle ----

enum { MAX_LOCAL = 4096 };

struct device_state {
    int hw;
    cudaStream_t stream;
    cublasHandle_t blas;
};

static device_state states[MAX_LOCAL];
static pthread_mutex_t states_lock = PTHREAD_MUTEX_INITIALIZER;

static spmd_status check_local(int local)
{
    SPMD_REQUIRE(local >= 0 && local < MAX_LOCAL, SPMD_ERR_INTERNAL,
                 "local CUDA device %d is out of range (at most %d per process)", local, MAX_LOCAL);
    return SPMD_OK;
}

static spmd_status stream_locked(int local, int hw, cudaStream_t *out)
{
    device_state *d = &states[local];
    if (!d->stream) {
        CUDA_REQUIRE(cudaSetDevice(hw), SPMD_ERR_BACKEND, "cudaSetDevice");
        // Non-blocking: the legacy default stream never serializes the logical devices.
        CUDA_REQUIRE(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking), SPMD_ERR_BACKEND,
                     "cudaStreamCreateWithFlags");
        d->hw = hw;
    }
    *out = d->stream;
    return SPMD_OK;
}

static spmd_status cuda_stream(int local, int hw, void **stream)
{
    *stream = nullptr;
    SPMD_CHECK(check_local(local));
    cudaStream_t s = states[local].stream; // set once, never changed until shutdown
    if (!s) {
        pthread_mutex_lock(&states_lock);
        spmd_status st = stream_locked(local, hw, &s);
        pthread_mutex_unlock(&states_lock);
        SPMD_CHECK(st);
    }
    *stream = s;
    return SPMD_OK;
}

static spmd_status cuda_sync(int local)
{
    SPMD_CHECK(check_local(local));
    cudaStream_t s = states[local].stream;
    if (s)
        CUDA_REQUIRE(cudaStreamSynchronize(s), SPMD_ERR_BACKEND, "cudaStreamSynchronize");
    return SPMD_OK;
}

// cuBLAS is opened on first use: loading it costs ~70 ms and ~200 MB per process, which
// programs that never multiply on a GPU should not pay.
struct blas_api {
    void *lib;
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                              const void *, const void *, cudaDataType, int, const void *,
                              cudaDataType, int, const void *, void *, cudaDataType, int,
                              cublasComputeType_t, cublasGemmAlgo_t);
    const char *(*status_string)(cublasStatus_t);
};

static blas_api blas;

template <typename F> static int bind(F *fn, const char *name)
{
    *fn = reinterpret_cast<F>(dlsym(blas.lib, name));
    return *fn != nullptr;
}

static spmd_status load_blas_locked(void)
{
    if (blas.lib)
        return SPMD_OK;
    char soname[64];
    snprintf(soname, sizeof soname, "libcublas.so.%d", CUBLAS_VER_MAJOR);
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    SPMD_REQUIRE(lib != nullptr, SPMD_ERR_BACKEND,
                 "could not load cuBLAS (%s): %s; install the CUDA toolkit's libcublas or add "
                 "its directory to LD_LIBRARY_PATH",
                 soname, dlerror());
    blas.lib = lib;
    int ok = bind(&blas.create, "cublasCreate_v2") && bind(&blas.destroy, "cublasDestroy_v2") &&
             bind(&blas.set_stream, "cublasSetStream_v2") && bind(&blas.gemm_ex, "cublasGemmEx") &&
             bind(&blas.status_string, "cublasGetStatusString");
    if (!ok) {
        dlclose(lib);
        blas = blas_api{};
        return SPMD_ERROR(SPMD_ERR_BACKEND, "%s lacks the cuBLAS functions libspmd calls", soname);
    }
    return SPMD_OK;
}

static spmd_status cuda_blas(int local, int hw, void **handle)
{
    *handle = nullptr;
    SPMD_CHECK(check_local(local));
    cublasHandle_t h = states[local].blas;
    if (h) {
        *handle = h;
        return SPMD_OK;
    }
    pthread_mutex_lock(&states_lock);
    cudaStream_t s = nullptr;
    spmd_status st = load_blas_locked();
    if (st == SPMD_OK)
        st = stream_locked(local, hw, &s);
    if (st == SPMD_OK && !states[local].blas) {
        cublasStatus_t b = CUBLAS_STATUS_SUCCESS;
        if (cudaSetDevice(hw) != cudaSuccess || (b = blas.create(&h)) != CUBLAS_STATUS_SUCCESS)
            st = SPMD_ERROR(SPMD_ERR_BACKEND, "cublasCreate on GPU %d failed: %s", hw,
                            blas.status_string(b));
        else if ((b = blas.set_stream(h, s)) != CUBLAS_STATUS_SUCCESS) {
            blas.destroy(h);
            st = SPMD_ERROR(SPMD_ERR_BACKEND, "cublasSetStream failed: %s", blas.status_string(b));
        } else
            states[local].blas = h;
    }
    h = states[local].blas;
    pthread_mutex_unlock(&states_lock);
    SPMD_CHECK(st);
    *handle = h;
    return SPMD_OK;
}

static void cuda_shutdown(void)
{
    small_drain();
    pthread_mutex_lock(&states_lock);
    for (int k = 0; k < MAX_LOCAL; k++) {
        device_state *d = &states[k];
        if (!d->stream)
            continue;
        if (cudaSetDevice(d->hw) == cudaSuccess) {
            if (d->blas)
                blas.destroy(d->blas);
            cudaStreamDestroy(d->stream);
        }
        *d = device_state{};
    }
    pthread_mutex_unlock(&states_lock);
}

extern "C" int spmd__cuda_is_device_memory(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeManaged || a.type == cudaMemoryTypeDevice;
}

extern "C" spmd_status spmd__cuda_copy_rows(void *stream, void *dst, size_t dpitch, const void *src,
                                            size_t spitch, size_t width, size_t height)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t e = height == 1 ? cudaMemcpyAsync(dst, src, width, cudaMemcpyDefault, s)
                                : cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height,
                                                    cudaMemcpyDefault, s);
    if (e == cudaErrorInvalidPitchValue) { // pitches beyond the 2-D copy's limit: row by row
        (void)cudaGetLastError();
        e = cudaSuccess;
        for (size_t r = 0; r < height && e == cudaSuccess; r++)
            e = cudaMemcpyAsync((char *)dst + r * dpitch, (const char *)src + r * spitch, width,
                                cudaMemcpyDefault, s);
    }
    CUDA_REQUIRE(e, SPMD_ERR_BACKEND, "cudaMemcpy2DAsync");
    return SPMD_OK;
}

// ---- gemm ----

extern "C" spmd_status spmd__cuda_gemm(void *handle, spmd_dtype dtype, int trans_a, int trans_b,
                                       int m, int n, int k, double alpha, const void *a, int lda,
                                       const void *b, int ldb, double beta, void *c, int ldc)
{
    cudaDataType type = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F; // float32 exactly: no TF32 rounding
    switch (dtype) {
    case SPMD_DTYPE_F64:
        type = CUDA_R_64F;
        compute = CUBLAS_COMPUTE_64F;
        break;
    case SPMD_DTYPE_F16: // 16-bit inputs on tensor cores, accumulated in float32
        type = CUDA_R_16F;
        break;
    case SPMD_DTYPE_BF16:
        type = CUDA_R_16BF;
        break;
    default:
        break;
    }
    double alpha64 = alpha, beta64 = beta;
    float alpha32 = (float)alpha, beta32 = (float)beta;
    const void *pa = dtype == SPMD_DTYPE_F64 ? (const void *)&alpha64 : (const void *)&alpha32;
    const void *pb = dtype == SPMD_DTYPE_F64 ? (const void *)&beta64 : (const void *)&beta32;
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    cublasStatus_t s =
        blas.gemm_ex(static_cast<cublasHandle_t>(handle), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                     trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, pa, b, type, ldb, a, type, lda,
                     pb, c, type, ldc, compute, CUBLAS_GEMM_DEFAULT);
    SPMD_REQUIRE(s == CUBLAS_STATUS_SUCCESS, SPMD_ERR_BACKEND, "cublasGemmEx (%dx%dx%d) failed: %s",
                 m, n, k, blas.status_string(s));
    return SPMD_OK;
}

extern "C" const spmd__backend spmd__backend_cuda = {
    "cuda",      SPMD_PLATFORM_CUDA, 0,         cuda_probe,    cuda_bind_thread,
    cuda_alloc,  cuda_free,          cuda_copy, cuda_copy,     cuda_copy,
    cuda_stream, cuda_sync,          cuda_blas, cuda_shutdown,
};
