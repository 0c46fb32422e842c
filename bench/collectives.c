/*
 * bench/collectives: nccl-tests-style rows for every shard_map collective, with the baselines
 * measured in the same run: raw MPI (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
 * MPI_Alltoall, MPI_Sendrecv) between processes on the same bytes, and for the in-process case
 * the least traffic each collective needs at the STREAM-copy bandwidth of this machine (CPU
 * devices) or the device-to-device cudaMemcpy bandwidth of the GPU (CUDA devices); plus shard_map
 * dispatch latency against a hand-written persistent thread pool.
 *
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=1 bench_collectives --op psum          # cross-process
 *   SPMD_NUM_CPU_DEVICES=8 bench_collectives --op psum --dispatch               # in-process
 *
 * size (nccl-tests convention): psum, ppermute: bytes per device; all_gather: bytes of the
 * gathered output; psum_scatter: bytes of each device's input; all_to_all: bytes per device.
 * algbw = size / time; busbw = algbw * (2(n-1)/n for psum, (n-1)/n for all_gather,
 * psum_scatter and all_to_all, 1 for ppermute).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "host_memory.h"
#ifdef SPMD_BENCH_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

typedef enum bench_op {
    B_PSUM,
    B_ALL_GATHER,
    B_PSUM_SCATTER,
    B_PPERMUTE,
    B_ALL_TO_ALL,
    B_COPY, /* in one process: each device copies its block, the same loop with no collective */
    B_OPS
} bench_op;
static const char *const op_names[] = {"psum",     "all_gather", "psum_scatter",
                                       "ppermute", "all_to_all", "copy"};

typedef struct config {
    int ops[B_OPS];
    size_t min_bytes, max_bytes;
    int iters, warmup;
    int rounds; /* repetitions of each row, alternating with the baseline; the median counts */
    spmd_dtype dtype;
    int dispatch;
    int dispatch_calls;
    int whole_calls; /* 0: no whole-call rows */
    int steps;       /* times every iteration: each row's slowest and its count over 100 us */
    const char *json_path;
} config;

#define CHECK(call) BENCH_CHECK("bench_collectives", call)

/* ---- the measured body ---- */

typedef struct job {
    bench_op op;
    size_t count; /* elements of each device's input */
    int n;        /* devices */
    int iters, warmup;
    spmd_dtype dtype;
    int steps; /* config.steps */
} job;

/* An iteration this much longer than its row's mean is a stall, which --steps counts (a
 * wake-up the scheduler delayed, a core another thread held). */
#define STALL_S 100e-6

static size_t out_count(const job *j)
{
    switch (j->op) {
    case B_ALL_GATHER:
        return j->count * (size_t)j->n;
    case B_PSUM_SCATTER:
        return j->count / (size_t)j->n;
    default:
        return j->count;
    }
}

/* Inputs repeat every INPUT_PERIOD elements: filling and checking a large row evaluate the
 * definitions below for one period of each stretch, not for every element (at 64 MiB that took
 * longer than the timed iterations). */
#define INPUT_PERIOD 13

static double input_value(int device, size_t i)
{
    return (double)((device * 7 + (int)(i % INPUT_PERIOD)) % 17);
}

/* Expected output element i on the device at position p, from the definitions. */
static double expected(const job *j, int p, size_t i)
{
    size_t per = j->count / (size_t)j->n;
    switch (j->op) {
    case B_PSUM: {
        double s = 0;
        for (int d = 0; d < j->n; d++)
            s += input_value(d, i);
        return s;
    }
    case B_ALL_GATHER:
        return input_value((int)(i / j->count), i % j->count);
    case B_PSUM_SCATTER: {
        double s = 0;
        for (int d = 0; d < j->n; d++)
            s += input_value(d, (size_t)p * per + i);
        return s;
    }
    case B_PPERMUTE:
        return input_value((p + j->n - 1) % j->n, i);
    case B_ALL_TO_ALL: /* tiled on axis 0: chunk p of member h lands in slot h */
        return input_value((int)(i / per), (size_t)p * per + i % per);
    case B_COPY:
        return input_value(p, i);
    default:
        return 0;
    }
}

/* The output splits into stretches that each read one device's input (all_gather: one per
 * device; all_to_all: one per chunk) or every input at the same offsets (the others); within a
 * stretch, expected() repeats every INPUT_PERIOD elements. */
static size_t stretch_of(const job *j)
{
    return j->op == B_ALL_GATHER   ? j->count
           : j->op == B_ALL_TO_ALL ? j->count / (size_t)j->n
                                   : out_count(j);
}

