// Kernels behind the block operations and the in-process reductions on CUDA devices. Each
// mirrors its host version in src/shard_map (reduce.c, ops.c) element for element: the same
// accumulation order and types, the same saturation, wrap-around and NaN rules, so a program
// gives the same numbers on either platform (transcendental functions aside: CUDA's libm).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "runtime/backend/cuda.h"
#include "runtime/check.h"

namespace
{

constexpr int THREADS = 256;

unsigned grid_for(size_t n)
{
    size_t blocks = (n + THREADS - 1) / THREADS;
    return (unsigned)(blocks < 8192 ? (blocks ? blocks : 1) : 8192); // grid-stride beyond
}

spmd_status launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    SPMD_REQUIRE(e == cudaSuccess, SPMD_ERR_BACKEND, "%s kernel launch failed: %s (%s)", what,
                 cudaGetErrorString(e), cudaGetErrorName(e));
    return SPMD_OK;
}

#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

// ---- element access, as spmd__load/spmd__store in reduce.c ----

__device__ double load(spmd_dtype t, const void *p, size_t i)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        return ((const float *)p)[i];
    case SPMD_DTYPE_F64:
        return ((const double *)p)[i];
    case SPMD_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case SPMD_DTYPE_I64:
        return (double)((const int64_t *)p)[i];
    case SPMD_DTYPE_U8:
        return ((const uint8_t *)p)[i];
    case SPMD_DTYPE_BOOL:
        return ((const uint8_t *)p)[i] != 0;
    case SPMD_DTYPE_F16:
        return __half2float(__ushort_as_half(((const unsigned short *)p)[i]));
    case SPMD_DTYPE_BF16:
        return __bfloat162float(__ushort_as_bfloat16(((const unsigned short *)p)[i]));
    default:
        return 0;
    }
}

// Rounding to odd first makes the second rounding, to 16 bits, round as one would.
__device__ float round_to_odd(double v)
{
    float f = __double2float_rn(v);
    if ((double)f == v || v != v || isinf(f))
        return f;
    if (fabs((double)f) > fabs(v))
        f = nextafterf(f, 0.0f);
    return __uint_as_float(__float_as_uint(f) | 1u);
}

__device__ void store(spmd_dtype t, void *p, size_t i, double v)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        ((float *)p)[i] = (float)v;
        break;
    case SPMD_DTYPE_F64:
        ((double *)p)[i] = v;
        break;
    case SPMD_DTYPE_I32:
        ((int32_t *)p)[i] = v != v           ? 0
                            : v <= INT32_MIN ? INT32_MIN
                            : v >= INT32_MAX ? INT32_MAX
                                             : (int32_t)v;
        break;
    case SPMD_DTYPE_I64:
        ((int64_t *)p)[i] = v != v         ? 0
                            : v <= -0x1p63 ? INT64_MIN
                            : v >= 0x1p63  ? INT64_MAX
                                           : (int64_t)v;
        break;
    case SPMD_DTYPE_U8:
        ((uint8_t *)p)[i] = v != v || v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
        break;
    case SPMD_DTYPE_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    case SPMD_DTYPE_F16:
        ((unsigned short *)p)[i] = __half_as_ushort(__float2half_rn(round_to_odd(v)));
        break;
    case SPMD_DTYPE_BF16:
        ((unsigned short *)p)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(round_to_odd(v)));
        break;
    default:
        break;
    }
}

__device__ bool int_like(spmd_dtype t)
{
    return t == SPMD_DTYPE_I32 || t == SPMD_DTYPE_I64 || t == SPMD_DTYPE_U8 || t == SPMD_DTYPE_BOOL;
}

__device__ int64_t load_int(spmd_dtype t, const void *p, size_t i)
{
    switch (t) {
    case SPMD_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case SPMD_DTYPE_I64:
        return ((const int64_t *)p)[i];
    case SPMD_DTYPE_U8:
        return ((const uint8_t *)p)[i];
    case SPMD_DTYPE_BOOL:
        return ((const uint8_t *)p)[i] != 0;
    default:
        return 0;
    }
}

