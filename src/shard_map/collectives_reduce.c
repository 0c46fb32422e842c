/*
 * psum, pmax, pmin and pmean, their _groups forms (another group table, the same paths) and
 * their many-block forms (psum_many ...). Reductions keep their one home for the order: every
 * sum between processes, psum_scatter's too, goes through reduce_between here.
 *   in process: the local members reduce slices of the inputs, in position order, into every
 *     output (host blocks from 16 KiB: pieces they claim; CUDA: a kernel on the device's stream);
 *   between processes: one tree allreduce by the first local member (runtime/base/tree.h's
 *     order), over the process's block added up here where every process holds an aligned
 *     block of positions, else over each position's input; then copied out to every output;
 *   many blocks: in one process on the host the members claim pieces of them, block after
 *     block; else each member takes small blocks whole and slices of large ones; between
 *     processes one fused buffer (a segment per accumulator dtype), or large blocks of one
 *     dtype reduced in place in the first member's outputs.
 * pmean sums, then each device scales its own output.
 */
#include "shard_map/collective_frame.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/dtype.h"
#ifdef SPMD_HAVE_CUDA
#include "runtime/devices/backend/cuda.h"
#endif

/* ---- psum / pmax / pmin / pmean ---- */

/* A reduction between processes, on accumulator-dtype elements: acc op= in. */
typedef struct reduction {
    spmd_dtype acc_dtype;
    spmd__reduce_op op;
} reduction;

static void combine(void *acc, const void *in, size_t bytes, void *arg)
{
    const reduction *r = arg;
    spmd__reduce_into(r->acc_dtype, r->op, acc, in, bytes / spmd_dtype_size(r->acc_dtype));
}

static void combine_from(void *out, const void *mine, const void *theirs, size_t bytes, void *arg)
{
    const reduction *r = arg;
    spmd__reduce_from(r->acc_dtype, r->op, out, mine, theirs,
                      bytes / spmd_dtype_size(r->acc_dtype));
}

/* Reduces slice [b, e) of the n inputs into every output: as one kernel on the device's stream,
 * finished before the peers go on, where the blocks (`bytes` each) allow it, else on the host. */
static spmd_status reduce_slice(spmd_ctx *ctx, spmd_dtype dtype, spmd__reduce_op rop,
                                void *const *dsts, int n, const void *const *srcs, size_t b,
                                size_t e, size_t bytes)
{
#ifdef SPMD_HAVE_CUDA
    if (n <= SPMD__CUDA_MAX_PEERS) { /* fn may pass host memory as in or out */
        const void *ptrs[2 * SPMD__CUDA_MAX_PEERS];
        for (int k = 0; k < n; k++) {
            ptrs[2 * k] = srcs[k];
            ptrs[2 * k + 1] = dsts[k];
        }
        void *queue = spmd__ctx_kernel_queue(ctx, bytes, 2 * n, ptrs);
        if (queue) {
            SPMD_CHECK(spmd__cuda_reduce_to_all(queue, dtype, rop, dsts, n, srcs, n, b, e));
            return spmd__ctx_sync(ctx);
        }
    }
#else
    (void)ctx;
#endif
    spmd__reduce_many_to_all(dtype, rop, dsts, n, srcs, n, b, e,
                             spmd__should_stream(bytes * (size_t)n));
    return SPMD_OK;
}

static spmd_status scale(spmd_ctx *ctx, spmd_block *out, double s, size_t count)
{
    size_t bytes = count * spmd_dtype_size(out->dtype);
    const void *data = out->data;
    void *queue = spmd__ctx_kernel_queue(ctx, bytes, 1, &data);
#ifdef SPMD_HAVE_CUDA
    if (queue) {
        SPMD_CHECK(spmd__cuda_scale(queue, out->dtype, out->data, s, count));
        return spmd__ctx_sync(ctx);
    }
#else
    (void)queue;
#endif
    spmd__scale(out->dtype, out->data, s, count);
    return SPMD_OK;
}

/* A block converted into out's dtype, in place of `in`, before the reduction runs over out; in
 * and out must not overlap when their element sizes differ. */
