/*
 * What one call costs the busiest process in messages, as a function of P: the MPI calls
 * libspmd makes are counted here through MPI's profiling interface (PMPI), per process, over
 * a run of calls, for the calls whose control plane must scale (an empty shard_map, one with a
 * 4-byte psum, one with a replicated output whose claim is checked, a barrier, a small
 * reshard, a device_put whose host data is checked to be the same on every process, an
 * spmd_assert_equal that holds and one that fails, a shard_map whose fn fails on one process:
 * its abort record goes down a tree, at most 5 messages per level). The test
 * fails when the busiest process sends and receives more than MESSAGES_PER_LEVEL *
 * ceil(log2 P) + MESSAGES_FLAT messages per call, sends more than BYTES_PER_MESSAGE bytes per
 * message it counts, or makes an MPI collective call per call (those hide their own traffic; the
 * calls measured here need none). It prints the table: messages (sent and received) and bytes
 * sent (what arrives is what the others sent). Of a shard_map call, the notes that its waits
 * lasting past 200 ms send (a crowded machine's) count apart, bounded by the run's time
 * (NOTES_APART): 16 processes on the 2 cores of a busy machine took a 16 MiB psum past its
 * bound of 40 messages with them (40.2-42).
 *
 * With 8 devices per process it also counts the communicators the first call on a 4-axis mesh
 * creates: only those of the axes its collectives use. With SPMD_COUNT_RINGS=1 it keeps the
 * shared-memory rings and checks instead that a small collective of every kind adds no MPI
 * message or collective call to a call (skipped where psum's do: no rings there).
 *
 *   mpirun -np 8 -x SPMD_NUM_CPU_DEVICES=1 test_message_counts
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>
#include <spmd/mpi.h>

/* Bounds. An agreement, a small collective or an outcome over P processes is one exchange of
 * recursive doubling: per level one message sent and one received, plus one received and one
 * sent (at most) for the processes beyond the largest power of two, which hand their part to a
 * partner and get the result back. A call measured here makes at most two exchanges (a
 * collective inside fn, then the outcome; or the agreement and the data of a reshard, whose
 * one piece per process is one message each way), so 2 x 2 per level and 2 x 2 flat. */
#define MESSAGES_PER_LEVEL 4
#define MESSAGES_FLAT 4
/* Every message sent is a payload of a few words and a 16-byte header here. */
#define BYTES_PER_MESSAGE 64
#define CALLS 40

/* ---- the counters (every thread of the process) ---- */

static atomic_long sends, recvs, sent_bytes, collectives, comms_created;
/* ... of them on libspmd's private communicator (spmd_mpi_comm), set once it exists: once a
 * mesh is set up, a shard_map call sends there only the notes of its lasting waits */
static atomic_long private_messages, private_bytes;
static _Atomic(MPI_Comm) private_comm = MPI_COMM_NULL;

static int on_private(MPI_Comm c)
{
    MPI_Comm mine = atomic_load(&private_comm);
    return mine != MPI_COMM_NULL && c == mine;
}

static long type_bytes(int count, MPI_Datatype type)
{
    int size = 0;
    PMPI_Type_size(type, &size);
    return (long)count * size;
}

static void count_send(int count, MPI_Datatype type, MPI_Comm c)
{
    long bytes = type_bytes(count, type);
    atomic_fetch_add(&sends, 1);
    atomic_fetch_add(&sent_bytes, bytes);
    if (on_private(c)) {
        atomic_fetch_add(&private_messages, 1);
        atomic_fetch_add(&private_bytes, bytes);
    }
}

static void count_recv(int count, MPI_Datatype type, MPI_Comm c)
{
    (void)count, (void)type; /* a buffer posted is not what arrives: that, the sender counts */
    atomic_fetch_add(&recvs, 1);
    if (on_private(c))
        atomic_fetch_add(&private_messages, 1);
}

int MPI_Send(const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c)
{
    count_send(n, t, c);
    return PMPI_Send(b, n, t, d, tag, c);
}

int MPI_Isend(const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c, MPI_Request *r)
{
    count_send(n, t, c);
    return PMPI_Isend(b, n, t, d, tag, c, r);
}

int MPI_Issend(const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c, MPI_Request *r)
{
    count_send(n, t, c);
    return PMPI_Issend(b, n, t, d, tag, c, r);
}

int MPI_Recv(void *b, int n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Status *st)
{
    count_recv(n, t, c);
    return PMPI_Recv(b, n, t, s, tag, c, st);
}

int MPI_Irecv(void *b, int n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Request *r)
{
    count_recv(n, t, c);
    return PMPI_Irecv(b, n, t, s, tag, c, r);
}

int MPI_Mrecv(void *b, int n, MPI_Datatype t, MPI_Message *m, MPI_Status *st)
{
    count_recv(n, t, MPI_COMM_NULL); /* a matched probe's: never a note */
    return PMPI_Mrecv(b, n, t, m, st);
}

