/* Private: the plan of a reshard, made by reshard_plan.c and carried out by reshard.c. */
#ifndef SPMD_RESHARD_PLAN_H
#define SPMD_RESHARD_PLAN_H

#include <stdint.h>

#include <spmd/sharding.h>
#include <spmd/status.h>

#include "runtime/base/check.h"
#include "runtime/comm/pieces.h"
#include "runtime/runtime_impl.h"

#define NO_MEMORY SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory")

/* A box of the global array, as start and extent. */
typedef struct region {
    int64_t start[SPMD_MAX_RANK];
    int64_t extent[SPMD_MAX_RANK];
} region;

/* Regions of shards of this process, packed: region k of shard shard[k] is box[k * 2 * ndim ...]
 * (start, then extent). */
typedef struct pieces {
    int n, cap;
    int *shard;
    int64_t *box;
} pieces;

/* A piece that is one run of elements in its source shard and in its destination shard (the
 * pieces of a transpose-like reshard are often single elements): copied by offsets, without
 * the walk of a box, which costs more than such a piece. */
typedef struct copy_run {
    int64_t src_at, dst_at, count; /* elements */
    int shard;                     /* source */
} copy_run;

typedef struct copy_runs {
    int n, cap;
    copy_run *run;
} copy_runs;

typedef struct dst_work { /* one destination shard of this process */
    int share_src;        /* source shard whose memory it reuses (a view), or -1 */
    int64_t share_offset; /* elements into that shard */
    copy_runs runs;       /* from source shards, before the exchange: the one-run pieces */
    pieces copies;        /* from source shards, before the exchange: the others */
    pieces replicas;      /* from another destination shard (which received it), after */
    int64_t copy_elements, replica_elements; /* of runs and copies; of replicas */
} dst_work;

/* Element sizes of the dtypes: 1, 2, 4 and 8 bytes, each with its wires. */
enum { ELEM_SIZES = 4 };

typedef struct peer_part { /* what this process sends to or receives from one process */
    int process;
    int64_t elements;
    pieces list; /* source shards (sends) or destination shards (receives), message order */
    spmd__wire *wire[ELEM_SIZES]; /* the message's MPI datatypes per element size, made at first
                                     use */
} peer_part;

typedef struct reshard_plan {
    uint64_t dst_uid; /* the destination layout */
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int num_processes;
    int *processes; /* owning a source or destination device, ascending */
    int ndst;
    dst_work *dst; /* [local destination shards] */
    int nsend, nrecv;
    peer_part *sends, *recvs; /* ascending process */
    uint64_t npieces;         /* copies, shares, replicas, sends and receives */
    uint64_t steps;           /* the work of making it */
} reshard_plan;

/* Region k of the list; returns its shard. */
int spmd__reshard_pieces_get(const pieces *l, int ndim, int k, region *r);

/* The number of elements of a region. */
int64_t spmd__reshard_region_elements(int ndim, const region *r);

/*
 * The plan from `from` to `to` for this shape: cached on the source layout (shared by every
 * equal sharding) under the destination layout, or new (*built set). The cache belongs to the
 * layout, which frees it with itself. Calls must not overlap (reshard.c calls it under its lock).
 */
spmd_status spmd__reshard_plan_get(const spmd_sharding *from, const spmd_sharding *to, int ndim,
                                   const int64_t *shape, const spmd__runtime *rt,
                                   reshard_plan **out, int *built);

#endif /* SPMD_RESHARD_PLAN_H */
