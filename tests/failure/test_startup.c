/*
 * Start-up with a process missing or slow: the program initializes MPI itself
 * (MPI_THREAD_MULTIPLE), then process 1 calls spmd_init late or never. Run under
 * `mpirun --enable-recovery` (run_case.sh); each process prints "survivor N: ok" or
 * "survivor N: check failed".
 *
 *   late            process 1 calls spmd_init three SPMD_INIT_TIMEOUTs late
 *   absent          process 1 exits without calling it
 *   slow_collective process 1 calls it 2 s late, with SPMD_COLLECTIVE_TIMEOUT far shorter
 *
 * In "late" and "absent" every process that calls spmd_init must fail within SPMD_INIT_TIMEOUT
 * plus a grace period (a tenth of it, at least 0.5 s) with SPMD_ERR_TIMEOUT naming process 1
 * and SPMD_INIT_TIMEOUT (the late process 1 is told that the others gave up), instead of
 * waiting for it. In "slow_collective" every process must start: the collective timeout does
 * not apply to spmd_init.
 * (A process that is late for, or never reaches, MPI_Init_thread itself keeps the others in
 * Open MPI's own MPI_Init, which has no timeout: the README says so.)
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <spmd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_s(double seconds)
{
    struct timespec pause = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&pause, NULL);
}

/* Every process starts although process 1 comes 2 s late: MPI is finalized normally. */
static int slow_collective(int me, int size)
{
    if (me == 1)
        sleep_s(2.0);
    spmd_status st = spmd_init(NULL);
    int ok = st == SPMD_OK && spmd_process_count() == size && spmd_process_index() == me &&
             spmd_device_count() == size * spmd_local_device_count();
    printf("process %d, slow_collective: %s: %s\n", me, spmd_status_name(st),
           st == SPMD_OK ? "started" : spmd_last_error());
    if (st == SPMD_OK)
        ok &= spmd_finalize() == SPMD_OK;
    printf("survivor %d: %s\n", me, ok ? "ok" : "check failed");
    fflush(stdout);
    if (st != SPMD_OK)
        _Exit(1); /* MPI_Finalize would wait for a process that gave up */
    MPI_Finalize();
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *the_case = argc > 1 ? argv[1] : "late";
    int provided = 0, me = 0, size = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (strcmp(the_case, "slow_collective") == 0)
        return slow_collective(me, size);
    const char *timeout_text = getenv("SPMD_INIT_TIMEOUT");
    double timeout = timeout_text ? atof(timeout_text) : 300.0;
    double grace = timeout / 10 > 0.5 ? timeout / 10 : 0.5;
    if (me == 1 && strcmp(the_case, "absent") == 0)
        _exit(0); /* never calls spmd_init */
    if (me == 1)
        sleep_s(3 * timeout);
    double t0 = now_s();
    spmd_status st = spmd_init(NULL);
    double waited = now_s() - t0;
    const char *msg = spmd_last_error();
    /* the others name process 1 alone; the late process 1 is told that they gave up */
    int named = me == 1 ? strstr(msg, "this process (1) arrived after") != NULL
                        : strstr(msg, "process(es) 1 did not arrive") != NULL;
    int ok = st == SPMD_ERR_TIMEOUT && named && strstr(msg, "SPMD_INIT_TIMEOUT") &&
             !strstr(msg, "SPMD_COLLECTIVE_TIMEOUT") && waited <= timeout + grace &&
             !spmd_is_initialized();
    printf("process %d, %s: %s after %.2f s: %s\n", me, the_case, spmd_status_name(st), waited,
           msg);
    printf("survivor %d: %s\n", me, ok ? "ok" : "check failed");
    fflush(stdout);
    _Exit(ok ? 0 : 1); /* MPI_Finalize would wait for the missing process */
}
