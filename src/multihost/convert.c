/* Host-local ⇄ global arrays: process p's host-local array is its subcube's part of the global
 * array, so the same device buffers serve both views. Only a global array in another layout
 * than the one asked for needs communication (a reshard). */
#include <spmd/multihost.h>
#include <spmd/reshard.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/base/env.h"
#include "runtime/devices/worker.h" /* refusing calls from inside fn */
#include "array/array_impl.h"
#include "array/buffer.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h" /* refusing unreduced arrays */

/* The mesh of this process's devices: the mesh's axis names, local sizes, same device order. */
static spmd_status local_mesh_of(const spmd_mesh *mesh, spmd_mesh **out)
{
    int ndim = spmd_mesh_ndim(mesh), shape[SPMD_MAX_MESH_AXES];
    SPMD_CHECK(spmd_mesh_local_shape(mesh, shape));
    const char *names[SPMD_MAX_MESH_AXES];
    for (int a = 0; a < ndim; a++)
        names[a] = spmd_mesh_axis_name(mesh, a);
    int n = spmd_mesh_num_local_devices(mesh);
    int *ids = malloc((size_t)n * sizeof *ids);
    SPMD_REQUIRE(ids != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < n; i++)
        ids[i] = spmd_mesh_local_device_id(mesh, i);
    spmd_status st = spmd_mesh_create(ndim, shape, names, ids, n, out);
    free(ids);
    return st;
}

/* A new array of `shape` on `sharding` over `src`'s buffers (each device's shard holds the same
 * data under both descriptions). */
static spmd_status share_buffers(const spmd_array *src, const spmd_sharding *sharding, int ndim,
                                 const int64_t *shape, const char *fn, spmd_array **out)
{
    spmd_array *a = NULL;
    SPMD_CHECK(spmd__array_create_empty(sharding, ndim, shape, src->dtype, fn, &a));
    for (int k = 0; k < a->num_shards; k++) {
        int s = spmd__array_shard_of_device(src, a->shards[k].device_id);
        if (s < 0 || src->shards[s].buffer == NULL) {
            spmd_array_destroy(a);
            return SPMD_ERROR(SPMD_ERR_INTERNAL, "%s: no shard of the input on device %d", fn,
                              a->shards[k].device_id);
        }
        a->shards[k].buffer = spmd__buffer_retain(src->shards[s].buffer);
    }
    *out = a;
    return SPMD_OK;
}

/*
 * JAX's multihost_utils returns an array that is already what the conversion makes (global for
 * host_local_array_to_global_array, fully addressable for the way back) unchanged: here, a new
 * handle over the same buffers. `mesh` and `spec` must still be valid together.
 */
static spmd_status pass_through(const spmd_array *x, spmd_mesh *mesh, const spmd_spec *spec,
                                const char *fn, spmd_array **out)
{
    spmd_sharding *asked = NULL;
    SPMD_CHECK(spmd_sharding_create(mesh, spec, &asked)); /* live handles, axes of the mesh */
    int entries = spmd_spec_length(spec);
    spmd_sharding_destroy(asked);
    SPMD_REQUIRE(entries <= x->ndim, SPMD_ERR_SPEC,
                 "%s: the spec has %d entries but the array has rank %d; a spec may not be "
                 "longer than the rank",
                 fn, entries, x->ndim);
    SPMD_CHECK(share_buffers(x, x->sharding, x->ndim, x->shape, fn, out));
    (*out)->stacked_replicas = x->stacked_replicas;
    return SPMD_OK;
}

static uint64_t digest_of(const void *data, size_t n)
{
    return spmd__fnv1a(SPMD__FNV1A_SEED, data, n);
}

/*
 * SPMD_CHECK_REPLICATED_INPUTS=1: processes whose host-local parts land on the same place of
 * the global array (the spec leaves out an axis that spans processes) must pass equal data.
 */