__device__ void store_int(spmd_dtype t, void *p, size_t i, int64_t v)
{
    switch (t) {
    case SPMD_DTYPE_I32:
        ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v;
        break;
    case SPMD_DTYPE_I64:
        ((int64_t *)p)[i] = v;
        break;
    case SPMD_DTYPE_U8:
        ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v;
        break;
    case SPMD_DTYPE_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    default:
        break;
    }
}

// ---- in-process reductions ----

struct peers {
    const void *src[SPMD__CUDA_MAX_PEERS];
    void *dst[SPMD__CUDA_MAX_PEERS];
};

template <typename T> __device__ T combine(spmd__reduce_op op, T acc, T v)
{
    switch (op) {
    case SPMD__OP_SUM:
        return acc + v;
    case SPMD__OP_MAX: // a NaN anywhere wins, as in XLA
        return v > acc || v != v ? v : acc;
    default:
        return v < acc || v != v ? v : acc;
    }
}

// Integers wrap on overflow: sums in unsigned arithmetic.
template <typename T, typename U> __device__ T combine_int(spmd__reduce_op op, T acc, T v)
{
    return op == SPMD__OP_SUM ? (T)((U)acc + (U)v) : combine(op, acc, v);
}

template <typename T, typename Acc, typename Load, typename Store, typename Combine>
__global__ void reduce_to_all(peers p, int n, int ndst, size_t begin, size_t end, Load ld, Store st,
                              Combine cb)
{
    GRID_STRIDE(j, end - begin)
    {
        size_t i = begin + j;
        Acc acc = ld(p.src[0], i);
        for (int k = 1; k < n; k++)
            acc = cb(acc, ld(p.src[k], i));
        for (int d = 0; d < ndst; d++)
            st(p.dst[d], i, acc);
    }
}

