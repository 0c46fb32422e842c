/* Host-local ⇄ global shapes, written on the public mesh and spec API. */
#include <spmd/multihost.h>

#include <stdio.h>

#include "runtime/base/check.h"
#include "sharding/spec_impl.h"

enum { TO_GLOBAL, TO_LOCAL };

/* Product of the global (or this process's local) sizes of the axes of spec entry `d`. */
static spmd_status entry_factors(const spmd_mesh *mesh, const int *local_mesh_shape,
                                 const spmd_spec *spec, int d, const char *fn, int64_t *global,
                                 int64_t *local)
{
    *global = 1;
    *local = 1;
    for (int k = 0; k < spmd_spec_entry_size(spec, d); k++) {
        const char *name = spmd_spec_entry_axis(spec, d, k);
        int axis = spmd_mesh_axis_index(mesh, name);
        if (axis < 0) {
            char text[256];
            spmd__ignore(spmd_mesh_format(mesh, text, sizeof text));
            return SPMD_ERROR(SPMD_ERR_SPEC,
                              "%s: spec entry %d names axis '%s', which %s does not have", fn, d,
                              name, text);
        }
        *global *= spmd_mesh_axis_size(mesh, axis);
        *local *= local_mesh_shape[axis];
    }
    return SPMD_OK;
}

static spmd_status convert(const spmd_mesh *mesh, const spmd_spec *spec, int ndim,
                           const int64_t *in, int64_t *out, int direction, const char *fn)
{
    SPMD_REQUIRE_NOT_NULL(mesh, fn);
    SPMD_REQUIRE_NOT_NULL(spec, fn);
    SPMD_REQUIRE(ndim >= 0 && ndim <= SPMD_MAX_RANK, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: ndim=%d must be in 0..%d", fn, ndim, SPMD_MAX_RANK);
    SPMD_REQUIRE(ndim == 0 || (in && out), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: the shape arguments are NULL but ndim is %d", fn, ndim);
    SPMD_CHECK(spmd__spec_check(spec, fn, "spec"));
    SPMD_REQUIRE(spmd_spec_length(spec) <= ndim, SPMD_ERR_SPEC,
                 "%s: the spec has %d entries but the array only %d dimensions", fn,
                 spmd_spec_length(spec), ndim);
    if (spmd_mesh_check_contiguous(mesh) != SPMD_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", spmd_last_error());
        return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                          "%s: %s; host-local data cannot be laid out in one block per process "
                          "on this mesh: build the array from its shards with "
                          "spmd_array_from_single_device_arrays instead",
                          fn, why);
    }
    int local_mesh[SPMD_MAX_MESH_AXES];
    SPMD_CHECK(spmd_mesh_local_shape(mesh, local_mesh));
    int64_t result[SPMD_MAX_RANK]; /* `out` is written only on success */
    for (int d = 0; d < ndim; d++) {
        SPMD_REQUIRE(in[d] >= 0, SPMD_ERR_SHAPE,
                     "%s: dimension %d is %lld; sizes cannot be negative", fn, d, (long long)in[d]);
        int64_t global = 1, local = 1;
        if (d < spmd_spec_length(spec))
            SPMD_CHECK(entry_factors(mesh, local_mesh, spec, d, fn, &global, &local));
        int64_t from = direction == TO_GLOBAL ? local : global;
        int64_t to = direction == TO_GLOBAL ? global : local;
        SPMD_REQUIRE(in[d] % from == 0, SPMD_ERR_SHAPE,
                     "%s: dimension %d has size %lld, not divisible by the %s size %lld of the "
                     "axes it is mapped to",
                     fn, d, (long long)in[d],
                     direction == TO_GLOBAL ? "local (per-process)" : "global", (long long)from);
        result[d] = in[d] / from * to;
    }
    for (int d = 0; d < ndim; d++)
        out[d] = result[d];
    return SPMD_OK;
}

spmd_status spmd_local_to_global_shape(const spmd_mesh *mesh, const spmd_spec *spec, int ndim,
                                       const int64_t *local_shape, int64_t *global_shape)
{
    return convert(mesh, spec, ndim, local_shape, global_shape, TO_GLOBAL,
                   "spmd_local_to_global_shape");
}

spmd_status spmd_global_to_local_shape(const spmd_mesh *mesh, const spmd_spec *spec, int ndim,
                                       const int64_t *global_shape, int64_t *local_shape)
{
    return convert(mesh, spec, ndim, global_shape, local_shape, TO_LOCAL,
                   "spmd_global_to_local_shape");
}