int MPI_Sendrecv(const void *sb, int sn, MPI_Datatype st_, int d, int stag, void *rb, int rn,
                 MPI_Datatype rt, int s, int rtag, MPI_Comm c, MPI_Status *status)
{
    count_send(sn, st_, c);
    count_recv(rn, rt, c);
    return PMPI_Sendrecv(sb, sn, st_, d, stag, rb, rn, rt, s, rtag, c, status);
}

/* Collectives: counted as calls (their messages are MPI's own). */
#define COLLECTIVE() atomic_fetch_add(&collectives, 1)

int MPI_Barrier(MPI_Comm c)
{
    COLLECTIVE();
    return PMPI_Barrier(c);
}

int MPI_Ibarrier(MPI_Comm c, MPI_Request *r)
{
    COLLECTIVE();
    return PMPI_Ibarrier(c, r);
}

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{
    COLLECTIVE();
    return PMPI_Allreduce(s, r, n, t, op, c);
}

int MPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                   MPI_Request *q)
{
    COLLECTIVE();
    return PMPI_Iallreduce(s, r, n, t, op, c, q);
}

int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,
                  MPI_Comm c)
{
    COLLECTIVE();
    return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}

int MPI_Iallgatherv(const void *s, int sn, MPI_Datatype st, void *r, const int rn[], const int d[],
                    MPI_Datatype rt, MPI_Comm c, MPI_Request *q)
{
    COLLECTIVE();
    return PMPI_Iallgatherv(s, sn, st, r, rn, d, rt, c, q);
}

int MPI_Igatherv(const void *s, int sn, MPI_Datatype st, void *r, const int rn[], const int d[],
                 MPI_Datatype rt, int root, MPI_Comm c, MPI_Request *q)
{
    COLLECTIVE();
    return PMPI_Igatherv(s, sn, st, r, rn, d, rt, root, c, q);
}

int MPI_Ibcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *q)
{
    COLLECTIVE();
    return PMPI_Ibcast(b, n, t, root, c, q);
}

int MPI_Ireduce_scatter(const void *s, void *r, const int n[], MPI_Datatype t, MPI_Op op,
                        MPI_Comm c, MPI_Request *q)
{
    COLLECTIVE();
    return PMPI_Ireduce_scatter(s, r, n, t, op, c, q);
}

int MPI_Ialltoallv(const void *s, const int sn[], const int sd[], MPI_Datatype st, void *r,
                   const int rn[], const int rd[], MPI_Datatype rt, MPI_Comm c, MPI_Request *q)
{
    COLLECTIVE();
    return PMPI_Ialltoallv(s, sn, sd, st, r, rn, rd, rt, c, q);
}

int MPI_Comm_create_group(MPI_Comm c, MPI_Group g, int tag, MPI_Comm *out)
{
    COLLECTIVE();
    atomic_fetch_add(&comms_created, 1);
    return PMPI_Comm_create_group(c, g, tag, out);
}

int MPI_Comm_dup(MPI_Comm c, MPI_Comm *out)
{
    COLLECTIVE();
    atomic_fetch_add(&comms_created, 1);
    return PMPI_Comm_dup(c, out);
}

int MPI_Comm_idup(MPI_Comm c, MPI_Comm *out, MPI_Request *r)
{
    COLLECTIVE();
    atomic_fetch_add(&comms_created, 1);
    return PMPI_Comm_idup(c, out, r);
}

int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *out)
{
    COLLECTIVE();
    atomic_fetch_add(&comms_created, 1);
    return PMPI_Comm_split(c, color, key, out);
}

/* ---- measurement ---- */

typedef struct counts {
    double messages, sent, collectives, comms, private_messages, private_sent, seconds;
} counts;

static counts snapshot(void)
{
    counts c = {(double)(atomic_load(&sends) + atomic_load(&recvs)),
                (double)atomic_load(&sent_bytes),
                (double)atomic_load(&collectives),
                (double)atomic_load(&comms_created),
                (double)atomic_load(&private_messages),
                (double)atomic_load(&private_bytes),
                PMPI_Wtime()};
    return c;
}

/* How the private communicator's messages count: with the others, or apart as the notes of
 * lasting waits (a shard_map call on a mesh set up already sends nothing else there). A wait
 * between processes that lasts past a fiftieth of SPMD_COLLECTIVE_TIMEOUT (within 20-200 ms:
 * note_interval) asks the process it waits for, and those that one waits for, where they are
 * (again after twice as long, and so on; a recheck 10 ms after an answer that needs one), and
 * they answer: a crowded machine's, not P's. So they are bounded by the run's time: none in a
 * run shorter than the interval, else per interval a probe and an answer each way with each
 * level's partner and the one a process folds into, twice (the rechecks). */
enum { ALL_COUNTED, NOTES_APART };
#define NOTES_PER_LEVEL 8

static double note_interval(void)
{
    const char *text = getenv("SPMD_COLLECTIVE_TIMEOUT");
    double timeout = text ? atof(text) : 0;
    double interval = (timeout > 0 ? timeout : 300) / 50;
    return interval < 0.02 ? 0.02 : interval > 0.2 ? 0.2 : interval;
}

