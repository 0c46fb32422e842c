/* Private: the collective groups of a mesh (one table per set of mesh axes), their
 * communicators and the in-process rendezvous of their local members. */
#ifndef SPMD_GROUPS_H
#define SPMD_GROUPS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <spmd/mesh.h>

#include "runtime/comm/comm.h"
#include "runtime/devices/event.h"
#include "runtime/comm/process_sets.h"
#include "sharding/mesh_impl.h"

/* What one local member publishes at a rendezvous; read by the others right after it. */
typedef struct spmd__slot {
    uint64_t fingerprint;
    atomic_uint arrived; /* generation + 1 when this member arrived (read by waiters) */
    int device_id;
    int position; /* in the group, for the collective's axis order */
    const void *in;
    void *out;
    const void *extra; /* collective-specific */
    /* the member's view of the collective, for a mismatch message (formatted only then) */
    const void *coll;
} spmd__slot;

/* Where a group's positions sit, for one order of its axes (or its grouping): what a reduction
 * across processes needs for its canonical order (runtime/base/tree.h). */
typedef struct spmd__position_map {
    uint64_t key;       /* the axis order or grouping it is for; 0: none yet */
    int *rank_of;       /* [size] rank holding each position */
    int block;          /* > 0: every rank holds `block` positions [v * block, (v + 1) *
                           block), block a power of two; 0: not so */
    int *rank_of_vrank; /* [num_ranks] with block > 0: the rank holding block v */
    int my_vrank;
} spmd__position_map;

/* One group (devices that share every coordinate off the table's axes) with local members. */
typedef struct spmd__group {
    int id;
    int lane;          /* among its table's groups spanning processes, in group order; -1: none */
    int size;          /* members */
    int *member_flat;  /* [size] mesh positions, ascending */
    int *member_rank;  /* [size] rank of the member's process in `comm` */
    int *member_index; /* [size] index of the member among its process's, ascending */
    int num_ranks;     /* processes with members */
    int *rank_device;  /* [num_ranks] global id of the rank's first member (which makes the
                          group's exchanges for its process) */
    int *rank_process; /* [num_ranks] runtime process of each rank, ascending */
    int *rank_members; /* [num_ranks] members per rank */
    spmd__comm *comm;  /* NULL when every member is in this process; else a subset of the
                          mesh's communicator */
    int num_local;     /* members in this process */
    int *local_flat;   /* [num_local] ascending */
    /* rendezvous of the local members */
    atomic_uint arrived;
    atomic_uint generation;
    /* the next piece of a collective's work that a local member may claim; reset at each
       barrier, when nobody is claiming */
    _Alignas(64) atomic_size_t next_piece;
    spmd__event event;
    spmd__slot *slots; /* [num_local] */
    int *local_order;  /* [num_local] local indices in position order (set at each rendezvous) */
    spmd__position_map positions; /* for the axis order last used (groups spanning processes);
                                     set by the last local member to arrive */
    /* The members by position for the axis order last used (collective_frame.h's `members`),
     * set with `positions`: a collective reads them instead of listing its group each time. */
    uint64_t members_key; /* as positions.key; 0: none yet */
    int *members_lists;   /* [3 * size]: pos, member_at, local_of */
    void *scratch[3];     /* staging buffers shared by the members, grown on demand */
    size_t scratch_bytes[3];
} spmd__group;

/* Most distinct axis_index_groups one mesh keeps tables for at once (each slot has tags of its
 * own); past them the least recently used table makes room, but one call may use at most this
 * many. */
#define SPMD__MAX_GROUPINGS 32
/* Table slots of a mesh: one per set of mesh axes, then one per grouping, in creation order. */
#define SPMD__NUM_TABLES ((1u << SPMD_MAX_MESH_AXES) + SPMD__MAX_GROUPINGS)

/* axis_index_groups, checked: subgroups of the positions 0..total-1 over the named axes (in the
 * order named), member k of a subgroup being its k-th listed position. */