static double load(spmd_dtype t, const void *p, size_t i)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        return ((const float *)p)[i];
    case SPMD_DTYPE_F64:
        return ((const double *)p)[i];
    case SPMD_DTYPE_I32:
        return ((const int32_t *)p)[i];
    default:
        return NAN;
    }
}

static spmd_status run_op(spmd_ctx *ctx, const job *j, spmd_block *in, spmd_block *out, int *pairs)
{
    switch (j->op) {
    case B_PSUM:
        return spmd_psum(ctx, in, out, "x");
    case B_ALL_GATHER:
        return spmd_all_gather(ctx, in, out, "x", 0, 1);
    case B_PSUM_SCATTER:
        return spmd_psum_scatter(ctx, in, out, "x", 0, 1);
    case B_PPERMUTE:
        return spmd_ppermute(ctx, in, out, "x", pairs, j->n);
    case B_ALL_TO_ALL:
        return spmd_all_to_all(ctx, in, out, "x", 0, 0, 1);
    case B_COPY:
        return spmd_op_copy(ctx, in, out);
    default:
        return SPMD_ERR_INVALID_ARGUMENT;
    }
}

/* Outputs: [0] the slowest device's seconds per iteration, [1] the number of wrong elements;
 * with --steps, [2] the slowest iteration on any device (seconds), [3] the most stalls on one
 * device. */
static spmd_status bench_body(spmd_ctx *ctx, int nin, const spmd_block *inb, int nout,
                              spmd_block *outb, void *user)
{
    (void)nin;
    (void)inb;
    (void)nout;
    const job *j = user;
    int p = 0;
    spmd_status st = spmd_axis_index(ctx, "x", &p);
    int64_t in_shape[1] = {(int64_t)j->count}, out_shape[1] = {(int64_t)out_count(j)};
    int64_t one[1] = {1};
    spmd_block in, out, t, w;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, in_shape, j->dtype, &in);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, out_shape, j->dtype, &out);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, one, SPMD_DTYPE_F64, &t);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, one, SPMD_DTYPE_F64, &w);
    if (st != SPMD_OK)
        return st;
    double period[INPUT_PERIOD];
    for (int r = 0; r < INPUT_PERIOD; r++)
        period[r] = input_value(p, (size_t)r);
    for (size_t i = 0, r = 0; i < j->count; i++, r = r + 1 < INPUT_PERIOD ? r + 1 : 0) {
        double v = period[r];
        if (j->dtype == SPMD_DTYPE_F32)
            ((float *)in.data)[i] = (float)v;
        else if (j->dtype == SPMD_DTYPE_F64)
            ((double *)in.data)[i] = v;
        else
            ((int32_t *)in.data)[i] = (int32_t)v;
    }
    int *pairs = malloc(2 * (size_t)j->n * sizeof *pairs);
    for (int k = 0; k < j->n; k++) {
        pairs[2 * k] = k;
        pairs[2 * k + 1] = (k + 1) % j->n;
    }
    /* warm-up (touches every page), then a tiny psum as a barrier before timing */
    for (int k = 0; k < j->warmup && st == SPMD_OK; k++)
        st = run_op(ctx, j, &in, &out, pairs);
    ((double *)t.data)[0] = 0;
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &t, &w, "x");
    double *steps = j->steps ? malloc((size_t)j->iters * sizeof *steps) : NULL;
    if (j->steps && !steps) {
        free(pairs);
        return SPMD_ERR_OUT_OF_MEMORY;
    }
    double start = bench_now_s(), last = start, slowest = 0, stalls = 0;
    for (int k = 0; k < j->iters && st == SPMD_OK; k++) {
        st = run_op(ctx, j, &in, &out, pairs);
        if (steps) { /* a clock read per iteration: tens of nanoseconds more on each */
            double now = bench_now_s();
            steps[k] = now - last;
            last = now;
        }
    }
    double mean = (bench_now_s() - start) / j->iters;
    ((double *)t.data)[0] = mean;
    for (int k = 0; steps && st == SPMD_OK && k < j->iters; k++) {
        slowest = steps[k] > slowest ? steps[k] : slowest;
        stalls += steps[k] > mean + STALL_S;
    }
    free(steps);
    free(pairs);
    /* every process's clock stops before any checks its values: a check would take a core from
     * a process still timing its last iteration where processes outnumber the cores (4 x 1 on 2
     * cores: the last of 40 iterations of a 1 MiB ppermute took 2-3 times the mean) */
    if (st == SPMD_OK)
        st = spmd_pmax(ctx, &t, &outb[0], "x");
    if (st != SPMD_OK)
        return st;
    double wrong = 0;
    size_t stretch = stretch_of(j);
    for (size_t at = 0; stretch > 0 && at < out_count(j); at += stretch) {
        double want[INPUT_PERIOD];
        for (size_t r = 0; r < INPUT_PERIOD && r < stretch; r++)
            want[r] = expected(j, p, at + r);
        for (size_t i = 0, r = 0; i < stretch; i++, r = r + 1 < INPUT_PERIOD ? r + 1 : 0)
            wrong += load(j->dtype, out.data, at + i) != want[r];
    }
    ((double *)w.data)[0] = wrong;
    spmd_block wsum = outb[1];
    st = spmd_psum(ctx, &w, &wsum, "x");
    if (st == SPMD_OK && j->steps) {
        ((double *)t.data)[0] = slowest;
        ((double *)w.data)[0] = stalls;
        st = spmd_pmax(ctx, &t, &outb[2], "x");
        if (st == SPMD_OK)
            st = spmd_pmax(ctx, &w, &outb[3], "x");
    }
    return st;
}

