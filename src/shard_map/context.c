/*
 * The spmd_ctx that fn runs with: its checks and accessors, its device's queue and
 * temporaries (spmd_ctx_alloc, freed with the call), what fn's writes to its outputs prove
 * (spmd__ctx_note, for the replication check), and the checks of the blocks fn hands to
 * ops and collectives.
 */
#include "shard_map/executor.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/runtime_impl.h"
#include "runtime/base/digest.h"
#include "runtime/calls/trace.h"
#include "runtime/devices/worker.h"
#ifdef SPMD_HAVE_CUDA
#include "runtime/devices/backend/cuda.h"
#endif

spmd_status spmd__ctx_check(const spmd_ctx *ctx, const char *fn)
{
    SPMD_REQUIRE(ctx != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument 'ctx' is NULL", fn);
    /* compared, never read: a ctx kept after its fn returned points at a dead stack frame */
    SPMD_REQUIRE(spmd__worker_context_is_live(ctx), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: ctx is not the context of a running fn; a ctx is valid only inside the fn "
                 "it was passed to, until fn returns: do not keep it, or use it, after that",
                 fn);
    return SPMD_OK;
}

spmd_status spmd__ctx_check_optional(const spmd_ctx *ctx, const char *fn)
{
    return ctx ? spmd__ctx_check(ctx, fn) : SPMD_OK;
}

int spmd_ctx_device(const spmd_ctx *ctx)
{
    return spmd__ctx_check(ctx, "spmd_ctx_device") == SPMD_OK ? ctx->device_id : -1;
}

const spmd_mesh *spmd_ctx_mesh(const spmd_ctx *ctx)
{
    return spmd__ctx_check(ctx, "spmd_ctx_mesh") == SPMD_OK ? ctx->call->mesh : NULL;
}

/* The runtime and local ordinal of ctx's device; NULL for a NULL ctx or one not running. */
static const spmd__runtime *ctx_device(const spmd_ctx *ctx, int *local, int *hw)
{
    const spmd__runtime *rt =
        spmd__worker_context_is_live(ctx) ? spmd__runtime_get("spmd_ctx") : NULL;
    if (rt) {
        *local = ctx->device_id - rt->first_local;
        *hw = rt->devices[ctx->device_id].hardware_ordinal;
    }
    return rt;
}

uint64_t spmd__ctx_trace_digest(const spmd_ctx *ctx, int n, const spmd_block *blocks)
{
    if (!spmd__trace_digests() || !spmd__ctx_platform_is_host(ctx))
        return 0;
    uint64_t h = SPMD__FNV1A_SEED;
    for (int i = 0; i < n; i++) {
        uint64_t d =
            blocks[i].data ? spmd__digest(blocks[i].data, spmd__block_bytes(&blocks[i])) : 0;
        h = spmd__fnv1a(h, &d, sizeof d);
    }
    return h | 1; /* 0 means "none taken" */
}

/* Called on a checked ctx (spmd__ctx_check): the call's platform, without the look-ups. */
int spmd__ctx_platform_is_host(const spmd_ctx *ctx)
{
    return ctx->call->platform == SPMD_PLATFORM_CPU;
}

/* The device's CUDA stream (NULL on CPU devices or outside fn), and the runtime in *rt. */
static void *device_queue(const spmd_ctx *ctx, const spmd__runtime **rt_out)
{
    int local = 0, hw = 0;
    const spmd__runtime *rt = ctx_device(ctx, &local, &hw);
    void *stream = NULL;
    if (rt && rt->platform == SPMD_PLATFORM_CUDA &&
        spmd__device_backend(rt, ctx->device_id)->stream(local, hw, &stream) != SPMD_OK)
        stream = NULL;
    *rt_out = rt;
    return stream;
}

void *spmd__ctx_queue(const spmd_ctx *ctx)
{
    const spmd__runtime *rt = NULL;
    return device_queue(ctx, &rt);
}

spmd_status spmd__ctx_sync(const spmd_ctx *ctx)
{
    if (ctx->call->platform != SPMD_PLATFORM_CUDA) /* a CPU device's work is done already */
        return SPMD_OK;
    int local = 0, hw = 0;
    const spmd__runtime *rt = ctx_device(ctx, &local, &hw);
    if (!rt || rt->platform != SPMD_PLATFORM_CUDA)
        return SPMD_OK;
    return spmd__device_backend(rt, ctx->device_id)->sync(local);
}

void *spmd__ctx_kernel_queue(const spmd_ctx *ctx, size_t bytes, int n, const void *const *ptrs)
{
#ifdef SPMD_HAVE_CUDA
    /* a CPU call has no queue and nothing queued to wait for: no look-ups */
    if (!ctx || spmd__ctx_platform_is_host(ctx))
        return NULL;
    const spmd__runtime *rt = NULL;
    void *queue = device_queue(ctx, &rt);
    if (!queue)
        return NULL;
    int on_device = bytes >= rt->cuda_kernel_min_bytes;
    for (int i = 0; on_device && i < n; i++)
        on_device = spmd__cuda_is_device_memory(ptrs[i]);
    if (on_device)
        return queue;
    (void)spmd__ctx_sync(ctx); /* a failure shows again when fn returns */
#else
    (void)ctx, (void)bytes, (void)n, (void)ptrs;
#endif
    return NULL;
}

void *spmd_ctx_stream(const spmd_ctx *ctx) { return spmd__ctx_queue(ctx); }

void *spmd_ctx_cublas(spmd_ctx *ctx)
{
    if (spmd__ctx_check(ctx, "spmd_ctx_cublas") != SPMD_OK)
        return NULL;
    int local = 0, hw = 0;
    const spmd__runtime *rt = ctx_device(ctx, &local, &hw);
    void *handle = NULL;
    if (rt && spmd__device_backend(rt, ctx->device_id)->blas(local, hw, &handle) != SPMD_OK)
        return NULL; /* the reason stays in spmd_last_error() */
    return handle;
}

spmd_status spmd_ctx_alloc(spmd_ctx *ctx, int ndim, const int64_t *shape, spmd_dtype dtype,
                           spmd_block *block)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_ctx_alloc"));
    SPMD_REQUIRE_NOT_NULL(block, "spmd_ctx_alloc");
    SPMD_REQUIRE(ndim >= 0 && ndim <= SPMD_MAX_RANK && (ndim == 0 || shape != NULL), SPMD_ERR_SHAPE,
                 "spmd_ctx_alloc: ndim is %d (use 0..%d) or shape is NULL", ndim, SPMD_MAX_RANK);
    size_t bytes = spmd_dtype_size(dtype);
    SPMD_REQUIRE(bytes != 0, SPMD_ERR_INVALID_ARGUMENT, "spmd_ctx_alloc: dtype %d is not a dtype",
                 (int)dtype);
    for (int j = 0; j < ndim; j++) {
        SPMD_REQUIRE(shape[j] >= 1, SPMD_ERR_SHAPE,
                     "spmd_ctx_alloc: dimension %d has extent %lld; extents must be >= 1", j,
                     (long long)shape[j]);
        SPMD_REQUIRE(!spmd__mul_overflows(bytes, (size_t)shape[j], &bytes), SPMD_ERR_SHAPE,
                     "spmd_ctx_alloc: the block's bytes overflow size_t");
    }
    spmd__allocation *a = malloc(sizeof *a);
    SPMD_REQUIRE(a != NULL, SPMD_ERR_OUT_OF_MEMORY, "spmd_ctx_alloc: out of memory");
    spmd_status st = spmd__buffer_create(ctx->device_id, bytes, &a->buffer);
    if (st != SPMD_OK) {
        free(a);
        return st;
    }
    a->next = ctx->allocations;
    ctx->allocations = a;
    spmd__fill_block(block, a->buffer->data, dtype, ndim, shape);
    return SPMD_OK;
}