static int P, me, failures;

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "process %d: %s: %s\n", me, #call, spmd_last_error());                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int ceil_log2(int n)
{
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

/* Runs `call` `calls` times after one warm-up call and reports the busiest process's cost per
 * call (every process checks the bounds on its own numbers): at most per_level * ceil(log2 P)
 * + flat messages and bytes_bound bytes sent, and with NOTES_APART at most NOTES_PER_LEVEL *
 * (ceil(log2 P) + 1) notes per note_interval() (whole) of the run's time, the longest of any
 * process. */
static void measure_within(const char *what, void (*call)(void *), void *arg, int calls,
                           double per_level, double flat, double bytes_bound, int notes)
{
    call(arg); /* the first call sets up communicators and plans */
    PMPI_Barrier(spmd_mpi_comm());
    counts before = snapshot();
    for (int k = 0; k < calls; k++)
        call(arg);
    counts after = snapshot();
    double apart = notes == NOTES_APART ? after.private_messages - before.private_messages : 0;
    double apart_bytes = notes == NOTES_APART ? after.private_sent - before.private_sent : 0;
    double mine[6] = {(after.messages - before.messages - apart) / calls,
                      (after.sent - before.sent - apart_bytes) / calls,
                      (after.collectives - before.collectives) / calls,
                      (after.comms - before.comms) / calls,
                      apart / calls,
                      after.seconds - before.seconds};
    double busiest[6];
    PMPI_Allreduce(mine, busiest, 6, MPI_DOUBLE, MPI_MAX, spmd_mpi_comm());
    double message_bound = per_level * ceil_log2(P) + flat;
    double note_bound =
        NOTES_PER_LEVEL * (ceil_log2(P) + 1) * floor(busiest[5] / note_interval()) / calls;
    int bad = mine[0] > message_bound || mine[1] > bytes_bound || mine[2] > 0 || mine[3] > 0 ||
              mine[4] > note_bound;
    if (bad) {
        fprintf(stderr,
                "process %d: %s: %.1f messages, %.0f bytes sent, %.2f MPI collective calls, "
                "%.2f communicators and %.1f notes of lasting waits per call (the run took "
                "%.3f s); the bounds at P = %d are %.0f messages, %.0f bytes, no collective call "
                "or communicator, %.1f notes\n",
                me, what, mine[0], mine[1], mine[2], mine[3], mine[4], busiest[5], P, message_bound,
                bytes_bound, note_bound);
        failures++;
    }
    char note_text[16] = "-";
    if (notes == NOTES_APART)
        snprintf(note_text, sizeof note_text, "%.1f", busiest[4]);
    if (me == 0)
        printf("| %-36s | %3d | %8.1f | %10.0f | %11.2f | %5.0f | %5s |\n", what, P, busiest[0],
               busiest[1], busiest[2], message_bound, note_text);
}

static void measure(const char *what, void (*call)(void *), void *arg, int notes)
{
    double bound = MESSAGES_PER_LEVEL * ceil_log2(P) + MESSAGES_FLAT;
    measure_within(what, call, arg, CALLS, MESSAGES_PER_LEVEL, MESSAGES_FLAT,
                   BYTES_PER_MESSAGE * bound, notes);
}

/* ---- the calls ---- */

typedef struct scenario {
    spmd_mesh *mesh;
    spmd_plan *plan;
    spmd_array *x;
    spmd_sharding *to;
    spmd_sharding *from; /* device_put: the same host data onto it, checked */
    const float *data;
    int64_t elements;
} scenario;

static spmd_status empty_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)ctx, (void)nin, (void)in, (void)nout, (void)out, (void)user;
    return SPMD_OK;
}

/* fn fails on the last process's devices, after a psum every device makes: the call fails on
 * every process (its abort record goes out while the others wait in the call's outcome). */
static spmd_status failing_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    float one[4] = {1, 1, 1, 1}; /* out's block: one element */
    spmd_block b = out[0];
    b.data = one;
    spmd_status st = spmd_psum(ctx, &b, &out[0], "x");
    if (st == SPMD_OK && spmd_process_index() == spmd_process_count() - 1)
        return SPMD_ERR_INVALID_ARGUMENT;
    return st;
}

static spmd_status psum_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    float one = 1.0f;
    spmd_block b = {&one, SPMD_DTYPE_F32, 1, {1}};
    spmd_status st = spmd_psum(ctx, &b, &out[0], "x");
    if (st == SPMD_OK && *(float *)out[0].data != (float)spmd_device_count())
        st = SPMD_ERR_INTERNAL; /* the psum of ones is the device count */
    return st;
}

/* A pytree of 16 one-element blocks, float32 and int32, psum'd at once: one exchange, as one
 * psum (where 16 psums would make 16). */
