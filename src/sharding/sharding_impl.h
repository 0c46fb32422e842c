/* Private: the named sharding structure, with the per-device block table precomputed. */
#ifndef SPMD_SHARDING_IMPL_H
#define SPMD_SHARDING_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include <spmd/sharding.h>

#include "sharding/attachment.h"

/**
 * Where a sharding puts the blocks of an array: its mesh's devices in flat order, the mesh's
 * shape and the mesh axes of each spec entry (trailing unsharded entries left out). Every
 * sharding with the same layout shares one, however and whenever it was made, so caches keyed
 * on it (reshard plans) serve them all; it lives as long as one of them does.
 */
typedef struct spmd__layout {
    struct spmd__layout *next; /* in its hash chain */
    uint64_t hash;
    uint64_t uid; /* never reused: names the layout in caches that outlive it */
    int refs;     /* shardings with this layout (under the table's lock) */
    unsigned session;
    int mesh_ndim;
    int mesh_shape[SPMD_MAX_MESH_AXES];
    int size;
    int *device_ids; /* [size] */
    int length;
    int entry_size[SPMD_MAX_RANK];
    int entry_axis[SPMD_MAX_RANK][SPMD_MAX_MESH_AXES];
    unsigned unreduced_mask;         /* mesh axes the values are partial sums over */
    spmd__attachment *reshard_plans; /* plans from this layout (reshard_plan.c, reshard.c's lock) */
} spmd__layout;

struct spmd_sharding {
    uint32_t magic;
    atomic_int refs;
    spmd_mesh *mesh;
    spmd_spec *spec;
    int length;                                             /* spec entries */
    int nblocks[SPMD_MAX_RANK];                             /* shards per dimension */
    int entry_mesh_axis[SPMD_MAX_RANK][SPMD_MAX_MESH_AXES]; /* mesh axis of each spec name */
    int *block;   /* [mesh size * length]: block index of each mesh position per dimension */
    int *replica; /* [mesh size] */
    int fully_replicated;
    unsigned unreduced_mask; /* bit a: mesh axis a is unreduced (spec.h) */
    spmd__layout *layout;    /* shared with every sharding of the same layout */
};

spmd_status spmd__sharding_check(const spmd_sharding *sh, const char *fn, const char *arg);

/**
 * Refuses a sharding with unreduced axes where a value must be whole: reading an array on the
 * host (`creating` 0: reshard it first) or making one from host data (`creating` 1: its
 * devices would have to hold partial sums that no host value says).
 */
spmd_status spmd__sharding_refuse_unreduced(const spmd_sharding *sh, const char *fn,
                                            const char *what, int creating);

/** Shards along dimension `dim` of an array (1 beyond the spec's length). */
static inline int spmd__sharding_blocks(const spmd_sharding *sh, int dim)
{
    return dim < sh->length ? sh->nblocks[dim] : 1;
}

/** Block index of mesh position `flat` along dimension `dim` (0 beyond the spec's length). */
static inline int spmd__sharding_block(const spmd_sharding *sh, int flat, int dim)
{
    return dim < sh->length ? sh->block[flat * sh->length + dim] : 0;
}

/** Box of mesh position `flat` for an array of `shape` (already checked). */
void spmd__sharding_box(const spmd_sharding *sh, int ndim, const int64_t *shape, int flat,
                        spmd_box *box);

/**
 * Validates `shape` for the sharding; `fn` and `what` (e.g. "input 2") name the caller and
 * the array in messages.
 */
spmd_status spmd__sharding_check_shape(const spmd_sharding *sh, int ndim, const int64_t *shape,
                                       const char *fn, const char *what);

#endif /* SPMD_SHARDING_IMPL_H */
