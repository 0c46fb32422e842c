/* The process layer over MPI: libspmd runs on a private duplicate of the chosen communicator,
 * with errors returned (MPI_ERRORS_RETURN) rather than aborting the job. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include <spmd/mpi.h>

#include "runtime/check.h"
#include "runtime/process.h"
#include "runtime/runtime_impl.h"

static MPI_Comm comm = MPI_COMM_NULL;
static int node_count = 1;
static int initialized_mpi; /* spmd_init called MPI_Init_thread, so it finalizes MPI too */
static int thread_multiple;

static spmd_status mpi_error(int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error code %d", rc);
    return SPMD_ERROR(SPMD_ERR_DISTRIBUTED, "%s failed: %s", what, text);
}

#define MPI_REQUIRE(call, what)                                                                    \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS)                                                                    \
            return mpi_error(rc_, (what));                                                         \
    } while (0)

static spmd_status use_comm(MPI_Comm base, int *index, int *count)
{
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    thread_multiple = level >= MPI_THREAD_MULTIPLE;
    MPI_REQUIRE(MPI_Comm_dup(base, &comm), "MPI_Comm_dup");
    MPI_REQUIRE(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    MPI_REQUIRE(MPI_Comm_rank(comm, index), "MPI_Comm_rank");
    MPI_REQUIRE(MPI_Comm_size(comm, count), "MPI_Comm_size");
    MPI_Comm node;
    MPI_REQUIRE(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
                "MPI_Comm_split_type");
    MPI_Comm_size(node, &node_count);
    MPI_Comm_free(&node);
    return SPMD_OK;
}

spmd_status spmd__proc_init(int use_mpi, const void *user_comm, int *index, int *count)
{
    int mpi_up = 0, mpi_down = 0;
    MPI_Initialized(&mpi_up);
    MPI_Finalized(&mpi_down);
    if (user_comm) {
        SPMD_REQUIRE(mpi_up && !mpi_down, SPMD_ERR_INVALID_ARGUMENT,
                     "spmd_init_mpi: MPI is not initialized; call MPI_Init_thread first, or use "
                     "spmd_init to let libspmd initialize MPI");
        return use_comm(*(const MPI_Comm *)user_comm, index, count);
    }
    if (mpi_up && !mpi_down && use_mpi != 0)
        return use_comm(MPI_COMM_WORLD, index, count); /* adopt the caller's MPI */
    const char *launcher = NULL;
    int launched = spmd__launcher_process_count(&launcher);
    if (use_mpi == 0 || (use_mpi == SPMD_AUTO && launched == 0)) {
        *index = 0;
        *count = 1;
        return SPMD_OK;
    }
    SPMD_REQUIRE(!mpi_down, SPMD_ERR_DISTRIBUTED,
                 "spmd_init: MPI was already finalized in this process and cannot start again; "
                 "call spmd_init once per process, or keep one spmd_init reference alive");
    int provided = MPI_THREAD_SINGLE;
    MPI_REQUIRE(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    initialized_mpi = 1;
    spmd_status st = use_comm(MPI_COMM_WORLD, index, count);
    if (st != SPMD_OK)
        spmd__proc_finalize();
    return st;
}

spmd_status spmd__proc_finalize(void)
{
    if (comm != MPI_COMM_NULL)
        MPI_Comm_free(&comm);
    node_count = 1;
    if (initialized_mpi) {
        initialized_mpi = 0;
        MPI_REQUIRE(MPI_Finalize(), "MPI_Finalize");
    }
    return SPMD_OK;
}

spmd_status spmd__proc_allgather(const void *send, void *recv, size_t bytes)
{
    if (comm == MPI_COMM_NULL) {
        memcpy(recv, send, bytes);
        return SPMD_OK;
    }
    MPI_REQUIRE(MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, comm),
                "MPI_Allgather");
    return SPMD_OK;
}

int spmd__proc_node_count(void) { return node_count; }

int spmd__mpi_thread_multiple(void) { return thread_multiple; }

static spmd_status spmd_init_mpi_checked(MPI_Comm user, const spmd_init_options *opts)
{
    SPMD_REQUIRE(user != MPI_COMM_NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_init_mpi: comm is MPI_COMM_NULL; pass the communicator to run on");
    return spmd__runtime_init(opts, &user);
}

MPI_Comm spmd_mpi_comm(void) { return comm; }

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_init_mpi(MPI_Comm user, const spmd_init_options *opts)
{
    return spmd__error_in(spmd_init_mpi_checked(user, opts), "spmd_init_mpi");
}
