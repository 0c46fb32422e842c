/* The sweeps of multihost.h, compat.h and pmap.h (test_api_sweep). */
#define _POSIX_C_SOURCE 200809L

#include "sweep.h"

/* ==== multihost.h ============================================================================= */

static void sweep_shape_conversion(int to_global)
{
    int64_t out[SPMD_MAX_RANK + 1];
#define CONVERT(mesh, spec, ndim, in, o)                                                           \
    (to_global ? spmd_local_to_global_shape(mesh, spec, ndim, in, o)                               \
               : spmd_global_to_local_shape(mesh, spec, ndim, in, o))
    fixture_up();
    BAD_KEEP(INV, out, CONVERT(NULL, P_XY, 2, S44, out));
    BAD_KEEP(INV, out, CONVERT(DEAD_MESH, P_XY, 2, S44, out));
    BAD_KEEP(INV, out, CONVERT(M, NULL, 2, S44, out));
    BAD_KEEP(INV, out, CONVERT(M, DEAD_SPEC, 2, S44, out));
    BAD_KEEP2(INV, SHP, out, CONVERT(M, P_XY, -1, S44, out));
    BAD_KEEP2(INV, SHP, out, CONVERT(M, P_XY, SPMD_MAX_RANK + 1, S17, out));
    BAD_KEEP2(INV, SHP, out, CONVERT(M, P_XY, INT_MAX, S44, out));
    BAD_KEEP2(INV, SHP, out, CONVERT(M, P_XY, INT_MIN, S44, out));
    BAD_KEEP(INV, out, CONVERT(M, P_XY, 2, NULL, out));
    BAD(INV, CONVERT(M, P_XY, 2, S44, NULL));
    BAD_KEEP(SPC, out, CONVERT(M, P_XY, 1, S4, out));
    BAD_KEEP(SPC, out, CONVERT(M, P_Z, 1, S4, out));
    BAD_KEEP(SHP, out, CONVERT(M, P_XY, 2, S4N, out));
    BAD_KEEP(SHP, out, CONVERT(M, P_XY, 2, SMIN, out));
#undef CONVERT
}

void sweep_spmd_local_to_global_shape(void) { sweep_shape_conversion(1); }
void sweep_spmd_global_to_local_shape(void) { sweep_shape_conversion(0); }