static spmd_status convert_into_out(const spmd_block *in, spmd_block *out, const char *name)
{
    SPMD_CHECK(spmd__coll_check_out_shape(out, out->dtype, in->ndim, in->shape, name));
    SPMD_REQUIRE(in->data != out->data || spmd_dtype_size(in->dtype) == spmd_dtype_size(out->dtype),
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: in (%s) and out (%s) share memory but differ in element size; pass a "
                 "separate out",
                 name, spmd_dtype_name(in->dtype), spmd_dtype_name(out->dtype));
    spmd__convert(out->dtype, out->data, in->dtype, in->data, (size_t)spmd_block_size(in));
    return SPMD_OK;
}

/*
 * Checks one (in, out) pair of a reduction, as JAX types it, and sets *reduced to the block the
 * reduction runs over: in itself, or out once in was converted into out's dtype (psum of bool
 * counts into int32; pmean of integers and bools averages as floats).
 */
static spmd_status prepare_reduction(op_kind op, const spmd_block *in, spmd_block *out,
                                     spmd_block *reduced)
{
    const char *name = spmd__coll_op_names[op];
    SPMD_CHECK(spmd__check_block(in, "in", name));
    int like_in = spmd__block_like_checked(out, in);
    if (!like_in)
        SPMD_CHECK(spmd__check_block(out, "out", name));
    *reduced = *in;
    int convert = 0;
    if (op == OP_PSUM && in->dtype == SPMD_DTYPE_BOOL) { /* counts, as JAX */
        SPMD_REQUIRE(out->dtype == SPMD_DTYPE_I32, SPMD_ERR_SHAPE,
                     "psum: out is %s; the psum of bool counts the true values, in an int32 out "
                     "(as JAX)",
                     spmd_dtype_name(out->dtype));
        convert = 1;
    } else if (op == OP_PMEAN) {
        SPMD_REQUIRE(!spmd__dtype_is_float(in->dtype) || out->dtype == in->dtype, SPMD_ERR_SHAPE,
                     "pmean: out is %s but in is %s; they must match", spmd_dtype_name(out->dtype),
                     spmd_dtype_name(in->dtype));
        SPMD_REQUIRE(spmd__dtype_is_float(out->dtype), SPMD_ERR_SHAPE,
                     "pmean: out is %s; the mean of %s needs a float out (float32 or float64)",
                     spmd_dtype_name(out->dtype), spmd_dtype_name(in->dtype));
        convert = !spmd__dtype_is_float(in->dtype);
    }
    if (convert) {
        SPMD_CHECK(convert_into_out(in, out, name));
        *reduced = *out;
    }
    SPMD_REQUIRE(spmd__reducible(reduced->dtype), SPMD_ERR_UNSUPPORTED,
                 "%s of %s is not supported; convert to int32 or float32 first (spmd_op_copy into "
                 "a block of that dtype)",
                 name, spmd_dtype_name(reduced->dtype));
    if (like_in) /* reduced is in: a conversion's out never has in's dtype (refused above) */
        return SPMD_OK;
    return spmd__coll_check_out_shape(out, reduced->dtype, reduced->ndim, reduced->shape, name);
}

/*
 * The step between processes of a reduction, by the first local member: acc (or acc_source, if
 * not NULL) holds the process's block already added up where every process holds an aligned
 * block (g->positions), else the inputs (in position order) go on their own; acc receives the
 * result.
 */
