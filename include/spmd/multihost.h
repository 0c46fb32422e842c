/* Multi-process utilities: the shapes of host-local and global arrays (DESIGN.md §6). */
#ifndef SPMD_MULTIHOST_H
#define SPMD_MULTIHOST_H

#include <stdint.h>

#include "spmd/export.h"
#include "spmd/mesh.h"
#include "spmd/spec.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/**
 * Global shape of an array whose host-local part on this process has shape `local_shape`,
 * under `spec` on `mesh`: a dimension mapped to axes A grows by prod(global sizes of A) /
 * prod(this process's local sizes of A) (so it concatenates the processes' parts along the
 * axes that span processes); unmapped dimensions are unchanged. Not collective.
 * @return SPMD_OK; SPMD_ERR_SPEC for an axis the mesh lacks or a spec longer than ndim;
 *         SPMD_ERR_SHAPE when a local dimension is not divisible by its local axis sizes;
 *         SPMD_ERR_INVALID_ARGUMENT for NULL arguments, a non-contiguous mesh (each process's
 *         devices must form a subcube; the message names the process) or no local device.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_local_to_global_shape(const spmd_mesh *mesh,
                                                               const spmd_spec *spec, int ndim,
                                                               const int64_t *local_shape,
                                                               int64_t *global_shape);

/** The inverse of spmd_local_to_global_shape: this process's part of a global shape. */
SPMD_API SPMD_NODISCARD spmd_status spmd_global_to_local_shape(const spmd_mesh *mesh,
                                                               const spmd_spec *spec, int ndim,
                                                               const int64_t *global_shape,
                                                               int64_t *local_shape);

SPMD_END_DECLS

#endif /* SPMD_MULTIHOST_H */
