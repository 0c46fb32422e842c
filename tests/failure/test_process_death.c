/*
 * Process failure: process 1 is killed (SIGKILL) at a chosen point; every other process must
 * return SPMD_ERR_TIMEOUT or SPMD_ERR_DISTRIBUTED within the collective timeout (+ slack),
 * with a message naming process 1, instead of hanging. Run under
 * `mpirun --enable-recovery` (otherwise Open MPI's launcher tears the whole job down as soon as
 * one process dies), one case per run:
 *
 *   mpirun --enable-recovery -np 3 -x SPMD_COLLECTIVE_TIMEOUT=3 test_process_death shard_map
 *
 * Cases: shard_map (killed inside fn, before its psum), barrier (before
 * spmd_sync_global_devices), allgather (before spmd_process_allgather), reshard (before a
 * reshard that needs its data); psum_exchange (a small psum, whose check travels with its data:
 * killed just after sending its first message of it); and in the middle of the data movement,
 * after every process agreed to it: psum_data (a psum of 128 KiB, as its data's first receive
 * is posted) and reshard_data (as the resharding exchange builds its messages). The last three
 * intercept MPI calls through MPI's profiling interface (PMPI), so the library itself has no
 * test hook. psum_stream: the victim dies a few milliseconds into a psum of 32 MiB per device,
 * whose rounds between processes of one machine stream through the shared-memory rings (a thread
 * of its own kills it: no MPI call marks the place). Each surviving process prints "survivor N:
 * ok" or "survivor N: check failed" (mpirun --enable-recovery exits with 0 whatever the processes
 * return; run_case.sh checks). psum_exchange and psum_data run with SPMD_SHM=0: their kill
 * points are MPI calls. psum_stall: as psum_stream, but the victim stops (SIGSTOP) instead of
 * dying, for twice the timeout and a second (a child it forked continues it): the others fail
 * as with a death, naming it, and the victim, once continued, fails too instead of finishing
 * its psum with what the others left in its rings. ppermute_stream and ppermute_stall: the same
 * in a ppermute of 32 MiB per device, whose messages between processes of one machine are read
 * straight from the sender's memory where the system allows it (host_rings.h), else stream
 * through the rings: a reader whose sender died or gave up must not keep what it read.
 * died_after_note (4 processes): process 0 comes 1.5 s late to a psum; the victim waits for it
 * there, answers process 3's question where it is (a note: alive, waiting for process 0), then
 * dies 0.8 s in (a thread of its own kills it). Through the rings (one machine; without them no
 * process sees another's end) no survivor may call it alive, and process 3, which heard the
 * note, says it has exited.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <spmd.h>

enum { VICTIM = 1 };
static const char *the_case;
static int die_in_data_phase;       /* set on the victim for the *_data cases */
static volatile int die_after_send; /* psum_exchange: set on the victim inside fn */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die_if_victim(void)
{
    if (spmd_process_index() == VICTIM) {
        fflush(stdout);
        raise(SIGKILL);
    }
}

#ifdef SPMD_HAVE_MPI
#include <mpi.h>

/* psum_data: the victim dies where the library starts moving the psum's data (its first
 * receive of a whole 128 KiB block), after the agreement. */
int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    int size = 0;
    PMPI_Type_size(type, &size);
    if (die_in_data_phase && (long)count * size >= 32768 * 4)
        die_if_victim();
    return PMPI_Irecv(buf, count, type, source, tag, comm, request);
}

/* psum_exchange: the victim dies once its first message of the psum is on its way. */
int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    int rc = PMPI_Isend(buf, count, type, dest, tag, comm, request);
    if (die_after_send)
        die_if_victim();
    return rc;
}

int MPI_Type_create_struct(int count, const int lengths[], const MPI_Aint displacements[],
                           const MPI_Datatype types[], MPI_Datatype *out)
{
    if (die_in_data_phase)
        die_if_victim();
    return PMPI_Type_create_struct(count, lengths, displacements, types, out);
}
#endif

static void sleep_s(double s)
{
    struct timespec pause = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&pause, NULL);
}