static spmd_status psum_many_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                  spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)out, (void)user;
    enum { BLOCKS = 16, ELEMS = 1 };
    float f[BLOCKS / 2][ELEMS];
    int32_t i[BLOCKS / 2][ELEMS];
    spmd_block b[BLOCKS];
    for (int k = 0; k < BLOCKS / 2; k++) {
        for (int e = 0; e < ELEMS; e++)
            f[k][e] = 1.0f, i[k][e] = 1;
        b[2 * k] = (spmd_block){f[k], SPMD_DTYPE_F32, 1, {ELEMS}};
        b[2 * k + 1] = (spmd_block){i[k], SPMD_DTYPE_I32, 1, {ELEMS}};
    }
    spmd_status st = spmd_psum_many(ctx, BLOCKS, b, b, "x");
    for (int k = 0; st == SPMD_OK && k < BLOCKS / 2; k++)
        if (f[k][ELEMS - 1] != (float)spmd_device_count() || i[k][0] != spmd_device_count())
            st = SPMD_ERR_INTERNAL;
    return st;
}

/* axis_index_groups: the mesh's two halves, each listed in reverse (member order matters) */
static int halves[4096];
static spmd_axis_groups halves_groups;

static spmd_status grouped_psum_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                     spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    float one = 1.0f;
    spmd_block b = {&one, SPMD_DTYPE_F32, 1, {1}};
    spmd_status st = spmd_psum_groups(ctx, &b, &out[0], "x", &halves_groups);
    if (st == SPMD_OK && *(float *)out[0].data != (float)(spmd_device_count() / 2))
        st = SPMD_ERR_INTERNAL; /* the psum of ones is the half's size */
    return st;
}

/* A psum of LARGE_ELEMENTS floats per device (1 or 16 MiB): the agreement, then the data in
 * the canonical order (recursive doubling over the processes' blocks), then the outcome. */
static int64_t large_elements;

static spmd_status large_psum_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                   spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    spmd_block b;
    spmd_status st = spmd_ctx_alloc(ctx, 1, &large_elements, SPMD_DTYPE_F32, &b);
    for (int64_t i = 0; st == SPMD_OK && i < large_elements; i++)
        ((float *)b.data)[i] = 1.0f;
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &b, &out[0], "x");
    for (int64_t i = 0; st == SPMD_OK && i < large_elements; i += 4099)
        if (((float *)out[0].data)[i] != (float)spmd_device_count())
            st = SPMD_ERR_INTERNAL; /* the psum of ones is the device count */
    return st;
}

/* A psum_scatter of scatter_elements floats per device (about 1 MiB, a multiple of the device
 * count), tiled along the block: each device keeps its chunk of the sum. */
static int64_t scatter_elements;

static spmd_status large_psum_scatter_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                           spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    spmd_block b;
    spmd_status st = spmd_ctx_alloc(ctx, 1, &scatter_elements, SPMD_DTYPE_F32, &b);
    for (int64_t i = 0; st == SPMD_OK && i < scatter_elements; i++)
        ((float *)b.data)[i] = (float)(i % 7);
    if (st == SPMD_OK)
        st = spmd_psum_scatter(ctx, &b, &out[0], "x", 0, 1);
    int position = 0;
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, "x", &position);
    int64_t chunk = scatter_elements / spmd_device_count(), first = position * chunk;
    for (int64_t i = 0; st == SPMD_OK && i < chunk; i += 1031)
        if (((float *)out[0].data)[i] != (float)((first + i) % 7 * spmd_device_count()))
            st = SPMD_ERR_INTERNAL; /* device d's chunk of the sum of every device's block */
    return st;
}

static spmd_status constant_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                 spmd_block *out, void *user)
{
    (void)ctx, (void)nin, (void)in, (void)nout, (void)user;
    ((float *)out[0].data)[0] = 42.0f; /* the same on every device: the claim holds */
    return SPMD_OK;
}

static void execute(void *arg)
{
    scenario *s = arg;
    spmd_array *out = NULL;
    CHECK(spmd_plan_execute(s->plan, NULL, &out));
    spmd_array_destroy(out);
}

static void execute_failing(void *arg)
{
    scenario *s = arg;
    spmd_array *out = NULL;
    spmd_status st = spmd_plan_execute(s->plan, NULL, &out);
    if (st == SPMD_OK) {
        fprintf(stderr, "process %d: a call whose fn fails on process %d succeeded\n", me, P - 1);
        exit(1);
    }
}

static void barrier(void *arg)
{
    (void)arg;
    CHECK(spmd_sync_global_devices("counted"));
}

static void reshard(void *arg)
{
    scenario *s = arg;
    spmd_array *y = NULL;
    CHECK(spmd_reshard(s->x, s->to, NULL, &y));
    spmd_array_destroy(y);
}

/* an array op: its rule's psum (the rows of x are sharded), in one shard_map */
static void array_sum(void *arg)
{
    scenario *s = arg;
    spmd_array *y = NULL;
    CHECK(spmd_array_reduce(SPMD_REDUCE_SUM, s->x, -1, NULL, 0, NULL, NULL, &y));
    spmd_array_destroy(y);
}

static void device_put(void *arg)
{
    scenario *s = arg;
    spmd_array *y = NULL;
    CHECK(spmd_device_put(s->data, 1, &s->elements, SPMD_DTYPE_F32, s->from, &y));
    spmd_array_destroy(y);
}

