/*
 * bench_array_ops: the ops on whole global arrays (spmd/array_ops.h, each one shard_map) against
 * anchors measured in the same run, sample by sample in turn with the op (each sample of a
 * multi-process run starts at an MPI_Barrier and counts the slowest process):
 *
 *   - elementwise: spmd_array_unary NEG and RELU, spmd_array_binary ADD, on a float32 vector of
 *     --elems elements sharded over every device (P('x')). Anchor: the copy bound, every local
 *     device's in + out bytes moved by memcpy, one thread per local device, all at once: a
 *     memcpy of L bytes reads L and writes L, so L = (in + out bytes of the device) / 2 (the
 *     device's block for NEG and RELU, 1.5 blocks for ADD). ratio = anchor / op, goal >= 0.8.
 *   - matmul, A[m,k] @ B[k,n] (spmd_array_matmul: dot_general through spmd_op_gemm):
 *       (i)   A[m@x,k] @ B[k,n] -> C[m@x,n], no communication;
 *       (ii)  A[m,k@x] @ B[k@x,n], out_sharding SPMD_REPLICATED: a psum of the m x n products;
 *       (iii) A[m,k@x] @ B[k,n] -> C[m,n]: an all_gather of A along k first.
 *     Anchor: one cblas_sgemm of the device's shape ((m/x, k, n), (m, k/x, n), (m, k, n)) per
 *     local device, on one thread each (the BLAS runs on one thread, SPMD_BLAS_THREADS's
 *     default), all at once; for (ii) and (iii) plus the collective alone: a shard_map whose fn
 *     only psums the m x n block (ii) or all_gather_invariant's A's block (iii), output
 *     replicated. Goals: (i) >= 0.9, (ii) and (iii) about 1. The op's plan (spmd_op_plan) must
 *     name exactly that collective, or the program fails.
 *   - memory: --mem-ops NEGs, each output destroyed before the next: the process's peak
 *     resident memory (VmHWM) after them against the peak after the first; the buffer pool
 *     (SPMD_BUFFER_POOL_MB) gives every output the memory of the one before (ratio 1: no
 *     growth). libspmd exposes no pool statistics; VmRSS is reported too. The loop stops early
 *     once the memory grew by 8 outputs (a leak: the ratio shows it).
 *
 * Every result is checked against a host computation (#wrong). CPU devices only (the anchors
 * run on the host); on other devices it writes no rows.
 *
 *   SPMD_NUM_CPU_DEVICES=4 bench_array_ops --json out.json
 *   mpirun -np 2 -x SPMD_NUM_CPU_DEVICES=1 bench_array_ops --json out.json
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "bench_util.h"
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

#define PROGRAM "bench_array_ops"
#define CHECK(call) BENCH_CHECK(PROGRAM, call)
#define MAX_LOCAL 256

typedef struct config {
    int64_t elems, m, n, k;
    int iters, warmup, mem_ops;
    const char *json;
} config;

/* ---- the run's layout and its timing ---- */

static int g_procs = 1, g_me = 0, g_nd = 1, g_local = 1;

/* All processes start a sample together. */
static void sample_start(void)
{
#ifdef SPMD_HAVE_MPI
    if (g_procs > 1)
        MPI_Barrier(spmd_mpi_comm());
#endif
}

/* Each sample becomes the slowest process's. */
static void slowest(double *v, int n)
{
#ifdef SPMD_HAVE_MPI
    if (g_procs > 1)
        MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, spmd_mpi_comm());
#else
    (void)v, (void)n;
#endif
}

static double sum_over_processes(double v)
{
#ifdef SPMD_HAVE_MPI
    if (g_procs > 1)
        MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, spmd_mpi_comm());
#endif
    return v;
}