/* How long the psum of psum_stream took in a warm-up run on this process: the data between
 * processes takes most of it (the agreement before it well under a millisecond). */
static double stream_seconds;

/* The victim's own killer, started as its psum_stream begins: 40 % into the warm-up's time
 * (most runs die in the data; a victim whose psum ended first dies as it returns). */
static void *kill_soon(void *arg)
{
    (void)arg;
    sleep_s(0.4 * stream_seconds);
    die_if_victim();
    return NULL;
}

static double collective_timeout(void)
{
    const char *text = getenv("SPMD_COLLECTIVE_TIMEOUT");
    return text ? atof(text) : 300.0;
}

/* died_after_note's: the victim dies once process 3 heard it alive (its question comes after
 * at most 0.2 s of waiting); process 0 comes later still. */
static void *kill_after_note(void *arg)
{
    (void)arg;
    sleep_s(0.8);
    die_if_victim();
    return NULL;
}

/* How long psum_stall stops the victim: the others give up on it in the meantime. */
static double stall_seconds(void) { return 2 * collective_timeout() + 1; }

/* psum_stall's: 40 % into the warm-up's time the victim stops, every thread of it, until a
 * child continues it stall_seconds() later (a stalled peer: swapped out, under a debugger). */
static void *stall_soon(void *arg)
{
    (void)arg;
    sleep_s(0.4 * stream_seconds);
    pid_t me = getpid(), child = fork();
    if (child == 0) {
        sleep_s(stall_seconds());
        kill(me, SIGCONT);
        _exit(0);
    }
    if (child > 0)
        kill(me, SIGSTOP);
    return NULL;
}

static spmd_status sum_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)nout;
    const char *c = user;
    if (spmd_ctx_device(ctx) == spmd_local_device_id(0) && strcmp(c, "shard_map") == 0)
        die_if_victim(); /* mid-call: the other devices of every process are already running */
    int stall = strcmp(c, "psum_stall") == 0 || strcmp(c, "ppermute_stall") == 0;
    int warm_up = strcmp(c, "stream-warm-up") == 0 || strcmp(c, "ppermute-warm-up") == 0,
        stream = warm_up || stall || !strcmp(c, "psum_stream") || !strcmp(c, "ppermute_stream");
    int permute = strncmp(c, "ppermute", 8) == 0, n = spmd_device_count();
    int pairs[2 * 64];
    for (int k = 0; k < n && k < 64; k++) {
        pairs[2 * k] = k;
        pairs[2 * k + 1] = (k + 1) % n;
    }
    if (strcmp(c, "psum_data") == 0 || stream) { /* beyond the size whose check travels with it */
        int64_t big[1] = {stream ? 8 << 20 : 32768};
        spmd_block a, b;
        spmd_status st = spmd_ctx_alloc(ctx, 1, big, SPMD_DTYPE_F32, &a);
        if (st == SPMD_OK)
            st = spmd_ctx_alloc(ctx, 1, big, SPMD_DTYPE_F32, &b);
        if (st == SPMD_OK)
            st = spmd_op_fill(ctx, &a, 1.0);
        pthread_t killer;
        int first = spmd_ctx_device(ctx) == spmd_local_device_id(0), killer_started = 0;
        if (st == SPMD_OK && stream && !warm_up && first && spmd_process_index() == VICTIM) {
            killer_started =
                pthread_create(&killer, NULL, stall ? stall_soon : kill_soon, NULL) == 0;
            if (!killer_started)
                st = SPMD_ERR_OUT_OF_MEMORY;
        }
        double t0 = now_s();
        if (st == SPMD_OK)
            st = permute ? spmd_ppermute(ctx, &a, &b, "i", pairs, n) : spmd_psum(ctx, &a, &b, "i");
        if (st == SPMD_OK && warm_up && first) /* the second warm-up's: pages touched already */
            stream_seconds = now_s() - t0;
        if (stream && !warm_up && first && !stall)
            die_if_victim();
        if (stall && killer_started)
            pthread_join(killer, NULL);
        if (st != SPMD_OK)
            return st;
    }
    if (strcmp(c, "psum_exchange") == 0)
        die_after_send = 1;
    return spmd_psum(ctx, &in[0], &out[0], "i");
}

