/* libspmd inside an MPI program that owns MPI: adopting MPI_COMM_WORLD, then running on a
 * caller's sub-communicator, then sessions one after another, each started right after calls
 * that failed between processes ended the one before. libspmd must never finalize an MPI it did
 * not start. */
#include <stdlib.h>

#include <spmd/mpi.h>

#include "testutil.h"

static int world_rank, world_size;

static void test_adopt_world(void **state)
{
    (void)state;
    int d = atoi(getenv("SPMD_NUM_CPU_DEVICES"));
    assert_ok(spmd_init(NULL));
    assert_int_equal(spmd_process_index(), world_rank);
    assert_int_equal(spmd_process_count(), world_size);
    assert_int_equal(spmd_device_count(), world_size * d);
    int cmp = MPI_UNEQUAL;
    MPI_Comm_compare(spmd_mpi_comm(), MPI_COMM_WORLD, &cmp);
    assert_int_equal(cmp, MPI_CONGRUENT); /* a private duplicate */
    assert_ok(spmd_finalize());
    int finalized = 1, initialized = 0;
    MPI_Finalized(&finalized);
    MPI_Initialized(&initialized);
    assert_false(finalized);
    assert_true(initialized);
    assert_true(spmd_mpi_comm() == MPI_COMM_NULL);
}

static void test_sub_communicator(void **state)
{
    (void)state;
    int d = atoi(getenv("SPMD_NUM_CPU_DEVICES"));
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half);
    assert_ok(spmd_init_mpi(half, NULL));
    MPI_Comm_free(&half); /* libspmd keeps its own duplicate */
    int half_size = (world_size + 1 - world_rank % 2) / 2;
    assert_int_equal(spmd_process_index(), world_rank / 2);
    assert_int_equal(spmd_process_count(), half_size);
    assert_int_equal(spmd_device_count(), half_size * d);
    for (int id = 0; id < half_size * d; id++) {
        spmd_device_info info;
        assert_ok(spmd_device_get_info(id, &info));
        assert_int_equal(info.process_index, id / d);
    }
    assert_ok(spmd_finalize());
    assert_status(spmd_init_mpi(MPI_COMM_NULL, NULL), SPMD_ERR_INVALID_ARGUMENT, "MPI_COMM_NULL");
}

/* fn: a psum of 2 floats of (axis index + 1) per device, but 4 on the last process's devices
 * where *user says so (a mismatch); out[0] is the sum's first element. */
static spmd_status psum_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout;
    int mismatch = *(const int *)user && spmd_process_index() == spmd_process_count() - 1;
    int index = 0;
    spmd_status st = spmd_axis_index(ctx, "x", &index);
    int64_t shape[1] = {mismatch ? 4 : 2};
    spmd_block x, y;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &x);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &y);
    if (st == SPMD_OK)
        st = spmd_op_fill(ctx, &x, (double)index + 1);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &x, &y, "x");
    if (st == SPMD_OK)
        st = spmd_op_fill(ctx, &out[0], (double)((const float *)y.data)[0]);
    return st;
}

/* One shard_map of psum_body over all devices: its status, and the sum in *sum on success. */
static spmd_status run_psum(int mismatch, float *sum)
{
    int n = spmd_device_count();
    const char *name = "x";
    spmd_mesh *mesh = NULL;
    spmd_spec *replicated = NULL;
    assert_ok(spmd_mesh_create(1, &n, &name, NULL, 0, &mesh));
    assert_ok(spmd_spec_parse("", &replicated));
    spmd_out_desc desc = {1, {1}, SPMD_DTYPE_F32};
    spmd_array *out = NULL;
    spmd_status st = spmd_shard_map(mesh, psum_body, &mismatch, 0, NULL, NULL, 1, &desc,
                                    (const spmd_spec *const *)&replicated, NULL, &out);
    if (st == SPMD_OK)
        assert_ok(spmd_array_to_host(out, sum, sizeof *sum));
    spmd_array_destroy(out);
    spmd_spec_destroy(replicated);
    spmd_mesh_destroy(mesh); /* at once: a failed call's messages may still be on their way */
    return st;
}

/* spmd_device_put of n floats 1.5 k, replicated over a mesh of every device; the last process's
 * mesh has devices 0 and 1 swapped where `mismatch` (the processes' agreement on the host data
 * and the devices runs over libspmd's private communicator). Its status; on success the array
 * read back into got[0..n). */
static spmd_status put_replicated(int mismatch, float *got, int n)
{
    int *order = malloc((size_t)n * sizeof *order);
    float *host = malloc((size_t)n * sizeof *host);
    assert_non_null(order);
    assert_non_null(host);
    for (int k = 0; k < n; k++) {
        order[k] = k;
        host[k] = 1.5f * (float)k;
    }
    if (mismatch && spmd_process_index() == spmd_process_count() - 1)
        order[0] = 1, order[1] = 0;
    const char *name = "x";
    spmd_mesh *mesh = NULL;
    spmd_sharding *replicated = NULL;
    assert_ok(spmd_mesh_create(1, &n, &name, order, n, &mesh));
    assert_ok(spmd_sharding_create_parse(mesh, "", &replicated));
    int64_t shape[1] = {n};
    spmd_array *a = NULL;
    spmd_status st = spmd_device_put(host, 1, shape, SPMD_DTYPE_F32, replicated, &a);
    if (st == SPMD_OK)
        assert_ok(spmd_array_to_host(a, got, (size_t)n * sizeof *got));
    spmd_array_destroy(a);
    spmd_sharding_destroy(replicated);
    spmd_mesh_destroy(mesh);
    free(host);
    free(order);
    return st;
}

/* Sessions, each started right after a failed psum (over the mesh's communicator) and a failed
 * device_put (over libspmd's private one) ended the one before: what the others still send for
 * the failed calls never reaches the new session's, whose values are checked. libspmd leaves
 * both communicators unfreed then: Open MPI gives a freed communicator's context id to the next
 * one created, and delivers to it what still comes for the old one. */
static void test_session_after_failure(void **state)
{
    (void)state;
    for (int round = 0; round < 10; round++) {
        assert_ok(spmd_init(NULL));
        int n = spmd_device_count();
        float sum = 0, *got = calloc((size_t)n, sizeof *got);
        assert_non_null(got);
        assert_int_equal(run_psum(1, &sum), SPMD_ERR_COLLECTIVE_MISMATCH);
        assert_int_equal(put_replicated(1, got, n), SPMD_ERR_COLLECTIVE_MISMATCH);
        assert_ok(spmd_finalize()); /* at once: the others' messages may be on their way */
        assert_ok(spmd_init(NULL));
        spmd_status st = put_replicated(0, got, n);
        if (st != SPMD_OK)
            fail_msg("round %d: the device_put after the failed session gave %s: %s", round,
                     spmd_status_name(st), spmd_last_error());
        for (int k = 0; k < n; k++)
            assert_true(got[k] == 1.5f * (float)k);
        st = run_psum(0, &sum);
        if (st != SPMD_OK)
            fail_msg("round %d: the psum after the failed session gave %s: %s", round,
                     spmd_status_name(st), spmd_last_error());
        assert_true(sum == (float)(n * (n + 1) / 2));
        assert_ok(spmd_finalize());
        free(got);
    }
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adopt_world),
        cmocka_unit_test(test_sub_communicator),
        cmocka_unit_test(test_session_after_failure),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    int any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}