/* ---- baselines ---- */

#ifdef SPMD_HAVE_MPI
static MPI_Datatype mpi_type(spmd_dtype t)
{
    return t == SPMD_DTYPE_F32 ? MPI_FLOAT : t == SPMD_DTYPE_F64 ? MPI_DOUBLE : MPI_INT32_T;
}

/* The same collective, raw MPI between processes (one device per process), seconds per op. */
static double mpi_baseline(const job *j)
{
    MPI_Comm comm = spmd_mpi_comm();
    int n = 0, me = 0;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    size_t elem = spmd_dtype_size(j->dtype);
    size_t in_bytes = j->count * elem, out_bytes = out_count(j) * elem + elem;
    char *in = bench_host_alloc(in_bytes), *out = bench_host_alloc(out_bytes);
    if (!in || !out) {
        fprintf(stderr, "bench_collectives: out of memory for the MPI baseline\n");
        MPI_Abort(comm, 1);
    }
    memset(in, 1, in_bytes);
    memset(out, 0, out_bytes);
    MPI_Datatype t = mpi_type(j->dtype);
    int per = (int)(j->count / (size_t)n);
    double elapsed = 0;
    for (int phase = 0; phase < 2; phase++) {
        int reps = phase == 0 ? j->warmup : j->iters;
        MPI_Barrier(comm);
        double start = bench_now_s();
        for (int k = 0; k < reps; k++) {
            switch (j->op) {
            case B_PSUM:
                MPI_Allreduce(in, out, (int)j->count, t, MPI_SUM, comm);
                break;
            case B_ALL_GATHER:
                MPI_Allgather(in, (int)j->count, t, out, (int)j->count, t, comm);
                break;
            case B_PSUM_SCATTER:
                MPI_Reduce_scatter_block(in, out, per, t, MPI_SUM, comm);
                break;
            case B_PPERMUTE:
                MPI_Sendrecv(in, (int)j->count, t, (me + 1) % n, 0, out, (int)j->count, t,
                             (me + n - 1) % n, 0, comm, MPI_STATUS_IGNORE);
                break;
            case B_ALL_TO_ALL:
                MPI_Alltoall(in, per, t, out, per, t, comm);
                break;
            default:
                break;
            }
        }
        elapsed = (bench_now_s() - start) / (reps ? reps : 1);
    }
    double slowest = elapsed;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
    bench_host_free(in, in_bytes);
    bench_host_free(out, out_bytes);
    return slowest;
}
#endif

/* STREAM copy with every core: bytes read + written per second. */
typedef struct copy_part {
    char *dst;
    const char *src;
    size_t bytes;
} copy_part;

static void *copy_thread(void *p)
{
    copy_part *c = p;
    memcpy(c->dst, c->src, c->bytes);
    return NULL;
}

