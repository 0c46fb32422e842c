/* spmd_op_random and spmd_array_random: counter-based random numbers whose values depend only
 * on the seed and each element's global index (runtime/devices/backend/random_values.h), so that a
 * global array is the same in every layout and on every device. Compiled without floating-point
 * contraction (src/CMakeLists.txt), like the CUDA kernel (runtime/devices/backend/cuda_random.cu).
 */
#include <spmd/array.h>
#include <spmd/ops.h>

#include "runtime/base/check.h"
#include "runtime/devices/backend/random_values.h"
#include "array/array_impl.h"
#include "shard_map/executor.h"
#ifdef SPMD_HAVE_CUDA
#include "runtime/devices/backend/cuda.h"
#endif

/* 0 float32, 1 float64, 2 bfloat16 (random_values.h's codes); -1 for another dtype. */
static int dtype_code(spmd_dtype dtype)
{
    return dtype == SPMD_DTYPE_F32    ? 0
           : dtype == SPMD_DTYPE_F64  ? 1
           : dtype == SPMD_DTYPE_BF16 ? 2
                                      : -1;
}

static spmd_status check_random(const char *fn, spmd_dtype dtype, int dist, int ndim,
                                const int64_t *global_shape, const int64_t *start,
                                const int64_t *extent)
{
    SPMD_REQUIRE(dtype_code(dtype) >= 0, SPMD_ERR_UNSUPPORTED,
                 "%s: random numbers of %s are not supported; make float32, float64 or bfloat16 "
                 "and convert with spmd_op_copy",
                 fn, spmd_dtype_name(dtype));
    SPMD_REQUIRE(dist == SPMD_RANDOM_UNIFORM || dist == SPMD_RANDOM_NORMAL,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: distribution is %d; use SPMD_RANDOM_UNIFORM or SPMD_RANDOM_NORMAL", fn, dist);
    SPMD_REQUIRE(ndim == 0 || (global_shape && start), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: global_shape and start are NULL for a rank-%d block; give %d entries each",
                 fn, ndim, ndim);
    uint64_t total = 1;
    for (int j = 0; j < ndim; j++) {
        SPMD_REQUIRE(global_shape[j] >= 0 && start[j] >= 0 && extent[j] <= global_shape[j] &&
                         start[j] <= global_shape[j] - extent[j],
                     SPMD_ERR_INVALID_ARGUMENT,
                     "%s: along dimension %d the block of %lld elements starting at %lld does "
                     "not lie inside the global extent %lld",
                     fn, j, (long long)extent[j], (long long)start[j], (long long)global_shape[j]);
        SPMD_REQUIRE(global_shape[j] == 0 || total <= UINT64_MAX / (uint64_t)global_shape[j],
                     SPMD_ERR_INVALID_ARGUMENT, "%s: the global shape has more than 2^64 elements",
                     fn);
        total *= (uint64_t)global_shape[j];
    }
    return SPMD_OK;
}

/* The block of `extent` at `start` of the global array, dense row-major at dst. */
static void fill_host(uint64_t seed, int normal, int code, int ndim, const int64_t *global_shape,
                      const int64_t *start, const int64_t *extent, void *dst)
{
    size_t elem = code == 1 ? 8 : code == 2 ? 2 : 4;
    int64_t count = 1, idx[SPMD_MAX_RANK] = {0};
    for (int j = 0; j < ndim; j++)
        count *= extent[j];
    if (count == 0)
        return;
    int64_t row = ndim ? extent[ndim - 1] : 1;
    char *out = dst;
    for (int64_t done = 0; done < count; done += row) {
        uint64_t base = 0; /* global row-major index of this row's first element */
        for (int j = 0; j < ndim; j++)
            base = base * (uint64_t)global_shape[j] + (uint64_t)(start[j] + idx[j]);
        for (int64_t k = 0; k < row; k++, out += elem)
            spmd__random_store(seed, base + (uint64_t)k, code, normal, out);
        for (int j = ndim - 2; j >= 0; j--) { /* the next row */
            if (++idx[j] < extent[j])
                break;
            idx[j] = 0;
        }
    }
}

spmd_status spmd_op_random(spmd_ctx *ctx, uint64_t seed, spmd_random_distribution dist,
                           const int64_t *global_shape, const int64_t *start, spmd_block *out)
{
    const char *fn = "spmd_op_random";
    SPMD_CHECK(spmd__ctx_check_optional(ctx, fn));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_CHECK(check_random(fn, out->dtype, (int)dist, out->ndim, global_shape, start, out->shape));
    int code = dtype_code(out->dtype), normal = dist == SPMD_RANDOM_NORMAL;
#ifdef SPMD_HAVE_CUDA
    size_t bytes = spmd__block_bytes(out);
    const void *ptrs[1] = {out->data};
    void *queue = spmd__ctx_kernel_queue(ctx, bytes, 1, ptrs);
    if (queue) {
        SPMD_CHECK(spmd__cuda_random(queue, seed, normal, code, out->ndim, global_shape, start,
                                     out->shape, out->data));
        return spmd__ctx_sync(ctx);
    }
#endif
    fill_host(seed, normal, code, out->ndim, global_shape, start, out->shape, out->data);
    return SPMD_OK;
}

typedef struct random_request {
    uint64_t seed;
    int normal, code, ndim;
    const int64_t *shape;
} random_request;

static spmd_status fill_box(const spmd_box *index, void *dst, void *user)
{
    const random_request *r = user;
    int64_t extent[SPMD_MAX_RANK];
    for (int j = 0; j < r->ndim; j++)
        extent[j] = index->stop[j] - index->start[j];
    fill_host(r->seed, r->normal, r->code, r->ndim, r->shape, index->start, extent, dst);
    return SPMD_OK;
}

spmd_status spmd_array_random(int ndim, const int64_t *shape, spmd_dtype dtype,
                              const spmd_sharding *sharding, uint64_t seed, int distribution,
                              spmd_array **out)
{
    const char *fn = "spmd_array_random";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    SPMD_REQUIRE(ndim >= 0 && ndim <= SPMD_MAX_RANK, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: ndim is %d; use 0..%d", fn, ndim, SPMD_MAX_RANK);
    SPMD_REQUIRE(ndim == 0 || shape, SPMD_ERR_INVALID_ARGUMENT, "%s: shape is NULL", fn);
    int64_t zeros[SPMD_MAX_RANK] = {0};
    SPMD_CHECK(check_random(fn, dtype, distribution, ndim, shape, zeros, zeros));
    random_request r = {seed, distribution == SPMD_RANDOM_NORMAL, dtype_code(dtype), ndim, shape};
    return spmd__array_from_callback(fn, ndim, shape, dtype, sharding, fill_box, &r, out);
}
