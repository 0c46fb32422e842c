/* The process layer over MPI: libspmd runs on a private duplicate of the chosen communicator,
 * with errors returned (MPI_ERRORS_RETURN) rather than aborting the job. Start-up first checks,
 * with a deadline, that every process is there, over the chosen communicator itself (whose
 * error handler returns errors meanwhile): duplicating it would wait for a missing process
 * forever. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <spmd/mpi.h>

#include "runtime/base/check.h"
#include "runtime/devices/event.h"
#include "runtime/comm/comm_mpi_impl.h"
#include "runtime/comm/host_rings.h"
#include "runtime/base/env.h"
#include "runtime/comm/process.h"

static MPI_Comm comm = MPI_COMM_NULL; /* the chosen communicator during start-up, then ours */
static int owns_comm;                 /* comm is the private duplicate */
static MPI_Comm base = MPI_COMM_NULL; /* the chosen communicator */
static MPI_Errhandler base_handler = MPI_ERRHANDLER_NULL; /* its own, restored after start-up */
static int initialized_mpi; /* spmd_init called MPI_Init_thread, so it finalizes MPI too */
static int thread_multiple;

/* With less than MPI_THREAD_MULTIPLE, device threads take turns in MPI. */
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;

void spmd__mpi_lock(void)
{
    if (!spmd__mpi_thread_multiple())
        pthread_mutex_lock(&mpi_lock);
}

void spmd__mpi_unlock(void)
{
    if (!spmd__mpi_thread_multiple())
        pthread_mutex_unlock(&mpi_lock);
}

/* ---- tags ---- */

/*
 * Each exchange owns a block of SPMD__TAGS_PER_EXCHANGE tags, the blocks cycling through the
 * tag space below a few fixed tags: abort records, views, resharding's data. A message of an
 * exchange given up on can only ever match the same block after a full cycle.
 */
int spmd__mpi_tag_top(void)
{
    static int top; /* the same on every process: MPI_TAG_UB, at most 2^30 */
    if (!top) {
        int *ub = NULL, flag = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
        int v = flag && ub ? *ub : 32767;
        top = v > (1 << 30) ? (1 << 30) : v;
    }
    return top;
}

int spmd__comm_pieces_tag(void) { return spmd__mpi_tag_top() - 3 * SPMD__TAGS_PER_EXCHANGE; }
int spmd__comm_note_tag(void) { return spmd__mpi_tag_top() - 3 * SPMD__TAGS_PER_EXCHANGE + 1; }
int spmd__comm_calls_tag(void) { return spmd__mpi_tag_top() - 3 * SPMD__TAGS_PER_EXCHANGE + 2; }
int spmd__comm_rings_tag(void) { return spmd__mpi_tag_top() - 3 * SPMD__TAGS_PER_EXCHANGE + 3; }

#define MPI_REQUIRE(call, what)                                                                    \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS)                                                                    \
            return spmd__mpi_failure(rc_, (what));                                                 \
    } while (0)

static const char *level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    default:
        return "MPI_THREAD_MULTIPLE";
    }
}

