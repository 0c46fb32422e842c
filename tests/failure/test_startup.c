/*
 * Start-up with a process missing: the program initializes MPI itself (MPI_THREAD_MULTIPLE),
 * then process 1 either calls spmd_init two timeouts late ("late") or exits without calling it
 * ("absent"). Every process that calls spmd_init must fail within the collective timeout plus
 * a grace period (a tenth of it, at least 0.5 s) with SPMD_ERR_TIMEOUT or SPMD_ERR_DISTRIBUTED
 * naming the missing side, instead of waiting for it. Run under `mpirun --enable-recovery`
 * (run_startup.sh), with SPMD_COLLECTIVE_TIMEOUT=2: each process prints
 * "startup N: ok" or "startup N: check failed".
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

int main(int argc, char **argv)
{
    const char *the_case = argc > 1 ? argv[1] : "late";
    int provided = 0, me = 0, size = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *timeout_text = getenv("SPMD_COLLECTIVE_TIMEOUT");
    double timeout = timeout_text ? atof(timeout_text) : 300.0;
    double grace = timeout / 10 > 0.5 ? timeout / 10 : 0.5;
    if (me == 1 && strcmp(the_case, "absent") == 0)
        _exit(0); /* never calls spmd_init */
    if (me == 1) {
        struct timespec pause = {(time_t)(2 * timeout), 0};
        nanosleep(&pause, NULL);
    }
    double t0 = now_s();
    spmd_status st = spmd_init(NULL);
    double waited = now_s() - t0;
    const char *msg = spmd_last_error();
    /* the others name process 1 alone; the late process 1 is told that they gave up */
    int named = me == 1 ? strstr(msg, "this process (1) arrived after") != NULL
                        : strstr(msg, "process(es) 1 did not arrive") != NULL;
    int ok = (st == SPMD_ERR_TIMEOUT || st == SPMD_ERR_DISTRIBUTED) && named &&
             waited <= timeout + grace && !spmd_is_initialized();
    printf("process %d, %s: %s after %.2f s: %s\n", me, the_case, spmd_status_name(st), waited,
           msg);
    printf("survivor %d: %s\n", me, ok ? "ok" : "check failed");
    fflush(stdout);
    (void)size;
    _Exit(ok ? 0 : 1); /* MPI_Finalize would wait for the missing process */
}
