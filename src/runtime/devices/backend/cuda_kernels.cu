// Kernels behind the block operations and the in-process reductions on CUDA devices. The
// arithmetic is runtime/devices/backend/scalar_ops.h's, shared with the host loops; element access
// and the reductions follow shard_map/reduce.c (same accumulation order and types, saturation,
// wrap-around and NaN rules), so a program gives the same numbers on either platform
// (transcendental functions aside: CUDA's libm).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "runtime/devices/backend/cuda.h"
#include "runtime/base/check.h"
#include "runtime/devices/backend/scalar_ops.h"
#include "runtime/base/tree.h"

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
    spmd__tree t = spmd__tree_of(n);
    GRID_STRIDE(j, end - begin)
    {
        size_t i = begin + j;
        Acc stack[8]; /* a slot per level: n <= SPMD__CUDA_MAX_PEERS */
        int depth = 0;
        for (int l = 0; l < t.p2; l++) { /* runtime/base/tree.h's order, as spmd__reduce_many */
            int first = spmd__tree_leaf_first(&t, l);
            Acc v = ld(p.src[first], i);
            if (spmd__tree_leaf_size(&t, l) == 2)
                v = cb(v, ld(p.src[first + 1], i));
            stack[depth++] = v;
            for (unsigned m = (unsigned)l + 1; !(m & 1u); m >>= 1, depth--)
                stack[depth - 2] = cb(stack[depth - 2], stack[depth - 1]);
        }
        for (int d = 0; d < ndst; d++)
            st(p.dst[d], i, stack[0]);
    }
}