static spmd_status reduce_between(coll *c, const void *const *srcs, spmd_dtype src_dtype, void *acc,
                                  size_t count, spmd_dtype acc_dtype, spmd__reduce_op rop,
                                  spmd__combine_fn fn, void *fn_arg, const spmd__piece_run *runs,
                                  const spmd__piece_run *sources, int nruns, size_t scatter,
                                  const void *acc_source)
{
    spmd__group *g = c->g;
    const spmd__position_map *pm = &g->positions;
    spmd__tree_inputs in = {.n = g->size,
                            .rank_of = pm->rank_of,
                            .block = pm->block,
                            .rank_of_vrank = pm->rank_of_vrank,
                            .my_vrank = pm->my_vrank,
                            .split = fn == combine, /* not the fused buffer's segments */
                            .nruns = nruns,
                            .runs = runs,
                            .sources = sources,
                            .combine_sources = fn == combine ? combine_from : NULL,
                            .scatter = scatter,
                            .acc_source = acc_source,
                            .host = blocks_on_host(c->ctx)};
    int *positions = NULL;
    void **converted = NULL;
    spmd_status st = SPMD_OK;
    if (!pm->block) {
        positions = malloc((size_t)c->nl * sizeof *positions);
        converted = calloc((size_t)c->nl, sizeof *converted);
        if (!positions || !converted)
            st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
        for (int k = 0; k < c->nl && st == SPMD_OK; k++) {
            positions[k] = g->slots[g->local_order[k]].position;
            if (acc_dtype == src_dtype)
                continue;
            /* 16-bit inputs go in the accumulator's dtype, as a process's block would */
            converted[k] = malloc(count * spmd_dtype_size(acc_dtype));
            if (!converted[k])
                st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
            else
                spmd__reduce_many(src_dtype, rop, converted[k], &srcs[k], 1, 0, count);
        }
        in.count = c->nl;
        in.positions = positions;
        in.inputs = acc_dtype == src_dtype ? srcs : (const void *const *)converted;
    }
    if (st != SPMD_OK) {
        free(positions);
        free(converted);
        return spmd__coll_fail(c, st);
    }
    spmd__agreement a = spmd__coll_agreement(c);
    spmd__wait w = spmd__coll_cross_wait(c);
    st = spmd__coll_crossed(
        c,
        spmd__comm_checked_tree_allreduce(g->comm, &a, &in, acc, count, acc_dtype, fn, fn_arg, &w),
        &w);
    for (int k = 0; converted && k < c->nl; k++)
        free(converted[k]);
    free(converted);
    free(positions);
    return st;
}

/* reduce_between for one block of the collective's dtype; scatter > 0: this process needs only
 * its range of it (spmd__tree_inputs). */
spmd_status spmd__coll_reduce_between_processes(coll *c, const void *const *srcs, void *acc,
                                                const void *acc_source, size_t count,
                                                spmd_dtype acc_dtype, spmd__reduce_op rop,
                                                size_t scatter)
{
    reduction r = {acc_dtype, rop};
    return reduce_between(c, srcs, c->dtype, acc, count, acc_dtype, rop, combine, &r, NULL, NULL, 0,
                          scatter, acc_source);
}

const void *spmd__coll_acc_source(const coll *c, const void *const *srcs, spmd_dtype dtype,
                                  const void *acc, size_t bytes)
{
    int usable = c->nl == 1 && c->g->comm && c->g->positions.block > 0 && !spmd__is_half(dtype) &&
                 blocks_on_host(c->ctx);
    /* an input that overlaps acc without being it would be overwritten while still read */
    const char *in = usable ? srcs[0] : NULL, *at = acc;
    if (in && in != at && in < at + bytes && at < in + bytes)
        return NULL;
    return in;
}