void sweep_spmd_host_local_to_global(void)
{
    fixture_up();
    BAD(INV, spmd_host_local_to_global(A, M, P_XY, NULL));
    BAD_OUT(spmd_array, INV, spmd_host_local_to_global(NULL, M, P_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_host_local_to_global(DEAD_ARRAY, M, P_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_host_local_to_global(DEL, M, P_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_host_local_to_global(A, NULL, P_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_host_local_to_global(A, DEAD_MESH, P_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_host_local_to_global(A, M, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_host_local_to_global(A, M, DEAD_SPEC, &out));
    BAD_OUT(spmd_array, SPC, spmd_host_local_to_global(A, M, P_Z, &out));
    BAD_OUT(spmd_array, SPC, spmd_host_local_to_global(A_SCALAR, M, P_X, &out));
    BAD_OUT(spmd_array, SHP, spmd_host_local_to_global(A_ODD, M, P_XY, &out));
}

void sweep_spmd_global_to_host_local(void)
{
    fixture_up();
    BAD(INV, spmd_global_to_host_local(A, M, P_XY, NULL));
    BAD_OUT(spmd_array, INV, spmd_global_to_host_local(NULL, M, P_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_global_to_host_local(DEAD_ARRAY, M, P_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_global_to_host_local(DEL, M, P_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_global_to_host_local(A, NULL, P_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_global_to_host_local(A, DEAD_MESH, P_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_global_to_host_local(A, M, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_global_to_host_local(A, M, DEAD_SPEC, &out));
    BAD_OUT(spmd_array, SPC, spmd_global_to_host_local(A, M, P_Z, &out));
    /* An array in another layout is no bad input: fully addressable (every array in one
     * process), it comes back unchanged, as in JAX; spanning processes, it is resharded. */
}

void sweep_spmd_process_allgather_shape(void)
{
    struct {
        int ndim;
        int64_t shape[SPMD_MAX_RANK + 1];
    } r;
    fixture_up();
    BAD_KEEP(INV, r, spmd_process_allgather_shape(NULL, 0, &r.ndim, r.shape));
    BAD_KEEP(INV, r, spmd_process_allgather_shape(DEAD_ARRAY, 0, &r.ndim, r.shape));
    BAD_KEEP(INV, r, spmd_process_allgather_shape(DEL, 0, &r.ndim, r.shape));
    BAD_KEEP(INV, r, spmd_process_allgather_shape(A, 0, NULL, r.shape));
    BAD_KEEP(INV, r, spmd_process_allgather_shape(A, 0, &r.ndim, NULL));
    BAD_KEEP(SHP, r, spmd_process_allgather_shape(A_RANK16, 0, &r.ndim, r.shape));
}

static void sweep_gather(int root_arg)
{
    float buf[64];
#define GATHER(x, root, host, bytes)                                                               \
    (root_arg ? spmd_process_gather(x, root, 0, host, bytes)                                       \
              : spmd_process_allgather(x, 0, host, bytes))
    fixture_up();
    BAD_KEEP(INV, buf, GATHER(NULL, 0, buf, sizeof buf));
    BAD_KEEP(INV, buf, GATHER(DEAD_ARRAY, 0, buf, sizeof buf));
    BAD_KEEP(INV, buf, GATHER(DEL, 0, buf, sizeof buf));
    BAD(INV, GATHER(A, 0, NULL, sizeof buf));
    BAD_KEEP(INV, buf, GATHER(A, 0, buf, 0));
    BAD_KEEP(INV, buf, GATHER(A, 0, buf, 63)); /* (1, 4, 4) float32: 64 bytes */
    BAD_KEEP(SHP, buf, GATHER(A_RANK16, 0, buf, sizeof buf));
    if (root_arg) {
        BAD_KEEP(INV, buf, GATHER(A, -1, buf, sizeof buf));
        BAD_KEEP(INV, buf, GATHER(A, 1, buf, sizeof buf));
        BAD_KEEP(INV, buf, GATHER(A, INT_MAX, buf, sizeof buf));
        BAD_KEEP(INV, buf, GATHER(A, INT_MIN, buf, sizeof buf));
    }
#undef GATHER
}

void sweep_spmd_process_allgather(void) { sweep_gather(0); }
void sweep_spmd_process_gather(void) { sweep_gather(1); }

void sweep_spmd_broadcast_one_to_all(void)
{
    float buf[4];
    BAD_KEEP(INV, buf, spmd_broadcast_one_to_all(buf, sizeof buf, 0));
    runtime_up();
    BAD(INV, spmd_broadcast_one_to_all(NULL, sizeof buf, 0));
    BAD_KEEP(INV, buf, spmd_broadcast_one_to_all(buf, sizeof buf, -1));
    BAD_KEEP(INV, buf, spmd_broadcast_one_to_all(buf, sizeof buf, 1));
    BAD_KEEP(INV, buf, spmd_broadcast_one_to_all(buf, sizeof buf, INT_MAX));
    BAD_KEEP(INV, buf, spmd_broadcast_one_to_all(buf, sizeof buf, INT_MIN));
}

void sweep_spmd_broadcast_array_one_to_all(void)
{
    float buf[16];
    fixture_up();
    BAD_KEEP(INV, buf, spmd_broadcast_array_one_to_all(NULL, 0, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_broadcast_array_one_to_all(DEAD_ARRAY, 0, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_broadcast_array_one_to_all(DEL, 0, buf, sizeof buf));
    BAD(INV, spmd_broadcast_array_one_to_all(A, 0, NULL, sizeof buf));
    BAD_KEEP(INV, buf, spmd_broadcast_array_one_to_all(A, 0, buf, 0));
    BAD_KEEP(INV, buf, spmd_broadcast_array_one_to_all(A, 0, buf, sizeof buf - 1));
    BAD_KEEP(INV, buf, spmd_broadcast_array_one_to_all(A, -1, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_broadcast_array_one_to_all(A, 1, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_broadcast_array_one_to_all(A, INT_MAX, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_broadcast_array_one_to_all(A, INT_MIN, buf, sizeof buf));
}

void sweep_spmd_sync_global_devices(void)
{
    BAD(INV, spmd_sync_global_devices("before"));
    runtime_up();
    BAD(INV, spmd_sync_global_devices(NULL));
}

void sweep_spmd_assert_equal(void)
{
    fixture_up();
    BAD(INV, spmd_assert_equal(NULL, "x"));
    BAD(INV, spmd_assert_equal(DEAD_ARRAY, "x"));
    BAD(INV, spmd_assert_equal(DEL, "x"));
    BAD(INV, spmd_assert_equal(NULL, NULL));
}

/* ==== compat.h ================================================================================ */

static const void *const SHARDS[8] = {HOST, HOST, HOST, HOST, HOST, HOST, HOST, HOST};
static const void *const SHARDS_NULL[4] = {HOST, HOST, NULL, HOST};

void sweep_spmd_device_put_sharded(void)
{
    const int64_t neg[1] = {-1}, zero[1] = {0};
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS, 1, S4, F32, DEV4, &out));
    fixture_up();
    BAD(INV, spmd_device_put_sharded(4, SHARDS, 1, S4, F32, DEV4, NULL));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, NULL, 1, S4, F32, DEV4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS, 1, S4, F32, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(0, SHARDS, 1, S4, F32, DEV4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(-1, SHARDS, 1, S4, F32, DEV4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(INT_MIN, SHARDS, 1, S4, F32, DEV4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(5, SHARDS, 1, S4, F32, DEV_LONG, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(INT_MAX, SHARDS, 1, S4, F32, DEV_LONG, &out));
    BAD_OUT2(spmd_array, INV, SHP, spmd_device_put_sharded(4, SHARDS, -1, S4, F32, DEV4, &out));
    BAD_OUT2(spmd_array, INV, SHP,
             spmd_device_put_sharded(4, SHARDS, SPMD_MAX_RANK, S17, F32, DEV4, &out));
    BAD_OUT2(spmd_array, INV, SHP,
             spmd_device_put_sharded(4, SHARDS, INT_MAX, S4, F32, DEV4, &out));
    BAD_OUT2(spmd_array, INV, SHP,
             spmd_device_put_sharded(4, SHARDS, INT_MIN, S4, F32, DEV4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS, 1, NULL, F32, DEV4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS, 1, S4, COUNT, DEV4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS, 1, S4, MINUS1, DEV4, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put_sharded(4, SHARDS, 1, neg, F32, DEV4, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put_sharded(4, SHARDS, 1, zero, F32, DEV4, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put_sharded(4, SHARDS, 1, S2P62, F32, DEV4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS_NULL, 1, S4, F32, DEV4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS, 1, S4, F32, DEV_NEG, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS, 1, S4, F32, DEV_BIG, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS, 1, S4, F32, DEV_MAX, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS, 1, S4, F32, DEV_MIN, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_sharded(4, SHARDS, 1, S4, F32, DEV_DUP, &out));
}

void sweep_spmd_device_put_replicated(void)
{
    const int64_t neg[1] = {-1}, zero[1] = {0};
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV4, 4, &out));
    fixture_up();
    BAD(INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV4, 4, NULL));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(NULL, 1, S4, F32, DEV4, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, NULL, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV4, 0, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV4, -1, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV4, INT_MIN, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV_LONG, 5, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV_LONG, INT_MAX, &out));
    BAD_OUT2(spmd_array, INV, SHP, spmd_device_put_replicated(HOST, -1, S4, F32, DEV4, 4, &out));
    BAD_OUT2(spmd_array, INV, SHP,
             spmd_device_put_replicated(HOST, SPMD_MAX_RANK, S17, F32, DEV4, 4, &out));
    BAD_OUT2(spmd_array, INV, SHP,
             spmd_device_put_replicated(HOST, INT_MAX, S4, F32, DEV4, 4, &out));
    BAD_OUT2(spmd_array, INV, SHP,
             spmd_device_put_replicated(HOST, INT_MIN, S4, F32, DEV4, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, NULL, F32, DEV4, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, COUNT, DEV4, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, MINUS1, DEV4, 4, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put_replicated(HOST, 1, neg, F32, DEV4, 4, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put_replicated(HOST, 1, zero, F32, DEV4, 4, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put_replicated(HOST, 1, S2P62, F32, DEV4, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV_NEG, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV_BIG, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV_MAX, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV_MIN, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put_replicated(HOST, 1, S4, F32, DEV_DUP, 4, &out));
}

void sweep_spmd_unreplicate(void)
{
    fixture_up();
    BAD(INV, spmd_unreplicate(A, NULL));
    BAD_OUT(spmd_array, INV, spmd_unreplicate(NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_unreplicate(DEAD_ARRAY, &out));
    BAD_OUT(spmd_array, INV, spmd_unreplicate(DEL, &out));
    BAD_OUT(spmd_array, SHP, spmd_unreplicate(A_SCALAR, &out));
    BAD_OUT(spmd_array, SHP, spmd_unreplicate(A, &out)); /* not the stacked layout */
    BAD_OUT(spmd_array, SHP, spmd_unreplicate(A_X, &out));
}

void sweep_spmd_unreplicate_to_host(void)
{
    float buf[16];
    spmd_array *stacked = NULL;
    fixture_up();
    SETUP(spmd_device_put_replicated(HOST, 1, S4, F32, DEV4, 4, &stacked)); /* (4, 4) */
    BAD(INV, spmd_unreplicate_to_host(stacked, NULL, sizeof buf));
    BAD_KEEP(INV, buf, spmd_unreplicate_to_host(NULL, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_unreplicate_to_host(DEAD_ARRAY, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_unreplicate_to_host(DEL, buf, sizeof buf));
    BAD_KEEP(SHP, buf, spmd_unreplicate_to_host(A_SCALAR, buf, sizeof buf));
    BAD_KEEP(SHP, buf, spmd_unreplicate_to_host(A, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_unreplicate_to_host(stacked, buf, 0));
    BAD_KEEP(INV, buf, spmd_unreplicate_to_host(stacked, buf, 15)); /* one slice: 16 bytes */
    spmd_array_destroy(stacked);
}

void sweep_spmd_replicate(void)
{
    fixture_up();
    BAD(INV, spmd_replicate(A, DEV4, 4, NULL));
    BAD_OUT(spmd_array, INV, spmd_replicate(NULL, DEV4, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(DEAD_ARRAY, DEV4, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(DEL, DEV4, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(A, NULL, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(A, DEV4, 0, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(A, DEV4, -1, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(A, DEV4, INT_MIN, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(A, DEV_LONG, 5, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(A, DEV_LONG, INT_MAX, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(A, DEV_NEG, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(A, DEV_MAX, 4, &out));
    BAD_OUT(spmd_array, INV, spmd_replicate(A, DEV_DUP, 4, &out));
    BAD_OUT2(spmd_array, INV, SHP, spmd_replicate(A_RANK16, DEV4, 4, &out)); /* rank 17 result */
}

/* ==== pmap.h ================================================================================== */

void sweep_spmd_pmap(void)
{
    spmd_array *outs[1];
    /* A is (4, 4): mapping axis 0 over the 4 devices gives per-device (4,) inputs and outputs */
    const spmd_out_desc od[1] = {{1, {4}, SPMD_DTYPE_F32}};
    const spmd_out_desc od_neg[1] = {{-1, {4}, SPMD_DTYPE_F32}};
    const spmd_out_desc od_big[1] = {{SPMD_MAX_RANK, {4}, SPMD_DTYPE_F32}};
    const spmd_out_desc od_max[1] = {{INT_MAX, {4}, SPMD_DTYPE_F32}};
    const spmd_out_desc od_min[1] = {{INT_MIN, {4}, SPMD_DTYPE_F32}};
    const spmd_out_desc od_count[1] = {{1, {4}, SPMD_DTYPE_COUNT}};
    const spmd_out_desc od_minus1[1] = {{1, {4}, (spmd_dtype)-1}};
    const spmd_out_desc od_zero[1] = {{1, {0}, SPMD_DTYPE_F32}};
    const int ax0[2] = {0, 0}, ax2[1] = {2}, ax_max[1] = {INT_MAX}, ax_min1[1] = {INT_MIN + 1};
    const int ax_none[1] = {SPMD_NONE}, ax_neg3[1] = {-3};
    char long_name[SPMD_MAX_AXIS_NAME + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    spmd_pmap_options v0 = SPMD_PMAP_OPTIONS_INIT, strict = SPMD_PMAP_OPTIONS_INIT;
    v0.version = 0;
    strict.strict = 1;
    spmd_array *in[2] = {NULL, NULL}; /* set once the fixture exists */
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    fixture_up();
    in[0] = A;
    spmd_array *in_null[1] = {NULL}, *in_dead[1] = {DEAD_ARRAY}, *in_del[1] = {DEL};
    spmd_array *in_mixed[2] = {A, A_ODD}, *in_scalar[1] = {A_SCALAR};
    BAD_OUTS(INV, outs, spmd_pmap(NULL, NULL, 1, in, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 0, in, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, -1, in, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 65, in, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, INT_MAX, in, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, INT_MIN, in, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD(INV, spmd_pmap(noop_fn, NULL, 1, in, NULL, -1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD(INV, spmd_pmap(noop_fn, NULL, 1, in, NULL, 65, od, NULL, "i", NULL, 0, NULL, outs));
    BAD(INV, spmd_pmap(noop_fn, NULL, 1, in, NULL, INT_MAX, od, NULL, "i", NULL, 0, NULL, outs));
    BAD(INV, spmd_pmap(noop_fn, NULL, 1, in, NULL, INT_MIN, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, NULL, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in_null, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in_dead, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in_del, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, NULL, NULL, "i", NULL, 0, NULL, outs));
    BAD(INV, spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", NULL, 0, NULL, NULL));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, NULL, NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, ",", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "a,b,c,d,e,f,g,h,i", NULL, 0, NULL,
                       outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, long_name, NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i,i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "None", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, ax2, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, ax_neg3, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, ax_max, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, ax_min1, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, ax_none, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in_scalar, NULL, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 2, in_mixed, ax0, 1, od, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, ax2, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, ax_max, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, ax_min1, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od_neg, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od_big, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od_max, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od_min, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od_count, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od_minus1, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(SHP, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od_zero, NULL, "i", NULL, 0, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", DEV4, 3, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", DEV4, -1, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", DEV4, INT_MAX, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", DEV4, INT_MIN, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", DEV_NEG, 4, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", DEV_BIG, 4, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", DEV_MAX, 4, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", DEV_DUP, 4, NULL, outs));
    BAD_OUTS(INV, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", NULL, 0, &v0, outs));
    BAD_OUTS(INC, outs,
             spmd_pmap(noop_fn, NULL, 1, in, NULL, 1, od, NULL, "i", NULL, 0, &strict, outs));
}

void sweep_spmd_pmap_clear_cache(void)
{
    Q_VOID(spmd_pmap_clear_cache()); /* before spmd_init */
    Q_VOID(spmd_pmap_clear_cache()); /* twice */
}
