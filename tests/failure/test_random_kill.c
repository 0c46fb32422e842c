/*
 * Process death at a random point: one process (the victim, chosen from the seed among
 * 1..P-1, or 0..P-1 with RK_VICTIM_ANY=1) is killed (SIGKILL) at a point of a short sequence of
 * operations chosen from the seed; every other process (a survivor) must fail within the collective
 * timeout plus the grace period after the kill, with SPMD_ERR_TIMEOUT whose first cause names the
 * victim (and no process that is alive). Run under `mpirun --enable-recovery` (run_random_kills.sh
 * does):
 *
 *   mpirun --enable-recovery -np 3 -x SPMD_COLLECTIVE_TIMEOUT=2 test_random_kill SEED DIR
 *
 * The sequence (the trial): spmd_shard_map whose fn issues psum, all_gather, ppermute (ring),
 * psum_scatter and all_to_all in three sizes (messages sent eagerly; by rendezvous but within
 * the 64 KiB that travel with the check; beyond it), then a psum into its output; spmd_reshard
 * (sharded to replicated, data between every pair of processes); spmd_process_allgather;
 * spmd_sync_global_devices. It runs three times before the trial: twice to set everything up, once
 * to count the MPI calls that start something (MPI_Isend, MPI_Irecv,
 * MPI_I{allreduce,allgatherv,gatherv,bcast,reduce_scatter}, MPI_Type_create_struct), which a run
 * without failure makes the same number of times. The victim dies at the N-th of them in the trial
 * (N uniform in 1..count), "before" it is made, "after" it returns, or "wait": in the k-th test of
 * requests (MPI_Test, MPI_Testall, MPI_Testsome, MPI_Wait, MPI_Improbe) after it, k in 1..8, on
 * whichever thread (device threads make most of them). The calls are intercepted through MPI's
 * profiling interface, so the library has no test hook.
 *
 * The victim writes the time of its death (CLOCK_REALTIME) and the kill point to DIR/kill just
 * before it dies; each survivor prints, when the operation it was in returns an error,
 *
 *   RESULT seed=S victim=V survivor=R kill_n=N kill_total=T kill_kind=K kill_fn=F kill_op=O
 *          kill_coll=C op=O status=ST since_kill=SECONDS in_op=SECONDS first_cause=KIND:LIST
 *          named_victim=0|1 blamed_alive=0|1 ambiguous_first=0|1
 *   MESSAGE seed=S survivor=R: the full message
 *
 * (since_kill: from the kill to the return; in_op: from the start of the failing operation).
 * first_cause is the first claim of the message about who is missing: "missing" (process(es)
 * L did not arrive), "nodata" (no data came from process(es) L), "late" (this process arrived
 * after another gave up on it: it blames itself, alive), "device" (a local device did not
 * arrive: alive), "begun" (processes L had all begun it: names no one), "timedout" (a device
 * timed out: names no one), "mismatch" (a collective mismatch) or "none". A survivor that
 * completes the whole sequence (the victim died after its part was done) prints status=SPMD_OK.
 * A survivor still in an operation 4 timeouts + 5 s after the trial started prints
 * status=HUNG and exits. Survivors exit (without spmd_finalize: MPI cannot finalize with a
 * dead peer) once every survivor has reported, so that no survivor's exit looks like a death
 * to another.
 *
 * RK_TRACE=1 adds every process's MPI calls of the trial to its report (TRACE lines, times
 * from the kill), for diagnosis.
 *
 * `test_random_kill count DIR` runs the sequence once more instead of the trial, without a
 * kill, and prints every process's counts of both counted runs (they must be equal).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <spmd.h>

#ifndef SPMD_HAVE_MPI
int main(void)
{
    printf("built without MPI; skipped\n");
    return 77;
}
#else
#include <mpi.h>

/* ---- clocks ---- */

static int64_t realtime_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- where the trial is: labels for the report ---- */

static _Atomic(const char *) current_op = "set-up"; /* set by the main thread */
static __thread const char *current_coll;           /* set by fn on device threads */

/* ---- the kill point ---- */

enum { KILL_BEFORE, KILL_AFTER, KILL_WAIT };
static const char *const kind_names[] = {"before", "after", "wait"};

