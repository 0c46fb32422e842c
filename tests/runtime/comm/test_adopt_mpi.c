/* libspmd inside an MPI program that owns MPI: adopting MPI_COMM_WORLD, then running on a
 * caller's sub-communicator. libspmd must never finalize an MPI it did not start. */
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

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adopt_world),
        cmocka_unit_test(test_sub_communicator),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    int any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}
