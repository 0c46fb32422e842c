/* The sweeps of array.h and reshard.h (test_api_sweep): making, querying and moving arrays. */
#define _POSIX_C_SOURCE 200809L

#include "sweep.h"

/* ==== array.h ================================================================================= */

void sweep_spmd_device_put(void)
{
    fixture_up();
    BAD_OUT(spmd_array, INV, spmd_device_put(NULL, 2, S44, F32, S_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put(HOST, 2, NULL, F32, S_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put(HOST, 2, S44, F32, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put(HOST, 2, S44, F32, DEAD_SHARDING, &out));
    BAD(INV, spmd_device_put(HOST, 2, S44, F32, S_XY, NULL));
    BAD_OUT(spmd_array, INV, spmd_device_put(HOST, 2, S44, COUNT, S_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put(HOST, 2, S44, MINUS1, S_XY, &out));
    BAD_OUT(spmd_array, INV, spmd_device_put(HOST, 2, S44, (spmd_dtype)INT_MAX, S_XY, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, -1, S44, F32, S_REP, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, SPMD_MAX_RANK + 1, S17, F32, S_REP, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, INT_MAX, S44, F32, S_REP, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, INT_MIN, S44, F32, S_REP, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, 1, S4, F32, S_XY, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, 2, S04, F32, S_XY, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, 2, S4N, F32, S_XY, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, 2, SMIN, F32, S_REP, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, 2, S34, F32, S_XY, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, 1, S2P62, F32, S_REP, &out));
    BAD_OUT(spmd_array, SHP, spmd_device_put(HOST, 2, SMAX, F32, S_REP, &out));
}

void sweep_spmd_array_from_process_local_data(void)
{
    fixture_up();
    BAD_OUT(spmd_array, INV,
            spmd_array_from_process_local_data(NULL, HOST, 2, S44, NULL, F32, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_process_local_data(DEAD_SHARDING, HOST, 2, S44, NULL, F32, &out));
    BAD(INV, spmd_array_from_process_local_data(S_XY, HOST, 2, S44, NULL, F32, NULL));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_process_local_data(S_XY, NULL, 2, S44, NULL, F32, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_process_local_data(S_XY, HOST, 2, NULL, NULL, F32, &out));
    BAD_OUT2(spmd_array, SHP, INV,
             spmd_array_from_process_local_data(S_XY, HOST, -1, S44, NULL, F32, &out));
    BAD_OUT2(
        spmd_array, SHP, INV,
        spmd_array_from_process_local_data(S_REP, HOST, SPMD_MAX_RANK + 1, S17, NULL, F32, &out));
    BAD_OUT2(spmd_array, SHP, INV,
             spmd_array_from_process_local_data(S_XY, HOST, INT_MAX, S44, NULL, F32, &out));
    BAD_OUT2(spmd_array, SHP, INV,
             spmd_array_from_process_local_data(S_XY, HOST, INT_MIN, S44, NULL, F32, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_process_local_data(S_XY, HOST, 2, S44, NULL, COUNT, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_process_local_data(S_XY, HOST, 2, S44, NULL, MINUS1, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_process_local_data(S_XY, HOST, 2, S04, NULL, F32, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_process_local_data(S_XY, HOST, 2, S4N, NULL, F32, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_process_local_data(S_XY, HOST, 2, SMIN, NULL, F32, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_process_local_data(S_XY, HOST, 2, S34, NULL, F32, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_process_local_data(S_XY, HOST, 1, S4, NULL, F32, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_process_local_data(S_XY, HOST, 2, S44, S34, F32, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_process_local_data(S_XY, HOST, 2, S44, SMIN, F32, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_process_local_data(S_XY, HOST, 2, S24, S44, F32, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_process_local_data(S_REP, HOST, 2, S44, SMAX, F32, &out));
}

void sweep_spmd_array_from_single_device_arrays(void)
{
    fixture_up();
    spmd_array *i32 = NULL;
    SETUP(spmd_array_create_on_device(1, HOST, 2, S22, SPMD_DTYPE_I32, &i32));
    spmd_array *const *sd = SINGLE;
    spmd_array *with_null[4] = {SINGLE[0], SINGLE[1], NULL, SINGLE[3]};
    spmd_array *with_dead[4] = {SINGLE[0], DEAD_ARRAY, SINGLE[2], SINGLE[3]};
    spmd_array *with_deleted[4] = {SINGLE[0], SINGLE[1], SINGLE[2], DEL};
    spmd_array *twice[4] = {SINGLE[0], SINGLE[0], SINGLE[2], SINGLE[3]};
    spmd_array *multi[4] = {A, SINGLE[1], SINGLE[2], SINGLE[3]};
    spmd_array *mixed[4] = {SINGLE[0], i32, SINGLE[2], SINGLE[3]};
    spmd_array *wrong_device[2] = {SINGLE[0], SINGLE[2]};
    const int64_t s42[2] = {4, 2}, s84[2] = {8, 4};
    BAD(INV, spmd_array_from_single_device_arrays(2, S44, F32, S_XY, 4, sd, NULL));
    BAD_OUT(spmd_array, INV, spmd_array_from_single_device_arrays(2, S44, F32, NULL, 4, sd, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, F32, DEAD_SHARDING, 4, sd, &out));
    BAD_OUT(spmd_array, INV, spmd_array_from_single_device_arrays(2, S44, F32, S_XY, 3, sd, &out));
    BAD_OUT(spmd_array, INV, spmd_array_from_single_device_arrays(2, S44, F32, S_XY, 5, sd, &out));
    BAD_OUT(spmd_array, INV, spmd_array_from_single_device_arrays(2, S44, F32, S_XY, -1, sd, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, F32, S_XY, INT_MAX, sd, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, F32, S_XY, INT_MIN, sd, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, F32, S_XY, 4, NULL, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, F32, S_XY, 4, with_null, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, F32, S_XY, 4, with_dead, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, F32, S_XY, 4, with_deleted, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, F32, S_XY, 4, twice, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, F32, S_XY, 4, multi, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, F32, S_XY, 4, mixed, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, SPMD_DTYPE_I32, S_XY, 4, sd, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, COUNT, S_XY, 4, sd, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, S44, MINUS1, S_XY, 4, sd, &out));
    BAD_OUT(spmd_array, INV, spmd_array_from_single_device_arrays(2, NULL, F32, S_XY, 4, sd, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_from_single_device_arrays(-1, S44, F32, S_XY, 4, sd, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_single_device_arrays(SPMD_MAX_RANK + 1, S17, F32, S_REP, 4, sd, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_single_device_arrays(INT_MIN, S44, F32, S_XY, 4, sd, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_from_single_device_arrays(1, S4, F32, S_XY, 4, sd, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_from_single_device_arrays(2, S04, F32, S_XY, 4, sd, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_from_single_device_arrays(2, s84, F32, S_XY, 4, sd, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_single_device_arrays(2, s42, F32, S_SUB, 2, wrong_device, &out));
    spmd_array_destroy(i32);
}

static spmd_status fill_callback(const spmd_box *index, void *dst, void *user)
{
    (void)user;
    int64_t n = 1;
    for (int j = 0; j < index->ndim; j++)
        n *= index->stop[j] - index->start[j];
    memset(dst, 0, (size_t)n * sizeof(float));
    return SPMD_OK;
}

static spmd_status silent_failing_callback(const spmd_box *index, void *dst, void *user)
{
    (void)index;
    (void)dst;
    (void)user;
    return SPMD_ERR_INVALID_ARGUMENT; /* without a message of its own */
}

void sweep_spmd_array_random(void)
{
    fixture_up();
    const int64_t neg[2] = {-4, 4};
    BAD(INV, spmd_array_random(2, S44, F32, S_XY, 1, SPMD_RANDOM_UNIFORM, NULL));
    BAD_OUT(spmd_array, INV, spmd_array_random(2, S44, F32, NULL, 1, SPMD_RANDOM_UNIFORM, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_random(2, S44, F32, DEAD_SHARDING, 1, SPMD_RANDOM_UNIFORM, &out));
    BAD_OUT(spmd_array, UNS,
            spmd_array_random(2, S44, SPMD_DTYPE_I32, S_XY, 1, SPMD_RANDOM_UNIFORM, &out));
    BAD_OUT(spmd_array, UNS, spmd_array_random(2, S44, COUNT, S_XY, 1, SPMD_RANDOM_UNIFORM, &out));
    BAD_OUT(spmd_array, INV, spmd_array_random(2, S44, F32, S_XY, 1, 7, &out));
    BAD_OUT(spmd_array, INV, spmd_array_random(2, NULL, F32, S_XY, 1, SPMD_RANDOM_UNIFORM, &out));
    BAD_OUT(spmd_array, INV, spmd_array_random(2, neg, F32, S_XY, 1, SPMD_RANDOM_UNIFORM, &out));
    BAD_OUT(spmd_array, INV, spmd_array_random(-1, S44, F32, S_XY, 1, SPMD_RANDOM_UNIFORM, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_random(SPMD_MAX_RANK + 1, S17, F32, S_REP, 1, SPMD_RANDOM_UNIFORM, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_random(2, S34, F32, S_XY, 1, SPMD_RANDOM_UNIFORM, &out));
}

void sweep_spmd_array_from_callback(void)
{
    fixture_up();
    BAD_OUT(spmd_array, INV, spmd_array_from_callback(2, S44, F32, S_XY, NULL, NULL, &out));
    BAD(INV, spmd_array_from_callback(2, S44, F32, S_XY, fill_callback, NULL, NULL));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_callback(2, S44, F32, NULL, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_callback(2, S44, F32, DEAD_SHARDING, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_callback(2, S44, COUNT, S_XY, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_callback(2, S44, MINUS1, S_XY, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_callback(-1, S44, F32, S_REP, fill_callback, NULL, &out));
    BAD_OUT(
        spmd_array, SHP,
        spmd_array_from_callback(SPMD_MAX_RANK + 1, S17, F32, S_REP, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_callback(INT_MAX, S44, F32, S_REP, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_callback(INT_MIN, S44, F32, S_REP, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_callback(2, NULL, F32, S_XY, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_from_callback(1, S4, F32, S_XY, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_callback(2, S04, F32, S_XY, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_callback(2, S34, F32, S_XY, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_from_callback(1, S2P62, F32, S_REP, fill_callback, NULL, &out));
    BAD_OUT(spmd_array, INV,
            spmd_array_from_callback(2, S44, F32, S_XY, silent_failing_callback, NULL, &out));
}

void sweep_spmd_array_create_on_device(void)
{
    BAD_OUT(spmd_array, INV, spmd_array_create_on_device(0, HOST, 2, S22, F32, &out));
    fixture_up();
    BAD(INV, spmd_array_create_on_device(0, HOST, 2, S22, F32, NULL));
    BAD_OUT(spmd_array, INV, spmd_array_create_on_device(-1, HOST, 2, S22, F32, &out));
    BAD_OUT(spmd_array, INV, spmd_array_create_on_device(NDEV, HOST, 2, S22, F32, &out));
    BAD_OUT(spmd_array, INV, spmd_array_create_on_device(INT_MAX, HOST, 2, S22, F32, &out));
    BAD_OUT(spmd_array, INV, spmd_array_create_on_device(INT_MIN, HOST, 2, S22, F32, &out));
    BAD_OUT(spmd_array, INV, spmd_array_create_on_device(0, NULL, 2, S22, F32, &out));
    BAD_OUT(spmd_array, INV, spmd_array_create_on_device(0, HOST, 2, NULL, F32, &out));
    BAD_OUT(spmd_array, INV, spmd_array_create_on_device(0, HOST, 2, S22, COUNT, &out));
    BAD_OUT(spmd_array, INV, spmd_array_create_on_device(0, HOST, 2, S22, MINUS1, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_create_on_device(0, HOST, -1, S22, F32, &out));
    BAD_OUT(spmd_array, SHP,
            spmd_array_create_on_device(0, HOST, SPMD_MAX_RANK + 1, S17, F32, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_create_on_device(0, HOST, INT_MAX, S22, F32, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_create_on_device(0, HOST, INT_MIN, S22, F32, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_create_on_device(0, HOST, 2, S04, F32, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_create_on_device(0, HOST, 2, SMIN, F32, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_create_on_device(0, HOST, 1, S2P62, F32, &out));
}

void sweep_spmd_array_destroy(void)
{
    Q_VOID(spmd_array_destroy(NULL));
    Q_VOID(spmd_array_destroy(DEAD_ARRAY));
}

void sweep_spmd_array_ndim(void)
{
    Q_INT(-1, spmd_array_ndim(NULL));
    Q_INT(-1, spmd_array_ndim(DEAD_ARRAY));
}

void sweep_spmd_array_shape(void)
{
    Q_NULL(spmd_array_shape(NULL));
    Q_NULL(spmd_array_shape(DEAD_ARRAY));
}

void sweep_spmd_array_dtype(void)
{
    Q_INT(COUNT, spmd_array_dtype(NULL));
    Q_INT(COUNT, spmd_array_dtype(DEAD_ARRAY));
}

void sweep_spmd_array_size(void)
{
    Q_INT(0, spmd_array_size(NULL));
    Q_INT(0, spmd_array_size(DEAD_ARRAY));
}

void sweep_spmd_array_sharding(void)
{
    Q_NULL(spmd_array_sharding(NULL));
    Q_NULL(spmd_array_sharding(DEAD_ARRAY));
}

void sweep_spmd_array_is_fully_addressable(void)
{
    Q_INT(0, spmd_array_is_fully_addressable(NULL));
    Q_INT(0, spmd_array_is_fully_addressable(DEAD_ARRAY));
}

void sweep_spmd_array_num_shards(void)
{
    Q_INT(0, spmd_array_num_shards(NULL));
    Q_INT(0, spmd_array_num_shards(DEAD_ARRAY));
}

void sweep_spmd_array_shard(void)
{
    spmd_shard shard;
    fixture_up();
    BAD_KEEP(INV, shard, spmd_array_shard(NULL, 0, &shard));
    BAD_KEEP(INV, shard, spmd_array_shard(DEAD_ARRAY, 0, &shard));
    BAD_KEEP(INV, shard, spmd_array_shard(DEL, 0, &shard));
    BAD_KEEP(INV, shard, spmd_array_shard(A, -1, &shard));
    BAD_KEEP(INV, shard, spmd_array_shard(A, NDEV, &shard));
    BAD_KEEP(INV, shard, spmd_array_shard(A, INT_MAX, &shard));
    BAD_KEEP(INV, shard, spmd_array_shard(A, INT_MIN, &shard));
    BAD(INV, spmd_array_shard(A, 0, NULL));
}

void sweep_spmd_array_shard_to_host(void)
{
    float dst[64];
    fixture_up();
    BAD_KEEP(INV, dst, spmd_array_shard_to_host(NULL, 0, dst, sizeof dst));
    BAD_KEEP(INV, dst, spmd_array_shard_to_host(DEAD_ARRAY, 0, dst, sizeof dst));
    BAD_KEEP(INV, dst, spmd_array_shard_to_host(DEL, 0, dst, sizeof dst));
    BAD_KEEP(INV, dst, spmd_array_shard_to_host(A, -1, dst, sizeof dst));
    BAD_KEEP(INV, dst, spmd_array_shard_to_host(A, NDEV, dst, sizeof dst));
    BAD_KEEP(INV, dst, spmd_array_shard_to_host(A, INT_MAX, dst, sizeof dst));
    BAD_KEEP(INV, dst, spmd_array_shard_to_host(A, INT_MIN, dst, sizeof dst));
    BAD(INV, spmd_array_shard_to_host(A, 0, NULL, sizeof dst));
    BAD_KEEP(INV, dst, spmd_array_shard_to_host(A, 0, dst, 0));
    BAD_KEEP(INV, dst, spmd_array_shard_to_host(A, 0, dst, 15));
}

void sweep_spmd_array_shard_view(void)
{
    const int64_t s33[2] = {3, 3}, snn[2] = {-2, -2};
    fixture_up();
    BAD(INV, spmd_array_shard_view(A, 0, -1, NULL, NULL));
    BAD_OUT(spmd_array, INV, spmd_array_shard_view(NULL, 0, -1, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_array_shard_view(DEAD_ARRAY, 0, -1, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_array_shard_view(DEL, 0, -1, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_array_shard_view(A, -1, -1, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_array_shard_view(A, NDEV, -1, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_array_shard_view(A, INT_MAX, -1, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_array_shard_view(A, INT_MIN, -1, NULL, &out));
    BAD_OUT2(spmd_array, INV, SHP, spmd_array_shard_view(A, 0, SPMD_MAX_RANK + 1, S17, &out));
    BAD_OUT2(spmd_array, INV, SHP, spmd_array_shard_view(A, 0, INT_MAX, S22, &out));
    BAD_OUT(spmd_array, INV, spmd_array_shard_view(A, 0, 2, NULL, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_shard_view(A, 0, 2, s33, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_shard_view(A, 0, 2, snn, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_shard_view(A, 0, 2, S04, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_shard_view(A, 0, 2, SMIN, &out));
    BAD_OUT(spmd_array, SHP, spmd_array_shard_view(A, 0, 2, S2P32, &out));
}

void sweep_spmd_array_mark_stacked_replicas(void)
{
    Q_VOID(spmd_array_mark_stacked_replicas(NULL));
    Q_VOID(spmd_array_mark_stacked_replicas(DEAD_ARRAY));
}

void sweep_spmd_array_has_stacked_replicas(void)
{
    Q_INT(0, spmd_array_has_stacked_replicas(NULL));
    Q_INT(0, spmd_array_has_stacked_replicas(DEAD_ARRAY));
}

void sweep_spmd_array_to_host(void)
{
    float dst[64];
    fixture_up();
    BAD_KEEP(INV, dst, spmd_array_to_host(NULL, dst, sizeof dst));
    BAD_KEEP(INV, dst, spmd_array_to_host(DEAD_ARRAY, dst, sizeof dst));
    BAD_KEEP(INV, dst, spmd_array_to_host(DEL, dst, sizeof dst));
    BAD(INV, spmd_array_to_host(A, NULL, sizeof dst));
    BAD_KEEP(INV, dst, spmd_array_to_host(A, dst, 0));
    BAD_KEEP(INV, dst, spmd_array_to_host(A, dst, 63));
}

/* ==== reshard.h =============================================================================== */

void sweep_spmd_reshard(void)
{
    spmd_reshard_options v0 = SPMD_RESHARD_OPTIONS_INIT, v2 = SPMD_RESHARD_OPTIONS_INIT;
    v0.version = 0;
    v2.version = SPMD_RESHARD_OPTIONS_VERSION + 1;
    fixture_up();
    BAD(INV, spmd_reshard(A, S_X, NULL, NULL));
    BAD_OUT(spmd_array, INV, spmd_reshard(NULL, S_X, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_reshard(DEAD_ARRAY, S_X, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_reshard(DEL, S_X, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_reshard(A, NULL, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_reshard(A, DEAD_SHARDING, NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_reshard(A, S_X, &v0, &out));
    BAD_OUT(spmd_array, INV, spmd_reshard(A, S_X, &v2, &out));
    BAD_OUT(spmd_array, SHP, spmd_reshard(A_ODD, S_XY, NULL, &out));
    BAD_OUT(spmd_array, SHP, spmd_reshard(A_SCALAR, S_X, NULL, &out));
    BAD_OUT(spmd_array, SHP, spmd_reshard(A_RANK16, S_XY, NULL, &out));
}

void sweep_spmd_reshard_batch(void)
{
    spmd_reshard_options v0 = SPMD_RESHARD_OPTIONS_INIT, donate = SPMD_RESHARD_OPTIONS_INIT;
    v0.version = 0;
    donate.donate = 1;
    fixture_up();
    spmd_array *outs[2];
    spmd_array *xs[2] = {A, A_X}, *xs_null[2] = {A, NULL}, *xs_dead[2] = {DEAD_ARRAY, A_X};
    spmd_array *xs_del[2] = {A, DEL}, *xs_same[2] = {A, A}, *xs_odd[2] = {A, A_ODD};
    const spmd_sharding *to[2] = {S_X, S_XY}, *to_null[2] = {NULL, S_XY};
    const spmd_sharding *to_dead[2] = {S_X, DEAD_SHARDING}, *to_xy[2] = {S_XY, S_XY};
    BAD(INV, spmd_reshard_batch(-1, xs, to, NULL, outs));
    BAD(INV, spmd_reshard_batch(INT_MIN, xs, to, NULL, outs));
    BAD(INV, spmd_reshard_batch(1025, xs, to, NULL, outs));
    BAD(INV, spmd_reshard_batch(INT_MAX, xs, to, NULL, outs));
    BAD(INV, spmd_reshard_batch(2, xs, to, NULL, NULL));
    BAD_OUTS(INV, outs, spmd_reshard_batch(2, NULL, to, NULL, outs));
    BAD_OUTS(INV, outs, spmd_reshard_batch(2, xs, NULL, NULL, outs));
    BAD_OUTS(INV, outs, spmd_reshard_batch(2, xs_null, to, NULL, outs));
    BAD_OUTS(INV, outs, spmd_reshard_batch(2, xs, to_null, NULL, outs));
    BAD_OUTS(INV, outs, spmd_reshard_batch(2, xs_dead, to, NULL, outs));
    BAD_OUTS(INV, outs, spmd_reshard_batch(2, xs_del, to, NULL, outs));
    BAD_OUTS(INV, outs, spmd_reshard_batch(2, xs, to_dead, NULL, outs));
    BAD_OUTS(INV, outs, spmd_reshard_batch(2, xs, to, &v0, outs));
    BAD_OUTS(SHP, outs, spmd_reshard_batch(2, xs_odd, to_xy, NULL, outs));
    BAD_OUTS(INV, outs, spmd_reshard_batch(2, xs_same, to, &donate, outs)); /* last: donates */
}

void sweep_spmd_array_copy(void)
{
    fixture_up();
    BAD(INV, spmd_array_copy(A, NULL));
    BAD_OUT(spmd_array, INV, spmd_array_copy(NULL, &out));
    BAD_OUT(spmd_array, INV, spmd_array_copy(DEAD_ARRAY, &out));
    BAD_OUT(spmd_array, INV, spmd_array_copy(DEL, &out));
}
