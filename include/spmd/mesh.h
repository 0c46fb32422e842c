/* Device meshes: an N-d array of global devices with named axes. */
#ifndef SPMD_MESH_H
#define SPMD_MESH_H

#include <stddef.h>

#include "spmd/export.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

#define SPMD_MAX_MESH_AXES 8
/** Longest axis name, in bytes, without the terminating NUL. */
#define SPMD_MAX_AXIS_NAME 63

typedef struct spmd_mesh spmd_mesh;

/**
 * A mesh for the sharding math alone (JAX's AbstractMesh, with device ids): needs neither
 * spmd_init nor devices, and holds any number of devices (up to 2^24). `device_ids` NULL means
 * 0..size-1; otherwise distinct ids in [0, 2^24). Its shardings answer shard shapes, index
 * boxes, replica ids, formats and pictures (spmd_sharding_*, spmd_visualize_sharding); every
 * device counts as process 0's and none as this process's (no addressable devices). Arrays,
 * shard_map and resharding refuse it, naming it. Release with spmd_mesh_destroy().
 * @return SPMD_OK, SPMD_ERR_INVALID_ARGUMENT (as spmd_mesh_create, and ids out of range).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_mesh_create_abstract(int ndim, const int *shape,
                                                              const char *const *axis_names,
                                                              const int *device_ids,
                                                              int num_device_ids, spmd_mesh **out);

/** 1 for a mesh made by spmd_mesh_create_abstract; 0 otherwise (NULL included). */
SPMD_API int spmd_mesh_is_abstract(const spmd_mesh *mesh);

/**
 * Creates a mesh of shape `shape[0..ndim)` with names `axis_names`, laid over `device_ids` in
 * row-major (C) order: the device at coordinate c is device_ids[flat(c)].
 *
 * Any subset of the global devices, in any order, may form a mesh (pipeline stages use
 * disjoint meshes). `device_ids` NULL means every global device in id order, and then the
 * product of `shape` must equal spmd_device_count(). A 0-axis mesh holds exactly one device.
 * Axis names: 1..SPMD_MAX_AXIS_NAME characters, distinct, not "None".
 *
 * Not collective, but every process must build the same mesh to use it in collectives.
 * @param[in]  num_device_ids  length of device_ids (ignored when device_ids is NULL).
 * @param[out] out  new mesh owned by the caller; release with spmd_mesh_destroy().
 * @return SPMD_OK, SPMD_ERR_INVALID_ARGUMENT (NULL, bad name, size mismatch, duplicate or
 *         unknown device, runtime not initialized).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_mesh_create(int ndim, const int *shape,
                                                     const char *const *axis_names,
                                                     const int *device_ids, int num_device_ids,
                                                     spmd_mesh **out);

/**
 * jax.experimental.mesh_utils.create_hybrid_device_mesh(per_process_shape,
 * across_process_shape) with process_is_granule=True: a mesh of shape per_process_shape[a] *
 * across_process_shape[a] on each axis over every device of the run, in which the process is
 * the major part of each coordinate. Each process's devices, in ascending id order, fill a
 * block of shape per_process_shape row-major; process k's block sits at row-major position k
 * of a grid of shape across_process_shape. So axes with across_process_shape[a] == 1 stay
 * within a process, each process owns a contiguous block (spmd_mesh_check_contiguous passes),
 * and its local shape is per_process_shape. Example, 4 processes x 2 devices:
 * per_process_shape (1, 2), across_process_shape (4, 1) gives a (4, 2) mesh whose row p holds
 * process p's devices. In one process, across_process_shape is all ones and this is
 * create_device_mesh on CPU: the devices in id order, reshaped.
 *
 * Not collective; every process computes the same mesh.
 * @param ndim  1..SPMD_MAX_MESH_AXES, the length of both shapes and of axis_names.
 * @return SPMD_OK; SPMD_ERR_INVALID_ARGUMENT for NULL arguments, ndim out of range, a size
 *         below 1, processes with different device counts, a per_process_shape whose product
 *         is not the device count of a process ("Number of devices ... must equal the product
 *         of mesh_shape"), an across_process_shape whose product is not the process count
 *         ("Number of slices ... must equal the product of dcn_mesh_shape"), bad axis names
 *         (as spmd_mesh_create).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_mesh_create_hybrid(int ndim, const int *per_process_shape,
                                                            const int *across_process_shape,
                                                            const char *const *axis_names,
                                                            spmd_mesh **out);

/** Adds a reference; each retain needs one more spmd_mesh_destroy. Returns `mesh`. */
SPMD_API spmd_mesh *spmd_mesh_retain(spmd_mesh *mesh);
/** Drops the caller's reference. Shardings and arrays keep their own. NULL-safe. */
SPMD_API void spmd_mesh_destroy(spmd_mesh *mesh);