typedef struct spmd__grouping {
    int naxes;
    int axes[SPMD_MAX_MESH_AXES];
    int num_groups;
    int total;            /* positions: the product of the named axes' sizes */
    const int *sizes;     /* [num_groups]; NULL: each total / num_groups */
    const int *positions; /* [total] group after group */
    uint64_t hash;
} spmd__grouping;

/* All groups of one set of mesh axes (the set, not the order: positions are computed per call),
 * or of one grouping of them. */
typedef struct spmd__group_table {
    unsigned mask;
    int group_size; /* members of each group; 0 when a grouping's subgroups differ in size */
    int num_groups;
    int *group_of_flat;   /* [mesh size] */
    spmd__group **groups; /* [num_groups], NULL for groups without local members */
    /* a grouping's table: its key, and each position's member index in its subgroup */
    spmd__grouping grouping;
    int *grouping_store;   /* sizes and positions of the key, and rank_in_subgroup */
    int *rank_in_subgroup; /* [grouping.total]; NULL for the table of an axis set */
    long lane_base;        /* its groups' first lane of tags on the mesh's communicator */
    int span_lanes;        /* its groups spanning processes: their lanes follow lane_base */
    /* a grouping's table: the number of the last shard_map call that used it (written under
     * tables_lock; a table used by the current call is never evicted) */
    atomic_ulong last_call;
} spmd__group_table;

/* A word that one device thread writes and others rarely read, on a line pair of its own so
 * that it stays in that thread's cache from call to call. */
typedef struct spmd__private_word {
    _Alignas(128) atomic_ulong value;
} spmd__private_word;

/* Where a local device is in the current call: the collective it last arrived at. Its group's
 * other local members read it while they wait for it (a seqlock: version odd while written). */
typedef struct spmd__device_at {
    _Alignas(128) atomic_uint version;
    atomic_ulong call;
    atomic_uint seq;
    _Atomic uint64_t fingerprint;
    _Atomic uint64_t what[2]; /* spmd__collective_format's */
} spmd__device_at;

/** Publishes that a local device arrived at collective `seq` of call `call`. */
void spmd__device_at_publish(spmd__device_at *at, unsigned long call, unsigned seq,
                             uint64_t fingerprint, const uint64_t what[2]);
/** Reads what spmd__device_at_publish last wrote (a consistent copy). */
void spmd__device_at_read(spmd__device_at *at, unsigned long *call, unsigned *seq,
                          uint64_t *fingerprint, uint64_t what[2]);

/* Per-mesh state behind shard_map: set up by the first call (collectively); the groups of an
 * axis set, and their communicators, by the first collective over it. */
typedef struct spmd__mesh_state {
    spmd__attachment base; /* first: the mesh frees it through base.destroy */
    pthread_mutex_t lock;
    int ready;
    int broken; /* a process did not finish a failed call: the mesh is unusable */
    char broken_reason[1024];
    spmd__comm *control; /* all mesh processes; NULL in one process */
    /* spmd__calls_failures when control was made: after any failure since, a peer may still
     * send to it (an abort record, a given-up exchange's message), and its MPI communicator is
     * never freed. Open MPI hands a freed communicator's context id to the next one created and
     * delivers to it what still comes for the old one: a later mesh's call would take it. */
    unsigned long failures_at_setup;
    uint64_t comm_id; /* control's identity, alike on every process (calls.h); 0 before */
    unsigned long call_seq;
    /* [axes mask], then [1 << SPMD_MAX_MESH_AXES + k] for the k-th grouping used: published
     * once built with its communicators (read without the lock) */
    _Atomic(spmd__group_table *) tables[SPMD__NUM_TABLES];
    atomic_int num_groupings; /* grouping slots in use */
    /* [grouping slot]: the table last evicted from it, which a device of the call that evicted
     * it may still be reading (looking for its own grouping); freed at the next eviction from
     * the slot, in a later call, when no device of that call runs any more */
    spmd__group_table *retired[SPMD__MAX_GROUPINGS];
    pthread_mutex_t tables_lock; /* one table built at a time in this process */
    /* [local slot]: the number of the last call whose fn the device returned from */
    spmd__private_word *returned;
    spmd__device_at *at; /* [local slot] */
    /* devices blocked in a rendezvous; apart from call_seq, which every call writes */
    _Alignas(128) atomic_int waiting;
} spmd__mesh_state;