spmd_status spmd__check_block(const spmd_block *b, const char *name, const char *fn)
{
    SPMD_REQUIRE(b != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, name);
    SPMD_REQUIRE(b->ndim >= 0 && b->ndim <= SPMD_MAX_RANK, SPMD_ERR_SHAPE,
                 "%s: %s has rank %d; use 0..%d", fn, name, b->ndim, SPMD_MAX_RANK);
    SPMD_REQUIRE(spmd_dtype_size(b->dtype) != 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: %s has dtype %d, which is not a dtype", fn, name, (int)b->dtype);
    SPMD_REQUIRE(b->data != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: %s.data is NULL", fn, name);
    for (int j = 0; j < b->ndim; j++)
        SPMD_REQUIRE(b->shape[j] >= 1, SPMD_ERR_SHAPE,
                     "%s: dimension %d of %s has extent %lld; extents must be >= 1", fn, j, name,
                     (long long)b->shape[j]);
    SPMD_REQUIRE(spmd_block_nbytes(b) != 0, SPMD_ERR_SHAPE,
                 "%s: %s has more bytes than size_t counts", fn, name);
    return SPMD_OK;
}

int64_t spmd_block_size(const spmd_block *block)
{
    if (!block || block->ndim < 0 || block->ndim > SPMD_MAX_RANK)
        return 0;
    int64_t n = 1;
    for (int j = 0; j < block->ndim; j++)
        if (block->shape[j] < 0 || __builtin_mul_overflow(n, block->shape[j], &n))
            return 0; /* not a valid block: negative, or more elements than int64 counts */
    return n;
}

size_t spmd_block_nbytes(const spmd_block *block)
{
    size_t bytes = 0;
    if (!block ||
        spmd__mul_overflows((size_t)spmd_block_size(block), spmd_dtype_size(block->dtype), &bytes))
        return 0;
    return bytes;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

/* ---- what fn's writes prove ---- */

void spmd__ctx_note_write(spmd_ctx *ctx, const spmd_block *dst)
{
    spmd__ctx_note(ctx, dst, &(spmd__proof){0});
}

int spmd__ctx_note(spmd_ctx *ctx, const spmd_block *dst, const spmd__proof *proof)
{
    if (!ctx || !ctx->proofs || !dst || !dst->data)
        return 0;
    /* *proof is read only where it is kept: its fields were just stored one by one, and a
     * wider read of them stalls until those stores land (a tenth of a small collective) */
    const char *d = dst->data;
    size_t bytes = spmd__block_bytes(dst);
    int apart = 1;
    for (int j = 0; j < ctx->nout; j++) {
        int kept = j < SPMD__CTX_OUT_BYTES;
        const char *o = kept ? ctx->out_data[j] : ctx->outs[j].data;
        size_t ob = kept ? ctx->out_bytes[j] : spmd__block_bytes(&ctx->outs[j]);
        if (!o || d >= o + ob || o >= d + (bytes ? bytes : 1))
            continue;
        int whole = d == o && bytes == ob;
        ctx->proofs[j] = whole ? *proof : (spmd__proof){0};
        ctx->proofs[j].digest = 0;
        apart = 0;
    }
    return apart && ctx->nout <= SPMD__CTX_OUT_BYTES; /* every output kept: the answer holds */
}

void spmd__ctx_note_copy(spmd_ctx *ctx, const spmd_block *src, const spmd_block *dst)
{
    if (!ctx || !ctx->proofs || !src || !dst)
        return;
    for (int i = 0; i < ctx->nin; i++)
        if (ctx->ins[i].data == src->data &&
            spmd_block_size(&ctx->ins[i]) == spmd_block_size(src)) {
            for (int j = 0; j < ctx->nout; j++)
                if (ctx->outs[j].data == src->data)
                    return; /* donated in place: fn's writes to that output changed it */
            /* every holder of dst's block copied the same block of input i */
            uint64_t token = spmd__fnv1a(SPMD__FNV1A_SEED ^ 0x636f7079ull, &i, sizeof i) | 1;
            spmd__ctx_note(ctx, dst,
                           &(spmd__proof){.token = token, .axes = (unsigned)ctx->in_alike[i]});
            return;
        }
}
