/* Private: one shard_map call in flight, and the per-device context fn runs with. */
#ifndef SPMD_EXECUTOR_H
#define SPMD_EXECUTOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <spmd/config.h>
#include <spmd/shard_map.h>

#include "runtime/base/check.h"
#include "array/buffer.h"
#include "shard_map/groups.h"

typedef struct spmd__call {
    /* first what every device reads, then the failure record */
    spmd_mesh *mesh;
    spmd__mesh_state *state;
    const struct spmd_plan *plan;
    unsigned long seq;       /* this call's number on the mesh (same on every process) */
    uint64_t signature;      /* what fn, specs and shapes the call runs (and the thread's
                                name): part of every fingerprint, so calls that differ never
                                pair */
    unsigned long number;    /* the call's number in this process (calls.h), for messages */
    int thread;              /* the calling thread's number in the process */
    char thread_text[48];    /* ... and name: "thread 2 'loader'" */
    uint64_t thread_tag;     /* ... and its hash (spmd__thread_tag) */
    uint64_t op_tag;         /* the array op that made the call (calls.h), 0 for none */
    char op_text[120];       /* ... and its text, for messages */
    uint64_t digest;         /* the collectives fn issued on this process's first device */
    unsigned first_count;    /* ... how many */
    uint64_t first_last[2];  /* ... and the last, for messages (spmd__collective_format) */
    const int *slot_of_flat; /* [mesh size]: local slot of a mesh position, or -1 */
    int64_t timeout_ns;
    spmd_platform platform; /* of every device (one platform per run) */
    atomic_int aborted;
    pthread_mutex_t abort_lock;
    spmd_status abort_status;  /* the first failure: the call's status */
    int abort_is_consequence;  /* ... caused by another process's failure, not a root */
    atomic_int abandoned;      /* a cross-process wait was given up: communicators unusable */
    atomic_int peer_missing;   /* ... because another process never arrived (a timeout) */
    _Atomic int64_t missed_at; /* ... when that wait gave up (0: none) */
    atomic_int data_abandoned; /* data movement was given up: MPI may still use the buffers */
    char abort_message[SPMD__MESSAGE_CAPACITY]; /* last: written before it is read */
} spmd__call;

/** Whether the local device at mesh position `flat` has returned from fn. */
static inline int spmd__call_finished(spmd__call *call, int flat)
{
    return atomic_load(&call->state->returned[call->slot_of_flat[flat]].value) == call->seq;
}

typedef struct spmd__allocation {
    struct spmd__allocation *next;
    spmd__buffer *buffer;
} spmd__allocation;

/** `b` as a block of `data`, with that dtype and shape. */
static inline void spmd__fill_block(spmd_block *b, void *data, spmd_dtype dtype, int ndim,
                                    const int64_t *shape)
{
    b->data = data;
    b->dtype = dtype;
    b->ndim = ndim;
    for (int j = 0; j < ndim; j++)
        b->shape[j] = shape[j];
}

/* The spmd_ctx accessors and block checks below are in context.c. */

/** 1 when the run's devices are CPU devices (their blocks host memory): the same answer on
 * every device of every process, as all share one platform. */
int spmd__ctx_platform_is_host(const spmd_ctx *ctx);
/** For the trace: a digest of blocks[0..n) when it takes digests and they are host memory;
 * 0 otherwise. */
uint64_t spmd__ctx_trace_digest(const spmd_ctx *ctx, int n, const spmd_block *blocks);
/** ctx's CUDA stream; NULL on CPU devices (work then runs on the calling thread). */
void *spmd__ctx_queue(const spmd_ctx *ctx);
/** Waits for the work queued on ctx's device, so that host code may read its blocks. */
spmd_status spmd__ctx_sync(const spmd_ctx *ctx);
/**
 * The CUDA stream on which work of `bytes` over ptrs[0..n) runs as kernels; NULL on CPU
 * devices, below the kernel threshold (SPMD__CUDA_KERNEL_MIN_BYTES) or when a pointer is host
 * memory that no kernel can read. A NULL answer on a CUDA device first waits for the device's
 * queued work, so that host code may go on.
 */
void *spmd__ctx_kernel_queue(const spmd_ctx *ctx, size_t bytes, int n, const void *const *ptrs);