/* spmd_assert_equal of a host-local array: alike everywhere, or differing on the last process
 * (the call then fails on every process, as it must). */
static void assert_same(void *arg) { CHECK(spmd_assert_equal(arg, "counted")); }

static void assert_differs(void *arg)
{
    spmd_status st = spmd_assert_equal(arg, "counted");
    if (st != SPMD_ERR_INVALID_ARGUMENT || !strstr(spmd_last_error(), "differs")) {
        fprintf(stderr, "process %d: spmd_assert_equal of differing values gave %s: %s\n", me,
                spmd_status_name(st), spmd_last_error());
        exit(1);
    }
}

static void count_assert_equal(void)
{
    int32_t values[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    spmd_array *x = NULL;
    CHECK(
        spmd_array_create_on_device(spmd_local_device_id(0), values, 1, shape, SPMD_DTYPE_I32, &x));
    /* an agreement and a record of 16 bytes with its header (64) reduced: two exchanges */
    double bound = MESSAGES_PER_LEVEL * ceil_log2(P) + MESSAGES_FLAT;
    measure_within("spmd_assert_equal, 16 B", assert_same, x, CALLS, MESSAGES_PER_LEVEL,
                   MESSAGES_FLAT, (BYTES_PER_MESSAGE + 16 + 64) * bound, ALL_COUNTED);
    spmd_array_destroy(x);
    if (P < 2)
        return;
    values[1] = me == P - 1 ? 5 : 2;
    CHECK(
        spmd_array_create_on_device(spmd_local_device_id(0), values, 1, shape, SPMD_DTYPE_I32, &x));
    measure_within("spmd_assert_equal, 16 B, one differs", assert_differs, x, CALLS,
                   MESSAGES_PER_LEVEL, MESSAGES_FLAT, (BYTES_PER_MESSAGE + 16 + 64) * bound,
                   ALL_COUNTED);
    spmd_array_destroy(x);
}

/* A plan of fn with nout float32 outputs of `length` elements, laid out by out_spec. */
static void plan_with_length(scenario *s, spmd_fn fn, int nout, const char *out_spec,
                             int64_t length)
{
    spmd_spec *spec = NULL;
    CHECK(spmd_spec_parse(out_spec, &spec));
    const spmd_spec *specs[1] = {spec};
    spmd_out_desc desc = {1, {length}, SPMD_DTYPE_F32};
    CHECK(spmd_plan_create(s->mesh, fn, NULL, 0, NULL, NULL, nout, &desc, specs, NULL, &s->plan));
    spmd_spec_destroy(spec);
}

/* One element per device, or one replicated element (out_spec ""). */
static void plan_scenario(scenario *s, spmd_fn fn, int nout, const char *out_spec)
{
    plan_with_length(s, fn, nout, out_spec, out_spec[0] ? spmd_device_count() : 1);
}

static void count_calls(void)
{
    int n = spmd_device_count();
    const char *name = "x";
    scenario s = {0};
    CHECK(spmd_mesh_create(1, &n, &name, NULL, 0, &s.mesh));

    plan_scenario(&s, empty_body, 0, "'x'");
    measure("empty shard_map", execute, &s, NOTES_APART);
    spmd_plan_destroy(s.plan);

    plan_scenario(&s, psum_body, 1, "'x'");
    measure("shard_map with one 4-byte psum", execute, &s, NOTES_APART);
    spmd_plan_destroy(s.plan);

    /* a failed call: its abort record down a tree, beside the outcome (1 KiB records) */
    plan_scenario(&s, failing_body, 1, "'x'");
    measure_within("shard_map failing on one process", execute_failing, &s, CALLS,
                   MESSAGES_PER_LEVEL + 1, MESSAGES_FLAT, 1100 * (ceil_log2(P) + 1) + 64 * 16,
                   ALL_COUNTED);
    spmd_plan_destroy(s.plan);

    plan_scenario(&s, psum_many_body, 0, "'x'");
    measure("psum_many of 16 one-element blocks", execute, &s, NOTES_APART);
    spmd_plan_destroy(s.plan);

    if (n % 2 == 0 && n <= 4096) {
        for (int p = 0; p < n; p++)
            halves[p] = p < n / 2 ? n / 2 - 1 - p : n - 1 - (p - n / 2);
        halves_groups = (spmd_axis_groups){2, NULL, halves};
        plan_scenario(&s, grouped_psum_body, 1, "'x'");
        measure("psum in 2 axis_index_groups", execute, &s, NOTES_APART);
        spmd_plan_destroy(s.plan);
    }

    /* Large psums: the agreement, the data, then the outcome. Per level the agreement and the
     * outcome send and receive one message each, the data two (a reduce-scatter by recursive
     * halving, an all-gather by recursive doubling, over the processes' blocks in the tree's
     * order): c = 8. A process beyond the largest power of two folds into a partner in each
     * (one message each way in all three): c0 = 8. The notes of waits longer than 200 ms (a
     * crowded machine's: 16 processes on 2 cores) count apart. Bytes: about 2 S (3 S where a
     * process folds), plus headers. */
    for (int mib = 1; mib <= 16; mib *= 16) {
        large_elements = (int64_t)mib << 18;
        plan_with_length(&s, large_psum_body, 1, "'x'", large_elements * n);
        double payload = (double)large_elements * sizeof(float);
        char what[64];
        snprintf(what, sizeof what, "shard_map with one %d MiB psum", mib);
        measure_within(what, execute, &s, 4, 8, 8, 3 * payload + 64 * (8 * ceil_log2(P) + 8),
                       NOTES_APART);
        spmd_plan_destroy(s.plan);
    }

    /* A large psum_scatter: the agreement, then the tree's reduce-scatter (the halving alone,
     * then each process's chunks from the processes holding them: a few messages), then the
     * outcome. Bytes: under S by halving, S more where a process folds, and a share S / P of
     * what a process holds sent on: bounded by 2 S plus headers, against about 2 S for the
     * whole sum's halving and doubling. */
    scatter_elements = ((int64_t)1 << 18) / n * n;
    plan_with_length(&s, large_psum_scatter_body, 1, "'x'", scatter_elements);
    double scatter_payload = (double)scatter_elements * sizeof(float);
    measure_within("shard_map, one 1 MiB psum_scatter", execute, &s, 4, 8, 8,
                   2 * scatter_payload + 64 * (8 * ceil_log2(P) + 8), NOTES_APART);
    spmd_plan_destroy(s.plan);

    plan_scenario(&s, constant_body, 1, "");
    measure("shard_map, replicated output checked", execute, &s, NOTES_APART);
    spmd_plan_destroy(s.plan);

    measure("spmd_sync_global_devices", barrier, NULL, ALL_COUNTED);

    /* a small reshard: every block moves to the next device (a rotated mesh) */
    int *rotated = malloc((size_t)n * sizeof *rotated);
    for (int i = 0; i < n; i++)
        rotated[i] = (i + 1) % n;
    spmd_mesh *other = NULL;
    spmd_sharding *from = NULL;
    CHECK(spmd_mesh_create(1, &n, &name, rotated, n, &other));
    CHECK(spmd_sharding_create_parse(s.mesh, "'x'", &from));
    CHECK(spmd_sharding_create_parse(other, "'x'", &s.to));
    float *data = malloc((size_t)n * 4 * sizeof *data);
    for (int i = 0; i < 4 * n; i++)
        data[i] = (float)i;
    int64_t shape[1] = {4 * n};
    CHECK(spmd_device_put(data, 1, shape, SPMD_DTYPE_F32, from, &s.x));
    measure("spmd_reshard of 16 bytes per device", reshard, &s, ALL_COUNTED);
    /* the check that every process passed the same data: one agreement on a digest range */
    s.from = from;
    s.data = data;
    s.elements = shape[0];
    measure("spmd_device_put, 16 B per device", device_put, &s, ALL_COUNTED);
    measure("spmd_array_reduce sum, 16 B/device", array_sum, &s, ALL_COUNTED);
    /* the values moved: read back through the new layout */
    spmd_array *y = NULL;
    float *back = malloc((size_t)n * 4 * sizeof *back);
    CHECK(spmd_reshard(s.x, s.to, NULL, &y));
    CHECK(spmd_process_allgather(y, 1, back, (size_t)n * 4 * sizeof *back));
    if (memcmp(back, data, (size_t)n * 4 * sizeof *back) != 0) {
        fprintf(stderr, "process %d: the resharded array differs from its source\n", me);
        failures++;
    }
    spmd_array_destroy(y);
    spmd_array_destroy(s.x);
    spmd_sharding_destroy(from);
    spmd_sharding_destroy(s.to);
    spmd_mesh_destroy(other);
    spmd_mesh_destroy(s.mesh);
    free(rotated);
    free(data);
    free(back);
}

/* ---- communicators of a 4-axis mesh ---- */

static spmd_status two_axes_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                 spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    float one = 1.0f, partial = 0;
    spmd_block b = {&one, SPMD_DTYPE_F32, 1, {1}}, t = {&partial, SPMD_DTYPE_F32, 1, {1}};
    spmd_status st = spmd_psum(ctx, &b, &t, "a"); /* across the processes */
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &t, &out[0], "d"); /* inside each process */
    return st;
}