static double stream_copy_bandwidth(void)
{
    /* allocated and touched once: fresh pages cost 0.3 s at every row's measurement */
    static char *a, *b;
    const size_t bytes = 64u << 20;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
    if (!a) {
        a = bench_host_alloc(bytes); /* paged as the devices' buffers it bounds */
        b = bench_host_alloc(bytes);
        if (!a || !b) {
            fprintf(stderr, "bench_collectives: no memory for the STREAM copy bound\n");
            exit(1);
        }
        memset(a, 1, bytes);
        memset(b, 2, bytes);
    }
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t tid[64];
        copy_part parts[64];
        double start = bench_now_s();
        for (int t = 0; t < threads; t++) {
            size_t lo = bytes / (size_t)threads * (size_t)t;
            size_t hi = t == threads - 1 ? bytes : bytes / (size_t)threads * (size_t)(t + 1);
            parts[t] = (copy_part){b + lo, a + lo, hi - lo};
            pthread_create(&tid[t], NULL, copy_thread, &parts[t]);
        }
        for (int t = 0; t < threads; t++)
            pthread_join(tid[t], NULL);
        double bw = 2.0 * (double)bytes / (bench_now_s() - start);
        best = bw > best ? bw : best;
    }
    return best;
}

#ifdef SPMD_BENCH_HAVE_CUDA
/* The bound on CUDA devices: device-to-device cudaMemcpy on GPU 0, bytes read + written. */
static double cuda_copy_bandwidth(void)
{
    const size_t bytes = 256u << 20;
    void *a = NULL, *b = NULL;
    if (cudaSetDevice(0) || cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes)) {
        fprintf(stderr, "bench_collectives: no GPU memory for the cudaMemcpy bound\n");
        exit(1);
    }
    cudaMemset(a, 1, bytes);
    cudaMemset(b, 2, bytes);
    double best = 0;
    for (int rep = 0; rep < 10; rep++) {
        cudaDeviceSynchronize();
        double start = bench_now_s();
        cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
        cudaDeviceSynchronize();
        double bw = 2.0 * (double)bytes / (bench_now_s() - start);
        best = bw > best ? bw : best;
    }
    cudaFree(a);
    cudaFree(b);
    return best;
}
#endif

/* A hand-written persistent thread pool: workers spin, then yield, waiting for a generation
 * counter; the caller waits for all of them the same way. The baseline for dispatch. */
typedef struct pool {
    int n;
    atomic_uint generation;
    atomic_int remaining;
    atomic_int stop;
    pthread_t threads[256];
} pool;

static void *pool_worker(void *p)
{
    pool *pl = p;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        while ((g = atomic_load(&pl->generation)) == seen && !atomic_load(&pl->stop))
            sched_yield();
        if (atomic_load(&pl->stop))
            return NULL;
        seen = g;
        atomic_fetch_sub(&pl->remaining, 1); /* the empty task */
    }
}

static double pool_fork_join_median(int n, int calls)
{
    pool *pl = calloc(1, sizeof *pl);
    pl->n = n;
    for (int t = 0; t < n; t++)
        pthread_create(&pl->threads[t], NULL, pool_worker, pl);
    double *times = malloc((size_t)calls * sizeof *times);
    for (int c = 0; c < calls; c++) {
        double start = bench_now_s();
        atomic_store(&pl->remaining, n);
        atomic_fetch_add(&pl->generation, 1);
        while (atomic_load(&pl->remaining) > 0)
            sched_yield();
        times[c] = bench_now_s() - start;
    }
    atomic_store(&pl->stop, 1);
    for (int t = 0; t < n; t++)
        pthread_join(pl->threads[t], NULL);
    free(pl);
    double median = bench_quantile(times, calls, 0.5);
    free(times);
    return median;
}

static spmd_status empty_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)ctx;
    (void)nin;
    (void)in;
    (void)nout;
    (void)out;
    (void)user;
    return SPMD_OK;
}

static double dispatch_median(spmd_mesh *mesh, int calls)
{
    spmd_plan *plan = NULL;
    CHECK(spmd_plan_create(mesh, empty_body, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL, &plan));
    double *times = malloc((size_t)calls * sizeof *times);
    for (int c = 0; c < calls; c++) {
        double start = bench_now_s();
        CHECK(spmd_plan_execute(plan, NULL, NULL));
        times[c] = bench_now_s() - start;
    }
    double median = bench_quantile(times, calls, 0.5);
    free(times);
    spmd_plan_destroy(plan);
    return median;
}

/* ---- whole calls between processes ---- */

static spmd_status one_psum_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                 spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    float one = 1.0f;
    spmd_block b = {&one, SPMD_DTYPE_F32, 1, {1}};
    return spmd_psum(ctx, &b, &out[0], "x");
}

#ifdef SPMD_HAVE_MPI
/* Median seconds of one call of `plan` (NULL: MPI_Barrier; MPI_Allreduce of 4 bytes when
 * `allreduce`), each call timed alone as a user's loop would see it. */