/** How an output block of fn came to be, for the replication check: `axes` (bits) are the mesh
 * axes along which a collective made it alike, `token` that collective (0: nothing proven);
 * `varying` the axes along which the collective that wrote it makes it vary by type (JAX's
 * vma: an all_gather, ppermute, all_to_all or psum_scatter over them), `varying_by` its name. */
typedef struct spmd__proof {
    uint64_t token;
    unsigned axes;
    unsigned varying;
    const char *varying_by;
    uint64_t digest; /* of its bytes, taken by the device when fn returned (0: not taken) */
} spmd__proof;

/**
 * fn (a collective or a block op) wrote `dst`: when it is one of fn's outputs, whole, its proof
 * becomes `*proof` (its digest left out); any other write to an output takes the proof away.
 * Nothing when the call checks no replication. By pointer: a copy of a proof whose fields were
 * just stored one by one stalls (store forwarding), and most writes keep no proof.
 * Returns 1 when `dst` overlaps none of fn's outputs, and stays so until fn returns (every
 * output kept in out_data[]): a collective may then skip its next note of the same block.
 * Writes only the proofs of outputs that dst overlaps, as a block op on another thread may.
 */
int spmd__ctx_note(spmd_ctx *ctx, const spmd_block *dst, const spmd__proof *proof);

/** spmd__ctx_note of a write that proves nothing (a block op, a host copy). */
void spmd__ctx_note_write(spmd_ctx *ctx, const spmd_block *dst);

/**
 * A block op copied `src` into `dst` unchanged: when `src` is one of fn's inputs, whole, dst
 * is alike along the axes that input's in_spec replicates it along (JAX: an invariant value
 * stays invariant). fn must not have changed the input by hand before (strict mode hashes).
 */
void spmd__ctx_note_copy(spmd_ctx *ctx, const spmd_block *src, const spmd_block *dst);

/**
 * pmap's plans: no refusal by type (legacy pmap has no varying types), the replication check
 * goes by the values alone.
 */
void spmd__plan_check_by_value(spmd_plan *p);

/** How many spmd_psend a device may have waiting for their spmd_precv. */
#define SPMD__PENDING_SENDS 8

/** 1 when b has exactly `dtype`, `ndim` and `shape`. */
static inline int spmd__block_has_layout(const spmd_block *b, spmd_dtype dtype, int ndim,
                                         const int64_t *shape)
{
    int same = b->dtype == dtype && b->ndim == ndim;
    for (int j = 0; same && j < ndim; j++)
        same = b->shape[j] == shape[j];
    return same;
}

/** 1 when out has in's dtype, rank and shape and data of its own: in, checked, vouches for it
 * (an out's full check is skipped on a small collective's path). */
static inline int spmd__block_like_checked(const spmd_block *out, const spmd_block *in)
{
    return out && out->data && spmd__block_has_layout(out, in->dtype, in->ndim, in->shape);
}

/** A block's bytes (of a block checked already: no overflow test). */
static inline size_t spmd__block_bytes(const spmd_block *b)
{
    return (size_t)spmd_block_size(b) * spmd_dtype_size(b->dtype);
}

/** How many of fn's outputs a ctx keeps the sizes of (the others' are computed at each note). */
#define SPMD__CTX_OUT_BYTES 8

/** How many positions and pairs of a ppermute a ctx keeps the check of. */
#define SPMD__CTX_PAIRS 64

/** The last ppermute pairs a device checked, and what the check found: a pipeline's loop
 * permutes alike at every step, and the check and the walk over the processes cost a
 * 2-process ppermute of 8 bytes 40 ns of its 310. */
typedef struct spmd__checked_pairs {
    int n, npairs; /* the positions they were checked against, and how many pairs */
    int pairs[2 * SPMD__CTX_PAIRS];
    int src_of[SPMD__CTX_PAIRS];
    uint64_t hash;
    const void *group; /* the group `connects` holds for; NULL: none yet */
    int connects;      /* the pairs link every process of that group */
} spmd__checked_pairs;

/** A psend's copy of its block, and the key (axes and permutation) its precv must match. */
typedef struct spmd__pending_send {
    spmd_block block;
    uint64_t key;
} spmd__pending_send;