static spmd_status use_comm(MPI_Comm chosen, int *index, int *count)
{
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    /* Device threads call MPI, one at a time behind a lock below MPI_THREAD_MULTIPLE: the
     * standard allows that only from MPI_THREAD_SERIALIZED up. */
    SPMD_REQUIRE(level >= MPI_THREAD_SERIALIZED || !initialized_mpi, SPMD_ERR_UNSUPPORTED,
                 "this MPI library provides only %s when asked for MPI_THREAD_MULTIPLE, but "
                 "libspmd calls MPI from its device threads, which needs MPI_THREAD_SERIALIZED "
                 "at least: use an MPI built with thread support",
                 level_name(level));
    SPMD_REQUIRE(level >= MPI_THREAD_SERIALIZED, SPMD_ERR_UNSUPPORTED,
                 "MPI runs at %s, but libspmd calls MPI from its device threads, which needs "
                 "MPI_THREAD_SERIALIZED at least: initialize MPI with MPI_Init_thread(&argc, "
                 "&argv, MPI_THREAD_MULTIPLE, &provided) (or MPI_THREAD_SERIALIZED) instead of "
                 "MPI_Init, or let spmd_init initialize it",
                 level_name(level));
    thread_multiple = level >= MPI_THREAD_MULTIPLE;
    MPI_REQUIRE(MPI_Comm_rank(chosen, index), "MPI_Comm_rank");
    MPI_REQUIRE(MPI_Comm_size(chosen, count), "MPI_Comm_size");
    MPI_REQUIRE(MPI_Comm_get_errhandler(chosen, &base_handler), "MPI_Comm_get_errhandler");
    MPI_REQUIRE(MPI_Comm_set_errhandler(chosen, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    base = chosen;
    comm = chosen;
    owns_comm = 0;
    return SPMD_OK;
}

static void restore_base_handler(void)
{
    if (base_handler != MPI_ERRHANDLER_NULL) {
        MPI_Comm_set_errhandler(base, base_handler);
        MPI_Errhandler_free(&base_handler);
        base_handler = MPI_ERRHANDLER_NULL;
    }
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
        spmd__proc_finalize(0); /* nothing went private yet */
    return st;
}

spmd_status spmd__proc_go_private(int64_t timeout_ns, int *fresh)
{
    *fresh = 0;
    if (comm == MPI_COMM_NULL || owns_comm)
        return SPMD_OK;
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_REQUIRE(MPI_Comm_idup(base, &dup, &request), "MPI_Comm_idup");
    int64_t deadline = spmd__now_ns() + timeout_ns;
    for (;;) {
        int done = 0;
        MPI_REQUIRE(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Comm_idup");
        if (done)
            break;
        /* every process was there a moment ago: only one that stopped since keeps this going */
        SPMD_REQUIRE(spmd__now_ns() < deadline, SPMD_ERR_TIMEOUT,
                     "duplicating the communicator did not complete within SPMD_INIT_TIMEOUT, "
                     "although every process had arrived: a process stopped during start-up");
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
    }
    MPI_REQUIRE(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    restore_base_handler();
    comm = dup;
    owns_comm = 1;
    *fresh = 1;
    return SPMD_OK;
}

spmd_status spmd__proc_link_hosts(const uint64_t *hosts, uint64_t job, int want, int64_t timeout_ns,
                                  int *machine_cores)
{
    int me = 0, count = 1;
    *machine_cores = 0;
    if (comm == MPI_COMM_NULL || MPI_Comm_size(comm, &count) != MPI_SUCCESS || count == 1)
        return SPMD_OK;
    MPI_REQUIRE(MPI_Comm_rank(comm, &me), "MPI_Comm_rank");
    return spmd__rings_link(comm, me, count, hosts, job, want, spmd__comm_rings_tag(), timeout_ns,
                            machine_cores);
}

uint64_t spmd__proc_host_id(void)
{
    char name[MPI_MAX_PROCESSOR_NAME + 1];
    int len = 0;
    if (comm == MPI_COMM_NULL || MPI_Get_processor_name(name, &len) != MPI_SUCCESS)
        return 0; /* a single process, MPI not started */
    return spmd__fnv1a(SPMD__FNV1A_SEED, name, (size_t)len);
}

spmd_status spmd__proc_finalize(int keep_comm)
{
    spmd__rings_unlink();
    int size = 1;
    if (owns_comm && keep_comm) /* alone, nothing else can send to it */
        keep_comm = MPI_Comm_size(comm, &size) == MPI_SUCCESS && size > 1;
    if (owns_comm && !keep_comm)
        MPI_Comm_free(&comm);
    restore_base_handler();
    comm = MPI_COMM_NULL;
    owns_comm = 0;
    if (initialized_mpi) {
        initialized_mpi = 0;
        MPI_REQUIRE(MPI_Finalize(), "MPI_Finalize");
    }
    return SPMD_OK;
}

void spmd__proc_abandon(void)
{
    /* messages to a missing process may be pending: nothing is freed, and MPI_Finalize would
     * wait for that process */
    spmd__rings_unlink();
    restore_base_handler();
    comm = MPI_COMM_NULL;
    owns_comm = 0;
    initialized_mpi = 0;
}

int spmd__mpi_thread_multiple(void) { return thread_multiple; }

MPI_Comm spmd_mpi_comm(void) { return comm; }