static _Atomic int counting;      /* count posting calls (warm-up 3, the trial) */
static _Atomic long posts;        /* posting calls counted since counting began */
static _Atomic int armed;         /* this process is the victim and the trial is on */
static long kill_n;               /* the posting call at which the victim dies */
static int kill_kind;             /* KILL_* */
static int kill_tests;            /* KILL_WAIT: dies in the kill_tests-th test after call kill_n */
static _Atomic int waiting_tests; /* KILL_WAIT: tests left before the kill; 0: not started */
static long kill_total;           /* the count of the run before the trial */
static int the_seed, the_victim;
static char the_dir[4096];

/* Writes the kill record to DIR/kill (atomically: a rename) and dies. */
static void die_now(const char *fn)
{
    const char *op = atomic_load(&current_op), *coll = current_coll ? current_coll : "-";
    if (strcmp(op, "shard_map") != 0)
        coll = "-";
    else if (!current_coll)
        coll = "end-of-call"; /* the main thread: the outcome agreement */
    int64_t t = realtime_ns();
    char path[4200], tmp[4200], text[512], wait_text[32];
    snprintf(wait_text, sizeof wait_text, "+%dtests", kill_tests);
    int len = snprintf(text, sizeof text,
                       "t_ns=%lld kill_n=%ld kill_total=%ld kill_kind=%s%s kill_fn=%s "
                       "kill_op=%s kill_coll=%s\n",
                       (long long)t, kill_n, kill_total, kind_names[kill_kind],
                       kill_kind == KILL_WAIT ? wait_text : "", fn, op, coll);
    snprintf(path, sizeof path, "%s/kill", the_dir);
    snprintf(tmp, sizeof tmp, "%s/kill.tmp", the_dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        if (write(fd, text, (size_t)len) != len)
            perror("write kill record");
        close(fd);
        rename(tmp, path);
    }
    printf("KILL seed=%d victim=%d %s", the_seed, the_victim, text);
    fflush(stdout);
    raise(SIGKILL);
}

/* A call that starts something: counted; the victim may die before or after it. */
static long post_begin(const char *fn)
{
    if (!atomic_load(&counting))
        return 0;
    long n = atomic_fetch_add(&posts, 1) + 1;
    if (atomic_load(&armed) && n == kill_n && kill_kind == KILL_BEFORE)
        die_now(fn);
    return n;
}

static void post_end(const char *fn, long n)
{
    if (!atomic_load(&armed) || n != kill_n)
        return;
    if (kill_kind == KILL_AFTER)
        die_now(fn);
    else if (kill_kind == KILL_WAIT)
        atomic_store(&waiting_tests, kill_tests);
}

/* A test of requests: the victim may die in it (KILL_WAIT). */
static void test_point(const char *fn)
{
    if (!atomic_load(&armed))
        return;
    int left = atomic_load(&waiting_tests);
    while (left > 0 && !atomic_compare_exchange_weak(&waiting_tests, &left, left - 1))
        ;
    if (left == 1)
        die_now(fn);
}

/* RK_TRACE=1: every process records its MPI calls of the trial (time since the trial began,
 * call, peer, tag, bytes) and prints them as TRACE lines when it reports (for diagnosis). */
typedef struct trace_entry {
    int64_t t_ns;
    const char *fn;
    int peer, tag, bytes, done;
} trace_entry;
enum { TRACE_MAX = 4096 };
static trace_entry trace_log[TRACE_MAX];
static _Atomic int trace_used;
static int tracing;
static int64_t trace_origin;

static void trace(const char *fn, int peer, int tag, int bytes, int done)
{
    if (!tracing || !atomic_load(&counting))
        return;
    int i = atomic_fetch_add(&trace_used, 1);
    if (i < TRACE_MAX)
        trace_log[i] = (trace_entry){realtime_ns() - trace_origin, fn, peer, tag, bytes, done};
}

#define POSTING(name, call)                                                                        \
    do {                                                                                           \
        long n_ = post_begin(name);                                                                \
        int rc_ = (call);                                                                          \
        post_end(name, n_);                                                                        \
        return rc_;                                                                                \
    } while (0)

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    trace("MPI_Isend", dest, tag, count, 0);
    POSTING("MPI_Isend", PMPI_Isend(buf, count, type, dest, tag, comm, request));
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    trace("MPI_Irecv", source, tag, count, 0);
    POSTING("MPI_Irecv", PMPI_Irecv(buf, count, type, source, tag, comm, request));
}