struct spmd_ctx {
    spmd__call *call;
    int device_id;
    int flat;        /* mesh position */
    int ordinal;     /* the device's local ordinal */
    uint64_t digest; /* of the fingerprints of the collectives issued so far (local ones too) */
    uint64_t last_what[2];          /* the last one, as spmd__collective_format reads it */
    int coords[SPMD_MAX_MESH_AXES]; /* the device's, once: its positions along axes need no
                                       division (spmd__mesh_coords divides per axis) */
    unsigned seq;                   /* collectives issued so far in this call */
    spmd__allocation *allocations;  /* spmd_ctx_alloc, freed at the end of the call */
    spmd__proof *proofs;            /* per output of fn (NULL: no replication to check) */
    const spmd_block *outs;         /* fn's outputs */
    int nout;
    const spmd_block *ins; /* fn's inputs, and the axes each is replicated along */
    int nin;
    const int *in_alike;
    int naxes;         /* of axes_text's parse */
    int pending_sends; /* spmd_psend's blocks that no spmd_precv has taken yet, oldest first */
    int spare_sends;   /* the copies precv is done with, for the next psends */
    int checked_pairs_valid; /* checked_pairs holds the last pairs this call checked */
    /* The collective under way on this device, from its arrival to spmd__coll_finished: in
     * ctx, not in thread-locals, whose every read in a shared library is a call to
     * __tls_get_addr without TLS descriptors (SPMD_TLSDESC), six a collective. A device's
     * collectives come one at a time (ctx->seq orders them). */
    uint64_t traced_collective; /* its trace record (0: none) */
    uint64_t packed_layout;     /* a many-block form's blocks (collective_frame.h; 0: none) */
    spmd__proof pending_proof;  /* what it proves of its out (some forms adjust it first) */
    /* the last out of a collective that its note found apart from every output of fn: a
     * loop's collectives write the same block at each step, and a note of it then costs two
     * compares. Collectives alone read and write it: block ops may run on other threads. */
    const char *apart_data;
    size_t apart_bytes;
    /* From here on only what the counts above say is read: a call zeroes the fields above and
     * the first byte of axes_text (the rest is kilobytes). */
    char axes_text[128]; /* the last axes string parsed, and its parse */
    int axes[SPMD_MAX_MESH_AXES];
    spmd__pending_send sends[SPMD__PENDING_SENDS];
    spmd_block spares[SPMD__PENDING_SENDS]; /* a pipeline's loop allocates once */
    /* where fn's first outputs lie (up to SPMD__CTX_OUT_BYTES of them), set as they are made:
     * every collective's note compares its out with them, and they never change */
    const char *out_data[SPMD__CTX_OUT_BYTES];
    size_t out_bytes[SPMD__CTX_OUT_BYTES];
    spmd__checked_pairs checked_pairs;
};

/**
 * Records `st` (with the calling thread's last error) as the call's failure when it is the
 * first, tells the other processes, and wakes every waiting device. Returns `st`.
 */
spmd_status spmd__call_abort(spmd__call *call, spmd_status st);

/**
 * As spmd__call_abort, for a failure that only follows from another process's (a peer that gave
 * up): when processes compare outcomes, a root cause elsewhere is reported instead.
 */
spmd_status spmd__call_abort_consequence(spmd__call *call, spmd_status st);

/** The status a device returns once the call was aborted elsewhere. */
spmd_status spmd__call_aborted_status(spmd__call *call);

/**
 * SPMD_OK when ctx is the context of a fn running now; SPMD_ERR_INVALID_ARGUMENT otherwise
 * (NULL, or kept after its fn returned), naming `fn`. The _optional form accepts NULL.
 */
spmd_status spmd__ctx_check(const spmd_ctx *ctx, const char *fn);
spmd_status spmd__ctx_check_optional(const spmd_ctx *ctx, const char *fn);

/** Writes a device's collective for the notes between processes (spmd__calls_set_formatter):
 * `arg` is the spmd__call. In collective_format.c, which calls neither the executor nor the
 * collectives: both call it. */
void spmd__collective_format(const void *arg, const uint64_t *what, char *text, size_t size);

/** Cancellation check for cross-process waits: a local abort, or another process's. */
spmd_status spmd__call_check_cancel(void *call);

/**
 * Checks a block handed to an op or a collective: non-NULL, rank, dtype, data, every extent
 * >= 1 and a byte count that size_t holds; `fn` names the caller, `name` the argument.
 */
spmd_status spmd__check_block(const spmd_block *b, const char *name, const char *fn);

#endif /* SPMD_EXECUTOR_H */