static void count_mesh_comms(void)
{
    int shape[4] = {2, 2, 2, 2};
    const char *names[4] = {"a", "b", "c", "d"};
    spmd_mesh *mesh = NULL;
    CHECK(spmd_mesh_create(4, shape, names, NULL, 0, &mesh));
    spmd_spec *spec = NULL;
    CHECK(spmd_spec_parse("('a', 'b', 'c', 'd')", &spec));
    const spmd_spec *specs[1] = {spec};
    spmd_out_desc desc = {1, {16}, SPMD_DTYPE_F32};
    spmd_array *out = NULL;
    PMPI_Barrier(spmd_mpi_comm());
    counts before = snapshot();
    CHECK(spmd_shard_map(mesh, two_axes_body, NULL, 0, NULL, NULL, 1, &desc, specs, NULL, &out));
    counts after = snapshot();
    float values[16];
    CHECK(spmd_process_allgather(out, 1, values, sizeof values));
    for (int i = 0; i < 16; i++)
        if (values[i] != 4.0f) { /* 2 along 'a' times 2 along 'd' */
            fprintf(stderr, "process %d: element %d is %g instead of 4\n", me, i, values[i]);
            failures++;
        }
    /* The mesh needs one communicator over its processes, which the groups of 'a' (8 of them,
     * each across the 2 processes) share, each with tags of its own. The groups of 'd' lie
     * inside each process. Every other axis set has no groups at all. (Below
     * MPI_THREAD_MULTIPLE the 8 groups of 'a' also make an MPI communicator each, up front.) */
    double created = after.comms - before.comms;
    int level = 0;
    MPI_Query_thread(&level);
    int expected = 1 + (level < MPI_THREAD_MULTIPLE ? 8 : 0);
    if (me == 0)
        printf("first call on a 2x2x2x2 mesh over %d x %d devices, psum over 'a' then 'd': "
               "%.0f communicators created (expected %d)\n",
               P, spmd_local_device_count(), created, expected);
    if (created != expected) {
        fprintf(stderr, "process %d: %.0f communicators created, expected %d\n", me, created,
                expected);
        failures++;
    }
    spmd_array_destroy(out);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
}