int MPI_Iallreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request)
{
    POSTING("MPI_Iallreduce", PMPI_Iallreduce(send, recv, count, type, op, comm, request));
}

int MPI_Iallgatherv(const void *send, int scount, MPI_Datatype stype, void *recv,
                    const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm,
                    MPI_Request *request)
{
    POSTING("MPI_Iallgatherv",
            PMPI_Iallgatherv(send, scount, stype, recv, rcounts, displs, rtype, comm, request));
}

int MPI_Igatherv(const void *send, int scount, MPI_Datatype stype, void *recv, const int rcounts[],
                 const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm,
                 MPI_Request *request)
{
    POSTING("MPI_Igatherv",
            PMPI_Igatherv(send, scount, stype, recv, rcounts, displs, rtype, root, comm, request));
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request *request)
{
    POSTING("MPI_Ibcast", PMPI_Ibcast(buf, count, type, root, comm, request));
}

int MPI_Ireduce_scatter(const void *send, void *recv, const int rcounts[], MPI_Datatype type,
                        MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    POSTING("MPI_Ireduce_scatter",
            PMPI_Ireduce_scatter(send, recv, rcounts, type, op, comm, request));
}

int MPI_Type_create_struct(int count, const int lengths[], const MPI_Aint displacements[],
                           const MPI_Datatype types[], MPI_Datatype *out)
{
    POSTING("MPI_Type_create_struct",
            PMPI_Type_create_struct(count, lengths, displacements, types, out));
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    test_point("MPI_Test");
    return PMPI_Test(request, flag, status);
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    test_point("MPI_Testall");
    return PMPI_Testall(count, requests, flag, statuses);
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    test_point("MPI_Testsome");
    int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    for (int k = 0; tracing && *outcount != MPI_UNDEFINED && k < *outcount; k++)
        trace("MPI_Testsome done", statuses != MPI_STATUSES_IGNORE ? statuses[k].MPI_SOURCE : -1,
              statuses != MPI_STATUSES_IGNORE ? statuses[k].MPI_TAG : -1, indices[k], 1);
    return rc;
}

int MPI_Cancel(MPI_Request *request)
{
    trace("MPI_Cancel", -1, -1, 0, 0);
    return PMPI_Cancel(request);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    test_point("MPI_Wait");
    int rc = PMPI_Wait(request, status);
    trace("MPI_Wait done", -1, -1, 0, 1);
    return rc;
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                MPI_Status *status)
{
    test_point("MPI_Improbe");
    return PMPI_Improbe(source, tag, comm, flag, message, status);
}

/* ---- the sequence ---- */

/* Elements (float32) per member in the three sizes of each collective: "small" messages go
 * eagerly (Open MPI's shared-memory transport: up to 4 KiB); "mid" ones still travel with the
 * check (up to 64 KiB per process) but by rendezvous, so a sender killed in the middle leaves
 * a matched, unfinished receive; "big" ones (beyond 64 KiB per process) are agreed first and
 * then moved by MPI_Iallreduce, MPI_Iallgatherv, MPI_Ireduce_scatter or point-to-point messages
 * polled against the deadline. */
#define SMALL 4
#define MID 1024
#define BIG 8192
#define PSUM_MID 4096     /* a 16 KiB psum */
#define PSUM_BIG 32768    /* a 128 KiB psum */
#define PERMUTE_BIG 32768 /* a 128 KiB block: ppermute's checked exchange */

static spmd_status alloc_fill(spmd_ctx *ctx, int64_t n, double v, spmd_block *b)
{
    spmd_status st = spmd_ctx_alloc(ctx, 1, &n, SPMD_DTYPE_F32, b);
    return st == SPMD_OK ? spmd_op_fill(ctx, b, v) : st;
}

static spmd_status alloc1(spmd_ctx *ctx, int64_t n, spmd_block *b)
{
    return spmd_ctx_alloc(ctx, 1, &n, SPMD_DTYPE_F32, b);
}

/* One collective of each kind at one size: psum of `psum` elements, all_gather, ppermute
 * (ring) of `permute` elements, psum_scatter and all_to_all of `per` elements per member. */