static double call_median(spmd_plan *plan, int nout, int allreduce, int calls)
{
    double *times = malloc((size_t)calls * sizeof *times);
    MPI_Comm comm = spmd_mpi_comm();
    float in = 1.0f, out = 0;
    MPI_Barrier(comm);
    for (int c = 0; c < calls + calls / 10; c++) { /* the first tenth warms up */
        spmd_array *o = NULL;
        double start = bench_now_s();
        if (plan)
            CHECK(spmd_plan_execute(plan, NULL, nout ? &o : NULL));
        else if (allreduce)
            MPI_Allreduce(&in, &out, 1, MPI_FLOAT, MPI_SUM, comm);
        else
            MPI_Barrier(comm);
        double t = bench_now_s() - start;
        if (c >= calls / 10)
            times[c - calls / 10] = t;
        spmd_array_destroy(o);
    }
    double median = bench_quantile(times, calls, 0.5), slowest = median;
    MPI_Allreduce(&median, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
    free(times);
    return slowest;
}

/* Whole shard_map calls against the MPI operation with the same synchronisation: an empty call
 * against MPI_Barrier, a call with one 4-byte psum against MPI_Allreduce of 4 bytes. */
static void whole_calls(spmd_mesh *mesh, int calls, int rounds, cJSON *root, int me)
{
    spmd_spec *rows = NULL;
    CHECK(spmd_spec_parse("'x'", &rows));
    const spmd_spec *specs[1] = {rows};
    spmd_out_desc desc = {1, {spmd_device_count()}, SPMD_DTYPE_F32};
    spmd_plan *empty = NULL, *psum = NULL;
    CHECK(spmd_plan_create(mesh, empty_body, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL, &empty));
    CHECK(spmd_plan_create(mesh, one_psum_body, NULL, 0, NULL, NULL, 1, &desc, specs, NULL, &psum));
    cJSON *list = cJSON_AddArrayToObject(root, "calls");
    const char *names[2] = {"empty call", "call with one 4-byte psum"};
    const char *baselines[2] = {"MPI_Barrier", "MPI_Allreduce of 4 bytes"};
    for (int k = 0; k < 2; k++) {
        double ours[100], base[100];
        for (int r = 0; r < rounds; r++) {
            ours[r] = call_median(k ? psum : empty, k, 0, calls);
            base[r] = call_median(NULL, 0, k, calls);
        }
        double t = bench_quantile(ours, rounds, 0.5), b = bench_quantile(base, rounds, 0.5);
        cJSON *row = cJSON_CreateObject();
        cJSON_AddStringToObject(row, "call", names[k]);
        cJSON_AddStringToObject(row, "baseline", baselines[k]);
        cJSON_AddNumberToObject(row, "median_us", t * 1e6);
        cJSON_AddNumberToObject(row, "mpi_median_us", b * 1e6);
        cJSON_AddNumberToObject(row, "ratio", t / b);
        cJSON_AddItemToArray(list, row);
        if (me == 0)
            printf("# %s: median %.2f us; %s: %.2f us; ratio %.2f\n", names[k], t * 1e6,
                   baselines[k], b * 1e6, t / b);
    }
    spmd_plan_destroy(empty);
    spmd_plan_destroy(psum);
    spmd_spec_destroy(rows);
}
#endif

/* ---- driver ---- */

/* One shard_map running the timed loop: seconds per collective (slowest device); adds the
 * number of wrong elements to *wrong; with --steps, steps[0] and steps[1] receive the slowest
 * iteration and the count of stalls (bench_body's outputs 2 and 3). */
static double measure(spmd_mesh *mesh, spmd_spec *replicated, job *j, double *wrong,
                      double steps[2])
{
    const spmd_out_desc d = {1, {1}, SPMD_DTYPE_F64};
    const spmd_out_desc descs[4] = {d, d, d, d};
    const spmd_spec *specs[4] = {replicated, replicated, replicated, replicated};
    spmd_array *outs[4] = {NULL, NULL, NULL, NULL};
    int nout = j->steps ? 4 : 2;
    CHECK(spmd_shard_map(mesh, bench_body, j, 0, NULL, NULL, nout, descs, specs, NULL, outs));
    double got[4] = {0, 0, 0, 0};
    for (int k = 0; k < nout; k++) {
        CHECK(spmd_array_to_host(outs[k], &got[k], sizeof got[k]));
        spmd_array_destroy(outs[k]);
    }
    *wrong += got[1];
    steps[0] = got[2];
    steps[1] = got[3];
    return got[0];
}

static int busbw_factor_num(bench_op op, int n, double *factor)
{
    *factor = op == B_PSUM ? 2.0 * (n - 1) / n : op == B_PPERMUTE ? 1.0 : (double)(n - 1) / n;
    return 0;
}

/* Bytes an in-process collective must at least read and write, every input read once and
 * every output written once (size as in size_of). */
static double least_traffic(bench_op op, int n, double size)
{
    switch (op) {
    case B_ALL_GATHER:   /* n inputs of size/n read, n outputs of size written */
    case B_PSUM_SCATTER: /* n inputs of size read, n outputs of size/n written */
        return (n + 1.0) * size;
    default: /* psum, ppermute, all_to_all: n inputs and n outputs of size */
        return 2.0 * n * size;
    }
}

static size_t size_of(const job *j)
{
    size_t elem = spmd_dtype_size(j->dtype);
    return (j->op == B_ALL_GATHER ? j->count * (size_t)j->n : j->count) * elem;
}

/* The timed iterations of a row of `bytes`: `iters` from 256 KiB up to 16 MiB; a quarter from
 * there, which keeps a run short; up to 64 times as many below, where a row of a few
 * iterations lasts microseconds and measures the timer and one-off delays (the extra ones cost
 * a run milliseconds where its big rows take seconds). */
static int iterations_for(int iters, size_t bytes)
{
    if (bytes >= ((size_t)1 << 24))
        return iters / 4 > 2 ? iters / 4 : 2;
    size_t more = ((size_t)256 << 10) / bytes;
    more = more < 1 ? 1 : more > 64 ? 64 : more;
    return iters > INT_MAX / (int)more ? INT_MAX : iters * (int)more;
}

static void usage(void)
{
    printf("usage: bench_collectives [--op NAME|all] [--min-bytes N] [--max-bytes N] [--iters N]\n"
           "                         [--warmup N] [--rounds N] [--dtype float32|float64|int32]\n"
           "                         [--dispatch] [--dispatch-calls N] [--calls N] [--steps]\n"
           "                         [--json FILE]\n"
           "  --iters N: timed iterations of a row from 256 KiB up to 16 MiB (default 20); a\n"
           "             quarter (at least 2) from 16 MiB, up to 64 times as many below 256 KiB\n"
           "  --calls N: between processes (one device each), whole shard_map calls (empty, one\n"
           "             4-byte psum) against MPI_Barrier and MPI_Allreduce, N calls a round\n"
           "  --steps:   times each iteration too: a row's slowest (worst_us) and how many took\n"
           "             100 us longer than the row's mean (stalls), on the device with the most;\n"
           "             each costs a clock read more\n");
}

static void parse(int argc, char **argv, config *c)
{
    static const struct option options[] = {{"op", required_argument, NULL, 'o'},
                                            {"min-bytes", required_argument, NULL, 'b'},
                                            {"max-bytes", required_argument, NULL, 'e'},
                                            {"iters", required_argument, NULL, 'n'},
                                            {"warmup", required_argument, NULL, 'w'},
                                            {"dtype", required_argument, NULL, 'd'},
                                            {"dispatch", no_argument, NULL, 'D'},
                                            {"dispatch-calls", required_argument, NULL, 'c'},
                                            {"json", required_argument, NULL, 'j'},
                                            {"help", no_argument, NULL, 'h'},
                                            {"rounds", required_argument, NULL, 'r'},
                                            {"calls", required_argument, NULL, 'C'},
                                            {"steps", no_argument, NULL, 'S'},
                                            {NULL, 0, NULL, 0}};
    *c = (config){{1, 1, 1, 1, 1, 1}, 8, 64u << 20, 20, 5, 3, SPMD_DTYPE_F32, 0, 2000, 0, 0, NULL};
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case 'o':
            if (strcmp(optarg, "all") != 0) {
                memset(c->ops, 0, sizeof c->ops);
                for (int k = 0; k < B_OPS; k++)
                    if (strcmp(optarg, op_names[k]) == 0)
                        c->ops[k] = 1;
            }
            break;
        case 'b':
            c->min_bytes = strtoull(optarg, NULL, 10);
            break;
        case 'e':
            c->max_bytes = strtoull(optarg, NULL, 10);
            break;
        case 'n':
            c->iters = atoi(optarg);
            break;
        case 'w':
            c->warmup = atoi(optarg);
            break;
        case 'd':
            c->dtype = spmd_dtype_from_name(optarg);
            break;
        case 'D':
            c->dispatch = 1;
            break;
        case 'c':
            c->dispatch_calls = atoi(optarg);
            break;
        case 'j':
            c->json_path = optarg;
            break;
        case 'r':
            c->rounds = atoi(optarg);
            break;
        case 'C':
            c->whole_calls = atoi(optarg);
            break;
        case 'S':
            c->steps = 1;
            break;
        default:
            usage();
            exit(opt == 'h' ? 0 : 2);
        }
    }
    if (c->iters < 1 || c->rounds < 1 || c->whole_calls < 0 || c->rounds > 99 || c->warmup < 0 ||
        c->min_bytes < 1 || c->max_bytes < c->min_bytes ||
        (c->dtype != SPMD_DTYPE_F32 && c->dtype != SPMD_DTYPE_F64 && c->dtype != SPMD_DTYPE_I32)) {
        fprintf(stderr, "bench_collectives: bad arguments\n");
        usage();
        exit(2);
    }
}