/* ---- small collectives within a machine: through the rings, no MPI message ---- */

/* Every kind of collective, REPEATS times in one fn or once: where the processes share a
 * machine and made their rings, the extra calls add no MPI message (psum, the first kind to
 * use the rings, tells whether this machine has them: the test is skipped where it does not). */
enum { REPEATS = 9, RING_CALLS = 8 };
static const char *const ring_kinds[] = {"psum",          "pmax",          "psum_many",
                                         "all_gather",    "psum_scatter",  "ppermute",
                                         "ppermute_many", "all_to_all",    "all_to_all_many",
                                         "pbroadcast",    "psend + precv", "ragged_all_to_all"};
enum { RING_KINDS = (int)(sizeof ring_kinds / sizeof ring_kinds[0]) };
static int ring_kind, ring_repeats;

/* x, y, y2: n floats; wide, wide2: n * n; one: 1; tables: ragged_all_to_all's counts */
static spmd_status one_small(spmd_ctx *ctx, int kind, spmd_block *b, spmd_block *tables,
                             const int *pairs, int n)
{
    spmd_block *x = &b[0], *y = &b[1], *y2 = &b[2], *wide = &b[3], *wide2 = &b[4], *one = &b[5];
    spmd_block xs[2] = {*x, *x}, ys[2] = {*y, *y2}, mixed[2] = {*x, *wide},
               mixed_out[2] = {*y, *wide2};
    int axes[2] = {0, 0};
    switch (kind) {
    case 0:
        return spmd_psum(ctx, x, y, "x");
    case 1:
        return spmd_pmax(ctx, x, y, "x");
    case 2:
        return spmd_psum_many(ctx, 2, xs, ys, "x");
    case 3:
        return spmd_all_gather(ctx, x, wide, "x", 0, 1);
    case 4:
        return spmd_psum_scatter(ctx, x, one, "x", 0, 1);
    case 5:
        return spmd_ppermute(ctx, x, y, "x", pairs, n);
    case 6:
        return spmd_ppermute_many(ctx, 2, mixed, mixed_out, "x", pairs, n);
    case 7:
        return spmd_all_to_all(ctx, x, y, "x", 0, 0, 1);
    case 8:
        return spmd_all_to_all_many(ctx, 2, xs, ys, "x", axes, axes, 1);
    case 9:
        return spmd_pbroadcast(ctx, x, y, "x", n - 1);
    case 10: {
        spmd_status st = spmd_psend(ctx, x, "x", pairs, n);
        return st == SPMD_OK ? spmd_precv(ctx, y, "x", pairs, n) : st;
    }
    default: /* one row from each member, at the row of the sender's position */
        return spmd_ragged_all_to_all(ctx, x, y, &tables[0], &tables[1], &tables[2], &tables[3], y,
                                      "x");
    }
}