static spmd_status collectives(spmd_ctx *ctx, int n, const int *pairs, int64_t psum, int64_t per,
                               int64_t permute, const char *const *labels)
{
    spmd_block a, b, c, d, e;
    spmd_status st;
#define STEP(label, expr)                                                                          \
    do {                                                                                           \
        current_coll = (label);                                                                    \
        st = (expr);                                                                               \
        if (st != SPMD_OK)                                                                         \
            return st;                                                                             \
    } while (0)
    STEP("alloc", alloc_fill(ctx, psum, 1.0, &a));
    STEP("alloc", alloc1(ctx, psum, &b));
    STEP(labels[0], spmd_psum(ctx, &a, &b, "i"));
    STEP("alloc", alloc_fill(ctx, per, 1.0, &a));
    STEP("alloc", alloc1(ctx, (int64_t)n * per, &b));
    STEP(labels[1], spmd_all_gather(ctx, &a, &b, "i", 0, 1));
    STEP("alloc", alloc_fill(ctx, permute, 2.0, &c));
    STEP("alloc", alloc1(ctx, permute, &d));
    STEP(labels[2], spmd_ppermute(ctx, &c, &d, "i", pairs, n));
    /* b: n * per elements */
    STEP("alloc", alloc1(ctx, per, &e));
    STEP(labels[3], spmd_psum_scatter(ctx, &b, &e, "i", 0, 1));
    STEP("alloc", alloc1(ctx, (int64_t)n * per, &c));
    STEP(labels[4], spmd_all_to_all(ctx, &b, &c, "i", 0, 0, 1));
#undef STEP
    return SPMD_OK;
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)nout, (void)user;
    static const char *const small[] = {"psum_small", "all_gather_small", "ppermute_small",
                                        "psum_scatter_small", "all_to_all_small"};
    static const char *const mid[] = {"psum_mid", "all_gather_mid", "ppermute_mid",
                                      "psum_scatter_mid", "all_to_all_mid"};
    static const char *const big[] = {"psum_big", "all_gather_big", "ppermute_big",
                                      "psum_scatter_big", "all_to_all_big"};
    int n = 0;
    spmd_status st = spmd_axis_size(ctx, "i", &n);
    int pairs[2 * 64];
    for (int k = 0; k < n && k < 64; k++) {
        pairs[2 * k] = k;
        pairs[2 * k + 1] = (k + 1) % n;
    }
    if (st == SPMD_OK)
        st = collectives(ctx, n, pairs, 1, SMALL, SMALL, small);
    if (st == SPMD_OK)
        st = collectives(ctx, n, pairs, PSUM_MID, MID, MID * 4, mid);
    if (st == SPMD_OK)
        st = collectives(ctx, n, pairs, PSUM_BIG, BIG, PERMUTE_BIG, big);
    if (st == SPMD_OK) {
        current_coll = "psum_out";
        st = spmd_psum(ctx, &in[0], &out[0], "i");
    }
    current_coll = NULL;
    return st;
}

typedef struct world {
    spmd_mesh *mesh;
    spmd_sharding *rows, *all;
    spmd_spec *spec;
    spmd_array *x;
    int n;
} world;

/* One operation of the sequence; its label is what the report calls it. */
static spmd_status run_op(world *w, int op)
{
    spmd_status st = SPMD_OK;
    switch (op) {
    case 0: {
        const spmd_spec *specs[1] = {w->spec};
        spmd_out_desc desc = {1, {w->n}, SPMD_DTYPE_F32};
        spmd_array *y = NULL;
        st = spmd_shard_map(w->mesh, body, NULL, 1, &w->x, specs, 1, &desc, specs, NULL, &y);
        spmd_array_destroy(y);
        break;
    }
    case 1: {
        spmd_array *y = NULL;
        st = spmd_reshard(w->x, w->all, NULL, &y);
        spmd_array_destroy(y);
        break;
    }
    case 2: {
        float host[64];
        st = spmd_process_allgather(w->x, 1, host, sizeof host);
        break;
    }
    case 3:
        st = spmd_sync_global_devices("trial");
        break;
    }
    return st;
}

static const char *const op_names[] = {"shard_map", "reshard", "process_allgather",
                                       "sync_global_devices"};
