/* Nullary ops: zeros, full, iota, random values; replicated unless out_sharding says
 * otherwise (each device fills its own block: no communication either way). */
#include <string.h>

#include "array_ops/driver.h"
#include "array/array_impl.h"
#include "runtime/base/check.h"

enum { NULL_FULL, NULL_IOTA, NULL_RANDOM };

typedef struct nullary_args {
    int kind, dimension;
    double value;
    uint64_t seed;
    spmd_random_distribution dist;
    spmd__xtype out;
} nullary_args;

static spmd_status nullary_fn(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    const nullary_args *w = user;
    (void)nin;
    (void)in;
    (void)nout;
    int64_t start[SPMD_MAX_RANK];
    SPMD_CHECK(spmd__xop_block_start(ctx, &w->out, start));
    if (w->kind == NULL_FULL)
        return spmd_op_fill(ctx, &out[0], w->value);
    if (w->kind == NULL_RANDOM)
        return spmd_op_random(ctx, w->seed, w->dist, w->out.shape, w->out.ndim ? start : NULL,
                              &out[0]);
    /* iota: the index along `dimension`, written in double and converted once */
    spmd_block idx;
    SPMD_CHECK(spmd_ctx_alloc(ctx, out[0].ndim, out[0].shape, SPMD_DTYPE_F64, &idx));
    int d = w->dimension;
    int64_t inner = 1, n = out[0].shape[d], total = spmd_block_size(&out[0]);
    for (int k = d + 1; k < out[0].ndim; k++)
        inner *= out[0].shape[k];
    double *v = idx.data;
    for (int64_t i = 0; i < total; i++)
        v[i] = (double)(start[d] + i / inner % n);
    return spmd_op_copy(ctx, &idx, &out[0]);
}