static spmd_status check_replicated(const spmd_array *global, const void *host, size_t bytes,
                                    const char *fn)
{
    int processes = spmd_process_count(), me = spmd_process_index();
    if (processes == 1)
        return SPMD_OK;
    /* where this process's part starts, and a digest of it */
    int64_t record[SPMD_MAX_RANK + 1];
    memset(record, 0, sizeof record);
    if (global->num_shards > 0)
        for (int d = 0; d < global->ndim; d++)
            record[d] = global->shards[0].index.start[d];
    uint64_t h = digest_of(host, bytes);
    memcpy(&record[SPMD_MAX_RANK], &h, sizeof h);
    int64_t shape[1] = {SPMD_MAX_RANK + 1};
    spmd_array *mine = NULL;
    SPMD_CHECK(spmd_array_create_on_device(spmd_local_device_id(0), record, 1, shape,
                                           SPMD_DTYPE_I64, &mine));
    int64_t *all = malloc((size_t)processes * sizeof record);
    spmd_status st = all ? spmd_process_allgather(mine, 0, all, (size_t)processes * sizeof record)
                         : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    spmd_array_destroy(mine);
    for (int p = 0; p < processes && st == SPMD_OK; p++) {
        const int64_t *theirs = all + (size_t)p * (SPMD_MAX_RANK + 1);
        if (p != me && memcmp(theirs, record, SPMD_MAX_RANK * sizeof *record) == 0 &&
            theirs[SPMD_MAX_RANK] != record[SPMD_MAX_RANK]) {
            st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                            "%s: the spec declares the data replicated across processes %d and "
                            "%d, but their host-local arrays differ; pass the same data on both "
                            "or name the axis that separates them in the spec "
                            "(SPMD_CHECK_REPLICATED_INPUTS=1)",
                            fn, p < me ? p : me, p < me ? me : p);
        }
    }
    free(all);
    return st;
}

