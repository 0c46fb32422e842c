/*
 * Private to the collectives: the frame every collective runs in (collectives.c, its texts in
 * collective_format.c), which each family's file (collectives_<family>.c) calls. The frame
 * never calls a family; a family calls the frame, and the reductions of collectives_reduce.c
 * (the one home of the order in which values are added).
 */
#ifndef SPMD_COLLECTIVE_FRAME_H
#define SPMD_COLLECTIVE_FRAME_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/base/check.h"
#include "shard_map/executor.h"
#include "shard_map/reduce.h"

/* Below this many bytes one thread does a reduction alone where the members split fixed slices
 * (between processes, on CUDA devices): splitting costs more than it saves. */
#define SPLIT_BYTES (64 * 1024)

/* The smallest piece the local members claim: two threads summing 8 KiB each beat one summing
 * 16 KiB (psum at 2 devices: 16 KiB 1.26 -> 1.73 of the copy bound, 64 KiB 1.34 -> 2.32). */
#define PIECE_BYTES (8 * 1024)

/* The collectives' kinds: the low byte of what a device's note says it waits in. */
typedef enum op_kind {
    OP_PSUM = 1,
    OP_PMEAN,
    OP_PMAX,
    OP_PMIN,
    OP_ALL_GATHER,
    OP_PSUM_SCATTER,
    OP_PPERMUTE,
    OP_ALL_TO_ALL,
    OP_PBROADCAST
} op_kind;

/* Their names in messages, by op_kind (collective_format.c). */
extern const char *const spmd__coll_op_names[OP_PBROADCAST + 1];

/* One device's view of the collective in progress. */
typedef struct coll {
    spmd_ctx *ctx;
    spmd__call *call;
    const spmd_mesh *mesh;
    spmd__group *g;
    int n;                       /* group size */
    int li;                      /* this device's index among the group's local members */
    int nl;                      /* local members */
    int pos;                     /* this device's position in the group (axis order of the call) */
    const int *rank_in_subgroup; /* axis_index_groups: a position's member index; else NULL */
    uint64_t grouping_hash;      /* tells groupings apart in messages */
    const spmd__grouping *grouping; /* the table's copy of the call's groups; else NULL */
    uint64_t order_key; /* the axis order (or grouping) that positions follow: never 0 */
    int naxes;
    int axes[SPMD_MAX_MESH_AXES];
    uint64_t fingerprint;
    /* what the description says, formatted only for a message */
    op_kind op;
    spmd_dtype dtype;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    unsigned seq;
    int nblocks;                /* > 0: a collective over that many blocks (shape: the first's) */
    spmd__wait_where where;     /* for the notes between processes (calls.h) */
    char description[240];      /* "" until formatted */
    const spmd_block *trace_in; /* the blocks given, for the trace's digest */
    int trace_n;
    size_t scratch_need[3];
    /* where every process holds an aligned block of positions (g->positions), these instead */
    int scratch_if_blocks;
    size_t scratch_blocks[3];
} coll;

/* ---- texts (collective_format.c) ---- */

/** "psum float32[4,3] over ('i') #2": what a device called. */
void spmd__coll_describe_op(const coll *c, spmd__strbuf *sb);
/** ... with the call, for messages (`arg` is the coll). */
void spmd__coll_describe_into(const void *arg, char *text, size_t size);
/** ... formatted once, into c->description. */
const char *spmd__coll_describe(coll *c);

/* ---- fingerprints ---- */

static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static inline uint64_t mix_block(uint64_t h, const spmd_block *b)
{
    h = mix(h, (uint64_t)b->dtype);
    h = mix(h, (uint64_t)b->ndim);
    for (int j = 0; j < b->ndim; j++)
        h = mix(h, (uint64_t)b->shape[j]);
    return h;
}

/* A many-block collective runs as one collective of its blocks packed into bytes: it sets
 * ctx->packed_layout to a digest of their shapes and dtypes (| 1), which spmd__coll_begin()
 * mixes into the fingerprint and clears. What the collective proves of its out waits in
 * ctx->pending_proof until spmd__coll_finished; some forms adjust it first, where their
 * status is SPMD_OK (all_gather_invariant, _many, precv). */

/* ---- the frame (collectives.c) ---- */

