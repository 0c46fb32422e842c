/* Private: elementwise reduction kernels behind psum/pmax/pmin and psum_scatter. */
#ifndef SPMD_REDUCE_H
#define SPMD_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <spmd/dtype.h>
#include <spmd/status.h>

#include "runtime/comm/comm.h"

/** 1 for dtypes that the reductions support (f32 f64 i32 i64 f16 bf16). */
int spmd__reducible(spmd_dtype dtype);
/** 1 for f16 and bf16, which are accumulated in float32. */
int spmd__is_half(spmd_dtype dtype);
/** The dtype reductions accumulate in: float32 for f16/bf16, else the dtype itself. */
spmd_dtype spmd__accumulator_dtype(spmd_dtype dtype);

/**
 * dst[i] = op over k of srcs[k][i], for i in [begin, end): srcs hold `dtype` elements and dst
 * holds accumulator-dtype elements (float32 for f16/bf16). dst may be one of the srcs.
 */
void spmd__reduce_many(spmd_dtype dtype, spmd__reduce_op op, void *dst, const void *const *srcs,
                       int n, size_t begin, size_t end);

/**
 * For i in [begin, end): every dsts[d][i] (dtype elements) = op over k of srcs[k][i], in one
 * pass: each block is reduced in a small buffer and written to all destinations, so the data is
 * read once and written once. A destination may be one of the sources (in place).
 */
void spmd__reduce_many_to_all(spmd_dtype dtype, spmd__reduce_op op, void *const *dsts, int ndst,
                              const void *const *srcs, int n, size_t begin, size_t end,
                              int streaming);

/**
 * 1 when an in-process reduction's results of `bytes` in all (psum, pmean, pmax, pmin; at
 * least the last-level cache) should bypass
 * the caches (non-temporal stores): they would only evict data that is still useful, and
 * skipping the read-for-ownership saves a third of the memory traffic. Copies no longer do
 * (collectives_gather.c says why).
 */
int spmd__should_stream(size_t bytes);

/** dst[i] op= src[i] for accumulator-dtype buffers. */
void spmd__reduce_into(spmd_dtype acc_dtype, spmd__reduce_op op, void *dst, const void *src,
                       size_t count);
/** dst[i] = mine[i] op theirs[i], the bits of a copy of mine then spmd__reduce_into; dst may be
 * mine, never theirs. */
void spmd__reduce_from(spmd_dtype acc_dtype, spmd__reduce_op op, void *dst, const void *mine,
                       const void *theirs, size_t count);

/** Converts count float32 values to f16/bf16 (round to nearest even), or copies for others. */
void spmd__from_accumulator(spmd_dtype dtype, void *dst, const void *acc, size_t begin, size_t end);

/** Converts count elements between dtypes (numeric cast; float to int truncates). */
void spmd__convert(spmd_dtype to, void *dst, spmd_dtype from, const void *src, size_t count);

/** Element i of a `t` buffer as a double, and back (rounding for f16/bf16, truncating ints). */
double spmd__load(spmd_dtype t, const void *p, size_t i);
void spmd__store(spmd_dtype t, void *p, size_t i, double v);

/** 1 for int32, int64, uint8 and bool; their values, exactly, as int64. */
int spmd__int_like(spmd_dtype t);
int64_t spmd__load_int(spmd_dtype t, const void *p, size_t i);
/** Stores v, wrapping for int32 and uint8 (bool: v != 0). */
void spmd__store_int(spmd_dtype t, void *p, size_t i, int64_t v);

/** Multiplies count float elements (f32 f64 f16 bf16) by s in place. */
void spmd__scale(spmd_dtype dtype, void *data, double s, size_t count);

#endif /* SPMD_REDUCE_H */
