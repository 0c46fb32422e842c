/* Legacy device_put_sharded / device_put_replicated and unreplicate, on the public API only:
 * a 1-D mesh over the given devices, the stacked axis sharded over it. */
#include <spmd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/check.h" /* error messages only */

typedef struct slices {
    const void *const *host; /* per slice; NULL: every slice from `single` */
    const void *single;
    size_t bytes; /* of one slice */
} slices;

/* Writes slice box->start[0] straight from the caller's buffer into the device's shard. */
static spmd_status write_slice(const spmd_box *box, void *dst, void *user)
{
    const slices *s = user;
    const void *src = s->host ? s->host[box->start[0]] : s->single;
    if (s->bytes)
        memcpy(dst, src, s->bytes);
    return SPMD_OK;
}

static int is_local(int device_id)
{
    spmd_device_info info;
    return spmd_device_get_info(device_id, &info) == SPMD_OK &&
           info.process_index == spmd_process_index();
}

static spmd_status put_stacked(const char *fn, const char *axis, int n, const slices *s, int ndim,
                               const int64_t *shape, spmd_dtype dtype, const int *devices,
                               spmd_array **out)
{
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    SPMD_REQUIRE(spmd_is_initialized(), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: libspmd is not initialized; call spmd_init first", fn);
    SPMD_REQUIRE_NOT_NULL(devices, fn);
    SPMD_REQUIRE(n >= 1 && n <= spmd_device_count(), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: n=%d, but there are %d devices and none may be given twice; give 1 to %d", fn,
                 n, spmd_device_count(), spmd_device_count());
    SPMD_REQUIRE(ndim >= 0 && ndim < SPMD_MAX_RANK, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: ndim=%d must be in 0..%d (the result adds a leading axis)", fn, ndim,
                 SPMD_MAX_RANK - 1);
    SPMD_REQUIRE(ndim == 0 || shape != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument 'shape' is NULL but ndim is %d", fn, ndim);
    SPMD_REQUIRE(spmd_dtype_size(dtype) != 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: dtype %d is not a dtype; use one of the SPMD_DTYPE_* values", fn, (int)dtype);
    int64_t stacked[SPMD_MAX_RANK];
    stacked[0] = n;
    size_t bytes = spmd_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) {
        SPMD_REQUIRE(shape[d] >= 0, SPMD_ERR_SHAPE, "%s: shape[%d] = %lld is negative", fn, d,
                     (long long)shape[d]);
        stacked[d + 1] = shape[d];
        bytes *= (size_t)shape[d];
    }
    for (int i = 0; i < n; i++)
        SPMD_REQUIRE(!is_local(devices[i]) || (s->host ? s->host[i] : s->single) != NULL,
                     SPMD_ERR_INVALID_ARGUMENT,
                     "%s: the buffer for device %d (entry %d) is NULL, but that device belongs "
                     "to this process",
                     fn, devices[i], i);
    slices filled = *s;
    filled.bytes = bytes;
    spmd_mesh *mesh = NULL;
    spmd_sharding *sharding = NULL;
    char spec[64];
    snprintf(spec, sizeof spec, "'%s'", axis);
    spmd_status st = spmd_mesh_create(1, &n, &axis, devices, n, &mesh);
    if (st == SPMD_OK)
        st = spmd_sharding_create_parse(mesh, spec, &sharding);
    if (st == SPMD_OK)
        st =
            spmd_array_from_callback(ndim + 1, stacked, dtype, sharding, write_slice, &filled, out);
    spmd_sharding_destroy(sharding);
    spmd_mesh_destroy(mesh);
    return st;
}

static spmd_status spmd_device_put_sharded_checked(int n, const void *const *host_shards, int ndim,
                                                   const int64_t *shape, spmd_dtype dtype,
                                                   const int *devices, spmd_array **out)
{
    const char *fn = "spmd_device_put_sharded";
    if (out)
        *out = NULL;
    SPMD_REQUIRE_NOT_NULL(host_shards, fn);
    slices s = {.host = host_shards};
    return put_stacked(fn, SPMD_DEVICE_PUT_SHARDED_AXIS, n, &s, ndim, shape, dtype, devices, out);
}

static spmd_status spmd_device_put_replicated_checked(const void *host, int ndim,
                                                      const int64_t *shape, spmd_dtype dtype,
                                                      const int *devices, int n, spmd_array **out)
{
    const char *fn = "spmd_device_put_replicated";
    if (out)
        *out = NULL;
    SPMD_REQUIRE_NOT_NULL(host, fn);
    slices s = {.single = host};
    SPMD_CHECK(
        put_stacked(fn, SPMD_DEVICE_PUT_REPLICATED_AXIS, n, &s, ndim, shape, dtype, devices, out));
    spmd_array_mark_stacked_replicas(*out);
    return SPMD_OK;
}

/* The first addressable shard, checked to hold one whole slice along axis 0. */
static spmd_status first_slice(const spmd_array *x, const char *fn, spmd_shard *shard)
{
    SPMD_REQUIRE(x != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument 'x' is NULL", fn);
    SPMD_REQUIRE(spmd_array_ndim(x) >= 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: x is not a live spmd_array (destroyed, or another type)", fn);
    int ndim = spmd_array_ndim(x);
    SPMD_REQUIRE(ndim >= 1, SPMD_ERR_SHAPE,
                 "%s: x is a scalar; unreplicate drops a leading stacked axis, so x needs one", fn);
    SPMD_REQUIRE(spmd_array_num_shards(x) > 0, SPMD_ERR_NOT_ADDRESSABLE,
                 "%s: this process holds no shard of x; unreplicate on a process that owns one "
                 "of its devices",
                 fn);
    SPMD_CHECK(spmd_array_shard(x, 0, shard));
    const int64_t *shape = spmd_array_shape(x);
    int one_row = shard->index.stop[0] - shard->index.start[0] == 1, whole_rest = 1;
    for (int d = 1; d < ndim; d++)
        whole_rest &= shard->index.start[d] == 0 && shard->index.stop[d] == shape[d];
    SPMD_REQUIRE(one_row && whole_rest, SPMD_ERR_SHAPE,
                 "%s: x's first shard (device %d) %s, not one whole slice; unreplicate needs the "
                 "stacked layout (axis 0 sharded over every device, nothing else); for other "
                 "layouts read the value with spmd_array_to_host or spmd_process_allgather",
                 fn, shard->device_id,
                 one_row ? "holds only part of the other axes" : "holds several rows of axis 0");
    return SPMD_OK;
}

static spmd_status spmd_unreplicate_checked(const spmd_array *x, spmd_array **out)
{
    const char *fn = "spmd_unreplicate";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    spmd_shard shard;
    SPMD_CHECK(first_slice(x, fn, &shard));
    return spmd_array_shard_view(x, 0, spmd_array_ndim(x) - 1, spmd_array_shape(x) + 1, out);
}

static spmd_status spmd_unreplicate_to_host_checked(const spmd_array *x, void *dst,
                                                    size_t dst_bytes)
{
    const char *fn = "spmd_unreplicate_to_host";
    SPMD_REQUIRE_NOT_NULL(dst, fn);
    spmd_shard shard;
    SPMD_CHECK(first_slice(x, fn, &shard));
    return spmd_array_shard_to_host(x, 0, dst, dst_bytes);
}

static spmd_status spmd_replicate_checked(const spmd_array *x, const int *devices, int n,
                                          spmd_array **out)
{
    const char *fn = "spmd_replicate";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    SPMD_REQUIRE(x != NULL && spmd_array_ndim(x) >= 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument 'x' is NULL or not a live array", fn);
    size_t bytes = (size_t)spmd_array_size(x) * spmd_dtype_size(spmd_array_dtype(x));
    void *host = malloc(bytes ? bytes : 1);
    SPMD_REQUIRE(host != NULL, SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes", fn,
                 bytes);
    spmd_status st = spmd_array_to_host(x, host, bytes);
    if (st == SPMD_OK)
        st = spmd_device_put_replicated(host, spmd_array_ndim(x), spmd_array_shape(x),
                                        spmd_array_dtype(x), devices, n, out);
    free(host);
    return st;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_device_put_sharded(int n, const void *const *host_shards, int ndim,
                                    const int64_t *shape, spmd_dtype dtype, const int *devices,
                                    spmd_array **out)
{
    return spmd__error_in(
        spmd_device_put_sharded_checked(n, host_shards, ndim, shape, dtype, devices, out),
        "spmd_device_put_sharded");
}

spmd_status spmd_device_put_replicated(const void *host, int ndim, const int64_t *shape,
                                       spmd_dtype dtype, const int *devices, int n,
                                       spmd_array **out)
{
    return spmd__error_in(
        spmd_device_put_replicated_checked(host, ndim, shape, dtype, devices, n, out),
        "spmd_device_put_replicated");
}

/* An unreduced array's devices hold partial sums: no copy of it is the value. */
static spmd_status refuse_unreduced(const spmd_array *x, const char *fn)
{
    const spmd_sharding *sh = spmd_array_sharding(x);
    SPMD_REQUIRE(!sh || spmd_spec_unreduced_size(spmd_sharding_spec(sh)) <= 0,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: x has unreduced axes (its devices hold partial sums, not the value); "
                 "spmd_reshard it to a spec without them first",
                 fn);
    return SPMD_OK;
}

spmd_status spmd_unreplicate(const spmd_array *x, spmd_array **out)
{
    if (out)
        *out = NULL;
    SPMD_CHECK(refuse_unreduced(x, "spmd_unreplicate"));
    return spmd__error_in(spmd_unreplicate_checked(x, out), "spmd_unreplicate");
}

spmd_status spmd_unreplicate_to_host(const spmd_array *x, void *dst, size_t dst_bytes)
{
    SPMD_CHECK(refuse_unreduced(x, "spmd_unreplicate_to_host"));
    return spmd__error_in(spmd_unreplicate_to_host_checked(x, dst, dst_bytes),
                          "spmd_unreplicate_to_host");
}

spmd_status spmd_replicate(const spmd_array *x, const int *devices, int n, spmd_array **out)
{
    if (out)
        *out = NULL;
    SPMD_CHECK(refuse_unreduced(x, "spmd_replicate"));
    return spmd__error_in(spmd_replicate_checked(x, devices, n, out), "spmd_replicate");
}