static spmd_status reduce(spmd_ctx *ctx, const spmd_block *given, spmd_block *out, const char *axes,
                          op_kind op, spmd__reduce_op rop, const spmd_axis_groups *groups)
{
    spmd_block prepared;
    /* kernels fn queued may still be writing `given`, which a conversion reads */
    spmd_status st = spmd__ctx_sync(ctx);
    if (st == SPMD_OK)
        st = prepare_reduction(op, given, out, &prepared);
    if (st != SPMD_OK)
        return spmd__coll_fail_args(ctx, st);
    const spmd_block *in = &prepared;
    coll c;
    SPMD_CHECK(spmd__coll_begin(ctx, axes, op, in, groups, &c));
    size_t count = (size_t)spmd_block_size(in), elem = spmd_dtype_size(in->dtype);
    spmd_dtype acc_dtype = spmd__accumulator_dtype(in->dtype);
    int half = spmd__is_half(in->dtype);
    if (half)
        c.scratch_need[0] = count * sizeof(float);
    SPMD_CHECK(spmd__coll_arrive(&c, in->data, out->data, NULL));

    spmd__group *g = c.g;
    enum { STACK = 64 };
    const void *stack_srcs[STACK];
    void *stack_dsts[STACK];
    const void **srcs = c.nl <= STACK ? stack_srcs : malloc((size_t)c.nl * sizeof *srcs);
    void **dsts = c.nl <= STACK ? stack_dsts : malloc((size_t)c.nl * sizeof *dsts);
    if (!srcs || !dsts) {
        if (srcs != stack_srcs)
            free(srcs);
        if (dsts != stack_dsts)
            free(dsts);
        return spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    }
    /* inputs in position order: the order of runtime/base/tree.h */
    for (int k = 0; k < c.nl; k++) {
        srcs[k] = g->slots[g->local_order[k]].in;
        dsts[k] = g->slots[k].out;
    }
    /* claimed pieces pay off from two of them; fixed slices and steps between processes from
     * SPLIT_BYTES */
    int claims = !g->comm && blocks_on_host(ctx);
    int small = count * elem < (claims ? 2 * PIECE_BYTES : SPLIT_BYTES) || c.nl == 1;
    size_t b = 0, e = count;
    if (!small)
        slice_of(count, c.nl, c.li, &b, &e);
    st = SPMD_OK;
    if (claims && !small) {
        /* One pass: the threads claim pieces, reduce each and write it to every output. */
        size_t piece = piece_elements(count, c.nl, elem), pieces = (count + piece - 1) / piece;
        for (long p; st == SPMD_OK && (p = claim_piece(g, pieces)) >= 0;) {
            size_t pb = (size_t)p * piece, pe = pb + piece < count ? pb + piece : count;
            st = reduce_slice(ctx, in->dtype, rop, dsts, c.nl, srcs, pb, pe, count * elem);
        }
    } else if (!g->comm) {
        /* One pass: each thread reduces its slice and writes it to every output. */
        if (!small || c.li == 0)
            st = reduce_slice(ctx, in->dtype, rop, dsts, c.nl, srcs, b, e, count * elem);
    } else {
        /* The process's block goes between processes once, then out to every output. */
        void *acc = half ? g->scratch[0] : dsts[0];
        int blocks = g->positions.block > 0; /* else every position goes on its own */
        /* one member's block is read where it is, its first sums taken from it (a pass less) */
        const void *source = spmd__coll_acc_source(&c, srcs, in->dtype, acc, count * elem);
        if ((!small || c.li == 0) && blocks && !source)
            spmd__reduce_many(in->dtype, rop, acc, srcs, c.nl, b, e);
        if (!small)
            st = spmd__coll_barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0)
            st = spmd__coll_reduce_between_processes(&c, srcs, acc, source, count, acc_dtype, rop,
                                                     0);
        if (st == SPMD_OK && !small)
            st = spmd__coll_barrier(&c, 0);
        for (int k = 0; st == SPMD_OK && k < c.nl && (!small || c.li == 0); k++)
            if (half || dsts[k] != acc)
                spmd__from_accumulator(in->dtype, dsts[k], acc, b, e);
    }
    /* Threads wrote into each other's outputs: nobody returns before all are done. */
    if (st == SPMD_OK && c.nl > 1)
        st = spmd__coll_barrier(&c, 0);
    if (dsts != stack_dsts)
        free(dsts);
    if (srcs != stack_srcs)
        free(srcs);
    /* rop is SUM for pmean: the division happens on each device's own output */
    if (st == SPMD_OK && op == OP_PMEAN)
        st = scale(ctx, out, 1.0 / c.n, count);
    return st;
}

static spmd_status spmd_psum_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                     const char *axes, const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_psum"));
    return reduce(ctx, in, out, axes, OP_PSUM, SPMD__OP_SUM, groups);
}

spmd_status spmd__pmax_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                               const char *axes, const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pmax"));
    return reduce(ctx, in, out, axes, OP_PMAX, SPMD__OP_MAX, groups);
}

static spmd_status spmd_pmin_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                     const char *axes, const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pmin"));
    return reduce(ctx, in, out, axes, OP_PMIN, SPMD__OP_MIN, groups);
}

/* rop is SUM: the division happens on each device's own output */
static spmd_status spmd_pmean_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                      const char *axes, const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pmean"));
    return reduce(ctx, in, out, axes, OP_PMEAN, SPMD__OP_SUM, groups);
}

/* ---- many blocks in one collective (a pytree's leaves) ---- */

/* What every local member computes alike about block i of a many-block reduction. */
typedef struct many_block {
    spmd_dtype dtype; /* of the reduction (out's) */
    size_t count, bytes;
    size_t fused; /* between processes: byte offset of its accumulator elements in the fused
                     buffer */
    int owner;    /* a small block's local member (-1: split between them all) */
} many_block;

/* Splits the work on the blocks between the local members where they do not claim pieces
 * (between processes, CUDA devices): a large block in slices, each small one whole to a member,
 * members taking consecutive blocks of about equal bytes. */