static spmd_status small_kinds_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                    spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)out, (void)user;
    int n = spmd_device_count(), position = 0;
    int64_t rows[1] = {n}, wide_rows[1] = {(int64_t)n * n}, single[1] = {1};
    const int64_t *shapes[6] = {rows, rows, rows, wide_rows, wide_rows, single};
    spmd_block b[6], tables[4];
    spmd_status st = SPMD_OK;
    for (int k = 0; k < 6 && st == SPMD_OK; k++)
        st = spmd_ctx_alloc(ctx, 1, shapes[k], SPMD_DTYPE_F32, &b[k]);
    for (int k = 0; k < 4 && st == SPMD_OK; k++)
        st = spmd_ctx_alloc(ctx, 1, rows, SPMD_DTYPE_I32, &tables[k]);
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, "x", &position);
    if (st != SPMD_OK)
        return st;
    int pairs[2 * 64];
    for (int i = 0; i < n; i++) {
        ((float *)b[0].data)[i] = (float)i;
        ((int32_t *)tables[0].data)[i] = i;        /* input offsets */
        ((int32_t *)tables[1].data)[i] = 1;        /* send sizes */
        ((int32_t *)tables[2].data)[i] = position; /* output offsets, at the receiver */
        ((int32_t *)tables[3].data)[i] = 1;        /* receive sizes */
        pairs[2 * i] = i;
        pairs[2 * i + 1] = (i + 1) % n;
    }
    for (int i = 0; i < n * n; i++)
        ((float *)b[3].data)[i] = (float)i;
    for (int r = 0; r < ring_repeats && st == SPMD_OK; r++)
        st = one_small(ctx, ring_kind, b, tables, pairs, n);
    return st;
}

static double messages_per_call(spmd_plan *plan, int repeats)
{
    ring_repeats = repeats;
    spmd_array *out = NULL;
    CHECK(spmd_plan_execute(plan, NULL, &out)); /* warm-up */
    spmd_array_destroy(out);
    PMPI_Barrier(spmd_mpi_comm());
    counts before = snapshot();
    for (int k = 0; k < RING_CALLS; k++) {
        CHECK(spmd_plan_execute(plan, NULL, &out));
        spmd_array_destroy(out);
    }
    counts after = snapshot();
    return (after.messages - before.messages + after.collectives - before.collectives) / RING_CALLS;
}

/* 77 where psum's repeats cost MPI messages: no rings here. */
static int count_small_through_rings(void)
{
    int n = spmd_device_count();
    const char *name = "x";
    spmd_mesh *mesh = NULL;
    CHECK(spmd_mesh_create(1, &n, &name, NULL, 0, &mesh));
    spmd_plan *plan = NULL;
    CHECK(
        spmd_plan_create(mesh, small_kinds_body, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL, &plan));
    if (me == 0)
        printf("| %-18s | %5s | %27s |\n", "4 B per device", "P x L",
               "MPI messages per extra call");
    int skipped = 0;
    for (ring_kind = 0; ring_kind < RING_KINDS && !skipped; ring_kind++) {
        double extra =
            (messages_per_call(plan, REPEATS) - messages_per_call(plan, 1)) / (REPEATS - 1);
        double most = 0;
        PMPI_Allreduce(&extra, &most, 1, MPI_DOUBLE, MPI_MAX, spmd_mpi_comm());
        if (me == 0)
            printf("| %-18s | %2d x %d | %27.2f |\n", ring_kinds[ring_kind], P,
                   spmd_local_device_count(), most);
        if (ring_kind == 0 && most > 0) {
            if (me == 0)
                printf("psum's messages go through MPI: no rings between these processes; "
                       "skipped\n");
            skipped = 1;
        } else if (extra > 0) {
            fprintf(stderr,
                    "process %d: a small %s made %.2f MPI messages or collective calls, where "
                    "psum makes none: it does not go through the rings\n",
                    me, ring_kinds[ring_kind], extra);
            failures++;
        }
    }
    spmd_plan_destroy(plan);
    spmd_mesh_destroy(mesh);
    return skipped ? 77 : 0;
}

int main(void)
{
    /* Processes on one machine send their small messages through shared memory (SPMD_SHM):
     * the same messages, which only MPI's profiling interface can count. With
     * SPMD_COUNT_RINGS=1 the rings stay, and small collectives must send nothing through MPI. */
    const char *rings_mode = getenv("SPMD_COUNT_RINGS");
    int rings = rings_mode && strcmp(rings_mode, "1") == 0;
    if (!rings)
        setenv("SPMD_SHM", "0", 1);
    if (spmd_init(NULL) != SPMD_OK) {
        fprintf(stderr, "spmd_init: %s\n", spmd_last_error());
        return 1;
    }
    atomic_store(&private_comm, spmd_mpi_comm());
    P = spmd_process_count();
    me = spmd_process_index();
    if (P < 2) {
        printf("needs several processes; skipped\n");
        spmd_finalize();
        return 77;
    }
    int skipped = 0;
    if (rings) {
        skipped = count_small_through_rings() == 77;
    } else if (spmd_local_device_count() == 8 && P == 2) {
        count_mesh_comms();
    } else {
        if (me == 0)
            printf("| %-36s | %3s | %8s | %10s | %11s | %5s | %5s |\n", "per call, busiest process",
                   "P", "messages", "bytes sent", "collectives", "bound", "notes");
        count_calls();
        count_assert_equal();
    }
    int any = failures != 0, all = 0;
    PMPI_Allreduce(&any, &all, 1, MPI_INT, MPI_MAX, spmd_mpi_comm());
    fflush(stdout);
    spmd_finalize();
    return all ? 1 : skipped ? 77 : 0;
}