template <typename T> struct plain_load {
    __device__ T operator()(const void *p, size_t i) const { return ((const T *)p)[i]; }
};
template <typename T> struct plain_store {
    __device__ void operator()(void *p, size_t i, T v) const { ((T *)p)[i] = v; }
};
struct f16_load {
    __device__ float operator()(const void *p, size_t i) const
    {
        return __half2float(__ushort_as_half(((const unsigned short *)p)[i]));
    }
};
struct f16_store {
    __device__ void operator()(void *p, size_t i, float v) const
    {
        ((unsigned short *)p)[i] = __half_as_ushort(__float2half_rn(v));
    }
};
struct bf16_load {
    __device__ float operator()(const void *p, size_t i) const
    {
        return __bfloat162float(__ushort_as_bfloat16(((const unsigned short *)p)[i]));
    }
};
struct bf16_store {
    __device__ void operator()(void *p, size_t i, float v) const
    {
        ((unsigned short *)p)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
};
template <typename T> struct float_combine {
    spmd__reduce_op op;
    __device__ T operator()(T a, T b) const { return combine(op, a, b); }
};
template <typename T, typename U> struct int_combine {
    spmd__reduce_op op;
    __device__ T operator()(T a, T b) const { return combine_int<T, U>(op, a, b); }
};

template <typename T, typename Acc, typename Load, typename Store, typename Combine>
void launch_reduce(cudaStream_t s, const peers &p, int n, int ndst, size_t begin, size_t end,
                   Combine cb)
{
    reduce_to_all<T, Acc>
        <<<grid_for(end - begin), THREADS, 0, s>>>(p, n, ndst, begin, end, Load{}, Store{}, cb);
}

// ---- elementwise ----

__global__ void fill_f32(float *out, size_t n, float v) { GRID_STRIDE(i, n) out[i] = v; }

__global__ void fill_any(spmd_dtype t, void *out, size_t n, double v)
{
    GRID_STRIDE(i, n) store(t, out, i, v);
}

__global__ void iota_any(spmd_dtype t, void *out, size_t n, double start, double step)
{
    GRID_STRIDE(i, n) store(t, out, i, start + (double)i * step);
}

__global__ void convert_any(spmd_dtype to, void *dst, spmd_dtype from, const void *src, size_t n)
{
    bool ints = int_like(from) && int_like(to); // exactly, through int64: narrowing wraps
    GRID_STRIDE(i, n)
    {
        if (ints)
            store_int(to, dst, i, load_int(from, src, i));
        else
            store(to, dst, i, load(from, src, i));
    }
}

__global__ void scale_any(spmd_dtype t, void *data, double s, size_t n)
{
    GRID_STRIDE(i, n)
    {
        if (t == SPMD_DTYPE_F32)
            ((float *)data)[i] *= (float)s;
        else if (t == SPMD_DTYPE_F64)
            ((double *)data)[i] *= s;
        else
            store(t, data, i, load(t, data, i) * s);
    }
}

template <typename T> __device__ T apply_unary(spmd_unary_op op, T x)
{
    switch (op) {
    case SPMD_UNARY_NEG:
        return -x;
    case SPMD_UNARY_EXP:
        return exp(x);
    case SPMD_UNARY_LOG:
        return log(x);
    case SPMD_UNARY_SIN:
        return sin(x);
    case SPMD_UNARY_COS:
        return cos(x);
    case SPMD_UNARY_TANH:
        return tanh(x);
    case SPMD_UNARY_RELU:
        return x > 0 || x != x ? x : (T)0; // NaN stays NaN, as max(x, 0) in JAX
    }
    return x;
}

__global__ void unary_any(spmd_unary_op op, spmd_dtype t, const void *in, void *out, size_t n)
{
    GRID_STRIDE(i, n)
    {
        if (t == SPMD_DTYPE_F32) {
            ((float *)out)[i] = apply_unary<float>(op, ((const float *)in)[i]);
        } else if (int_like(t)) { // integers exactly; negation wraps, as in JAX
            int64_t v = load_int(t, in, i);
            store_int(t, out, i,
                      op == SPMD_UNARY_NEG ? (int64_t)(0 - (uint64_t)v) : (v > 0 ? v : 0));
        } else {
            store(t, out, i, apply_unary<double>(op, load(t, in, i)));
        }
    }
}

template <typename T> __device__ T apply_binary(spmd_binary_op op, T a, T b)
{
    switch (op) {
    case SPMD_BINARY_ADD:
        return a + b;
    case SPMD_BINARY_SUB:
        return a - b;
    case SPMD_BINARY_MUL:
        return a * b;
    case SPMD_BINARY_DIV:
        return a / b;
    case SPMD_BINARY_MAX: // NaN propagates, as in lax.max
        return a != a || b != b ? (T)NAN : a > b ? a : b;
    case SPMD_BINARY_MIN:
        return a != a || b != b ? (T)NAN : a < b ? a : b;
    }
    return a;
}

__device__ int64_t apply_binary_int(spmd_binary_op op, int64_t a, int64_t b)
{
    switch (op) {
    case SPMD_BINARY_ADD:
        return (int64_t)((uint64_t)a + (uint64_t)b);
    case SPMD_BINARY_SUB:
        return (int64_t)((uint64_t)a - (uint64_t)b);
    case SPMD_BINARY_MUL:
        return (int64_t)((uint64_t)a * (uint64_t)b);
    case SPMD_BINARY_DIV: // truncates; INT64_MIN / -1 wraps instead of trapping
        return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
    case SPMD_BINARY_MAX:
        return a > b ? a : b;
    case SPMD_BINARY_MIN:
        return a < b ? a : b;
    }
    return a;
}

__global__ void binary_any(spmd_binary_op op, spmd_dtype t, const void *a, const void *b,
                           size_t period, double scalar, int64_t int_scalar, void *out, size_t n)
{
    GRID_STRIDE(i, n)
    {
        if (int_like(t)) {
            int64_t y = b ? load_int(t, b, i % period) : int_scalar;
            store_int(t, out, i, apply_binary_int(op, load_int(t, a, i), y));
        } else if (t == SPMD_DTYPE_F32 && b) {
            ((float *)out)[i] =
                apply_binary<float>(op, ((const float *)a)[i], ((const float *)b)[i % period]);
        } else {
            double y = b ? load(t, b, i % period) : scalar;
            store(t, out, i, apply_binary<double>(op, load(t, a, i), y));
        }
    }
}

__global__ void reduce_axis_any(spmd_reduce_kind kind, spmd_dtype in_t, const void *in,
                                spmd_dtype out_t, void *out, size_t outer, size_t extent,
                                size_t inner, bool exact)
{
    GRID_STRIDE(j, outer * inner)
    {
        size_t o = j / inner, i = j % inner;
        size_t first = o * extent * inner + i;
        if (exact) { // integers: exact, sums wrap
            int64_t acc = load_int(in_t, in, first);
            for (size_t e = 1; e < extent; e++) {
                int64_t v = load_int(in_t, in, first + e * inner);
                acc = kind == SPMD_REDUCE_MAX ? (v > acc ? v : acc)
                                              : (int64_t)((uint64_t)acc + (uint64_t)v);
            }
            store_int(out_t, out, j, acc);
            continue;
        }
        double acc = load(in_t, in, first);
        for (size_t e = 1; e < extent; e++) {
            double v = load(in_t, in, first + e * inner);
            acc = kind != SPMD_REDUCE_MAX ? __dadd_rn(acc, v) : v > acc || v != v ? v : acc;
        }
        if (kind == SPMD_REDUCE_MEAN)
            acc /= (double)extent;
        store(out_t, out, j, acc);
    }
}

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

bool is_int_like(spmd_dtype t)
{
    return t == SPMD_DTYPE_I32 || t == SPMD_DTYPE_I64 || t == SPMD_DTYPE_U8 || t == SPMD_DTYPE_BOOL;
}

} // namespace