static void assign_blocks(many_block *mb, int n, int nl)
{
    size_t whole = 0, before = 0;
    for (int i = 0; i < n; i++)
        if (nl == 1 || mb[i].bytes < SPLIT_BYTES)
            whole += mb[i].bytes;
    for (int i = 0; i < n; i++) {
        mb[i].owner = -1;
        if (nl > 1 && mb[i].bytes >= SPLIT_BYTES)
            continue;
        mb[i].owner = (int)(before * (size_t)nl / (whole + 1)); /* < nl */
        before += mb[i].bytes;
    }
}

/* This member's part [b, e) of block i; 0 when it has none. */
static int my_part(const many_block *mb, int nl, int li, size_t *b, size_t *e)
{
    if (mb->owner >= 0) {
        *b = 0;
        *e = mb->count;
        return mb->owner == li;
    }
    slice_of(mb->count, nl, li, b, e);
    return *e > *b;
}

/* In process on the host, the members claim pieces of the blocks, block after block, as a
 * psum claims those of its one block: none waits on a descheduled peer's fixed share. Returns
 * the elements of block `mb`'s pieces, and sets *pieces to their number. */
static size_t block_piece(const many_block *mb, int nl, size_t *pieces)
{
    size_t piece = piece_elements(mb->count, nl, spmd_dtype_size(mb->dtype));
    *pieces = mb->count ? (mb->count + piece - 1) / piece : 0;
    return piece;
}

static spmd_status reduce_claimed_pieces(coll *c, const many_block *mb, int n, spmd__reduce_op rop,
                                         const void **srcs, void **dsts)
{
    spmd__group *g = c->g;
    size_t total = 0, pieces;
    for (int i = 0; i < n; i++) {
        block_piece(&mb[i], c->nl, &pieces);
        total += pieces;
    }
    int i = -1;
    size_t first = 0, piece = 0; /* block i's first piece, and its pieces' elements */
    pieces = 0;
    spmd_status st = SPMD_OK;
    for (long p; st == SPMD_OK && (p = claim_piece(g, total)) >= 0;) {
        while ((size_t)p >= first + pieces) { /* a thread's claims only grow */
            first += pieces;
            piece = block_piece(&mb[++i], c->nl, &pieces);
        }
        size_t pb = ((size_t)p - first) * piece;
        size_t pe = pb + piece < mb[i].count ? pb + piece : mb[i].count;
        for (int k = 0; k < c->nl; k++) {
            srcs[k] = ((const void *const *)g->slots[g->local_order[k]].in)[i];
            dsts[k] = ((spmd_block *)g->slots[k].out)[i].data;
        }
        st = reduce_slice(c->ctx, mb[i].dtype, rop, dsts, c->nl, srcs, pb, pe, mb[i].bytes);
    }
    return st;
}

/* The fused buffer: one segment per accumulator dtype (in dtype order, 16-byte aligned). */
static size_t fuse_blocks(many_block *mb, int n, size_t *seg_begin, size_t *seg_end)
{
    size_t at = 0;
    for (int t = 0; t < SPMD_DTYPE_COUNT; t++) {
        at = (at + 15) / 16 * 16;
        seg_begin[t] = at;
        for (int i = 0; i < n; i++)
            if (spmd__accumulator_dtype(mb[i].dtype) == (spmd_dtype)t) {
                mb[i].fused = at;
                at += mb[i].count * spmd_dtype_size((spmd_dtype)t);
            }
        seg_end[t] = at;
    }
    return at;
}

/* The fused buffer's segments, each reduced in its own dtype: the data of a small many-block
 * reduction travels with the agreement, whatever its dtypes. */
typedef struct fused_reduction {
    const size_t *seg_begin, *seg_end;
    spmd__reduce_op op;
} fused_reduction;

static void combine_fused(void *acc, const void *in, size_t bytes, void *arg)
{
    const fused_reduction *f = arg;
    for (int t = 0; t < SPMD_DTYPE_COUNT; t++)
        if (f->seg_end[t] > f->seg_begin[t] && f->seg_end[t] <= bytes)
            spmd__reduce_into((spmd_dtype)t, f->op, (char *)acc + f->seg_begin[t],
                              (const char *)in + f->seg_begin[t],
                              (f->seg_end[t] - f->seg_begin[t]) / spmd_dtype_size((spmd_dtype)t));
}

/* The reduction between processes of the fused buffer, by the first local member: the
 * process's blocks already added up in it (ranks holding aligned blocks of positions), or each
 * member's blocks packed in its own fused buffer of g->scratch[1] (in position order). */