template <typename T> struct plain_load {
    __device__ T operator()(const void *p, size_t i) const { return ((const T *)p)[i]; }
};
template <typename T> struct plain_store {
    __device__ void operator()(void *p, size_t i, T v) const { ((T *)p)[i] = v; }
};
// 16-bit floats are summed in float32 and rounded once, as on the host.
template <spmd_dtype T> struct half_load {
    __device__ float operator()(const void *p, size_t i) const
    {
        return spmd__half_to_f32(T, ((const uint16_t *)p)[i]);
    }
};
template <spmd_dtype T> struct half_store {
    __device__ void operator()(void *p, size_t i, float v) const
    {
        ((uint16_t *)p)[i] = spmd__f32_to_half(T, v);
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
    GRID_STRIDE(i, n) spmd__store_element(t, out, i, v);
}

__global__ void iota_any(spmd_dtype t, void *out, size_t n, double start, double step)
{
    GRID_STRIDE(i, n) spmd__store_element(t, out, i, start + (double)i * step);
}

__global__ void convert_any(spmd_dtype to, void *dst, spmd_dtype from, const void *src, size_t n)
{
    bool ints =
        spmd__is_int_like(from) && spmd__is_int_like(to); // exactly, through int64: narrowing wraps
    GRID_STRIDE(i, n)
    {
        if (ints)
            spmd__store_int_element(to, dst, i, spmd__load_int_element(from, src, i));
        else
            spmd__store_element(to, dst, i, spmd__load_element(from, src, i));
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
            spmd__store_element(t, data, i, spmd__load_element(t, data, i) * s);
    }
}

__global__ void unary_any(spmd_unary_op op, spmd_dtype t, const void *in, void *out, size_t n)
{
    GRID_STRIDE(i, n)
    {
        if (t == SPMD_DTYPE_F32) {
            ((float *)out)[i] = spmd__unary_f32(op, ((const float *)in)[i]);
        } else if (spmd__is_int_like(t)) { // integers exactly; negation wraps, as in JAX
            int64_t v = spmd__load_int_element(t, in, i);
            spmd__store_int_element(t, out, i, spmd__unary_i64(op, v));
        } else {
            spmd__store_element(t, out, i, spmd__unary_f64(op, spmd__load_element(t, in, i)));
        }
    }
}

__global__ void binary_any(spmd_binary_op op, spmd_dtype t, const void *a, const void *b,
                           size_t period, double scalar, int64_t int_scalar, void *out, size_t n)
{
    GRID_STRIDE(i, n)
    {
        if (spmd__is_int_like(t)) {
            int64_t y = b ? spmd__load_int_element(t, b, i % period) : int_scalar;
            spmd__store_int_element(t, out, i,
                                    spmd__binary_i64(op, spmd__load_int_element(t, a, i), y));
        } else if (t == SPMD_DTYPE_F32 && b) {
            ((float *)out)[i] =
                spmd__binary_f32(op, ((const float *)a)[i], ((const float *)b)[i % period]);
        } else {
            double y = b ? spmd__load_element(t, b, i % period) : scalar;
            spmd__store_element(t, out, i, spmd__binary_f64(op, spmd__load_element(t, a, i), y));
        }
    }
}

template <typename T>
__global__ void take_kernel(spmd_take_mode mode, const T *in, spmd_dtype index_dtype,
                            const void *indices, T *out, size_t extent, size_t count, size_t inner,
                            T fill, size_t n)
{
    GRID_STRIDE(j, n)
    {
        size_t i = j % inner, k = j / inner % count, o = j / inner / count;
        int64_t from = spmd__take_source(mode, spmd__load_int_element(index_dtype, indices, k),
                                         (int64_t)extent);
        out[j] = from < 0 ? fill : in[(o * extent + (size_t)from) * inner + i];
    }
}

__global__ void softmax_any(spmd_dtype t, const void *in, void *out, size_t extent, size_t inner,
                            size_t lines)
{
    GRID_STRIDE(j, lines)
    {
        size_t o = j / inner, i = j % inner;
        spmd__softmax_line(t, in, out, o * extent * inner + i, extent, inner);
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
        if (kind == SPMD_REDUCE_ARGMAX || kind == SPMD_REDUCE_ARGMIN) { // as the host loop
            bool argmax = kind == SPMD_REDUCE_ARGMAX;
            size_t best = 0;
            if (spmd__is_int_like(in_t)) {
                int64_t b = spmd__load_int_element(in_t, in, first);
                for (size_t e = 1; e < extent; e++) {
                    int64_t v = spmd__load_int_element(in_t, in, first + e * inner);
                    if (argmax ? v > b : v < b)
                        b = v, best = e;
                }
            } else {
                double b = spmd__load_element(in_t, in, first);
                for (size_t e = 1; e < extent && b == b; e++) {
                    double v = spmd__load_element(in_t, in, first + e * inner);
                    if (v != v || (argmax ? v > b : v < b))
                        b = v, best = e;
                }
            }
            spmd__store_int_element(out_t, out, j, (int64_t)best);
            continue;
        }
        if (exact) { // integers: exact, sums wrap
            int64_t acc = spmd__load_int_element(in_t, in, first);
            for (size_t e = 1; e < extent; e++) {
                int64_t v = spmd__load_int_element(in_t, in, first + e * inner);
                acc = kind == SPMD_REDUCE_MAX   ? (v > acc ? v : acc)
                      : kind == SPMD_REDUCE_MIN ? (v < acc ? v : acc)
                                                : (int64_t)((uint64_t)acc + (uint64_t)v);
            }
            spmd__store_int_element(out_t, out, j, acc);
            continue;
        }
        double acc = spmd__load_element(in_t, in, first);
        for (size_t e = 1; e < extent; e++) {
            double v = spmd__load_element(in_t, in, first + e * inner);
            acc = kind == SPMD_REDUCE_MAX   ? (v > acc || v != v ? v : acc)
                  : kind == SPMD_REDUCE_MIN ? (v < acc || v != v ? v : acc)
                                            : __dadd_rn(acc, v);
        }
        if (kind == SPMD_REDUCE_MEAN)
            acc /= (double)extent;
        spmd__store_element(out_t, out, j, acc);
    }
}

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

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
        launch_reduce<uint16_t, float, half_load<SPMD_DTYPE_F16>, half_store<SPMD_DTYPE_F16>>(
            s, p, n, ndst, begin, end, float_combine<float>{op});
        break;
    case SPMD_DTYPE_BF16:
        launch_reduce<uint16_t, float, half_load<SPMD_DTYPE_BF16>, half_store<SPMD_DTYPE_BF16>>(
            s, p, n, ndst, begin, end, float_combine<float>{op});
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

template <typename T>
__global__ void where_kernel(const unsigned char *cond, int cond_scalar, const T *a, const T *b,
                             T *out, size_t n)
{
    GRID_STRIDE(i, n) out[i] = cond[cond_scalar ? 0 : i] ? a[i] : b[i];
}

extern "C" spmd_status spmd__cuda_where(void *stream, const unsigned char *cond, int cond_scalar,
                                        const void *a, const void *b, void *out, size_t n,
                                        size_t elem)
{
    if (!n)
        return SPMD_OK;
    cudaStream_t s = as_stream(stream);
    switch (elem) { /* bits, whatever the dtype */
    case 1:
        where_kernel<<<grid_for(n), THREADS, 0, s>>>(cond, cond_scalar, (const uint8_t *)a,
                                                     (const uint8_t *)b, (uint8_t *)out, n);
        break;
    case 2:
        where_kernel<<<grid_for(n), THREADS, 0, s>>>(cond, cond_scalar, (const uint16_t *)a,
                                                     (const uint16_t *)b, (uint16_t *)out, n);
        break;
    case 4:
        where_kernel<<<grid_for(n), THREADS, 0, s>>>(cond, cond_scalar, (const uint32_t *)a,
                                                     (const uint32_t *)b, (uint32_t *)out, n);
        break;
    default:
        where_kernel<<<grid_for(n), THREADS, 0, s>>>(cond, cond_scalar, (const uint64_t *)a,
                                                     (const uint64_t *)b, (uint64_t *)out, n);
        break;
    }
    return launched("where");
}

template <typename T> __global__ void box_kernel(spmd__box_map m, const T *src, T *dst, size_t n)
{
    GRID_STRIDE(i, n)
    {
        size_t rest = i, from = (size_t)m.src_at, to = (size_t)m.dst_at;
        for (int j = m.ndim - 1; j >= 0; j--) {
            size_t c = rest % (size_t)m.extent[j];
            from += c * (size_t)m.src_stride[j];
            to += c * (size_t)m.dst_stride[j];
            rest /= (size_t)m.extent[j];
        }
        dst[to] = src[from];
    }
}

extern "C" spmd_status spmd__cuda_box_copy(void *stream, const spmd__box_map *map, const void *src,
                                           void *dst, size_t n, size_t elem)
{
    if (!n)
        return SPMD_OK;
    cudaStream_t s = as_stream(stream);
    switch (elem) { /* bits, whatever the dtype */
    case 1:
        box_kernel<<<grid_for(n), THREADS, 0, s>>>(*map, (const uint8_t *)src, (uint8_t *)dst, n);
        break;
    case 2:
        box_kernel<<<grid_for(n), THREADS, 0, s>>>(*map, (const uint16_t *)src, (uint16_t *)dst, n);
        break;
    case 4:
        box_kernel<<<grid_for(n), THREADS, 0, s>>>(*map, (const uint32_t *)src, (uint32_t *)dst, n);
        break;
    default:
        box_kernel<<<grid_for(n), THREADS, 0, s>>>(*map, (const uint64_t *)src, (uint64_t *)dst, n);
        break;
    }
    return launched("box copy");
}

template <typename T>
__global__ void transpose_kernel(spmd__transpose_map m, const T *in, T *out, size_t n)
{
    GRID_STRIDE(i, n)
    {
        size_t rest = i, from = 0;
        for (int j = m.ndim - 1; j >= 0; j--) {
            size_t extent = (size_t)m.shape[j];
            from += (rest % extent) * (size_t)m.in_stride[j];
            rest /= extent;
        }
        out[i] = in[from];
    }
}

extern "C" spmd_status spmd__cuda_transpose(void *stream, const spmd__transpose_map *map,
                                            const void *in, void *out, size_t n, size_t elem)
{
    if (!n)
        return SPMD_OK;
    cudaStream_t s = as_stream(stream);
    switch (elem) { /* bits, whatever the dtype */
    case 1:
        transpose_kernel<<<grid_for(n), THREADS, 0, s>>>(*map, (const uint8_t *)in, (uint8_t *)out,
                                                         n);
        break;
    case 2:
        transpose_kernel<<<grid_for(n), THREADS, 0, s>>>(*map, (const uint16_t *)in,
                                                         (uint16_t *)out, n);
        break;
    case 4:
        transpose_kernel<<<grid_for(n), THREADS, 0, s>>>(*map, (const uint32_t *)in,
                                                         (uint32_t *)out, n);
        break;
    default:
        transpose_kernel<<<grid_for(n), THREADS, 0, s>>>(*map, (const uint64_t *)in,
                                                         (uint64_t *)out, n);
        break;
    }
    return launched("transpose");
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

extern "C" spmd_status spmd__cuda_take(void *stream, spmd_take_mode mode, const void *in,
                                       spmd_dtype index_dtype, const void *indices, void *out,
                                       size_t outer, size_t extent, size_t count, size_t inner,
                                       size_t elem, uint64_t fill)
{
    size_t n = outer * count * inner;
    if (!n)
        return SPMD_OK;
    cudaStream_t s = as_stream(stream);
    switch (elem) { /* bits, whatever the dtype */
    case 1:
        take_kernel<<<grid_for(n), THREADS, 0, s>>>(mode, (const uint8_t *)in, index_dtype, indices,
                                                    (uint8_t *)out, extent, count, inner,
                                                    (uint8_t)fill, n);
        break;
    case 2:
        take_kernel<<<grid_for(n), THREADS, 0, s>>>(mode, (const uint16_t *)in, index_dtype,
                                                    indices, (uint16_t *)out, extent, count, inner,
                                                    (uint16_t)fill, n);
        break;
    case 4:
        take_kernel<<<grid_for(n), THREADS, 0, s>>>(mode, (const uint32_t *)in, index_dtype,
                                                    indices, (uint32_t *)out, extent, count, inner,
                                                    (uint32_t)fill, n);
        break;
    default:
        take_kernel<<<grid_for(n), THREADS, 0, s>>>(mode, (const uint64_t *)in, index_dtype,
                                                    indices, (uint64_t *)out, extent, count, inner,
                                                    fill, n);
        break;
    }
    return launched("take");
}

extern "C" spmd_status spmd__cuda_softmax(void *stream, spmd_dtype dtype, const void *in, void *out,
                                          size_t outer, size_t extent, size_t inner)
{
    size_t lines = outer * inner;
    if (!lines || !extent)
        return SPMD_OK;
    softmax_any<<<grid_for(lines), THREADS, 0, as_stream(stream)>>>(dtype, in, out, extent, inner,
                                                                    lines);
    return launched("softmax");
}

extern "C" spmd_status spmd__cuda_reduce_axis(void *stream, spmd_reduce_kind kind,
                                              spmd_dtype in_dtype, const void *in,
                                              spmd_dtype out_dtype, void *out, size_t outer,
                                              size_t extent, size_t inner)
{
    size_t n = outer * inner;
    if (!n)
        return SPMD_OK;
    bool exact =
        spmd__is_int_like(in_dtype) && kind != SPMD_REDUCE_MEAN && spmd__is_int_like(out_dtype);
    reduce_axis_any<<<grid_for(n), THREADS, 0, as_stream(stream)>>>(
        kind, in_dtype, in, out_dtype, out, outer, extent, inner, exact);
    return launched("reduce");
}