static spmd_status spmd_host_local_to_global_checked(const spmd_array *local, spmd_mesh *mesh,
                                                     const spmd_spec *spec, spmd_array **global)
{
    const char *fn = "spmd_host_local_to_global";
    SPMD_REQUIRE_NOT_NULL(global, fn);
    *global = NULL;
    SPMD_CHECK(spmd__worker_refuse_nested(fn));
    SPMD_CHECK(spmd__array_check(local, fn, "local"));
    SPMD_CHECK(spmd__sharding_refuse_unreduced(local->sharding, fn, "local", 0));
    if (!spmd_array_is_fully_addressable(local)) /* already global */
        return pass_through(local, mesh, spec, fn, global);
    /* the real reason first: an abstract mesh has no devices, hence no local mesh either */
    SPMD_CHECK(spmd__mesh_check(mesh, fn, "mesh"));
    SPMD_CHECK(spmd__mesh_refuse_abstract(mesh, fn, "mesh"));
    int64_t global_shape[SPMD_MAX_RANK];
    SPMD_CHECK(spmd_local_to_global_shape(mesh, spec, local->ndim, local->shape, global_shape));
    spmd_sharding *global_sharding = NULL, *local_sharding = NULL;
    spmd_mesh *local_mesh = NULL;
    spmd_status st = spmd_sharding_create(mesh, spec, &global_sharding);
    if (st == SPMD_OK)
        st = local_mesh_of(mesh, &local_mesh);
    if (st == SPMD_OK)
        st = spmd_sharding_create(local_mesh, spec, &local_sharding);
    long check = 0;
    int is_set = 0;
    if (st == SPMD_OK)
        st = spmd__env_int("SPMD_CHECK_REPLICATED_INPUTS", 0, 1, &check, &is_set);
    void *host = NULL;
    size_t bytes = (size_t)spmd_array_size(local) * spmd_dtype_size(local->dtype);
    int in_place =
        st == SPMD_OK && spmd_sharding_is_equivalent(local->sharding, local_sharding, local->ndim);
    if (st == SPMD_OK && (check || !in_place)) {
        host = malloc(bytes ? bytes : 1);
        st = host ? spmd_array_to_host(local, host, bytes)
                  : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    if (st == SPMD_OK && in_place)
        st = share_buffers(local, global_sharding, local->ndim, global_shape, fn, global);
    else if (st == SPMD_OK) /* the shards sit elsewhere: one copy from the host value */
        st = spmd_array_from_process_local_data(global_sharding, host, local->ndim, local->shape,
                                                global_shape, local->dtype, global);
    if (st == SPMD_OK && check)
        st = check_replicated(*global, host, bytes, fn);
    if (st != SPMD_OK) {
        spmd_array_destroy(*global);
        *global = NULL;
    }
    free(host);
    spmd_sharding_destroy(local_sharding);
    spmd_sharding_destroy(global_sharding);
    spmd_mesh_destroy(local_mesh);
    return st;
}

static spmd_status spmd_global_to_host_local_checked(const spmd_array *global, spmd_mesh *mesh,
                                                     const spmd_spec *spec, spmd_array **local)
{
    const char *fn = "spmd_global_to_host_local";
    SPMD_REQUIRE_NOT_NULL(local, fn);
    *local = NULL;
    SPMD_CHECK(spmd__worker_refuse_nested(fn));
    SPMD_CHECK(spmd__array_check(global, fn, "global"));
    SPMD_CHECK(spmd__sharding_refuse_unreduced(global->sharding, fn, "global", 0));
    if (spmd_array_is_fully_addressable(global)) /* already host-local */
        return pass_through(global, mesh, spec, fn, local);
    int64_t local_shape[SPMD_MAX_RANK];
    SPMD_CHECK(spmd_global_to_local_shape(mesh, spec, global->ndim, global->shape, local_shape));
    spmd_sharding *global_sharding = NULL, *local_sharding = NULL;
    spmd_mesh *local_mesh = NULL;
    spmd_array *moved = NULL; /* `global` in the layout asked for, when it had another */
    spmd_status st = local_mesh_of(mesh, &local_mesh);
    if (st == SPMD_OK)
        st = spmd_sharding_create(local_mesh, spec, &local_sharding);
    if (st == SPMD_OK)
        st = spmd_sharding_create(mesh, spec, &global_sharding);
    /* As JAX: device_put to NamedSharding(mesh, spec) first, a collective; the caller's array
     * is left as it is (no donation). */
    if (st == SPMD_OK &&
        !spmd_sharding_is_equivalent(global->sharding, global_sharding, global->ndim))
        st = spmd_reshard((spmd_array *)global, global_sharding, NULL, &moved);
    if (st == SPMD_OK)
        st = share_buffers(moved ? moved : global, local_sharding, global->ndim, local_shape, fn,
                           local);
    spmd_array_destroy(moved);
    spmd_sharding_destroy(local_sharding);
    spmd_sharding_destroy(global_sharding);
    spmd_mesh_destroy(local_mesh);
    return st;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

/* Each runs as one call in its process (calls.h): the collectives it makes come together. */

spmd_status spmd_host_local_to_global(const spmd_array *local, spmd_mesh *mesh,
                                      const spmd_spec *spec, spmd_array **global)
{
    const char *fn = "spmd_host_local_to_global";
    spmd__call_entry lock;
    if (global)
        *global = NULL;
    SPMD_CHECK(spmd__calls_enter(fn, &lock));
    spmd_status st = spmd_host_local_to_global_checked(local, mesh, spec, global);
    spmd__calls_exit(&lock, st);
    return spmd__error_in(st, fn);
}

spmd_status spmd_global_to_host_local(const spmd_array *global, spmd_mesh *mesh,
                                      const spmd_spec *spec, spmd_array **local)
{
    const char *fn = "spmd_global_to_host_local";
    spmd__call_entry lock;
    if (local)
        *local = NULL;
    SPMD_CHECK(spmd__calls_enter(fn, &lock));
    spmd_status st = spmd_global_to_host_local_checked(global, mesh, spec, local);
    spmd__calls_exit(&lock, st);
    return spmd__error_in(st, fn);
}