static double median_slowest(double *v, int n)
{
    slowest(v, n);
    return bench_quantile(v, n, 0.5);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, PROGRAM ": out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* ---- the anchors' threads: one per local device, started together ---- */

typedef struct pool pool;
typedef void (*pool_work)(int i, void *arg);
typedef struct worker {
    pool *p;
    int i;
} worker;
struct pool {
    int n, quit;
    pool_work work;
    void *arg;
    pthread_barrier_t start, done;
    pthread_t tid[MAX_LOCAL];
    worker w[MAX_LOCAL];
};

static void *pool_thread(void *arg)
{
    worker *w = arg;
    for (;;) {
        pthread_barrier_wait(&w->p->start);
        if (w->p->quit)
            return NULL;
        w->p->work(w->i, w->p->arg);
        pthread_barrier_wait(&w->p->done);
    }
}

static pool *pool_create(int n)
{
    pool *p = calloc(1, sizeof *p);
    if (!p || n > MAX_LOCAL) {
        fprintf(stderr, PROGRAM ": cannot make %d anchor threads\n", n);
        exit(1);
    }
    p->n = n;
    pthread_barrier_init(&p->start, NULL, (unsigned)n + 1);
    pthread_barrier_init(&p->done, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        p->w[i] = (worker){p, i};
        pthread_create(&p->tid[i], NULL, pool_thread, &p->w[i]);
    }
    return p;
}

/* Seconds from the start of work(i) on every thread to the end of the last. */
static double pool_run(pool *p, pool_work work, void *arg)
{
    p->work = work;
    p->arg = arg;
    double t0 = bench_now_s();
    pthread_barrier_wait(&p->start);
    pthread_barrier_wait(&p->done);
    return bench_now_s() - t0;
}

static void pool_destroy(pool *p)
{
    p->quit = 1;
    pthread_barrier_wait(&p->start);
    for (int i = 0; i < p->n; i++)
        pthread_join(p->tid[i], NULL);
    pthread_barrier_destroy(&p->start);
    pthread_barrier_destroy(&p->done);
    free(p);
}

typedef struct copy_job {
    char *src[MAX_LOCAL], *dst[MAX_LOCAL];
    size_t bytes;
} copy_job;

static void copy_work(int i, void *arg)
{
    copy_job *j = arg;
    memcpy(j->dst[i], j->src[i], j->bytes);
}

typedef struct gemm_job {
    float *a[MAX_LOCAL], *b[MAX_LOCAL], *c[MAX_LOCAL];
    int m, n, k;
} gemm_job;

static void gemm_work(int i, void *arg)
{
    gemm_job *j = arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, j->m, j->n, j->k, 1.0f, j->a[i], j->k,
                j->b[i], j->n, 0.0f, j->c[i], j->n);
}

/* ---- small helpers ---- */

static spmd_sharding *sharding(spmd_mesh *mesh, const char *spec)
{
    spmd_sharding *s = NULL;
    CHECK(spmd_sharding_create_parse(mesh, spec, &s));
    return s;
}

static void type_of(const spmd_array *x, char *buf, size_t size)
{
    CHECK(spmd_array_type_format(x, buf, size));
}

/* VmHWM and VmRSS of this process, in MiB. */
static void memory_mib(double *peak, double *now)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    *peak = *now = -1;
    while (f && fgets(line, sizeof line, f)) {
        long kb = 0;
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            *peak = (double)kb / 1024;
        else if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            *now = (double)kb / 1024;
    }
    if (f)
        fclose(f);
}

/* Local shard i of x on the host (a fresh buffer), and its box. */
static float *shard_copy(const spmd_array *x, int i, spmd_box *box)
{
    spmd_shard s;
    CHECK(spmd_array_shard(x, i, &s));
    float *h = xmalloc(s.nbytes);
    CHECK(spmd_array_shard_to_host(x, i, h, s.nbytes));
    if (box)
        *box = s.index;
    return h;
}

/* ---- elementwise ---- */

enum { EW_NEG, EW_RELU, EW_ADD, EW_KINDS };
static const char *const ew_names[EW_KINDS] = {"neg", "relu", "add"};

static spmd_status ew_call(int kind, spmd_array *x, spmd_array *y, spmd_array **out)
{
    if (kind == EW_ADD)
        return spmd_array_binary(SPMD_BINARY_ADD, x, y, NULL, NULL, out);
    return spmd_array_unary(kind == EW_NEG ? SPMD_UNARY_NEG : SPMD_UNARY_RELU, x, NULL, NULL, out);
}