/** The mesh axes `text` names, and the size of the group over them. */
spmd_status spmd__coll_group_of(const spmd_ctx *ctx, const char *text, int *axes, int *naxes,
                                int *size);
/** spmd_axis_index without its public name on errors. */
spmd_status spmd__axis_index_checked(const spmd_ctx *ctx, const char *axes, int *index);

/** A failure of the collective (or of its arguments, before it began): aborts the call. */
spmd_status spmd__coll_fail(coll *c, spmd_status st);
spmd_status spmd__coll_fail_args(spmd_ctx *ctx, spmd_status st);

/** Starts a collective on this device: waits for ctx's queued work, parses the axes, checks
 * the groups, finds the group and its fingerprint. A failure aborts the call. */
spmd_status spmd__coll_begin(spmd_ctx *ctx, const char *axes, op_kind op, const spmd_block *in,
                             const spmd_axis_groups *groups, coll *c);
/** Publishes this device's buffers and meets the other local members (the first barrier). */
spmd_status spmd__coll_arrive(coll *c, const void *in, void *out, const void *extra);
/** The meeting of the group's local members behind spmd__coll_barrier. */
spmd_status spmd__coll_meet(coll *c, int arrive);
/** A barrier of the group's local members; `arrive` also publishes this device's slot. A lone
 * member (one device per process) that does not arrive only looks whether the call was
 * aborted: inline, for most collectives end so, some twice. */
static inline spmd_status spmd__coll_barrier(coll *c, int arrive)
{
    if (c->nl == 1 && !arrive)
        return atomic_load(&c->call->aborted) ? spmd__call_aborted_status(c->call) : SPMD_OK;
    return spmd__coll_meet(c, arrive);
}
/** The end of a collective on this worker: its trace record and the proof of its outs. */
spmd_status spmd__coll_finished(spmd_ctx *ctx, spmd_status st, int n, const spmd_block *out);
/** The end of a many-block form: its outs, written on the host, vary as the collective's did. */
spmd_status spmd__coll_finished_many(spmd_ctx *ctx, spmd_status st, int n, spmd_block *out,
                                     const char *name);

/** The agreement of a step between processes, its wait, and the end of that step. */
spmd__agreement spmd__coll_agreement(const coll *c);
spmd__wait spmd__coll_cross_wait(coll *c);
spmd_status spmd__coll_crossed(coll *c, spmd_status st, const spmd__wait *w);

/* ---- argument checks ---- */

/** "float32[4,3]" */
void spmd__coll_shape_text(const spmd_block *b, char *buf, size_t size);
/** out must have exactly `ndim`/`shape` and `dtype`; `op` names the collective. */
spmd_status spmd__coll_check_out_shape(const spmd_block *out, spmd_dtype dtype, int ndim,
                                       const int64_t *shape, const char *op);

static inline int normalize_axis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

/* ---- the work of the local members ---- */

/* Host memory: MPI may move a collective's data straight between the blocks (CUDA blocks go
 * through host staging), and host threads may share out the work. Every member of every process
 * answers alike. */
static inline int blocks_on_host(const spmd_ctx *ctx) { return spmd__ctx_platform_is_host(ctx); }

/* The largest message a collective sends through a paired exchange (spmd__comm_paired_max_bytes):
 * host blocks beyond it may be read straight; other blocks keep the paired exchange up to
 * SPMD__COMM_COMBINED_BYTES (the platform is alike on every process). */
static inline size_t paired_max_bytes(const spmd_ctx *ctx, const spmd__comm *comm)
{
    return blocks_on_host(ctx) ? spmd__comm_paired_max_bytes(comm) : SPMD__COMM_COMBINED_BYTES;
}

/* Slice `index` of `parts` of `count` elements. */
static inline void slice_of(size_t count, int parts, int index, size_t *begin, size_t *end)
{
    if (parts == 1) { /* one local member: no division on a small collective's path */
        *begin = 0;
        *end = count;
        return;
    }
    /* multiples of 16 elements keep different threads off each other's cache lines */
    size_t per = (count / (size_t)parts + 15) / 16 * 16;
    *begin = per * (size_t)index < count ? per * (size_t)index : count;
    *end = *begin + per < count ? *begin + per : count;
    if (index == parts - 1)
        *end = count;
}

