/* Private to executor.c and replication.c: what a plan holds, and the replication check that
 * the executor runs on each call's outputs (replication.c). */
#ifndef SPMD_PLAN_H
#define SPMD_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include <spmd/shard_map.h>

#include "shard_map/executor.h"

struct spmd_plan {
    uint32_t magic;
    spmd_mesh *mesh;
    spmd_fn fn;
    void *user;
    int nin, nout;
    spmd_in_desc *in_descs;
    spmd_sharding **in_shardings;
    spmd_sharding **accepted; /* last input sharding found equivalent, per input; retained so
                                 that its address cannot be reused by another sharding */
    spmd_out_desc *out_descs;
    spmd_sharding **out_shardings;
    int64_t (*out_blocks)[SPMD_MAX_RANK];
    int64_t (*in_blocks)[SPMD_MAX_RANK];
    int *check_output; /* the mesh axes (size > 1) out_spec leaves out, as bits; 0: unchecked */
    int *in_alike;     /* per input: the mesh axes its in_spec replicates it along, as bits */
    int *typed_output; /* per output: the axes out_spec leaves out, of any size (JAX's types
                          count size-1 axes too); 0: unchecked */
    int check_replication;
    int strict_replication; /* every checked block hashed, proven or not */
    int by_value;           /* pmap: no refusal by type (spmd__plan_check_by_value) */
    int *donate;            /* per input: 0, SPMD_DONATE or SPMD_DONATE_IN_PLACE */
    int *donate_to;         /* per input donated in place: the output it can alias, or -1 */
    int num_local;          /* this process's mesh devices, flat order */
    int *local_flat;
    int *local_ordinal;
    int *slot_of_ordinal; /* [local device count]: index into local_flat */
    int *slot_of_flat;    /* [mesh size]: index into local_flat, or -1 */
    uint64_t signature;   /* fn, specs, shapes, dtypes and options: alike on every process */
    char *trace_text;     /* "spmd_shard_map on Mesh(...) (devices ...)", made when first traced */
};

/* A 64-bit finalizer: the call's signatures and the replication check's terms. */
static inline uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* ---- the replication check (replication.c) ---- */

/** The device's part, once fn returned: the digests of its blocks that no collective proved,
 * taken on its own thread (the devices hash in parallel). */
void spmd__replication_take_digests(const spmd_plan *p, const spmd_ctx *ctx, const spmd_block *out);
/** JAX's check by type: an output claimed replicated along an axis that the collective which
 * wrote it last leaves varying is refused, whatever its values. */
spmd_status spmd__replication_refuse_varying(const spmd_plan *p, const spmd__proof *proofs);

/** A mesh in one process: the digests of every block of each checked output at
 * [output][mesh position] (`use_proofs`: a proven block's token instead of its bytes), and
 * their check. */
void spmd__replication_local_digests(const spmd_plan *p, spmd_array **outputs,
                                     const spmd__proof *proofs, int use_proofs, uint64_t *digests);
spmd_status spmd__replication_check(const spmd_plan *p, const uint64_t *digests);

/** Across processes: this process's digests of every checked output's blocks in shard order,
 * its terms of the sum over blocks [lo, hi) (0 over the mesh when the claims hold), and on
 * failure the search for two holders that differ (every process takes part). */
void spmd__replication_shard_digests(const spmd_plan *p, spmd_array **outputs,
                                     const spmd__proof *proofs, int use_proofs, uint64_t *local);
uint64_t spmd__replication_sum(const spmd_plan *p, spmd_array **outputs, const uint64_t *local,
                               int64_t lo, int64_t hi);
spmd_status spmd__replication_find_differing(const spmd_plan *p, spmd__call *call,
                                             spmd_array **outputs, const uint64_t *local,
                                             int checked);

#endif /* SPMD_PLAN_H */