static spmd_status sum(spmd_mesh *mesh, spmd_array *x, const char *c)
{
    spmd_spec *spec = NULL;
    spmd_status st = spmd_spec_parse("'i'", &spec);
    const spmd_spec *specs[1] = {spec};
    spmd_out_desc desc = {1, {spmd_device_count()}, SPMD_DTYPE_F32};
    spmd_array *y = NULL;
    if (st == SPMD_OK)
        st = spmd_shard_map(mesh, sum_body, (void *)c, 1, &x, specs, 1, &desc, specs, NULL, &y);
    spmd_array_destroy(y);
    spmd_spec_destroy(spec);
    return st;
}

static spmd_status run_case(spmd_mesh *mesh, spmd_array *x, spmd_sharding *rows, spmd_sharding *all)
{
    (void)rows;
    die_in_data_phase = strstr(the_case, "_data") != NULL;
    if (strcmp(the_case, "shard_map") == 0 || strcmp(the_case, "psum_data") == 0 ||
        strcmp(the_case, "psum_exchange") == 0 || strcmp(the_case, "psum_stream") == 0 ||
        strcmp(the_case, "psum_stall") == 0 || strcmp(the_case, "ppermute_stream") == 0 ||
        strcmp(the_case, "ppermute_stall") == 0)
        return sum(mesh, x, the_case);
    if (strcmp(the_case, "died_after_note") == 0) {
        pthread_t killer;
        int killer_started = 0;
        if (spmd_process_index() == VICTIM)
            killer_started = pthread_create(&killer, NULL, kill_after_note, NULL) == 0;
        else if (spmd_process_index() == 0)
            sleep_s(1.5);
        if (spmd_process_index() == VICTIM && !killer_started)
            return SPMD_ERR_OUT_OF_MEMORY;
        return sum(mesh, x, "late");
    }
    if (strcmp(the_case, "barrier") == 0) {
        die_if_victim();
        return spmd_sync_global_devices("after the kill");
    }
    if (strcmp(the_case, "allgather") == 0) {
        die_if_victim();
        float host[64];
        return spmd_process_allgather(x, 1, host, sizeof host);
    }
    if (strcmp(the_case, "reshard") == 0 || strcmp(the_case, "reshard_data") == 0) {
        if (!die_in_data_phase)
            die_if_victim();
        spmd_array *y = NULL;
        spmd_status st = spmd_reshard(x, all, NULL, &y);
        spmd_array_destroy(y);
        return st;
    }
    fprintf(stderr,
            "unknown case '%s': shard_map, barrier, allgather, reshard, psum_exchange, "
            "psum_data, psum_stream, psum_stall, ppermute_stream, ppermute_stall, "
            "reshard_data or died_after_note\n",
            the_case);
    exit(2);
}