extern "C" spmd_status spmd__cuda_reduce_to_all(void *stream, spmd_dtype dtype, spmd__reduce_op op,
                                                void *const *dsts, int ndst,
                                                const void *const *srcs, int n, size_t begin,
                                                size_t end)
{
    SPMD_REQUIRE(n >= 1 && n <= SPMD__CUDA_MAX_PEERS && ndst >= 0 && ndst <= SPMD__CUDA_MAX_PEERS,
                 SPMD_ERR_INTERNAL, "reduction over %d sources into %d outputs (at most %d)", n,
                 ndst, SPMD__CUDA_MAX_PEERS);
    if (end <= begin)
        return SPMD_OK;
    peers p = {};
    for (int k = 0; k < n; k++)
        p.src[k] = srcs[k];
    for (int d = 0; d < ndst; d++)
        p.dst[d] = dsts[d];
    cudaStream_t s = as_stream(stream);
    switch (dtype) {
    case SPMD_DTYPE_F32:
        launch_reduce<float, float, plain_load<float>, plain_store<float>>(
            s, p, n, ndst, begin, end, float_combine<float>{op});
        break;
    case SPMD_DTYPE_F64:
        launch_reduce<double, double, plain_load<double>, plain_store<double>>(
            s, p, n, ndst, begin, end, float_combine<double>{op});
        break;
    case SPMD_DTYPE_I32:
        launch_reduce<int32_t, int32_t, plain_load<int32_t>, plain_store<int32_t>>(
            s, p, n, ndst, begin, end, int_combine<int32_t, uint32_t>{op});
        break;
    case SPMD_DTYPE_I64:
        launch_reduce<int64_t, int64_t, plain_load<int64_t>, plain_store<int64_t>>(
            s, p, n, ndst, begin, end, int_combine<int64_t, uint64_t>{op});
        break;
    case SPMD_DTYPE_F16: // accumulated in float32, rounded once
        launch_reduce<unsigned short, float, f16_load, f16_store>(s, p, n, ndst, begin, end,
                                                                  float_combine<float>{op});
        break;
    case SPMD_DTYPE_BF16:
        launch_reduce<unsigned short, float, bf16_load, bf16_store>(s, p, n, ndst, begin, end,
                                                                    float_combine<float>{op});
        break;
    default:
        return SPMD_ERROR(SPMD_ERR_UNSUPPORTED, "no reduction kernel for %s",
                          spmd_dtype_name(dtype));
    }
    return launched("reduction");
}

