/* Private: the mesh structure. */
#ifndef SPMD_MESH_IMPL_H
#define SPMD_MESH_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include <spmd/mesh.h>

#include "sharding/attachment.h"

struct spmd_mesh {
    uint32_t magic;
    atomic_int refs;
    unsigned session; /* the spmd_init start-up it belongs to */
    int ndim;
    int shape[SPMD_MAX_MESH_AXES];
    int strides[SPMD_MAX_MESH_AXES]; /* row-major strides of the device array */
    char names[SPMD_MAX_MESH_AXES][SPMD_MAX_AXIS_NAME + 1];
    int size;
    int *device_ids; /* [size], flat order */
    int *process_of; /* [size], owning process of each flat position */
    int num_processes;
    int *processes;   /* [num_processes], the processes owning its devices, ascending */
    int abstract;     /* spmd_mesh_create_abstract: ids only, no devices, no runtime */
    int num_global;   /* global device count when the mesh was made (abstract: ids' bound) */
    int *position_of; /* [num_global], flat position or -1 */
    int num_local;
    int *local_ids; /* [num_local], this process's devices in flat order */
    int contiguous;
    int local_shape[SPMD_MAX_MESH_AXES];  /* valid when contiguous and num_local > 0 */
    int local_origin[SPMD_MAX_MESH_AXES]; /* first coordinate of this process's subcube */
    char why_not_contiguous[512];
    _Atomic(spmd__attachment *) attachment; /* shard_map's groups, attached on first use */
};

spmd_status spmd__mesh_check(const spmd_mesh *mesh, const char *fn, const char *arg);
/** As spmd__mesh_check, and the mesh belongs to the running start-up of libspmd. */
spmd_status spmd__mesh_check_current(const spmd_mesh *mesh, const char *fn, const char *arg);
/** SPMD_ERR_INVALID_ARGUMENT, saying why, for an abstract mesh (one without devices). */
spmd_status spmd__mesh_refuse_abstract(const spmd_mesh *mesh, const char *fn, const char *arg);
/** As spmd__mesh_check_current, or an abstract mesh (the sharding math needs no devices). */
spmd_status spmd__mesh_check_math(const spmd_mesh *mesh, const char *fn, const char *arg);

/**
 * Attaches `a` unless another thread attached one first: returns the one the mesh keeps (the
 * caller destroys `a` when it is not that one).
 */
spmd__attachment *spmd__mesh_attach(spmd_mesh *mesh, spmd__attachment *a);

/** Coordinates of flat position `flat`. */
void spmd__mesh_coords(const spmd_mesh *mesh, int flat, int *coords);

#endif /* SPMD_MESH_IMPL_H */