static spmd_status many_between_processes(coll *c, size_t fused, spmd__reduce_op rop,
                                          const size_t *seg_begin, const size_t *seg_end)
{
    spmd__group *g = c->g;
    const void **packed = malloc((size_t)c->nl * sizeof *packed);
    if (!packed)
        return spmd__coll_fail(c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    for (int k = 0; k < c->nl; k++)
        packed[k] = (char *)g->scratch[1] + (size_t)k * fused;
    int segments = 0, only = 0;
    for (int t = 0; t < SPMD_DTYPE_COUNT; t++)
        if (seg_end[t] > seg_begin[t])
            segments++, only = t;
    spmd_status st;
    if (segments == 1) { /* one accumulator dtype: a plain reduction, which large blocks split */
        size_t elem = spmd_dtype_size((spmd_dtype)only);
        for (int k = 0; k < c->nl; k++)
            packed[k] = (const char *)packed[k] + seg_begin[only];
        reduction r = {(spmd_dtype)only, rop};
        st = reduce_between(c, packed, (spmd_dtype)only, (char *)g->scratch[0] + seg_begin[only],
                            (seg_end[only] - seg_begin[only]) / elem, (spmd_dtype)only, rop,
                            combine, &r, NULL, NULL, 0, 0, NULL);
    } else {
        fused_reduction f = {seg_begin, seg_end, rop};
        st = reduce_between(c, packed, SPMD_DTYPE_U8, g->scratch[0], fused, SPMD_DTYPE_U8, rop,
                            combine_fused, &f, NULL, NULL, 0, 0, NULL);
    }
    free(packed);
    return st;
}

/* The reduction between processes of large blocks of one dtype, in place in the first local
 * member's outputs: MPI reads and writes them through datatypes, no packing. The process's
 * blocks are added up there already, or (one member) read from its inputs as the reduction
 * needs them. */
static spmd_status many_in_place(coll *c, const many_block *mb, int n, spmd__reduce_op rop)
{
    const spmd_block *first_out = c->g->slots[0].out;
    const void *const *first_in = (const void *const *)c->g->slots[0].in;
    spmd__piece_run *runs = malloc(2 * (size_t)n * sizeof *runs), *sources = runs + n;
    if (!runs)
        return spmd__coll_fail(c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    size_t count = 0;
    for (int i = 0; i < n; i++) {
        runs[i] = (spmd__piece_run){first_out[i].data, mb[i].count};
        sources[i] = (spmd__piece_run){(void *)first_in[i], mb[i].count};
        count += mb[i].count;
    }
    reduction r = {mb[0].dtype, rop};
    spmd_status st = reduce_between(c, NULL, mb[0].dtype, NULL, count, mb[0].dtype, rop, combine,
                                    &r, runs, c->nl == 1 ? sources : NULL, n, 0, NULL);
    free(runs);
    return st;
}

static spmd_status reduce_blocks(spmd_ctx *ctx, int n, const spmd_block *given, spmd_block *out,
                                 const char *axes, op_kind op, spmd__reduce_op rop)
{
    const char *name = spmd__coll_op_names[op];
    spmd_status st = SPMD_OK;
    if (n < 0 || (n > 0 && (!given || !out)))
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "%s of many blocks: n is %d, in %s, out %s; pass n >= 0 and arrays of n "
                        "blocks",
                        name, n, given ? "given" : "NULL", out ? "given" : "NULL");
    if (st != SPMD_OK)
        return spmd__coll_fail_args(ctx, st);
    if (n == 0)
        return SPMD_OK; /* an empty tree: no collective, as in JAX */
    const void **src = malloc((size_t)n * sizeof *src);
    many_block *mb = calloc((size_t)n, sizeof *mb);
    spmd_block first;
    if (!src || !mb)
        st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == SPMD_OK) /* kernels fn queued may still be writing the blocks converted below */
        st = spmd__ctx_sync(ctx);
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        spmd_block prepared;
        st = prepare_reduction(op, &given[i], &out[i], &prepared);
        if (st != SPMD_OK) {
            char detail[SPMD__MESSAGE_CAPACITY];
            spmd__copy_text(detail, sizeof detail, spmd_last_error());
            st = SPMD_ERROR(st, "block %d of %d: %s", i, n, detail);
            break;
        }
        if (i == 0)
            first = prepared;
        src[i] = prepared.data;
        mb[i].dtype = prepared.dtype;
        mb[i].count = (size_t)spmd_block_size(&prepared);
        mb[i].bytes = mb[i].count * spmd_dtype_size(prepared.dtype);
    }
    if (st != SPMD_OK) {
        free(src);
        free(mb);
        return spmd__coll_fail_args(ctx, st);
    }
    coll c;
    st = spmd__coll_begin(ctx, axes, op, &first, NULL, &c);
    if (st != SPMD_OK) {
        free(src);
        free(mb);
        return st;
    }
    c.nblocks = n;
    c.trace_in = given;
    c.trace_n = n;
    uint64_t h = mix(c.fingerprint, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        spmd_block shape_of = out[i];
        shape_of.dtype = mb[i].dtype;
        h = mix_block(h, &shape_of);
    }
    c.fingerprint = h;
    spmd__group *g = c.g;
    int cross = g->comm != NULL;
    /* Between processes every block goes in one fused buffer: one reduction in the canonical
     * order, whatever the number of blocks. */
    size_t seg_begin[SPMD_DTYPE_COUNT], seg_end[SPMD_DTYPE_COUNT], fused = 0;
    int in_place = cross; /* large blocks of one dtype reduced in place (MPI reads the outputs) */
    if (cross) {
        fused = fuse_blocks(mb, n, seg_begin, seg_end);
        for (int i = 0; i < n; i++)
            in_place &= mb[i].dtype == mb[0].dtype && !spmd__is_half(mb[i].dtype);
        in_place &= fused > SPMD__COMM_COMBINED_BYTES;
        c.scratch_need[0] = fused;
        c.scratch_need[1] = (size_t)c.nl * fused; /* each position's blocks, packed */
        c.scratch_if_blocks = 1;
        c.scratch_blocks[0] = in_place ? 0 : fused;
    }
    assign_blocks(mb, n, c.nl);
    const void **srcs = malloc(2 * (size_t)c.nl * sizeof *srcs);
    if (!srcs) {
        free(src);
        free(mb);
        return spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    }
    void **dsts = (void **)(srcs + c.nl);
    st = spmd__coll_arrive(&c, src, out, NULL);
    int blocks = cross && st == SPMD_OK && g->positions.block > 0;
    in_place &= blocks;
    if (cross && st == SPMD_OK && !blocks) { /* each member packs its own blocks */
        int at = 0;
        while (g->local_order[at] != c.li)
            at++;
        char *mine = (char *)g->scratch[1] + (size_t)at * fused;
        for (int i = 0; i < n; i++)
            spmd__reduce_many(mb[i].dtype, rop, mine + mb[i].fused, &src[i], 1, 0, mb[i].count);
    }
    /* 1. each member reduces its part of the local blocks (inputs in position order): into
     *    every local output (one process: on the host, pieces it claims), or into the fused
     *    buffer (several) */
    int claims = !cross && c.nl > 1 && blocks_on_host(ctx);
    if (claims && st == SPMD_OK &&
        (st = reduce_claimed_pieces(&c, mb, n, rop, srcs, dsts)) != SPMD_OK)
        st = spmd__coll_fail(&c, st);
    for (int i = 0; i < n && st == SPMD_OK && !claims && (!cross || blocks); i++) {
        size_t b, e;
        if (!my_part(&mb[i], c.nl, c.li, &b, &e))
            continue;
        for (int k = 0; k < c.nl; k++) {
            srcs[k] = ((const void *const *)g->slots[g->local_order[k]].in)[i];
            dsts[k] = ((spmd_block *)g->slots[k].out)[i].data;
        }
        if (!cross)
            st = reduce_slice(ctx, mb[i].dtype, rop, dsts, c.nl, srcs, b, e, mb[i].bytes);
        else if (in_place && c.nl > 1) /* first member's output (one: many_in_place reads) */
            spmd__reduce_many(mb[i].dtype, rop, dsts[0], srcs, c.nl, b, e);
        else if (!in_place)
            spmd__reduce_many(mb[i].dtype, rop, (char *)g->scratch[0] + mb[i].fused, srcs, c.nl, b,
                              e);
        if (st != SPMD_OK)
            st = spmd__coll_fail(&c, st);
    }
    /* 2. between processes, then each member copies its part back out to every output */
    if (cross) {
        if (st == SPMD_OK && c.nl > 1)
            st = spmd__coll_barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0)
            st = in_place ? many_in_place(&c, mb, n, rop)
                          : many_between_processes(&c, fused, rop, seg_begin, seg_end);
        if (st == SPMD_OK && c.nl > 1)
            st = spmd__coll_barrier(&c, 0);
        for (int i = 0; i < n && st == SPMD_OK; i++) {
            size_t b, e;
            if (!my_part(&mb[i], c.nl, c.li, &b, &e))
                continue;
            const char *result = in_place ? ((spmd_block *)g->slots[0].out)[i].data
                                          : (char *)g->scratch[0] + mb[i].fused;
            for (int k = 0; k < c.nl; k++) {
                void *dst = ((spmd_block *)g->slots[k].out)[i].data;
                if (dst != result)
                    spmd__from_accumulator(mb[i].dtype, dst, result, b, e);
            }
        }
    }
    /* members wrote into each other's outputs: nobody returns before all are done */
    if (st == SPMD_OK && c.nl > 1)
        st = spmd__coll_barrier(&c, 0);
    for (int i = 0; i < n && st == SPMD_OK && op == OP_PMEAN; i++)
        st = scale(ctx, &out[i], 1.0 / c.n, mb[i].count);
    free(srcs);
    free(src);
    free(mb);
    return st;
}