int main(int argc, char **argv)
{
    the_case = argc > 1 ? argv[1] : "shard_map";
    /* The kill comes with an MPI call (the exchange's first MPI_Isend, the data's first
     * MPI_Irecv): on one machine the messages would go through shared memory (SPMD_SHM), where
     * no profiling interface sees them. */
    if (strcmp(the_case, "psum_exchange") == 0 || strcmp(the_case, "psum_data") == 0)
        setenv("SPMD_SHM", "0", 1);
    if (spmd_init(NULL) != SPMD_OK) {
        fprintf(stderr, "%s\n", spmd_last_error());
        return 1;
    }
    if (spmd_process_count() < 2) {
        printf("needs at least 2 processes; skipped\n");
        spmd_finalize();
        return 77;
    }
    int n = spmd_device_count();
    const char *names[1] = {"i"};
    const int64_t shape[1] = {n};
    float data[64] = {0};
    spmd_mesh *mesh = NULL;
    spmd_sharding *rows = NULL, *all = NULL;
    spmd_array *x = NULL;
    if (n > 64 || spmd_mesh_create(1, &n, names, NULL, 0, &mesh) ||
        spmd_sharding_create_parse(mesh, "'i'", &rows) ||
        spmd_sharding_create_parse(mesh, "", &all) ||
        spmd_device_put(data, 1, shape, SPMD_DTYPE_F32, rows, &x)) {
        fprintf(stderr, "set-up: %s\n", spmd_last_error());
        return 1;
    }
    /* the cases in the middle of a psum's messages start from a mesh that made its
     * communicators in an earlier call */
    int permute = strncmp(the_case, "ppermute_", 9) == 0;
    const char *warm_up =
        permute ? "ppermute-warm-up"
        : strcmp(the_case, "psum_stream") == 0 || strcmp(the_case, "psum_stall") == 0
            ? "stream-warm-up"
            : "warm-up";
    if ((strncmp(the_case, "psum_", 5) == 0 || permute ||
         strcmp(the_case, "died_after_note") == 0) &&
        (sum(mesh, x, warm_up) != SPMD_OK || sum(mesh, x, warm_up) != SPMD_OK)) {
        fprintf(stderr, "warm-up: %s\n", spmd_last_error());
        return 1;
    }
    /* every process is set up before the victim dies */
    if (spmd_sync_global_devices("set-up") != SPMD_OK) {
        fprintf(stderr, "set-up barrier: %s\n", spmd_last_error());
        return 1;
    }
    double t0 = now_s();
    spmd_status st = run_case(mesh, x, rows, all);
    double waited = now_s() - t0;
    const char *msg = spmd_last_error();
    int named =
        strstr(msg, "process 1") || strstr(msg, "process(es) 1") || strstr(msg, "processes 1");
    /* shard_map waits the timeout for the collective, then a grace period (a tenth of the
     * timeout, at least 0.5 s) for the outcome agreement that gives every surviving process
     * the same status */
    double timeout = collective_timeout();
    double grace = timeout / 10 > 0.5 ? timeout / 10 : 0.5;
    int after_note = strcmp(the_case, "died_after_note") == 0;
    int in_shard_map = strcmp(the_case, "shard_map") == 0 || strncmp(the_case, "psum_", 5) == 0 ||
                       permute || after_note;
    /* died_after_note: process 0's own wait starts 1.5 s late */
    double bound = timeout + (in_shard_map ? grace : 0) + 1.5 + (after_note ? 1.5 : 0);
    int ok = (st == SPMD_ERR_TIMEOUT || st == SPMD_ERR_DISTRIBUTED) && named && waited <= bound;
    if (after_note) {
        int said_alive = strstr(msg, "process 1 is alive") != NULL,
            said_exited = strstr(msg, "process 1 has exited") != NULL;
        const char *shm = getenv("SPMD_SHM");
        int rings = !shm || strcmp(shm, "0") != 0; /* else no process sees another's end */
        ok = ok && (!rings || (!said_alive && (spmd_process_index() != 3 || said_exited)));
    }
    if ((strcmp(the_case, "psum_stall") == 0 || strcmp(the_case, "ppermute_stall") == 0) &&
        spmd_process_index() == VICTIM) {
        bound += stall_seconds(); /* the victim's own call fails too once it runs again */
        ok = (st == SPMD_ERR_TIMEOUT || st == SPMD_ERR_DISTRIBUTED) && waited <= bound;
    }
    printf("process %d, %s: %s after %.2f s: %s\n", spmd_process_index(), the_case,
           spmd_status_name(st), waited, msg);
    fflush(stdout);
    /* What is left after a failure: free the arrays; MPI cannot be finalized with a dead peer
     * in Open MPI 4 (no ULFM), so the process ends without spmd_finalize. */
    spmd_array_destroy(x);
    spmd_sharding_destroy(rows);
    spmd_sharding_destroy(all);
    spmd_mesh_destroy(mesh);
    if (!ok)
        fprintf(stderr,
                "process %d: expected SPMD_ERR_TIMEOUT or SPMD_ERR_DISTRIBUTED naming process 1 "
                "within %.1f s\n",
                spmd_process_index(), bound);
    printf("survivor %d: %s\n", spmd_process_index(), ok ? "ok" : "check failed");
    fflush(stdout);
    if (after_note) /* an exit would read as a death to a survivor still in its roll call */
        sleep_s(2);
    _Exit(ok ? 0 : 1);
}