extern "C" spmd_status spmd__cuda_fill(void *stream, spmd_dtype dtype, void *out, size_t n,
                                       double value)
{
    if (!n)
        return SPMD_OK;
    if (dtype == SPMD_DTYPE_F32)
        fill_f32<<<grid_for(n), THREADS, 0, as_stream(stream)>>>((float *)out, n, (float)value);
    else
        fill_any<<<grid_for(n), THREADS, 0, as_stream(stream)>>>(dtype, out, n, value);
    return launched("fill");
}

extern "C" spmd_status spmd__cuda_iota(void *stream, spmd_dtype dtype, void *out, size_t n,
                                       double start, double step)
{
    if (!n)
        return SPMD_OK;
    iota_any<<<grid_for(n), THREADS, 0, as_stream(stream)>>>(dtype, out, n, start, step);
    return launched("iota");
}

extern "C" spmd_status spmd__cuda_convert(void *stream, spmd_dtype to, void *dst, spmd_dtype from,
                                          const void *src, size_t n)
{
    if (!n)
        return SPMD_OK;
    if (to == from) {
        if (dst == src)
            return SPMD_OK;
        cudaError_t e = cudaMemcpyAsync(dst, src, n * spmd_dtype_size(to), cudaMemcpyDefault,
                                        as_stream(stream));
        SPMD_REQUIRE(e == cudaSuccess, SPMD_ERR_BACKEND, "cudaMemcpyAsync failed: %s",
                     cudaGetErrorString(e));
        return SPMD_OK;
    }
    convert_any<<<grid_for(n), THREADS, 0, as_stream(stream)>>>(to, dst, from, src, n);
    return launched("conversion");
}

extern "C" spmd_status spmd__cuda_scale(void *stream, spmd_dtype dtype, void *data, double s,
                                        size_t n)
{
    if (!n)
        return SPMD_OK;
    scale_any<<<grid_for(n), THREADS, 0, as_stream(stream)>>>(dtype, data, s, n);
    return launched("scale");
}

extern "C" spmd_status spmd__cuda_unary(void *stream, spmd_unary_op op, spmd_dtype dtype,
                                        const void *in, void *out, size_t n)
{
    if (!n)
        return SPMD_OK;
    unary_any<<<grid_for(n), THREADS, 0, as_stream(stream)>>>(op, dtype, in, out, n);
    return launched("unary");
}

extern "C" spmd_status spmd__cuda_binary(void *stream, spmd_binary_op op, spmd_dtype dtype,
                                         const void *a, const void *b, size_t period, double scalar,
                                         int64_t int_scalar, void *out, size_t n)
{
    if (!n)
        return SPMD_OK;
    binary_any<<<grid_for(n), THREADS, 0, as_stream(stream)>>>(op, dtype, a, b, period ? period : 1,
                                                               scalar, int_scalar, out, n);
    return launched("binary");
}

extern "C" spmd_status spmd__cuda_reduce_axis(void *stream, spmd_reduce_kind kind,
                                              spmd_dtype in_dtype, const void *in,
                                              spmd_dtype out_dtype, void *out, size_t outer,
                                              size_t extent, size_t inner)
{
    size_t n = outer * inner;
    if (!n)
        return SPMD_OK;
    bool exact = is_int_like(in_dtype) && kind != SPMD_REDUCE_MEAN && is_int_like(out_dtype);
    reduce_axis_any<<<grid_for(n), THREADS, 0, as_stream(stream)>>>(
        kind, in_dtype, in, out_dtype, out, outer, extent, inner, exact);
    return launched("reduce");
}