static spmd_status spmd_reduce_many_checked(const char *entry, spmd_ctx *ctx, int n,
                                            const spmd_block *in, spmd_block *out, const char *axes,
                                            op_kind op, spmd__reduce_op rop)
{
    SPMD_CHECK(spmd__ctx_check(ctx, entry));
    return reduce_blocks(ctx, n, in, out, axes, op, rop);
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_psum(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_psum_checked(ctx, in, out, axes, NULL), 1, out), "spmd_psum");
}

spmd_status spmd_pmean(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_pmean_checked(ctx, in, out, axes, NULL), 1, out),
        "spmd_pmean");
}

spmd_status spmd_pmax(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd__pmax_checked(ctx, in, out, axes, NULL), 1, out),
        "spmd_pmax");
}

spmd_status spmd_pmin(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_pmin_checked(ctx, in, out, axes, NULL), 1, out), "spmd_pmin");
}

spmd_status spmd_psum_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                             const spmd_axis_groups *groups)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_psum_checked(ctx, in, out, axes, groups), 1, out),
        "spmd_psum_groups");
}

spmd_status spmd_pmean_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                              const char *axes, const spmd_axis_groups *groups)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_pmean_checked(ctx, in, out, axes, groups), 1, out),
        "spmd_pmean_groups");
}