/* Pieces of `count` elements that the local members claim one at a time: a thread the
 * scheduler runs more takes more of them, so none waits on a descheduled peer's fixed share
 * (devices outnumber cores on a laptop). A block under two pieces' worth is one piece; else a
 * piece is at least a member's share clamped to [PIECE_BYTES, SPLIT_BYTES], and at least an
 * eighth of that share: every member may take part in a small block where it has a core, and
 * large blocks go in pieces that stream. */
static inline size_t piece_elements(size_t count, int nl, size_t elem)
{
    if (count * elem < 2 * PIECE_BYTES)
        return (count + 63) / 64 * 64;
    size_t piece = count / ((size_t)nl * 8), least = count / (size_t)nl;
    least = least < PIECE_BYTES / elem   ? PIECE_BYTES / elem
            : least > SPLIT_BYTES / elem ? SPLIT_BYTES / elem
                                         : least;
    piece = piece > least ? piece : least;
    return (piece + 63) / 64 * 64; /* whole cache lines for the streamed stores */
}

/* Claims the next of `pieces` pieces for this thread: its index, or -1 when none is left. */
static inline long claim_piece(spmd__group *g, size_t pieces)
{
    size_t k = atomic_fetch_add_explicit(&g->next_piece, 1, memory_order_relaxed);
    return k < pieces ? (long)k : -1;
}

/* ---- helpers for the data-movement collectives ---- */

/* Groups of up to this many members list them inside `members`: a small collective's frame
 * allocates nothing for them. */
#define SPMD__MEMBERS_INLINE 16

typedef struct members {
    const int *pos;       /* [n] position of each member (group member order) */
    const int *member_at; /* [n] member at each position */
    const int *local_of;  /* [n] local index of the member, or -1 */
    int *owned;           /* the lists when this frame allocated them */
    int inline_lists[3 * SPMD__MEMBERS_INLINE];
} members;

/** The group's members by position: the group's lists for this axis order where the last
 * rendezvous made them, else listed here; spmd__coll_members_free releases them (also after a
 * failed init). `m` is not to be copied: its lists may lie inside it. */
spmd_status spmd__coll_members_init(const coll *c, members *m);
void spmd__coll_members_free(members *m);

/* Host memcpy, or (CUDA devices, 64 KiB and more, device memory on both sides) the device's
 * stream, waited for by spmd__coll_copier_finish before the other devices may go on. */
typedef struct copier {
    spmd_ctx *ctx;
    void *queue;
} copier;

copier spmd__coll_copier_for(spmd_ctx *ctx, size_t bytes, int n, const void *const *ptrs);
/** A copy_rows function of array/copy.h, with a copier as `arg`. */
int spmd__coll_copy_rows(void *arg, void *dst, size_t dpitch, const void *src, size_t spitch,
                         size_t width, size_t height);
/** The copies' status (0 or a spmd_status), once they are done. */
spmd_status spmd__coll_copier_finish(const copier *cp, int rc);

/* ---- reductions (collectives_reduce.c), for the families built on them ---- */

/** The reduction between processes of one block of the collective's dtype, by the first local
 * member, in the one order of runtime/base/tree.h; scatter > 0: this process needs only its
 * range of it (spmd__tree_inputs). acc_source: where the process's block is, if not in acc
 * (spmd__coll_acc_source). */
spmd_status spmd__coll_reduce_between_processes(coll *c, const void *const *srcs, void *acc,
                                                const void *acc_source, size_t count,
                                                spmd_dtype acc_dtype, spmd__reduce_op rop,
                                                size_t scatter);
/** The input the reduction between processes reads as the process's block, where it needs no
 * copy into the accumulator `acc` (`bytes`) first: one local member, a block of positions, host
 * memory, not 16-bit (`dtype`, the collective's), acc the input or apart from it; else NULL. */
const void *spmd__coll_acc_source(const coll *c, const void *const *srcs, spmd_dtype dtype,
                                  const void *acc, size_t bytes);
/** spmd_pmax without its public name on errors, nor its end (spmd__coll_finished). */
spmd_status spmd__pmax_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                               const char *axes, const spmd_axis_groups *groups);

#endif /* SPMD_COLLECTIVE_FRAME_H */