static spmd_status run_nullary(const char *api, const char *name, spmd_mesh *mesh, int ndim,
                               const int64_t *shape, spmd_dtype dtype,
                               const spmd_sharding *out_sharding, const spmd_op_options *opts,
                               nullary_args *w, spmd_array **out)
{
    spmd__xop op;
    SPMD_CHECK(spmd__xop_begin(&op, api, name, opts, out));
    SPMD_CHECK(spmd__xop_mesh(&op, mesh));
    SPMD_REQUIRE(ndim >= 0 && ndim <= SPMD_MAX_RANK, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: ndim is %d; it must lie in [0, %d]", api, ndim, SPMD_MAX_RANK);
    SPMD_REQUIRE(ndim == 0 || shape != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument 'shape' is NULL for ndim %d", api, ndim);
    for (int d = 0; d < ndim; d++)
        SPMD_REQUIRE(shape[d] >= 1, SPMD_ERR_SHAPE,
                     "%s: shape[%d] is %lld; extents must be at least 1", api, d,
                     (long long)shape[d]);
    SPMD_REQUIRE((unsigned)dtype < SPMD_DTYPE_COUNT, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: dtype %d is not a spmd_dtype", api, (int)dtype);
    SPMD_REQUIRE(spmd__xshape_elements(ndim, shape, dtype) >= 0, SPMD_ERR_SHAPE,
                 "%s: the shape holds more bytes of %s than int64 can count", api,
                 spmd_dtype_name(dtype));
    SPMD_REQUIRE(
        w->kind != NULL_RANDOM ||
            ((dtype == SPMD_DTYPE_F32 || dtype == SPMD_DTYPE_F64 || dtype == SPMD_DTYPE_BF16) &&
             (w->dist == SPMD_RANDOM_UNIFORM || w->dist == SPMD_RANDOM_NORMAL)),
        dtype == SPMD_DTYPE_F32 || dtype == SPMD_DTYPE_F64 || dtype == SPMD_DTYPE_BF16
            ? SPMD_ERR_INVALID_ARGUMENT
            : SPMD_ERR_UNSUPPORTED,
        "%s: %s values with distribution %d: random arrays are float32, float64 or "
        "bfloat16, SPMD_RANDOM_UNIFORM or SPMD_RANDOM_NORMAL",
        api, spmd_dtype_name(dtype), (int)w->dist);
    SPMD_REQUIRE(w->kind != NULL_IOTA || (w->dimension >= 0 && w->dimension < ndim),
                 SPMD_ERR_INVALID_ARGUMENT, "%s: dimension %d is out of range for rank %d", api,
                 w->dimension, ndim);
    if (w->kind == NULL_IOTA) { /* every index must be a value of the dtype */
        int64_t top = dtype == SPMD_DTYPE_U8     ? 255
                      : dtype == SPMD_DTYPE_BOOL ? 1
                      : dtype == SPMD_DTYPE_I32  ? INT32_MAX
                      : dtype == SPMD_DTYPE_F16  ? 2048
                      : dtype == SPMD_DTYPE_BF16 ? 256
                      : dtype == SPMD_DTYPE_F32  ? (int64_t)1 << 24
                                                 : INT64_MAX;
        SPMD_REQUIRE(shape[w->dimension] - 1 <= top, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: indices up to %lld along dimension %d do not all fit %s exactly (at "
                     "most %lld); choose a wider dtype",
                     api, (long long)shape[w->dimension] - 1, w->dimension, spmd_dtype_name(dtype),
                     (long long)top);
    }
    spmd__xtype rep, res;
    int given, done;
    spmd__xtype_replicated(mesh, ndim, shape, dtype, &rep);
    SPMD_CHECK(spmd__xop_requested(&op, out_sharding, &rep, &res, &given));
    SPMD_REQUIRE(!res.unreduced, SPMD_ERR_SPEC,
                 "%s: a new array cannot be unreduced; give an out_sharding without unreduced "
                 "axes",
                 api);
    char type[192];
    spmd__xtype_format(&res, type, sizeof type);
    spmd__xop_describe(&op, name);
    spmd__xop_describe_more(&op, "%s, value %.17g, dimension %d, seed %llu, distribution %d", type,
                            w->value, w->dimension, (unsigned long long)w->seed, (int)w->dist);
    SPMD_CHECK(spmd__xop_plan(&op, &res, &res, &done, out));
    if (done)
        return SPMD_OK;
    w->out = res;
    op.fn = nullary_fn;
    op.user = w;
    return spmd__xop_run(&op, out);
}

spmd_status spmd_array_zeros(spmd_mesh *mesh, int ndim, const int64_t *shape, spmd_dtype dtype,
                             const spmd_sharding *out_sharding, const spmd_op_options *opts,
                             spmd_array **out)
{
    nullary_args w = {.kind = NULL_FULL, .value = 0};
    return run_nullary("spmd_array_zeros", "zeros", mesh, ndim, shape, dtype, out_sharding, opts,
                       &w, out);
}

spmd_status spmd_array_full(spmd_mesh *mesh, int ndim, const int64_t *shape, spmd_dtype dtype,
                            double value, const spmd_sharding *out_sharding,
                            const spmd_op_options *opts, spmd_array **out)
{
    nullary_args w = {.kind = NULL_FULL, .value = value};
    return run_nullary("spmd_array_full", "full", mesh, ndim, shape, dtype, out_sharding, opts, &w,
                       out);
}

spmd_status spmd_array_iota(spmd_mesh *mesh, int ndim, const int64_t *shape, spmd_dtype dtype,
                            int dimension, const spmd_sharding *out_sharding,
                            const spmd_op_options *opts, spmd_array **out)
{
    nullary_args w = {.kind = NULL_IOTA, .dimension = dimension};
    return run_nullary("spmd_array_iota", "iota", mesh, ndim, shape, dtype, out_sharding, opts, &w,
                       out);
}

spmd_status spmd_array_random_values(spmd_mesh *mesh, int ndim, const int64_t *shape,
                                     spmd_dtype dtype, uint64_t seed,
                                     spmd_random_distribution distribution,
                                     const spmd_sharding *out_sharding, const spmd_op_options *opts,
                                     spmd_array **out)
{
    nullary_args w = {.kind = NULL_RANDOM, .seed = seed, .dist = distribution};
    return run_nullary("spmd_array_random_values", "random", mesh, ndim, shape, dtype, out_sharding,
                       opts, &w, out);
}