enum { NUM_OPS = 4 };

static _Atomic int64_t op_start_ns; /* of the operation in progress (the watchdog reads it) */

/* A run of the whole sequence; *failed: the operation that failed, else -1. */
static spmd_status run_sequence(world *w, int *failed)
{
    *failed = -1;
    for (int op = 0; op < NUM_OPS; op++) {
        atomic_store(&current_op, op_names[op]);
        atomic_store(&op_start_ns, realtime_ns());
        spmd_status st = run_op(w, op);
        if (st != SPMD_OK) {
            *failed = op;
            return st;
        }
    }
    atomic_store(&current_op, "after-sequence");
    return SPMD_OK;
}

/* ---- what a message blames ---- */

typedef struct claim {
    const char *kind;
    int procs[16];
    int n;
    int ambiguous; /* names no process as the missing one */
} claim;

/* Parses "1, 2 and others" into procs. */
static void parse_list(const char *p, claim *c)
{
    while (*p && c->n < 16) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p < '0' || *p > '9')
            break;
        c->procs[c->n++] = (int)strtol(p, (char **)&p, 10);
    }
}

static int device_process(int device)
{
    spmd_device_info info;
    return spmd_device_get_info(device, &info) == SPMD_OK ? info.process_index : -1;
}

/* The first claim of `msg` about who is missing (kind "none" when there is none), and whether
 * it names a process that is alive (`victim` is the only one that is not). Later claims tell
 * the way the failure spread (a survivor stuck behind the victim "did not arrive" at the next
 * collective of another) and are not checked. */
static claim first_claim(const char *msg, int victim, int *blamed_alive)
{
    static const struct pattern {
        const char *text; /* what the claim contains */
        const char *kind;
        const char *list_after; /* the list of processes follows this, searched back from text */
        int ambiguous;
    } patterns[] = {
        {" did not arrive within the collective timeout", "missing", "process(es) ", 0},
        {"no data came from process(es) ", "nodata", "no data came from process(es) ", 0},
        {" had given up waiting for it", "late", "this process (", 0},
        {", which did not arrive within", "device", "for device(s) ", 0},
        {" had all begun it", "begun", NULL, 1},
        {" timed out inside ", "timedout", NULL, 1},
        {"issued different collectives", "mismatch", NULL, 1},
        {"without calling it", "mismatch", NULL, 1},
    };
    claim first = {"none", {0}, 0, 1};
    const char *first_at = NULL;
    *blamed_alive = 0;
    for (size_t k = 0; k < sizeof patterns / sizeof patterns[0]; k++) {
        const struct pattern *pt = &patterns[k];
        for (const char *at = strstr(msg, pt->text); at; at = strstr(at + 1, pt->text)) {
            claim c = {pt->kind, {0}, 0, pt->ambiguous};
            if (pt->list_after) {
                /* the nearest list start at or before the claim */
                const char *start = NULL;
                size_t len = strlen(pt->list_after);
                for (const char *s = strstr(msg, pt->list_after); s && s <= at;
                     s = strstr(s + 1, pt->list_after))
                    start = s;
                if (start)
                    parse_list(start + len, &c);
                if (strcmp(c.kind, "device") == 0) /* devices to their processes */
                    for (int i = 0; i < c.n; i++)
                        c.procs[i] = device_process(c.procs[i]);
            }
            if (!first_at || at < first_at) {
                first_at = at;
                first = c;
            }
        }
    }
    for (int i = 0; i < first.n; i++)
        if (first.procs[i] != victim)
            *blamed_alive = 1;
    return first;
}

/* ---- the survivors' reports ---- */

static _Atomic int reported;
static int64_t trial_start_ns;
static double timeout_s;

static int read_kill(char *record, size_t size, int64_t *t_ns)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/kill", the_dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t got = fread(record, 1, size - 1, f);
    fclose(f);
    record[got] = '\0';
    char *nl = strchr(record, '\n');
    if (nl)
        *nl = '\0';
    long long t = 0;
    if (sscanf(record, "t_ns=%lld", &t) != 1)
        return 0;
    *t_ns = t;
    return 1;
}