static int64_t ew_wrong(int kind, spmd_array *x, spmd_array *y, spmd_array *out)
{
    int64_t wrong = 0;
    for (int s = 0; s < spmd_array_num_shards(out); s++) {
        spmd_box box;
        float *o = shard_copy(out, s, &box), *a = shard_copy(x, s, NULL);
        float *b = kind == EW_ADD ? shard_copy(y, s, NULL) : NULL;
        int64_t n = box.stop[0] - box.start[0];
        for (int64_t i = 0; i < n; i++) {
            float want = kind == EW_NEG    ? -a[i]
                         : kind == EW_RELU ? (a[i] > 0 ? a[i] : 0.0f)
                                           : a[i] + b[i];
            wrong += o[i] != want;
        }
        free(o), free(a), free(b);
    }
    return wrong;
}

/* The same block op in a hand-written shard_map (not an anchor: it tells the array op's own
 * cost from the block op's). */
static spmd_status block_op_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                 spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    int kind = *(const int *)user;
    if (kind == EW_ADD)
        return spmd_op_binary(ctx, SPMD_BINARY_ADD, &in[0], &in[1], &out[0]);
    return spmd_op_unary(ctx, kind == EW_NEG ? SPMD_UNARY_NEG : SPMD_UNARY_RELU, &in[0], &out[0]);
}

static void elementwise_row(const config *c, pool *p, copy_job *cj, int kind, spmd_array *x,
                            spmd_array *y, cJSON *rows)
{
    size_t block = (size_t)(c->elems / g_nd) * sizeof(float);
    cj->bytes = kind == EW_ADD ? block * 3 / 2 : block;
    spmd_spec *spec = NULL;
    CHECK(spmd_spec_parse("'x'", &spec));
    const spmd_spec *specs[2] = {spec, spec};
    spmd_array *ins[2] = {x, y};
    spmd_out_desc desc = {.ndim = 1, .shape = {c->elems}, .dtype = SPMD_DTYPE_F32};
    double *top = xmalloc((size_t)c->iters * sizeof *top),
           *tcp = xmalloc((size_t)c->iters * sizeof *tcp),
           *tbo = xmalloc((size_t)c->iters * sizeof *tbo);
    spmd_array *out = NULL;
    for (int i = -c->warmup; i < c->iters; i++) {
        spmd_array_destroy(out);
        out = NULL;
        sample_start();
        double t0 = bench_now_s();
        CHECK(ew_call(kind, x, y, &out));
        double t = bench_now_s() - t0;
        sample_start();
        double tc = pool_run(p, copy_work, cj);
        spmd_array *bo = NULL;
        sample_start();
        t0 = bench_now_s();
        CHECK(spmd_shard_map(spmd_sharding_mesh(spmd_array_sharding(x)), block_op_body, &kind,
                             kind == EW_ADD ? 2 : 1, ins, specs, 1, &desc, specs, NULL, &bo));
        double tb = bench_now_s() - t0;
        spmd_array_destroy(bo);
        if (i >= 0)
            top[i] = t, tcp[i] = tc, tbo[i] = tb;
    }
    spmd_spec_destroy(spec);
    double op_s = median_slowest(top, c->iters), copy_s = median_slowest(tcp, c->iters),
           block_s = median_slowest(tbo, c->iters);
    double wrong = sum_over_processes((double)ew_wrong(kind, x, y, out));
    char type[160];
    type_of(x, type, sizeof type);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "op", ew_names[kind]);
    cJSON_AddStringToObject(r, "shape", type);
    cJSON_AddNumberToObject(r, "time_us", op_s * 1e6);
    cJSON_AddNumberToObject(r, "copy_us", copy_s * 1e6);
    cJSON_AddNumberToObject(r, "ratio", copy_s / op_s);
    cJSON_AddNumberToObject(r, "block_op_shard_map_us", block_s * 1e6);
    cJSON_AddNumberToObject(r, "in_out_bytes_per_device", (double)(cj->bytes * 2));
    cJSON_AddNumberToObject(r, "op_gbps", (double)(cj->bytes * 2) * g_nd / op_s * 1e-9);
    cJSON_AddNumberToObject(r, "wrong", wrong);
    cJSON_AddItemToArray(rows, r);
    if (g_me == 0)
        printf("%-6s %-24s %12.1f %12.1f %8.2f %14.1f %8.0f\n", ew_names[kind], type, op_s * 1e6,
               copy_s * 1e6, copy_s / op_s, block_s * 1e6, wrong);
    spmd_array_destroy(out);
    free(top), free(tcp), free(tbo);
}

