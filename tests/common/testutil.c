#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

#include <spmd/config.h>
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

void spmd_test_check_status(spmd_status got, spmd_status expected, const char *expr,
                            const char *file, int line, ...)
{
    const char *msg = spmd_last_error();
    if (got != expected) {
        print_error("ERROR: %s returned %s, expected %s (message: %s)\n", expr,
                    spmd_status_name(got), spmd_status_name(expected), msg);
        _fail(file, line);
    }
    if (expected == SPMD_OK)
        return;
    if (msg[0] == '\0') {
        print_error("ERROR: %s failed with %s but left no message\n", expr, spmd_status_name(got));
        _fail(file, line);
    }
    va_list ap;
    va_start(ap, line);
    for (const char *want = va_arg(ap, const char *); want; want = va_arg(ap, const char *)) {
        if (!strstr(msg, want)) {
            va_end(ap);
            print_error("ERROR: %s: message lacks \"%s\": %s\n", expr, want, msg);
            _fail(file, line);
        }
    }
    va_end(ap);
}

void spmd_test_init(void)
{
    spmd_status st = spmd_init(NULL);
    if (st != SPMD_OK) {
        fprintf(stderr, "spmd_init failed: %s: %s\n", spmd_status_name(st), spmd_last_error());
        exit(1);
    }
}

int spmd_test_finish(int failures)
{
    int any = failures != 0;
#ifdef SPMD_HAVE_MPI
    if (spmd_process_count() > 1) {
        int mine = any;
        MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, spmd_mpi_comm());
    }
#endif
    spmd_status st = spmd_finalize();
    if (st != SPMD_OK) {
        fprintf(stderr, "spmd_finalize failed: %s\n", spmd_last_error());
        any = 1;
    }
    return any ? 1 : 0;
}

uint64_t spmd_test_rng_next(spmd_test_rng *rng)
{
    uint64_t x = rng->state ? rng->state : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

int spmd_test_rng_below(spmd_test_rng *rng, int n)
{
    return (int)(spmd_test_rng_next(rng) % (uint64_t)n);
}