spmd_status spmd_pmax_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                             const spmd_axis_groups *groups)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd__pmax_checked(ctx, in, out, axes, groups), 1, out),
        "spmd_pmax_groups");
}

spmd_status spmd_pmin_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                             const spmd_axis_groups *groups)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_pmin_checked(ctx, in, out, axes, groups), 1, out),
        "spmd_pmin_groups");
}

spmd_status spmd_psum_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                           const char *axes)
{
    return spmd__error_in(
        spmd__coll_finished(ctx,
                            spmd_reduce_many_checked("spmd_psum_many", ctx, n, in, out, axes,
                                                     OP_PSUM, SPMD__OP_SUM),
                            n, out),
        "spmd_psum_many");
}

spmd_status spmd_pmean_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                            const char *axes)
{
    return spmd__error_in(
        spmd__coll_finished(ctx,
                            spmd_reduce_many_checked("spmd_pmean_many", ctx, n, in, out, axes,
                                                     OP_PMEAN, SPMD__OP_SUM),
                            n, out),
        "spmd_pmean_many");
}

spmd_status spmd_pmax_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                           const char *axes)
{
    return spmd__error_in(
        spmd__coll_finished(ctx,
                            spmd_reduce_many_checked("spmd_pmax_many", ctx, n, in, out, axes,
                                                     OP_PMAX, SPMD__OP_MAX),
                            n, out),
        "spmd_pmax_many");
}

spmd_status spmd_pmin_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                           const char *axes)
{
    return spmd__error_in(
        spmd__coll_finished(ctx,
                            spmd_reduce_many_checked("spmd_pmin_many", ctx, n, in, out, axes,
                                                     OP_PMIN, SPMD__OP_MIN),
                            n, out),
        "spmd_pmin_many");
}