/* --mem-ops NEGs, each output destroyed before the next: peak and resident memory after the
 * first and after the last (the largest over the processes). */
static cJSON *memory_row(const config *c, spmd_array *x)
{
    double v[4]; /* peak after the first, rss after the first, peak after all, rss after all */
    double out_mib = (double)c->elems * sizeof(float) / g_procs / 1048576.0;
    int done = 0;
    for (int i = 0; i < c->mem_ops; i++) {
        spmd_array *out = NULL;
        CHECK(spmd_array_unary(SPMD_UNARY_NEG, x, NULL, NULL, &out));
        spmd_array_destroy(out);
        done++;
        if (i == 0)
            memory_mib(&v[0], &v[1]);
        memory_mib(&v[2], &v[3]);
        /* a leak: stop before it takes the machine's memory (all processes alike) */
        double grew = v[3] - v[1];
#ifdef SPMD_HAVE_MPI
        if (g_procs > 1)
            MPI_Allreduce(MPI_IN_PLACE, &grew, 1, MPI_DOUBLE, MPI_MAX, spmd_mpi_comm());
#endif
        if (grew > 8 * out_mib)
            break;
    }
    slowest(v, 4); /* the largest */
    char type[160];
    type_of(x, type, sizeof type);
    char op[64];
    snprintf(op, sizeof op, "neg x%d, outputs destroyed", c->mem_ops);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "op", op);
    cJSON_AddStringToObject(r, "shape", type);
    cJSON_AddNumberToObject(r, "ops_done", done);
    cJSON_AddNumberToObject(r, "output_mib_per_process", out_mib);
    cJSON_AddNumberToObject(r, "first_peak_mib", v[0]);
    cJSON_AddNumberToObject(r, "first_rss_mib", v[1]);
    cJSON_AddNumberToObject(r, "peak_mib", v[2]);
    cJSON_AddNumberToObject(r, "rss_mib", v[3]);
    cJSON_AddNumberToObject(r, "peak_growth_mib", v[2] - v[0]);
    cJSON_AddNumberToObject(r, "rss_growth_mib", v[3] - v[1]);
    cJSON_AddNumberToObject(r, "wrong", 0);
    if (g_me == 0)
        printf("# memory, %d of %d NEGs of %s (%.1f MiB out per process): peak %.1f -> %.1f MiB "
               "(+%.1f), resident %.1f -> %.1f MiB (+%.1f)\n",
               done, c->mem_ops, type, out_mib, v[0], v[2], v[2] - v[0], v[1], v[3], v[3] - v[1]);
    return r;
}

/* ---- matmul ---- */

typedef struct collective_job {
    int kase;
} collective_job;

/* The collective of case (ii) or (iii) alone. */
static spmd_status collective_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                   spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    const collective_job *j = user;
    if (j->kase == 2)
        return spmd_psum(ctx, &in[0], &out[0], "x");
    return spmd_all_gather_invariant(ctx, &in[0], &out[0], "x", 1, 1);
}

/* Host block of the random array spmd_array_random_values(seed) makes: the whole of it. */
static float *host_random(int64_t rows, int64_t cols, uint64_t seed)
{
    float *h = xmalloc((size_t)(rows * cols) * sizeof *h);
    spmd_block b = {.data = h, .dtype = SPMD_DTYPE_F32, .ndim = 2, .shape = {rows, cols}};
    int64_t shape[2] = {rows, cols}, start[2] = {0, 0};
    CHECK(spmd_op_random(NULL, seed, SPMD_RANDOM_UNIFORM, shape, start, &b));
    return h;
}