/* Queries: not collective; invalid arguments give 0, -1 or NULL as documented. */
SPMD_API int spmd_mesh_ndim(const spmd_mesh *mesh);                /**< -1 if mesh is NULL */
SPMD_API int spmd_mesh_size(const spmd_mesh *mesh);                /**< number of devices */
SPMD_API int spmd_mesh_axis_size(const spmd_mesh *mesh, int axis); /**< -1 if out of range */
SPMD_API const char *spmd_mesh_axis_name(const spmd_mesh *mesh, int axis); /**< NULL if bad */
/** Position of the axis called `name`, or -1 when the mesh has no such axis. */
SPMD_API int spmd_mesh_axis_index(const spmd_mesh *mesh, const char *name);
/** Global id of the device at row-major position `flat`; -1 if out of range. */
SPMD_API int spmd_mesh_device_id(const spmd_mesh *mesh, int flat);
/** Row-major position of global device `device_id` in the mesh; -1 if it is not in the mesh. */
SPMD_API int spmd_mesh_device_position(const spmd_mesh *mesh, int device_id);
/** Coordinates of global device `device_id`; SPMD_ERR_INVALID_ARGUMENT if not in the mesh. */
SPMD_API SPMD_NODISCARD spmd_status spmd_mesh_device_coords(const spmd_mesh *mesh, int device_id,
                                                            int *coords);
/** Number of this process's devices in the mesh. */
SPMD_API int spmd_mesh_num_local_devices(const spmd_mesh *mesh);
/** Global id of this process's i-th mesh device, in mesh flat order; -1 if out of range. */
SPMD_API int spmd_mesh_local_device_id(const spmd_mesh *mesh, int i);
/** 1 when the mesh holds a device of `process`, else 0. */
SPMD_API int spmd_mesh_has_process(const spmd_mesh *mesh, int process);

/**
 * 1 when every process's devices form a contiguous subcube of the mesh (the rule that
 * host-local ⇄ global conversions need), else 0.
 */
SPMD_API int spmd_mesh_is_contiguous(const spmd_mesh *mesh);
/**
 * SPMD_OK when the mesh is contiguous; otherwise SPMD_ERR_INVALID_ARGUMENT with a message that
 * names the first offending process and a device inside its hull that belongs to another one.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_mesh_check_contiguous(const spmd_mesh *mesh);
/**
 * Shape of this process's subcube (the local mesh: same axis names, local sizes).
 * @return SPMD_ERR_INVALID_ARGUMENT if the mesh is not contiguous or has no local device.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_mesh_local_shape(const spmd_mesh *mesh, int *shape);

/** 1 when the mesh was built since the last spmd_init (objects do not outlive spmd_finalize). */
SPMD_API int spmd_mesh_is_current(const spmd_mesh *mesh);

/** 1 when both meshes have the same names, shape and devices in the same order. */
SPMD_API int spmd_mesh_equal(const spmd_mesh *a, const spmd_mesh *b);

/**
 * Writes "Mesh('a': 4, 'b': 2, axis_types=(Auto, Auto))" (NUL-terminated) into buf, as JAX's
 * str(Mesh) (libspmd's axes are all of JAX's default type, Auto).
 * @return SPMD_ERR_INVALID_ARGUMENT when buf is too small (the text is truncated).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_mesh_format(const spmd_mesh *mesh, char *buf, size_t size);

SPMD_END_DECLS

#endif /* SPMD_MESH_H */