static void report(int me, const char *op, spmd_status st, const char *status_text,
                   int64_t op_start, int64_t end, const char *msg)
{
    if (atomic_exchange(&reported, 1))
        return;
    char record[600] = "";
    int64_t kill_t = 0;
    int have_kill = read_kill(record, sizeof record, &kill_t);
    /* a survivor done before the victim died: the record comes right after */
    for (int i = 0; !have_kill && st == SPMD_OK && !status_text && i < 100; i++) {
        struct timespec nap = {0, 10000000};
        nanosleep(&nap, NULL);
        have_kill = read_kill(record, sizeof record, &kill_t);
    }
    const char *fields = have_kill ? strchr(record, ' ') : NULL; /* after t_ns */
    char since[32] = "na";
    if (have_kill)
        snprintf(since, sizeof since, "%.3f", (double)(end - kill_t) / 1e9);
    int blamed_alive = 0;
    claim c = first_claim(msg, the_victim, &blamed_alive);
    char list[128] = "";
    for (int i = 0, at = 0; i < c.n && at < (int)sizeof list - 12; i++)
        at += snprintf(list + at, sizeof list - (size_t)at, "%s%d", i ? "," : "", c.procs[i]);
    int named =
        !c.ambiguous && c.n > 0 && strcmp(c.kind, "late") != 0 && strcmp(c.kind, "device") != 0;
    for (int i = 0; named && i < c.n; i++)
        named = c.procs[i] == the_victim;
    printf("RESULT seed=%d victim=%d survivor=%d%s op=%s status=%s since_kill=%s in_op=%.3f "
           "first_cause=%s:%s named_victim=%d blamed_alive=%d ambiguous_first=%d\n",
           the_seed, the_victim, me, fields ? fields : " kill=none", op,
           status_text ? status_text : spmd_status_name(st), since, (double)(end - op_start) / 1e9,
           c.kind, c.n ? list : "-", st == SPMD_OK ? 1 : named, blamed_alive,
           c.ambiguous && st != SPMD_OK);
    printf("MESSAGE seed=%d survivor=%d: %s\n", the_seed, me, msg[0] ? msg : "(none)");
    int used = atomic_load(&trace_used);
    for (int i = 0; tracing && i < used && i < TRACE_MAX; i++) {
        const trace_entry *e = &trace_log[i];
        printf("TRACE seed=%d process=%d t=%.6f %s peer=%d tag=%d n=%d\n", the_seed, me,
               (double)(e->t_ns - (have_kill ? kill_t - trace_origin : 0)) / 1e9, e->fn, e->peer,
               e->tag, e->bytes);
    }
    fflush(stdout);
}

static void *watchdog(void *arg)
{
    (void)arg;
    int64_t limit = trial_start_ns + (int64_t)((4 * timeout_s + 5) * 1e9);
    while (realtime_ns() < limit) {
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
        if (atomic_load(&reported))
            return NULL;
    }
    report(spmd_process_index(), atomic_load(&current_op), SPMD_OK, "HUNG",
           atomic_load(&op_start_ns), realtime_ns(), "");
    char path[4200];
    snprintf(path, sizeof path, "%s/done.%d", the_dir, spmd_process_index());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0)
        close(fd);
    _Exit(3);
}

/* Waits until every survivor has reported (DIR/done.R), at most `cap` seconds. */
static void wait_for_survivors(int me, int procs, double cap)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/done.%d", the_dir, me);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0)
        close(fd);
    int64_t until = realtime_ns() + (int64_t)(cap * 1e9);
    while (realtime_ns() < until) {
        int all = 1;
        for (int p = 0; p < procs && all; p++) {
            if (p == the_victim)
                continue;
            snprintf(path, sizeof path, "%s/done.%d", the_dir, p);
            all = access(path, F_OK) == 0;
        }
        if (all)
            return;
        struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
    }
}

