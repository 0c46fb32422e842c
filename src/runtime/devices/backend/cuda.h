/* Private: what the CUDA backend offers the shard_map layer beyond backend.h: kernels for the
 * block operations and the in-process reductions, and gemm through cuBLAS. Every function
 * queues its work on `stream` (a cudaStream_t) and returns without waiting; pointers are to
 * device (managed) memory unless said otherwise. Declared only when SPMD_HAVE_CUDA. */
#ifndef SPMD_BACKEND_CUDA_H
#define SPMD_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <spmd/dtype.h>
#include <spmd/ops.h>
#include <spmd/status.h>

#include "runtime/devices/backend/index_map.h"
#include "runtime/base/reduce_op.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Blocks below this many bytes are handled by host code even on CUDA devices: a kernel's launch
 * and wait (~10 us) costs more than the work, and small blocks are mostly written and read by
 * host code, so moving their pages to the GPU and back would cost more still.
 */
#define SPMD__CUDA_KERNEL_MIN_BYTES (64 * 1024)

/** The most sources or destinations one in-process reduction kernel takes. */
#define SPMD__CUDA_MAX_PEERS 64

/** 1 when a kernel may read p (device or managed memory), 0 for host memory. */
int spmd__cuda_is_device_memory(const void *p);

/** Copies `height` rows of `width` bytes, `dpitch` / `spitch` apart (cudaMemcpy2DAsync). */
spmd_status spmd__cuda_copy_rows(void *stream, void *dst, size_t dpitch, const void *src,
                                 size_t spitch, size_t width, size_t height);

/** C (row-major, m x n) = alpha op(A) op(B) + beta C; f16/bf16 accumulate in float32. */
spmd_status spmd__cuda_gemm(void *cublas, spmd_dtype dtype, int trans_a, int trans_b, int m, int n,
                            int k, double alpha, const void *a, int lda, const void *b, int ldb,
                            double beta, void *c, int ldc);

/** As spmd__reduce_many_to_all (reduce.h), on the GPU; n and ndst at most SPMD__CUDA_MAX_PEERS. */
spmd_status spmd__cuda_reduce_to_all(void *stream, spmd_dtype dtype, spmd__reduce_op op,
                                     void *const *dsts, int ndst, const void *const *srcs, int n,
                                     size_t begin, size_t end);

spmd_status spmd__cuda_fill(void *stream, spmd_dtype dtype, void *out, size_t n, double value);
/** spmd_op_random's values (runtime/devices/backend/random_values.h, dtype code 0 f32, 1 f64, 2
 * bf16) for the block of `extent` at `start` of a global array of `global_shape`. */
spmd_status spmd__cuda_random(void *stream, uint64_t seed, int normal, int code, int ndim,
                              const int64_t *global_shape, const int64_t *start,
                              const int64_t *extent, void *out);
spmd_status spmd__cuda_iota(void *stream, spmd_dtype dtype, void *out, size_t n, double start,
                            double step);
/** As spmd__convert (reduce.h). */
spmd_status spmd__cuda_convert(void *stream, spmd_dtype to, void *dst, spmd_dtype from,
                               const void *src, size_t n);
/** Multiplies n float elements by s in place, as spmd__scale. */
spmd_status spmd__cuda_scale(void *stream, spmd_dtype dtype, void *data, double s, size_t n);
spmd_status spmd__cuda_unary(void *stream, spmd_unary_op op, spmd_dtype dtype, const void *in,
                             void *out, size_t n);
/**
 * out[i] = a[i] op b[i % period] for n elements of `dtype`. b is device memory of `dtype`, or,
 * when NULL, the scalar `scalar` (integer dtypes: `int_scalar`) for every i.
 */
spmd_status spmd__cuda_binary(void *stream, spmd_binary_op op, spmd_dtype dtype, const void *a,
                              const void *b, size_t period, double scalar, int64_t int_scalar,
                              void *out, size_t n);
/** out[i] = cond[cond_scalar ? 0 : i] ? a[i] : b[i] for n elements of elem bytes (1, 2, 4, 8). */
spmd_status spmd__cuda_where(void *stream, const unsigned char *cond, int cond_scalar,
                             const void *a, const void *b, void *out, size_t n, size_t elem);
/** As the host loop of spmd_op_slice / _update_slice (index_map.h): n box elements. */
spmd_status spmd__cuda_box_copy(void *stream, const spmd__box_map *map, const void *src, void *dst,
                                size_t n, size_t elem);
/** As the host loop of spmd_op_transpose (index_map.h). */
spmd_status spmd__cuda_transpose(void *stream, const spmd__transpose_map *map, const void *in,
                                 void *out, size_t n, size_t elem);
/** spmd_op_take: n = outer x count x inner output elements of `elem` bytes; element (o, k, i)
 * is in[(o * extent + spmd__take_source(mode, indices[k], extent)) * inner + i], or `fill`'s
 * low bytes when that is -1. */
spmd_status spmd__cuda_take(void *stream, spmd_take_mode mode, const void *in,
                            spmd_dtype index_dtype, const void *indices, void *out, size_t outer,
                            size_t extent, size_t count, size_t inner, size_t elem, uint64_t fill);
/** spmd_op_softmax: spmd__softmax_line (scalar_ops.h) on each of outer x inner lines. */
spmd_status spmd__cuda_softmax(void *stream, spmd_dtype dtype, const void *in, void *out,
                               size_t outer, size_t extent, size_t inner);
/** out[o, i] = reduction over e of in[o, e, i] (outer x extent x inner), as spmd_op_reduce. */
spmd_status spmd__cuda_reduce_axis(void *stream, spmd_reduce_kind kind, spmd_dtype in_dtype,
                                   const void *in, spmd_dtype out_dtype, void *out, size_t outer,
                                   size_t extent, size_t inner);

#ifdef __cplusplus
}
#endif

#endif /* SPMD_BACKEND_CUDA_H */
