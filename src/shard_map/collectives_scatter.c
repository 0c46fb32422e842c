/*
 * psum_scatter and psum_scatter_groups (the same paths): each device gets the sum of its chunk.
 *   in process: on the host the local members claim pieces of every member's chunk and sum
 *     each over the members; else each device sums its own chunk (CUDA: a kernel);
 *   between processes: the sum in the reductions' order (collectives_reduce.c), cut to a
 *     reduce-scatter where processes hold aligned blocks and the chunks lie one after another;
 *     each device then takes its chunk.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "shard_map/collective_frame.h"
#include "runtime/base/stream_copy.h"
#ifdef SPMD_HAVE_CUDA
#include "runtime/devices/backend/cuda.h"
#endif

/* ---- psum_scatter ---- */

/* The chunk of position p along dimension d: `outer` runs of `run` contiguous elements. */
typedef struct chunking {
    size_t outer;  /* product of the extents before d */
    size_t run;    /* chunk extent along d times the extents after d */
    size_t stride; /* elements between runs: extent of d times the extents after d */
    size_t elems;  /* outer * run */
} chunking;

static chunking chunks_of(const spmd_block *in, int d, int64_t chunk)
{
    chunking k = {1, (size_t)chunk, 0, 0};
    for (int j = 0; j < d; j++)
        k.outer *= (size_t)in->shape[j];
    size_t inner = 1;
    for (int j = d + 1; j < in->ndim; j++)
        inner *= (size_t)in->shape[j];
    k.run *= inner;
    k.stride = (size_t)in->shape[d] * inner;
    k.elems = k.outer * k.run;
    return k;
}

/* Elements [b, e) of acc (contiguous chunk, accumulator dtype) = op over srcs of chunk p of
 * each. */
static void reduce_chunk_range(spmd_dtype dtype, spmd__reduce_op op, void *acc,
                               const void *const *srcs, int n, const chunking *k, int p, size_t b,
                               size_t e, const void **scratch_ptrs)
{
    size_t elem = spmd_dtype_size(dtype),
           acc_elem = spmd_dtype_size(spmd__accumulator_dtype(dtype));
    for (size_t r = b / k->run; r < k->outer && r * k->run < e; r++) {
        size_t lo = r * k->run > b ? r * k->run : b;
        size_t hi = (r + 1) * k->run < e ? (r + 1) * k->run : e;
        size_t offset = r * k->stride + (size_t)p * k->run + (lo - r * k->run);
        for (int i = 0; i < n; i++)
            scratch_ptrs[i] = (const char *)srcs[i] + offset * elem;
        spmd__reduce_many(dtype, op, (char *)acc + lo * acc_elem, scratch_ptrs, n, 0, hi - lo);
    }
}

static void reduce_chunk(spmd_dtype dtype, spmd__reduce_op op, void *acc, const void *const *srcs,
                         int n, const chunking *k, int p, const void **scratch_ptrs)
{
    reduce_chunk_range(dtype, op, acc, srcs, n, k, p, 0, k->elems, scratch_ptrs);
}

/* reduce_chunk on the device's stream, straight into out (dtype elements), when everything is
 * device memory of 64 KiB and more; *done says whether it ran. */
static spmd_status device_reduce_chunk(spmd_ctx *ctx, spmd_dtype dtype, void *out,
                                       const void *const *srcs, int n, const chunking *k, int p,
                                       const void **scratch_ptrs, int *done)
{
    *done = 0;
#ifdef SPMD_HAVE_CUDA
    size_t elem = spmd_dtype_size(dtype);
    if (n > SPMD__CUDA_MAX_PEERS)
        return SPMD_OK;
    const void *ptrs[SPMD__CUDA_MAX_PEERS + 1] = {out};
    for (int i = 0; i < n; i++)
        ptrs[i + 1] = srcs[i];
    void *queue = spmd__ctx_kernel_queue(ctx, k->elems * elem, n + 1, ptrs);
    if (!queue)
        return SPMD_OK;
    for (size_t r = 0; r < k->outer; r++) {
        size_t offset = r * k->stride + (size_t)p * k->run;
        for (int i = 0; i < n; i++)
            scratch_ptrs[i] = (const char *)srcs[i] + offset * elem;
        void *dst = (char *)out + r * k->run * elem;
        SPMD_CHECK(spmd__cuda_reduce_to_all(queue, dtype, SPMD__OP_SUM, &dst, 1, scratch_ptrs, n, 0,
                                            k->run));
    }
    *done = 1;
    return spmd__ctx_sync(ctx);
#else
    (void)ctx, (void)dtype, (void)out, (void)srcs, (void)n, (void)k, (void)p, (void)scratch_ptrs;
    return SPMD_OK;
#endif
}