/* splitmix64: the seed's draws */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_random_kill SEED|count DIR\n");
        return 2;
    }
    int count_mode = strcmp(argv[1], "count") == 0;
    the_seed = count_mode ? 0 : atoi(argv[1]);
    snprintf(the_dir, sizeof the_dir, "%s", argv[2]);
    const char *timeout_text = getenv("SPMD_COLLECTIVE_TIMEOUT");
    timeout_s = timeout_text ? atof(timeout_text) : 300.0;
    if (spmd_init(NULL) != SPMD_OK) {
        fprintf(stderr, "%s\n", spmd_last_error());
        return 1;
    }
    int procs = spmd_process_count(), me = spmd_process_index();
    if (procs < 2) {
        printf("needs at least 2 processes; skipped\n");
        spmd_finalize();
        return 77;
    }
    uint64_t s = (uint64_t)the_seed * 0x100000001B3ull + 12345;
    /* RK_VICTIM_ANY=1: process 0 may be the victim too */
    int any = getenv("RK_VICTIM_ANY") != NULL && atoi(getenv("RK_VICTIM_ANY")) != 0;
    the_victim =
        any ? (int)(mix(&s) % (uint64_t)procs) : 1 + (int)(mix(&s) % (uint64_t)(procs - 1));
    uint64_t draw_n = mix(&s);
    kill_kind = (int)(mix(&s) % 3);
    kill_tests = 1 + (int)(mix(&s) % 8);

    world w = {0};
    w.n = spmd_device_count();
    const char *names[1] = {"i"};
    const int64_t shape[1] = {w.n};
    float data[64] = {0};
    if (w.n > 64 || spmd_mesh_create(1, &w.n, names, NULL, 0, &w.mesh) ||
        spmd_sharding_create_parse(w.mesh, "'i'", &w.rows) ||
        spmd_sharding_create_parse(w.mesh, "", &w.all) || spmd_spec_parse("'i'", &w.spec) ||
        spmd_device_put(data, 1, shape, SPMD_DTYPE_F32, w.rows, &w.x)) {
        fprintf(stderr, "set-up: %s\n", spmd_last_error());
        return 1;
    }
    /* warm-ups 1 and 2 set everything up (the second posts the note receives of communicators
     * that the first made); warm-up 3 counts the posting calls of a run */
    int failed = -1;
    spmd_status st = run_sequence(&w, &failed);
    if (st == SPMD_OK)
        st = run_sequence(&w, &failed);
    if (st == SPMD_OK) {
        atomic_store(&counting, 1);
        st = run_sequence(&w, &failed);
        atomic_store(&counting, 0);
    }
    if (st != SPMD_OK) {
        fprintf(stderr, "process %d: warm-up, %s: %s\n", me, op_names[failed], spmd_last_error());
        return 1;
    }
    kill_total = atomic_load(&posts);
    atomic_store(&posts, 0);
    kill_n = 1 + (long)(draw_n % (uint64_t)(kill_total > 0 ? kill_total : 1));
    if (spmd_sync_global_devices("armed") != SPMD_OK) {
        fprintf(stderr, "process %d: set-up barrier: %s\n", me, spmd_last_error());
        return 1;
    }
    if (count_mode) {
        atomic_store(&counting, 1);
        st = run_sequence(&w, &failed);
        atomic_store(&counting, 0);
        printf("COUNT process=%d warmup=%ld again=%ld status=%s\n", me, kill_total,
               atomic_load(&posts), spmd_status_name(st));
        fflush(stdout);
        spmd_finalize();
        return 0;
    }

    /* the trial */
    trial_start_ns = realtime_ns();
    trace_origin = trial_start_ns;
    tracing = getenv("RK_TRACE") != NULL && atoi(getenv("RK_TRACE")) != 0;
    pthread_t dog;
    if (me != the_victim)
        pthread_create(&dog, NULL, watchdog, NULL);
    atomic_store(&armed, me == the_victim);
    atomic_store(&counting, 1);
    st = run_sequence(&w, &failed);
    int64_t end = realtime_ns();
    if (me == the_victim) { /* the kill point was not reached: die now */
        atomic_store(&current_op, "after-sequence(kill-point-not-reached)");
        die_now("-");
    }
    char msg[4096];
    snprintf(msg, sizeof msg, "%s", st == SPMD_OK ? "" : spmd_last_error());
    /* the kill record is written before the victim dies; a survivor that failed before it
     * (a failure nobody caused) reports since_kill=na */
    report(me, failed >= 0 ? op_names[failed] : "none", st, NULL, atomic_load(&op_start_ns), end,
           msg);
    wait_for_survivors(me, procs, 6 * timeout_s + 5);
    /* MPI cannot be finalized with a dead peer (Open MPI 4 has no ULFM): leave without it */
    _Exit(0);
}
#endif