static void matmul_row(const config *c, pool *p, spmd_mesh *mesh, int kase, cJSON *rows)
{
    static const char *const names[4] = {"", "matmul (i)", "matmul (ii)", "matmul (iii)"};
    static const char *const a_specs[4] = {"", "'x', None", "None, 'x'", "None, 'x'"};
    static const char *const b_specs[4] = {"", "", "'x', None", ""};
    static const char *const want_step[4] = {"", "", "psum", "all_gather"};
    int64_t m = c->m, n = c->n, k = c->k;
    int64_t ashape[2] = {m, k}, bshape[2] = {k, n};
    spmd_sharding *as = sharding(mesh, a_specs[kase]), *bs = sharding(mesh, b_specs[kase]);
    spmd_array *a = NULL, *b = NULL;
    CHECK(spmd_array_random_values(mesh, 2, ashape, SPMD_DTYPE_F32, 11, SPMD_RANDOM_UNIFORM, as,
                                   NULL, &a));
    CHECK(spmd_array_random_values(mesh, 2, bshape, SPMD_DTYPE_F32, 12, SPMD_RANDOM_UNIFORM, bs,
                                   NULL, &b));
    const spmd_sharding *out_sh = kase == 2 ? SPMD_REPLICATED : NULL;

    /* the plan: exactly the collective the anchor times */
    spmd_op_plan plan;
    spmd_op_options dry = SPMD_OP_OPTIONS_INIT;
    dry.dry_run = 1;
    dry.plan = &plan;
    spmd_array *out = NULL;
    CHECK(spmd_array_matmul(a, b, out_sh, &dry, &out));
    char plan_text[512];
    CHECK(spmd_op_plan_format(&plan, plan_text, sizeof plan_text));
    int plan_ok = kase == 1 ? plan.nsteps == 0
                            : plan.nsteps == 1 && strcmp(plan.steps[0].kind, want_step[kase]) == 0;
    if (!plan_ok) {
        fprintf(stderr, PROGRAM ": %s: the plan is \"%s\", not the %s the anchor times\n",
                names[kase], plan_text, kase == 1 ? "no collective" : want_step[kase]);
        exit(1);
    }

    /* the anchors' inputs: the BLAS call of each device's shape; the collective's operand */
    gemm_job gj = {
        .m = (int)(kase == 1 ? m / g_nd : m), .n = (int)n, .k = (int)(kase == 2 ? k / g_nd : k)};
    for (int d = 0; d < g_local; d++) {
        gj.a[d] = xmalloc((size_t)gj.m * (size_t)gj.k * sizeof(float));
        gj.b[d] = xmalloc((size_t)gj.k * (size_t)gj.n * sizeof(float));
        gj.c[d] = xmalloc((size_t)gj.m * (size_t)gj.n * sizeof(float));
        for (size_t i = 0; i < (size_t)gj.m * (size_t)gj.k; i++)
            gj.a[d][i] = (float)((int)(i % 13) - 6) / 8;
        for (size_t i = 0; i < (size_t)gj.k * (size_t)gj.n; i++)
            gj.b[d][i] = (float)((int)(i % 11) - 5) / 8;
        memset(gj.c[d], 0, (size_t)gj.m * (size_t)gj.n * sizeof(float));
    }
    collective_job cjob = {kase};
    spmd_array *coll_in = NULL;
    spmd_spec *coll_in_spec = NULL, *replicated = NULL;
    spmd_out_desc coll_out = {.ndim = 2, .dtype = SPMD_DTYPE_F32};
    if (kase == 2) { /* each device's m x n block of products, psum'd into a replicated C */
        int64_t pshape[2] = {m * g_nd, n};
        spmd_sharding *ps = sharding(mesh, "'x', None");
        CHECK(spmd_array_random_values(mesh, 2, pshape, SPMD_DTYPE_F32, 13, SPMD_RANDOM_UNIFORM, ps,
                                       NULL, &coll_in));
        spmd_sharding_destroy(ps);
        CHECK(spmd_spec_parse("'x', None", &coll_in_spec));
        coll_out.shape[0] = m, coll_out.shape[1] = n;
    } else if (kase == 3) { /* A's m x k/x block gathered along k into a replicated A */
        coll_in = a;
        CHECK(spmd_spec_parse(a_specs[3], &coll_in_spec));
        coll_out.shape[0] = m, coll_out.shape[1] = k;
    }
    CHECK(spmd_spec_parse("", &replicated));
    const spmd_spec *cin_specs[1] = {coll_in_spec}, *cout_specs[1] = {replicated};
    spmd_shard_map_options smo = SPMD_SHARD_MAP_OPTIONS_INIT;
    smo.check_replication = 0; /* as the ops run their shard_map */

    double *top = xmalloc((size_t)c->iters * sizeof *top),
           *tb = xmalloc((size_t)c->iters * sizeof *tb),
           *tc = xmalloc((size_t)c->iters * sizeof *tc);
    for (int i = -c->warmup; i < c->iters; i++) {
        spmd_array_destroy(out);
        out = NULL;
        sample_start();
        double t0 = bench_now_s();
        CHECK(spmd_array_matmul(a, b, out_sh, NULL, &out));
        double t = bench_now_s() - t0;
        sample_start();
        double t_blas = pool_run(p, gemm_work, &gj), t_coll = 0;
        if (coll_in) {
            spmd_array *co = NULL;
            sample_start();
            t0 = bench_now_s();
            CHECK(spmd_shard_map(mesh, collective_body, &cjob, 1, &coll_in, cin_specs, 1, &coll_out,
                                 cout_specs, &smo, &co));
            t_coll = bench_now_s() - t0;
            spmd_array_destroy(co);
        }
        if (i >= 0)
            top[i] = t, tb[i] = t_blas, tc[i] = t_coll;
    }
    double op_s = median_slowest(top, c->iters), blas_s = median_slowest(tb, c->iters),
           coll_s = median_slowest(tc, c->iters), anchor_s = blas_s + coll_s;

    /* check C against one host sgemm of the whole shape */
    float *ha = host_random(m, k, 11), *hb = host_random(k, n, 12);
    float *ref = xmalloc((size_t)(m * n) * sizeof *ref);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, ha, (int)k,
                hb, (int)n, 0.0f, ref, (int)n);
    double rms = 0;
    for (int64_t i = 0; i < m * n; i++)
        rms += (double)ref[i] * ref[i];
    rms = sqrt(rms / (double)(m * n));
    double tol = 0x1p-23 * (g_nd + 2) * sqrt((double)k);
    int64_t wrong = 0;
    for (int s = 0; s < spmd_array_num_shards(out); s++) {
        spmd_box box;
        float *got = shard_copy(out, s, &box);
        int64_t cols = box.stop[1] - box.start[1];
        for (int64_t r = box.start[0]; r < box.stop[0]; r++)
            for (int64_t q = box.start[1]; q < box.stop[1]; q++) {
                double g = got[(r - box.start[0]) * cols + (q - box.start[1])], w = ref[r * n + q];
                wrong += !(fabs(g - w) <= tol * (fabs(w) + rms));
            }
        free(got);
    }
    double wrong_all = sum_over_processes((double)wrong);

    char ta[160], tbt[160], tcc[160], shape[512];
    type_of(a, ta, sizeof ta);
    type_of(b, tbt, sizeof tbt);
    type_of(out, tcc, sizeof tcc);
    snprintf(shape, sizeof shape, "%s @ %s -> %s", ta, tbt, tcc);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "op", names[kase]);
    cJSON_AddStringToObject(r, "shape", shape);
    cJSON_AddStringToObject(r, "plan", plan_text);
    cJSON_AddNumberToObject(r, "time_us", op_s * 1e6);
    cJSON_AddNumberToObject(r, "blas_us", blas_s * 1e6);
    if (coll_in)
        cJSON_AddNumberToObject(r, "collective_us", coll_s * 1e6);
    cJSON_AddNumberToObject(r, "anchor_us", anchor_s * 1e6);
    cJSON_AddNumberToObject(r, "ratio", anchor_s / op_s);
    cJSON_AddNumberToObject(r, "device_m", gj.m);
    cJSON_AddNumberToObject(r, "device_n", gj.n);
    cJSON_AddNumberToObject(r, "device_k", gj.k);
    cJSON_AddNumberToObject(r, "wrong", wrong_all);
    cJSON_AddItemToArray(rows, r);
    if (g_me == 0)
        printf("%-13s %-54s %10.1f %10.1f %10.1f %6.2f %6.0f\n", names[kase], shape, op_s * 1e6,
               blas_s * 1e6, coll_s * 1e6, anchor_s / op_s, wrong_all);

    free(ha), free(hb), free(ref), free(top), free(tb), free(tc);
    for (int d = 0; d < g_local; d++)
        free(gj.a[d]), free(gj.b[d]), free(gj.c[d]);
    if (coll_in && coll_in != a)
        spmd_array_destroy(coll_in);
    spmd_spec_destroy(coll_in_spec);
    spmd_spec_destroy(replicated);
    spmd_array_destroy(out);
    spmd_array_destroy(a);
    spmd_array_destroy(b);
    spmd_sharding_destroy(as);
    spmd_sharding_destroy(bs);
}