/**
 * The mesh's state, attached empty on first use (not collective); NULL, with the error set,
 * when there is no memory for it.
 */
spmd__mesh_state *spmd__mesh_state_get(spmd_mesh *mesh);

/**
 * Collective over the mesh's processes on the first call: checks that they all set up the same
 * mesh (with a deadline) and creates the communicator over them. Fails fast when an earlier
 * call left the mesh broken.
 */
spmd_status spmd__mesh_state_setup(spmd_mesh *mesh, spmd__mesh_state *state, int64_t timeout_ns,
                                   unsigned long call);

/**
 * The identity of the mesh's communicator between processes (calls.h), alike on every process:
 * the one it has, or the one its set-up will give it.
 */
uint64_t spmd__mesh_state_identity(const spmd_mesh *mesh, spmd__mesh_state *state);

/**
 * The groups of axis set `mask`, built by the first collective over it (not collective: the
 * groups that span processes exchange over the mesh's communicator, each in a lane of tags).
 * `call` numbers the shard_map call, the same on every process.
 */
spmd_status spmd__mesh_state_table(spmd_mesh *mesh, spmd__mesh_state *state, unsigned mask,
                                   unsigned long call, spmd__group_table **out);

/**
 * The groups of `grouping` (subgroups of the groups of its axes), built by the first collective
 * that uses it, as spmd__mesh_state_table; positions within a subgroup come from the table's
 * rank_in_subgroup. Past SPMD__MAX_GROUPINGS distinct groupings the least recently used table
 * not used by call `call` makes room; SPMD_ERR_UNSUPPORTED when every one is (more than
 * SPMD__MAX_GROUPINGS distinct groupings in one call).
 */
spmd_status spmd__mesh_state_grouped_table(spmd_mesh *mesh, spmd__mesh_state *state,
                                           const spmd__grouping *grouping, unsigned long call,
                                           spmd__group_table **out);

/**
 * After a failed call that every process finished: drops the group tables and communicators
 * (unfinished exchanges may linger in them); the next collectives build new ones.
 * `keep_scratch`: data movement was given up, so MPI may still use the staging buffers.
 */
void spmd__mesh_state_discard_comms(spmd__mesh_state *state, int keep_scratch);

/** Marks the mesh unusable (communicators may hold pending operations) and drops them. */
void spmd__mesh_state_break(spmd__mesh_state *state, const char *reason);

/** Wakes every rendezvous of the mesh (a call is aborting). */
void spmd__mesh_state_wake_all(spmd__mesh_state *state);

/** Discards the abort records of calls up to `epoch` (see spmd__comm_drain). */
void spmd__mesh_state_drain(spmd__mesh_state *state, unsigned long epoch);

/** Resets every rendezvous for the next call (after an aborted one). */
void spmd__mesh_state_reset_rendezvous(spmd__mesh_state *state);

/** Index of a local member (flat position) within its group's local members. */
int spmd__group_local_index(const spmd__group *g, int flat);

/** Replaces scratch buffer `which` of the group with one of `bytes` (spmd__group_scratch). */
spmd_status spmd__group_scratch_grow(spmd__group *g, int which, size_t bytes);

/** Makes scratch buffer `which` of the group at least `bytes` long (called by one member). It
 * only grows: most collectives find it large enough, here, without a call. */
static inline spmd_status spmd__group_scratch(spmd__group *g, int which, size_t bytes)
{
    return g->scratch_bytes[which] >= bytes ? SPMD_OK : spmd__group_scratch_grow(g, which, bytes);
}

#endif /* SPMD_GROUPS_H */