int main(int argc, char **argv)
{
    config cfg;
    parse(argc, argv, &cfg);
    CHECK(spmd_init(NULL));
    bench_warm_malloc(); /* before any baseline: host_memory.h */
    int me = spmd_process_index(), procs = spmd_process_count(), n = spmd_device_count();
    const char *name = "x";
    spmd_mesh *mesh = NULL;
    spmd_spec *replicated = NULL;
    CHECK(spmd_mesh_create(1, &n, &name, NULL, 0, &mesh));
    CHECK(spmd_spec_parse("", &replicated));
    int one_device_each = procs > 1 && spmd_local_device_count() == 1;
    spmd_device_info info;
    CHECK(spmd_device_get_info(spmd_local_device_id(0), &info));
    int cuda = info.platform == SPMD_PLATFORM_CUDA;
    double b_copy = procs == 1 && !cuda ? stream_copy_bandwidth() : 0;
#ifdef SPMD_BENCH_HAVE_CUDA
    if (procs == 1 && cuda)
        b_copy = cuda_copy_bandwidth();
#endif
    cJSON *root = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(root, "rows");
    cJSON_AddNumberToObject(root, "processes", procs);
    cJSON_AddNumberToObject(root, "devices", n);
    cJSON_AddStringToObject(root, "platform", spmd_platform_name(info.platform));
    if (b_copy > 0)
        cJSON_AddNumberToObject(root, cuda ? "cuda_memcpy_d2d_GBps" : "stream_copy_GBps",
                                b_copy / 1e9);
    if (me == 0) {
        printf("# libspmd bench_collectives: %d process(es) x %d %s device(s), dtype %s\n", procs,
               spmd_local_device_count(), spmd_platform_name(info.platform),
               spmd_dtype_name(cfg.dtype));
        if (b_copy > 0)
            printf("# %s: %.2f GB/s (bytes read + written)\n",
                   cuda ? "device-to-device cudaMemcpy bandwidth of GPU 0"
                        : "STREAM copy bandwidth (all cores)",
                   b_copy / 1e9);
        printf("# %-12s %12s %12s %10s %9s %9s %6s   %s\n", "op", "size", "count", "time_us",
               "algbw", "busbw", "#wrong",
               one_device_each ? "MPI: time_us busbw ratio" : (procs == 1 ? "bound: ratio" : ""));
    }
    size_t elem = spmd_dtype_size(cfg.dtype);
    double all_wrong = 0;
    for (int op = 0; op < B_OPS; op++) {
        if (!cfg.ops[op])
            continue;
        if (op == B_COPY && (procs > 1 || one_device_each))
            continue; /* a copy has no MPI baseline: it shows what the machine does in process */
        for (size_t bytes = cfg.min_bytes; bytes <= cfg.max_bytes; bytes *= 2) {
            job j = {(bench_op)op, bytes / elem, n, cfg.iters, cfg.warmup, cfg.dtype, cfg.steps};
            if (op == B_ALL_GATHER)
                j.count = bytes / elem / (size_t)n;
            if (op == B_PSUM_SCATTER || op == B_ALL_TO_ALL)
                j.count = j.count / (size_t)n * (size_t)n;
            if (j.count == 0 || (op != B_PSUM && op != B_PPERMUTE && j.count < (size_t)n))
                continue;
            j.iters = iterations_for(cfg.iters, bytes);
            double times[100], baseline[100], copy_bw[100], wrong = 0, worst = 0, stalls = 0;
            for (int r = 0; r < cfg.rounds; r++) {
                /* the bound is measured beside each round: a VM's memory bandwidth drifts */
                copy_bw[r] = procs == 1 && !cuda ? stream_copy_bandwidth() : b_copy;
                double steps[2];
                times[r] = measure(mesh, replicated, &j, &wrong, steps);
                worst = steps[0] > worst ? steps[0] : worst;
                stalls += steps[1];
#ifdef SPMD_HAVE_MPI
                if (one_device_each)
                    baseline[r] = mpi_baseline(&j);
#endif
            }
            double t = bench_quantile(times, cfg.rounds, 0.5);
            double size = (double)size_of(&j), factor;
            busbw_factor_num((bench_op)op, n, &factor);
            double algbw = size / t / 1e9, busbw = algbw * factor;
            cJSON *row = cJSON_CreateObject();
            cJSON_AddStringToObject(row, "op", op_names[op]);
            cJSON_AddNumberToObject(row, "size", size);
            cJSON_AddNumberToObject(row, "count", (double)j.count);
            cJSON_AddNumberToObject(row, "iters", j.iters);
            cJSON_AddStringToObject(row, "dtype", spmd_dtype_name(cfg.dtype));
            cJSON_AddNumberToObject(row, "time_us", t * 1e6);
            cJSON_AddNumberToObject(row, "algbw", algbw);
            cJSON_AddNumberToObject(row, "busbw", busbw);
            cJSON_AddNumberToObject(row, "wrong", wrong);
            all_wrong += wrong;
            if (cfg.steps) {
                cJSON_AddNumberToObject(row, "worst_us", worst * 1e6);
                cJSON_AddNumberToObject(row, "stalls", stalls);
            }
            char extra[128] = "";
#ifdef SPMD_HAVE_MPI
            if (one_device_each) {
                double tb = bench_quantile(baseline, cfg.rounds, 0.5),
                       bb = size / tb / 1e9 * factor;
                cJSON_AddNumberToObject(row, "mpi_time_us", tb * 1e6);
                cJSON_AddNumberToObject(row, "mpi_busbw", bb);
                cJSON_AddNumberToObject(row, "ratio", busbw / bb);
                snprintf(extra, sizeof extra, "%9.2f %9.3f %5.2f", tb * 1e6, bb, busbw / bb);
            }
#endif
            if (procs == 1 && b_copy > 0) {
                double bound =
                    least_traffic((bench_op)op, n, size) / bench_quantile(copy_bw, cfg.rounds, 0.5);
                cJSON_AddNumberToObject(row, "bound_time_us", bound * 1e6);
                cJSON_AddNumberToObject(row, "ratio", bound / t);
                snprintf(extra, sizeof extra, "%9.1f %5.2f", bound * 1e6, bound / t);
            }
            cJSON_AddItemToArray(rows, row);
            char tail[64] = "";
            if (cfg.steps)
                snprintf(tail, sizeof tail, "   worst %.0f us, %.0f stalls", worst * 1e6, stalls);
            if (me == 0)
                printf("  %-12s %12.0f %12zu %10.2f %9.3f %9.3f %6.0f   %s%s\n", op_names[op], size,
                       j.count, t * 1e6, algbw, busbw, wrong, extra, tail);
            fflush(stdout);
        }
    }
#ifdef SPMD_HAVE_MPI
    if (cfg.whole_calls > 0 && one_device_each)
        whole_calls(mesh, cfg.whole_calls, cfg.rounds, root, me);
#endif
    if (cfg.dispatch && procs == 1) {
        double ours = dispatch_median(mesh, cfg.dispatch_calls);
        double base = pool_fork_join_median(spmd_local_device_count(), cfg.dispatch_calls);
        cJSON *d = cJSON_AddObjectToObject(root, "dispatch");
        cJSON_AddNumberToObject(d, "devices", n);
        cJSON_AddNumberToObject(d, "plan_median_us", ours * 1e6);
        cJSON_AddNumberToObject(d, "thread_pool_median_us", base * 1e6);
        cJSON_AddNumberToObject(d, "ratio", ours / base);
        printf("# dispatch of an empty fn on %d devices through a reused plan: median %.1f us; "
               "hand-written thread-pool fork-join: %.1f us; ratio %.2f\n",
               n, ours * 1e6, base * 1e6, ours / base);
    }
    if (me == 0)
        bench_write_json(root, cfg.json_path);
    cJSON_Delete(root);
    spmd_spec_destroy(replicated);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    if (all_wrong > 0 && me == 0)
        fprintf(stderr, "bench_collectives: %.0f wrong elements (the #wrong column)\n", all_wrong);
    return all_wrong > 0; /* the smoke tests check the values too */
}