/* ---- main ---- */

static void usage(FILE *to)
{
    fprintf(to, "usage: " PROGRAM " [--elems E] [--m M --n N --k K] [--iters I] [--warmup W]\n"
                "                       [--mem-ops OPS] [--json FILE]\n"
                "Array ops (spmd/array_ops.h) against anchors of the same run: elementwise NEG,\n"
                "RELU, ADD on E float32 elements against memcpy of the in+out bytes per device;\n"
                "matmul cases (i) A[m@x,k]@B[k,n], (ii) A[m,k@x]@B[k@x,n] -> replicated (psum),\n"
                "(iii) A[m,k@x]@B[k,n] (all_gather) against one sgemm per device (+ the\n"
                "collective alone); peak memory over OPS NEGs whose outputs are destroyed.\n"
                "E, M and K are rounded up to multiples of the device count.\n");
}

static int parse(int argc, char **argv, config *c)
{
    *c = (config){
        .elems = 1 << 23, .m = 1024, .n = 512, .k = 512, .iters = 10, .warmup = 2, .mem_ops = 100};
    static const struct option opts[] = {
        {"elems", 1, 0, 'e'}, {"m", 1, 0, 'm'},      {"n", 1, 0, 'n'},    {"k", 1, 0, 'k'},
        {"iters", 1, 0, 'i'}, {"warmup", 1, 0, 'w'}, {"json", 1, 0, 'j'}, {"mem-ops", 1, 0, 'o'},
        {"help", 0, 0, 'h'},  {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'e':
            c->elems = atoll(optarg);
            break;
        case 'm':
            c->m = atoll(optarg);
            break;
        case 'n':
            c->n = atoll(optarg);
            break;
        case 'k':
            c->k = atoll(optarg);
            break;
        case 'i':
            c->iters = atoi(optarg);
            break;
        case 'w':
            c->warmup = atoi(optarg);
            break;
        case 'o':
            c->mem_ops = atoi(optarg);
            break;
        case 'j':
            c->json = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return 2;
        }
    }
    if (c->elems < 1 || c->m < 1 || c->n < 1 || c->k < 1 || c->iters < 1 || c->warmup < 0 ||
        c->mem_ops < 1 || c->m > (1 << 20) || c->n > (1 << 20) || c->k > (1 << 20) ||
        optind < argc) {
        usage(stderr);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    config c;
    int rc = parse(argc, argv, &c);
    if (rc)
        return rc;
    CHECK(spmd_init(NULL));
    g_procs = spmd_process_count();
    g_me = spmd_process_index();
    g_nd = spmd_device_count();
    g_local = spmd_local_device_count();
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "processes", g_procs);
    cJSON_AddNumberToObject(root, "devices", g_nd);
    cJSON *rows = cJSON_AddArrayToObject(root, "rows");
    spmd_device_info info;
    CHECK(spmd_device_get_info(spmd_local_device_id(0), &info));
    if (info.platform != SPMD_PLATFORM_CPU) {
        if (g_me == 0)
            printf("# " PROGRAM ": %s devices: the anchors (memcpy, sgemm) run on the host; "
                   "CPU devices only, no rows\n",
                   spmd_platform_name(info.platform));
        cJSON_AddStringToObject(root, "skipped", "CPU devices only");
        if (g_me == 0)
            bench_write_json(root, c.json);
        cJSON_Delete(root);
        CHECK(spmd_finalize());
        return 0;
    }
    if (g_local > MAX_LOCAL) {
        fprintf(stderr, PROGRAM ": at most %d devices per process\n", MAX_LOCAL);
        return 2;
    }
    /* the sharded dimensions rounded up to a multiple of the devices */
    c.elems = (c.elems + g_nd - 1) / g_nd * g_nd;
    c.m = (c.m + g_nd - 1) / g_nd * g_nd;
    c.k = (c.k + g_nd - 1) / g_nd * g_nd;
    const char *axis = "x";
    spmd_mesh *mesh = NULL;
    CHECK(spmd_mesh_create(1, &g_nd, &axis, NULL, 0, &mesh));
    spmd_sharding *vs = sharding(mesh, "'x'");
    spmd_array *x = NULL, *y = NULL;
    CHECK(spmd_array_random_values(mesh, 1, &c.elems, SPMD_DTYPE_F32, 1, SPMD_RANDOM_NORMAL, vs,
                                   NULL, &x));
    if (g_me == 0)
        printf("# " PROGRAM ": %d process(es) x %d CPU device(s); anchors on %d thread(s) per "
               "process\n",
               g_procs, g_local, g_local);
    /* memory first, before the anchors' buffers and the other arrays raise the peak; its row
     * goes last */
    cJSON *memory = memory_row(&c, x);
    CHECK(spmd_array_random_values(mesh, 1, &c.elems, SPMD_DTYPE_F32, 2, SPMD_RANDOM_NORMAL, vs,
                                   NULL, &y));

    pool *p = pool_create(g_local);
    copy_job cj;
    size_t block = (size_t)(c.elems / g_nd) * sizeof(float), most = block * 3 / 2;
    for (int d = 0; d < g_local; d++) { /* touched once: no page faults in the anchor */
        cj.src[d] = xmalloc(most);
        cj.dst[d] = xmalloc(most);
        memset(cj.src[d], 1, most);
        memset(cj.dst[d], 2, most);
    }
    if (g_me == 0)
        printf("%-6s %-24s %12s %12s %8s %14s %8s\n", "op", "type", "time_us", "memcpy_us", "ratio",
               "block_op_us", "#wrong");
    for (int kind = 0; kind < EW_KINDS; kind++)
        elementwise_row(&c, p, &cj, kind, x, y, rows);
    for (int d = 0; d < g_local; d++)
        free(cj.src[d]), free(cj.dst[d]);
    spmd_array_destroy(x);
    spmd_array_destroy(y);
    spmd_sharding_destroy(vs);

    if (g_me == 0)
        printf("%-13s %-54s %10s %10s %10s %6s %6s\n", "matmul", "types", "time_us", "sgemm_us",
               "coll_us", "ratio", "#wrong");
    for (int kase = 1; kase <= 3; kase++)
        matmul_row(&c, p, mesh, kase, rows);
    pool_destroy(p);
    cJSON_AddItemToArray(rows, memory);

    double wrong = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) wrong += cJSON_GetObjectItemCaseSensitive(r, "wrong")->valuedouble;
    if (g_me == 0)
        bench_write_json(root, c.json);
    cJSON_Delete(root);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return wrong > 0 ? 1 : 0;
}