/* Copies chunk p of a dense accumulator-dtype buffer into contiguous dst. */
static void pack_chunk(size_t acc_elem, void *dst, const void *acc, const chunking *k, int p)
{
    for (size_t r = 0; r < k->outer; r++)
        spmd__copy_cached((char *)dst + r * k->run * acc_elem,
                          (const char *)acc + (r * k->stride + (size_t)p * k->run) * acc_elem,
                          k->run * acc_elem);
}

static spmd_status spmd_psum_scatter_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                             const char *axes, int scatter_dimension, int tiled,
                                             const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_psum_scatter"));
    spmd_status st = spmd__check_block(in, "in", "psum_scatter");
    if (st == SPMD_OK)
        st = spmd__check_block(out, "out", "psum_scatter");
    if (st == SPMD_OK && !spmd__reducible(in->dtype))
        st = SPMD_ERROR(SPMD_ERR_UNSUPPORTED,
                        "psum_scatter of %s is not supported; convert to "
                        "int32 or float32 first",
                        spmd_dtype_name(in->dtype));
    int d = st == SPMD_OK ? normalize_axis(scatter_dimension, in->ndim) : 0;
    if (st == SPMD_OK && (d < 0 || d >= in->ndim))
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "psum_scatter: scatter_dimension %d is out of range for a rank-%d block",
                        scatter_dimension, in->ndim);
    if (st != SPMD_OK)
        return spmd__coll_fail_args(ctx, st);
    coll c;
    SPMD_CHECK(spmd__coll_begin(ctx, axes, OP_PSUM_SCATTER, in, groups, &c));
    c.fingerprint = mix(mix(c.fingerprint, (uint64_t)d), (uint64_t)tiled);
    int64_t extent = in->shape[d];
    if (!tiled && extent != c.n)
        st = SPMD_ERROR(SPMD_ERR_SHAPE,
                        "psum_scatter: operand scatter dimension size %lld must match shard count "
                        "%d (untiled)",
                        (long long)extent, c.n);
    else if (tiled && extent % c.n != 0)
        st = SPMD_ERROR(SPMD_ERR_SHAPE,
                        "psum_scatter: tiled operand scatter dimension size %lld must be divisible "
                        "by shard_count %d",
                        (long long)extent, c.n);
    int64_t chunk = extent / c.n, want[SPMD_MAX_RANK];
    int out_rank = tiled ? in->ndim : in->ndim - 1;
    for (int j = 0, k = 0; j < in->ndim; j++) {
        if (j == d && !tiled)
            continue;
        want[k++] = j == d ? chunk : in->shape[j];
    }
    if (st == SPMD_OK)
        st = spmd__coll_check_out_shape(out, in->dtype, out_rank, want, "psum_scatter");
    if (st != SPMD_OK)
        return spmd__coll_fail(&c, st);

    spmd__group *g = c.g;
    chunking k = chunks_of(in, d, chunk);
    size_t count = (size_t)spmd_block_size(in);
    spmd_dtype acc_dtype = spmd__accumulator_dtype(in->dtype);
    size_t acc_elem = spmd_dtype_size(acc_dtype);
    int half = spmd__is_half(in->dtype);
    if (g->comm) {
        c.scratch_need[0] = count * acc_elem; /* the sum over every position */
        if (half)
            c.scratch_need[2] = (size_t)c.nl * k.elems * acc_elem;
    } else if (half) {
        c.scratch_need[0] = (size_t)c.nl * k.elems * acc_elem;
    }
    SPMD_CHECK(spmd__coll_arrive(&c, in->data, out->data, NULL));
    const void **srcs = malloc(2 * (size_t)c.nl * sizeof *srcs);
    if (!srcs)
        return spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    for (int i = 0; i < c.nl; i++) /* in position order: the order of runtime/base/tree.h */
        srcs[i] = g->slots[g->local_order[i]].in;
    if (!g->comm && c.nl > 1 && blocks_on_host(ctx)) {
        /* The threads claim pieces of the members' chunks and sum each over the members. */
        size_t piece = piece_elements(k.elems, 1, spmd_dtype_size(in->dtype));
        size_t per_member = (k.elems + piece - 1) / piece;
        for (long q; (q = claim_piece(g, (size_t)c.nl * per_member)) >= 0;) {
            int i = (int)((size_t)q / per_member);
            size_t b = (size_t)q % per_member * piece;
            size_t e = b + piece < k.elems ? b + piece : k.elems;
            void *acc =
                half ? (char *)g->scratch[0] + (size_t)i * k.elems * acc_elem : g->slots[i].out;
            reduce_chunk_range(in->dtype, SPMD__OP_SUM, acc, srcs, c.nl, &k, g->slots[i].position,
                               b, e, srcs + c.nl);
            if (half)
                spmd__from_accumulator(in->dtype, g->slots[i].out, acc, b, e);
        }
        st = spmd__coll_barrier(&c, 0);
    } else if (!g->comm) {
        /* Each device sums its own chunk over the local members directly. */
        int on_device = 0;
        st = device_reduce_chunk(ctx, in->dtype, out->data, srcs, c.nl, &k, c.pos, srcs + c.nl,
                                 &on_device);
        if (st == SPMD_OK && !on_device) {
            void *acc =
                half ? (char *)g->scratch[0] + (size_t)c.li * k.elems * acc_elem : out->data;
            reduce_chunk(in->dtype, SPMD__OP_SUM, acc, srcs, c.nl, &k, c.pos, srcs + c.nl);
            if (half)
                spmd__from_accumulator(in->dtype, out->data, acc, 0, k.elems);
        }
        st = st == SPMD_OK ? spmd__coll_barrier(&c, 0) : spmd__coll_fail(&c, st);
    } else {
        /* The sum in the canonical order (as psum), each device taking its chunk. Where every
         * process holds an aligned block of positions and the chunks lie one after another
         * (scattering the outermost dimension that is not 1), only the process's own chunks
         * are summed to the end between processes: the tree's reduce-scatter, about S bytes sent
         * per process for S per device, instead of the whole sum everywhere. */
        void *acc = g->scratch[0];
        int blocks = g->positions.block > 0;
        size_t scatter = blocks && k.outer == 1 ? (size_t)g->positions.block * k.run : 0;
        size_t b, e;
        slice_of(count, c.nl, c.li, &b, &e);
        /* one member's block is read where it is, its first sums taken from it (a pass less) */
        const void *source = spmd__coll_acc_source(&c, srcs, in->dtype, acc, count * acc_elem);
        if (blocks && !source)
            spmd__reduce_many(in->dtype, SPMD__OP_SUM, acc, srcs, c.nl, b, e);
        st = spmd__coll_barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0)
            st = spmd__coll_reduce_between_processes(&c, srcs, acc, source, count, acc_dtype,
                                                     SPMD__OP_SUM, scatter);
        if (st == SPMD_OK)
            st = spmd__coll_barrier(&c, 0);
        if (st == SPMD_OK && half) {
            void *mine = (char *)g->scratch[2] + (size_t)c.li * k.elems * acc_elem;
            pack_chunk(acc_elem, mine, acc, &k, c.pos);
            spmd__from_accumulator(in->dtype, out->data, mine, 0, k.elems);
        } else if (st == SPMD_OK) {
            pack_chunk(acc_elem, out->data, acc, &k, c.pos);
        }
        /* every device reads acc: none may return (and start another collective) before */
        if (st == SPMD_OK && c.nl > 1)
            st = spmd__coll_barrier(&c, 0);
    }
    free(srcs);
    return st;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_psum_scatter(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                              const char *axes, int scatter_dimension, int tiled)
{
    return spmd__error_in(
        spmd__coll_finished(
            ctx, spmd_psum_scatter_checked(ctx, in, out, axes, scatter_dimension, tiled, NULL), 1,
            out),
        "spmd_psum_scatter");
}

spmd_status spmd_psum_scatter_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                     const char *axes, int scatter_dimension, int tiled,
                                     const spmd_axis_groups *groups)
{
    return spmd__error_in(
        spmd__coll_finished(
            ctx, spmd_psum_scatter_checked(ctx, in, out, axes, scatter_dimension, tiled, groups), 1,
            out),
        "spmd_psum_scatter_groups");
}
