/*
 * bench/reshard: spmd_reshard (jax.device_put(x, new_sharding)) of an N x N float64 matrix for
 * the layout changes below, with its baselines timed in the same run, iteration by iteration
 * (each timed call starts after a barrier; a row's time is the median over iterations of the
 * slowest process):
 *   (a) MPI_Alltoallv on spmd_mpi_comm() of exactly the elements that must change process,
 *       from pre-packed contiguous buffers (no packing): the bound. ratio = a2av / reshard.
 *   (b) gather-then-scatter through rank 0: pack the source shards, MPI_Gatherv, assemble the
 *       global matrix on rank 0, pack every destination shard, MPI_Scatterv, unpack (the naive
 *       way). ratio = gather_scatter / reshard.
 *   (c) ScaLAPACK pdgemr2d (when built with it) for layouts of one block per device, each
 *       device on its own process (rows_to_cols, transpose_2d, half_to_half): a row-major A is
 *       the column-major A^T, so row blocks of A over p devices are column blocks of A^T over
 *       a 1 x p BLACS grid (block size N/p). ratio = pdgemr2d / reshard.
 * Layouts (mesh 'a' of every device; ('a','b') an n1 x n2 mesh when the device count allows):
 *   rows_to_cols        P('a') -> P(None,'a')       (the transpose-like all-to-all)
 *   transpose_2d        P('a','b') -> P('b','a')    on the 2-D mesh
 *   replicated_to_rows  P() -> P('a')               (no data moves)
 *   rows_to_replicated  P('a') -> P()               (an all-gather)
 *   half_to_half        P('a') on devices [0, n/2) -> P('a') on devices [n/2, n)
 * spmd_reshard's time includes creating the output array; destroying it is outside the timed
 * region. Every result (and every baseline's) is compared element by element with
 * f(i, j) = i*N + j; a nonzero #wrong prints WRONG. Also reported: moved (the bytes
 * spmd_reshard says it sent over the bound's) and pgfault (minor page faults per call: fresh
 * output buffers are first-touched inside the timed region).
 *
 * --plan measures planning instead: rounds of new shardings, each timing the call that plans,
 * the same call again (cached plan), a call to a destination sharding made anew equal to the
 * first and one from a source sharding made anew; the time planning and the pieces and steps
 * of the plan come from spmd_reshard_stats; MPI_Alltoallv of the bytes that move is the bound
 * of the repeated call (--dtype f32 for float32).
 *
 * This file holds the placements, spmd_reshard's timing and checks, the driver, --plan and main;
 * the bound and the baselines are in reshard_baselines.c, and reshard.h declares what they share.
 *
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=1 bench_reshard --min-n 256 --max-n 4096 --json r.json
 *   SPMD_NUM_CPU_DEVICES=4 bench_reshard --layout rows_to_cols    # one process: reshard only
 *   SPMD_NUM_CPU_DEVICES=1024 bench_reshard --plan --layout rows_to_cols --min-n 1024 --max-n 1024
 *   mpirun -np 16 -x SPMD_NUM_CPU_DEVICES=8 bench_reshard --plan --layout transpose_2d \
 *       --mesh-rows 16 --min-n 64 --max-n 64 --dtype f32
 */
#define _GNU_SOURCE
#include "reshard.h"

void fail(const char *what)
{
    fprintf(stderr, "bench_reshard: %s\n", what);
    exit(1);
}

void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        fail("out of memory");
    return p;
}

typedef enum layout_kind {
    L_ROWS_TO_COLS,
    L_TRANSPOSE_2D,
    L_REPLICATED_TO_ROWS,
    L_ROWS_TO_REPLICATED,
    L_HALF_TO_HALF,
    L_COUNT
} layout_kind;
static const char *const layout_names[L_COUNT] = {
    "rows_to_cols", "transpose_2d", "replicated_to_rows", "rows_to_replicated", "half_to_half"};

typedef struct config {
    int layouts[L_COUNT];
    int64_t min_n, max_n;
    int iters, warmup;
    const char *json_path;
    int plan;         /* --plan: what planning costs (first, repeated, fresh equal shardings) */
    spmd_dtype dtype; /* of the --plan rows: f64 (default) or f32 */
} config;

/* The global value: exact in float64 for N up to 2^26. */
double value_at(int64_t n, int64_t i, int64_t j) { return (double)(i * n + j); }

static spmd_status fill_box(const spmd_box *index, void *dst, void *user)
{
    int64_t n = *(const int64_t *)user;
    double *d = dst;
    int64_t w = index->stop[1] - index->start[1];
    for (int64_t i = index->start[0]; i < index->stop[0]; i++)
        for (int64_t j = index->start[1]; j < index->stop[1]; j++)
            d[(i - index->start[0]) * w + (j - index->start[1])] = value_at(n, i, j);
    return SPMD_OK;
}

int64_t box_elems(const spmd_box *b)
{
    return (b->stop[0] - b->start[0]) * (b->stop[1] - b->start[1]);
}

/* Wrong elements of a dense row-major buffer holding box b. */
int64_t count_wrong(int64_t n, const spmd_box *b, const double *d)
{
    int64_t wrong = 0, w = b->stop[1] - b->start[1];
    for (int64_t i = b->start[0]; i < b->stop[0]; i++)
        for (int64_t j = b->start[1]; j < b->stop[1]; j++)
            wrong += d[(i - b->start[0]) * w + (j - b->start[1])] != value_at(n, i, j);
    return wrong;
}

/* ---- where every block lives ---- */

static void placement_make(const spmd_sharding *s, int64_t n, const int *proc_of, placement *pl)
{
    const spmd_mesh *mesh = spmd_sharding_mesh(s);
    int64_t shape[2] = {n, n};
    pl->ndev = spmd_mesh_size(mesh);
    pl->dev = xmalloc((size_t)pl->ndev * sizeof *pl->dev);
    pl->proc = xmalloc((size_t)pl->ndev * sizeof *pl->proc);
    pl->box = xmalloc((size_t)pl->ndev * sizeof *pl->box);
    for (int f = 0; f < pl->ndev; f++) {
        pl->dev[f] = spmd_mesh_device_id(mesh, f);
        pl->proc[f] = proc_of[pl->dev[f]];
        CHECK(spmd_sharding_device_box(s, 2, shape, pl->dev[f], &pl->box[f]));
    }
}

static void placement_free(placement *pl)
{
    free(pl->dev);
    free(pl->proc);
    free(pl->box);
}

/* Number of this process's devices in the placement. */
int placement_local(const placement *pl, int me)
{
    int k = 0;
    for (int f = 0; f < pl->ndev; f++)
        k += pl->proc[f] == me;
    return k;
}

/* ---- spmd_reshard itself ---- */

/* Minor page faults of this process so far (every thread): fresh output buffers fault in. */
static double minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_minflt : 0;
}

/* Wrong elements of `out` against destination placement dst; a missing or misplaced shard
 * counts all its elements. */
static int64_t check_result(const spmd_array *out, const placement *dst, int me, int64_t n,
                            double *scratch)
{
    int64_t wrong = 0;
    int want = placement_local(dst, me), have = spmd_array_num_shards(out);
    int k = 0;
    for (int f = 0; f < dst->ndev; f++) {
        if (dst->proc[f] != me)
            continue;
        spmd_shard sh;
        if (k >= have || spmd_array_shard(out, k, &sh) != SPMD_OK || sh.device_id != dst->dev[f] ||
            sh.index.ndim != 2 || sh.index.start[0] != dst->box[f].start[0] ||
            sh.index.stop[0] != dst->box[f].stop[0] || sh.index.start[1] != dst->box[f].start[1] ||
            sh.index.stop[1] != dst->box[f].stop[1] ||
            sh.nbytes != (size_t)box_elems(&dst->box[f]) * sizeof(double) ||
            spmd_array_shard_to_host(out, k, scratch, sh.nbytes) != SPMD_OK) {
            wrong += box_elems(&dst->box[f]);
        } else {
            wrong += count_wrong(n, &dst->box[f], scratch);
        }
        k++;
    }
    if (have != want)
        wrong += 1; /* a shard too many: at least one wrong */
    return wrong;
}

/* Microseconds this machine spends faulting in one fresh page, beyond writing it (best of 3):
 * pgfault x this is what fresh output buffers cost a reshard. */
static double page_fault_us(void)
{
    const size_t bytes = (size_t)32 << 20;
    long page = sysconf(_SC_PAGESIZE);
    double best = -1;
    for (int rep = 0; rep < 3; rep++) {
        char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return -1;
        double t0 = bench_now_s();
        memset(p, 1, bytes);
        double t1 = bench_now_s();
        memset(p, 2, bytes);
        double t2 = bench_now_s();
        munmap(p, bytes);
        double us =
            ((t1 - t0) - (t2 - t1)) * 1e6 / (double)(bytes / (size_t)(page > 0 ? page : 4096));
        best = best < 0 || us < best ? us : best;
    }
    return best;
}

/* ---- driver ---- */

typedef struct layout {
    layout_kind kind;
    char text[96];
    spmd_sharding *src, *dst;
} layout;

static spmd_sharding *make_sharding(spmd_mesh *mesh, const char *spec)
{
    spmd_sharding *s = NULL;
    CHECK(spmd_sharding_create_parse(mesh, spec, &s));
    return s;
}

/* --mesh-rows: the first axis of transpose_2d's mesh (0: the largest divisor of the device
 * count up to its square root). */
static int mesh_rows;

/* Builds the layout, or returns 0 when the device count does not allow it. */
static int layout_make(layout_kind kind, int ndev, layout *l)
{
    static const char *const a[1] = {"a"}, *const ab[2] = {"a", "b"};
    spmd_mesh *m1 = NULL, *m2 = NULL;
    memset(l, 0, sizeof *l);
    l->kind = kind;
    switch (kind) {
    case L_ROWS_TO_COLS:
        CHECK(spmd_mesh_create(1, &ndev, a, NULL, 0, &m1));
        l->src = make_sharding(m1, "'a'");
        l->dst = make_sharding(m1, "None, 'a'");
        snprintf(l->text, sizeof l->text, "P('a')->P(None,'a')");
        break;
    case L_TRANSPOSE_2D: {
        int n1 = 1;
        for (int d = 2; d * d <= ndev; d++)
            if (ndev % d == 0)
                n1 = d;
        if (mesh_rows > 0)
            n1 = ndev % mesh_rows == 0 && mesh_rows < ndev ? mesh_rows : 1;
        if (n1 < 2)
            return 0;
        int shape[2] = {n1, ndev / n1};
        CHECK(spmd_mesh_create(2, shape, ab, NULL, 0, &m1));
        l->src = make_sharding(m1, "'a', 'b'");
        l->dst = make_sharding(m1, "'b', 'a'");
        snprintf(l->text, sizeof l->text, "P('a','b')->P('b','a') %dx%d", shape[0], shape[1]);
        break;
    }
    case L_REPLICATED_TO_ROWS:
    case L_ROWS_TO_REPLICATED:
        CHECK(spmd_mesh_create(1, &ndev, a, NULL, 0, &m1));
        l->src = make_sharding(m1, kind == L_REPLICATED_TO_ROWS ? "" : "'a'");
        l->dst = make_sharding(m1, kind == L_REPLICATED_TO_ROWS ? "'a'" : "");
        snprintf(l->text, sizeof l->text, "%s",
                 kind == L_REPLICATED_TO_ROWS ? "P()->P('a')" : "P('a')->P()");
        break;
    case L_HALF_TO_HALF: {
        if (ndev < 2 || ndev % 2 != 0)
            return 0;
        int h = ndev / 2, *ids = xmalloc((size_t)ndev * sizeof *ids);
        for (int d = 0; d < ndev; d++)
            ids[d] = d;
        CHECK(spmd_mesh_create(1, &h, a, ids, h, &m1));
        CHECK(spmd_mesh_create(1, &h, a, ids + h, h, &m2));
        free(ids);
        l->src = make_sharding(m1, "'a'");
        l->dst = make_sharding(m2, "'a'");
        snprintf(l->text, sizeof l->text, "P('a')[0:%d]->P('a')[%d:%d]", h, h, ndev);
        break;
    }
    default:
        return 0;
    }
    spmd_mesh_destroy(m1); /* the shardings keep their meshes */
    spmd_mesh_destroy(m2);
    return 1;
}

typedef struct row_result {
    double reshard, a2av, a2av_self, gs, sl, mc; /* median seconds; < 0: not measured */
    int64_t wrong, base_wrong;                   /* summed over processes and iterations */
    double bytes_sent, bound_bytes;              /* summed over processes (last iteration) */
    double bytes_copied, bytes_shared;           /* reshard's local work, summed over processes */
    double faults; /* minor page faults per timed reshard, busiest process */
} row_result;

/* Median over iterations of the slowest process's time. */
static double slowest_median(double *t, int iters, int procs)
{
#ifdef SPMD_HAVE_MPI
    if (procs > 1)
        MPI_Allreduce(MPI_IN_PLACE, t, iters, MPI_DOUBLE, MPI_MAX, spmd_mpi_comm());
#else
    (void)procs;
#endif
    return bench_quantile(t, iters, 0.5);
}

static void sum_over_processes(double *v, int count, int procs)
{
#ifdef SPMD_HAVE_MPI
    if (procs > 1)
        MPI_Allreduce(MPI_IN_PLACE, v, count, MPI_DOUBLE, MPI_SUM, spmd_mpi_comm());
#else
    (void)v;
    (void)count;
    (void)procs;
#endif
}

static row_result run_row(const layout *l, int64_t n, const config *cfg, const int *proc_of, int me,
                          int procs, int one_device_each)
{
    row_result res = {-1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0};
    int64_t shape[2] = {n, n};
    placement src, dst;
    placement_make(l->src, n, proc_of, &src);
    placement_make(l->dst, n, proc_of, &dst);
    bound b;
    bound_make(&src, &dst, procs, n, &b);
    res.bound_bytes = (double)bound_total(&b) * sizeof(double);

    spmd_array *x = NULL;
    CHECK(spmd_array_from_callback(2, shape, SPMD_DTYPE_F64, l->src, fill_box, &n, &x));
    int64_t biggest = 1;
    for (int f = 0; f < dst.ndev; f++)
        biggest = box_elems(&dst.box[f]) > biggest ? box_elems(&dst.box[f]) : biggest;
    double *scratch = xmalloc((size_t)biggest * sizeof(double));

    int total = cfg->warmup + cfg->iters;
    double *t_rs = xmalloc((size_t)cfg->iters * sizeof(double));
    double *t_a2a = xmalloc((size_t)cfg->iters * sizeof(double));
    double *t_gs = xmalloc((size_t)cfg->iters * sizeof(double));
    double *t_sl = xmalloc((size_t)cfg->iters * sizeof(double));
    double *t_mc = xmalloc((size_t)cfg->iters * sizeof(double));
    double *t_a2s = xmalloc((size_t)cfg->iters * sizeof(double));
    /* memcpy bound of the local work: one thread copying the bytes spmd_reshard copies between
     * this process's buffers (learnt from one untimed call), between pages already touched */
    spmd_reshard_options probe = SPMD_RESHARD_OPTIONS_INIT;
    spmd_reshard_stats probe_stats;
    probe.stats = &probe_stats;
    spmd_array *y0 = NULL;
    CHECK(spmd_reshard(x, l->dst, &probe, &y0));
    spmd_array_destroy(y0);
    size_t mc_bytes = (size_t)probe_stats.bytes_copied;
    char *mc_src = xmalloc(mc_bytes), *mc_dst = xmalloc(mc_bytes);
    memset(mc_src, 1, mc_bytes);
    memset(mc_dst, 2, mc_bytes);
    int64_t wrong = 0, base_wrong = 0;
    double faults = 0;
    spmd_reshard_stats stats;
    memset(&stats, 0, sizeof stats);
    int do_mpi = 0, do_sl = 0;
#ifdef SPMD_HAVE_MPI
    MPI_Comm comm = spmd_mpi_comm();
    a2a xa, xs;
    gs xg;
    do_mpi = procs > 1;
    if (do_mpi) {
        a2a_setup(&b, me, n, &xa);
        a2a_with_self(&xa, procs, me, (int64_t)(mc_bytes / sizeof(double)), &xs);
        gs_setup(&src, &dst, x, me, procs, n, &xg);
        int ok[3] = {xa.ok, xg.ok, xs.ok};
        MPI_Allreduce(MPI_IN_PLACE, ok, 3, MPI_INT, MPI_MIN, comm);
        xa.ok = ok[0];
        xg.ok = ok[1];
        xs.ok = ok[2];
    }
#endif
#ifdef SPMD_BENCH_HAVE_SCALAPACK
    sl_grid ga, gb;
    int sys = -1, all = -1;
    do_sl = do_mpi && one_device_each && sl_expressible(l->src, &src, procs) &&
            sl_expressible(l->dst, &dst, procs);
    if (do_sl) {
        sys = Csys2blacs_handle(comm);
        all = sys;
        Cblacs_gridinit(&all, "R", 1, procs);
        sl_grid_make(sys, l->src, &src, me, n, &ga);
        sl_grid_make(sys, l->dst, &dst, me, n, &gb);
        if (ga.mine >= 0)
            fill_box(&src.box[ga.mine], ga.local, &n);
    }
#else
    (void)one_device_each;
#endif

    for (int it = 0; it < total; it++) {
        int k = it - cfg->warmup; /* timed when >= 0 */
        /* spmd_reshard, creating the output; destroyed after the clock stops */
        spmd_reshard_options opts = SPMD_RESHARD_OPTIONS_INIT;
        opts.stats = &stats;
        spmd_array *y = NULL;
#ifdef SPMD_HAVE_MPI
        if (procs > 1)
            MPI_Barrier(comm);
#endif
        double f0 = minor_faults(), t0 = bench_now_s();
        CHECK(spmd_reshard(x, l->dst, &opts, &y));
        double t = bench_now_s() - t0;
        if (k >= 0) {
            t_rs[k] = t;
            faults += minor_faults() - f0;
        }
        wrong += check_result(y, &dst, me, n, scratch);
        spmd_array_destroy(y);
#ifdef SPMD_HAVE_MPI
        if (procs > 1)
            MPI_Barrier(comm);
#endif
        t0 = bench_now_s();
        memcpy(mc_dst, mc_src, mc_bytes);
        t = bench_now_s() - t0;
        if (k >= 0)
            t_mc[k] = t;
#ifdef SPMD_HAVE_MPI
        if (do_mpi && xa.ok) {
            memset(xa.recv, 0xff, (size_t)xa.nrecv * sizeof(double));
            t = a2a_run(&xa, comm);
            if (k >= 0)
                t_a2a[k] = t;
            base_wrong += a2a_verify(&b, me, n, &xa);
        }
        if (do_mpi && xs.ok) {
            t = a2a_run(&xs, comm);
            if (k >= 0)
                t_a2s[k] = t;
        }
        if (do_mpi && xg.ok) {
            gs_clear(&dst, me, &xg);
            t = gs_run(&src, &dst, x, me, procs, n, &xg, comm);
            if (k >= 0)
                t_gs[k] = t;
            base_wrong += gs_verify(&dst, me, n, &xg);
        }
#endif
#ifdef SPMD_BENCH_HAVE_SCALAPACK
        if (do_sl) {
            if (gb.mine >= 0)
                memset(gb.local, 0xff, (size_t)box_elems(&dst.box[gb.mine]) * sizeof(double));
            t = sl_run(&ga, &gb, all, n, comm);
            if (k >= 0)
                t_sl[k] = t;
            if (gb.mine >= 0)
                base_wrong += count_wrong(n, &dst.box[gb.mine], gb.local);
        }
#endif
    }
    res.reshard = slowest_median(t_rs, cfg->iters, procs);
    if (mc_bytes > 0)
        res.mc = slowest_median(t_mc, cfg->iters, procs);
    else
        (void)slowest_median(t_mc, cfg->iters, procs); /* collective: every process joins */
#ifdef SPMD_HAVE_MPI
    if (do_mpi && xa.ok)
        res.a2av = slowest_median(t_a2a, cfg->iters, procs);
    if (do_mpi && xs.ok)
        res.a2av_self = slowest_median(t_a2s, cfg->iters, procs);
    if (do_mpi && xg.ok)
        res.gs = slowest_median(t_gs, cfg->iters, procs);
    if (do_mpi) {
        a2a_free(&xa);
        a2a_free(&xs);
        gs_free(&xg);
    }
#endif
#ifdef SPMD_BENCH_HAVE_SCALAPACK
    if (do_sl) {
        res.sl = slowest_median(t_sl, cfg->iters, procs);
        sl_grid_free(&ga);
        sl_grid_free(&gb);
        if (all >= 0)
            Cblacs_gridexit(all);
        Cfree_blacs_system_handle(sys);
    }
#endif
    (void)do_mpi;
    (void)do_sl;
    double sums[5] = {(double)wrong, (double)base_wrong, (double)stats.bytes_sent,
                      (double)stats.bytes_copied, (double)stats.bytes_shared};
    sum_over_processes(sums, 5, procs);
    res.wrong = (int64_t)sums[0];
    res.base_wrong = (int64_t)sums[1];
    res.bytes_sent = sums[2];
    res.bytes_copied = sums[3];
    res.bytes_shared = sums[4];
    res.faults = faults / cfg->iters;
#ifdef SPMD_HAVE_MPI
    if (procs > 1)
        MPI_Allreduce(MPI_IN_PLACE, &res.faults, 1, MPI_DOUBLE, MPI_MAX, comm);
#endif

    free(t_rs);
    free(t_a2a);
    free(t_gs);
    free(t_sl);
    free(t_mc);
    free(t_a2s);
    free(mc_src);
    free(mc_dst);
    free(scratch);
    spmd_array_destroy(x);
    bound_free(&b);
    placement_free(&src);
    placement_free(&dst);
    return res;
}

static void usage(void)
{
    printf("usage: bench_reshard [--layout NAME|all] [--min-n N] [--max-n N] [--iters N]\n"
           "                     [--warmup N] [--json FILE] [--plan [--dtype f32|f64]]\n"
           "                     [--mesh-rows N]\n"
           "layouts: rows_to_cols transpose_2d replicated_to_rows rows_to_replicated "
           "half_to_half\n"
           "--plan: the cost of planning instead of the baselines: per round new shardings, then\n"
           "        the first reshard (plans), a repeated one (cached plan), one to a fresh equal\n"
           "        destination sharding and one from a fresh equal source sharding\n"
           "--mesh-rows N: transpose_2d on an N x (devices / N) mesh (e.g. processes x local "
           "devices)\n");
}

static void parse(int argc, char **argv, config *c)
{
    static const struct option options[] = {{"layout", required_argument, NULL, 'l'},
                                            {"min-n", required_argument, NULL, 'm'},
                                            {"max-n", required_argument, NULL, 'M'},
                                            {"iters", required_argument, NULL, 'i'},
                                            {"warmup", required_argument, NULL, 'w'},
                                            {"json", required_argument, NULL, 'j'},
                                            {"plan", no_argument, NULL, 'p'},
                                            {"dtype", required_argument, NULL, 'd'},
                                            {"mesh-rows", required_argument, NULL, 'r'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    *c = (config){{1, 1, 1, 1, 1}, 256, 2048, 10, 2, NULL, 0, SPMD_DTYPE_F64};
    int picked = 0, opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case 'l':
            if (strcmp(optarg, "all") == 0)
                break;
            if (!picked)
                memset(c->layouts, 0, sizeof c->layouts);
            picked = 1;
            for (int k = 0; k < L_COUNT; k++)
                if (strcmp(optarg, layout_names[k]) == 0)
                    c->layouts[k] = 1;
            break;
        case 'm':
            c->min_n = strtoll(optarg, NULL, 10);
            break;
        case 'M':
            c->max_n = strtoll(optarg, NULL, 10);
            break;
        case 'i':
            c->iters = atoi(optarg);
            break;
        case 'w':
            c->warmup = atoi(optarg);
            break;
        case 'j':
            c->json_path = optarg;
            break;
        case 'p':
            c->plan = 1;
            break;
        case 'r':
            mesh_rows = atoi(optarg);
            break;
        case 'd':
            if (strcmp(optarg, "f32") == 0 || strcmp(optarg, "float32") == 0)
                c->dtype = SPMD_DTYPE_F32;
            else if (strcmp(optarg, "f64") == 0 || strcmp(optarg, "float64") == 0)
                c->dtype = SPMD_DTYPE_F64;
            else
                c->iters = 0; /* reported below as a bad argument */
            break;
        default:
            usage();
            exit(opt == 'h' ? 0 : 2);
        }
    }
    int any = 0;
    for (int k = 0; k < L_COUNT; k++)
        any |= c->layouts[k];
    if (!any || c->min_n < 1 || c->max_n < c->min_n || c->max_n > (1 << 15) || c->iters < 1 ||
        c->warmup < 0) {
        fprintf(stderr, "bench_reshard: bad arguments\n");
        usage();
        exit(2);
    }
}

/* "%10.1f" of microseconds, or "n/a". */
static const char *fmt_us(char *buf, size_t size, double s)
{
    if (s < 0)
        snprintf(buf, size, "%s", "n/a");
    else
        snprintf(buf, size, "%.1f", s * 1e6);
    return buf;
}

static const char *fmt_ratio(char *buf, size_t size, double base, double ours)
{
    if (base < 0 || ours <= 0)
        snprintf(buf, size, "%s", "n/a");
    else
        snprintf(buf, size, "%.2f", base / ours);
    return buf;
}

static void add_time(cJSON *row, const char *key, const char *ratio_key, double base, double ours)
{
    if (base < 0) {
        cJSON_AddNullToObject(row, key);
        cJSON_AddNullToObject(row, ratio_key);
        return;
    }
    cJSON_AddNumberToObject(row, key, base * 1e6);
    if (ours > 0)
        cJSON_AddNumberToObject(row, ratio_key, base / ours);
    else
        cJSON_AddNullToObject(row, ratio_key);
}

/* ---- --plan: what planning costs ---- */

/* The global value in the --plan rows' dtype: value_at, exact in float32 for N up to 4096. */
typedef struct typed_fill {
    int64_t n;
    spmd_dtype dtype;
} typed_fill;

static spmd_status fill_typed(const spmd_box *index, void *dst, void *user)
{
    const typed_fill *f = user;
    int64_t k = 0;
    for (int64_t i = index->start[0]; i < index->stop[0]; i++)
        for (int64_t j = index->start[1]; j < index->stop[1]; j++, k++) {
            if (f->dtype == SPMD_DTYPE_F32)
                ((float *)dst)[k] = (float)value_at(f->n, i, j);
            else
                ((double *)dst)[k] = value_at(f->n, i, j);
        }
    return SPMD_OK;
}

/* Wrong elements of every addressable shard of y (whatever its sharding). */
static int64_t count_wrong_typed(const spmd_array *y, const typed_fill *f, void *scratch)
{
    int64_t wrong = 0;
    for (int k = 0; k < spmd_array_num_shards(y); k++) {
        spmd_shard sh;
        CHECK(spmd_array_shard(y, k, &sh));
        CHECK(spmd_array_shard_to_host(y, k, scratch, sh.nbytes));
        int64_t e = 0;
        for (int64_t i = sh.index.start[0]; i < sh.index.stop[0]; i++)
            for (int64_t j = sh.index.start[1]; j < sh.index.stop[1]; j++, e++) {
                double v = f->dtype == SPMD_DTYPE_F32 ? (double)((const float *)scratch)[e]
                                                      : ((const double *)scratch)[e];
                wrong += v != value_at(f->n, i, j);
            }
    }
    return wrong;
}

typedef struct plan_result {
    double first, repeated, fresh_dst, fresh_src; /* median seconds of a call, slowest process */
    double plan;    /* median seconds planning in the first call (stats), slowest process */
    double a2av;    /* < 0: not measured */
    double pieces;  /* plan_pieces of the busiest process */
    double steps;   /* plan_steps of the first call, busiest process */
    double replans; /* plans built by the repeated and fresh calls, all processes and rounds */
    int64_t wrong;
} plan_result;

static void barrier(int procs)
{
#ifdef SPMD_HAVE_MPI
    if (procs > 1)
        MPI_Barrier(spmd_mpi_comm());
#else
    (void)procs;
#endif
}

/* What one timed spmd_reshard(x, to) cost; the result is checked, then destroyed. */
typedef struct call_cost {
    double seconds, plan_seconds, pieces, steps, built;
} call_cost;

static call_cost timed_reshard(spmd_array *x, const spmd_sharding *to, int procs,
                               const typed_fill *f, void *scratch, int64_t *wrong)
{
    spmd_array *y = NULL;
    spmd_reshard_options opts = SPMD_RESHARD_OPTIONS_INIT;
    spmd_reshard_stats stats;
    memset(&stats, 0, sizeof stats);
    opts.stats = &stats;
    barrier(procs);
    double t0 = bench_now_s();
    CHECK(spmd_reshard(x, to, &opts, &y));
    call_cost c = {bench_now_s() - t0, -1, -1, -1, -1};
#ifndef SPMD_BENCH_NO_PLAN_STATS /* a library from before spmd_reshard_stats told planning */
    c.plan_seconds = stats.plan_seconds;
    c.pieces = (double)stats.plan_pieces;
    c.steps = (double)stats.plan_steps;
    c.built = stats.plans_built;
#endif
    *wrong += count_wrong_typed(y, f, scratch);
    spmd_array_destroy(y);
    return c;
}

static double max_over_processes(double v, int procs)
{
#ifdef SPMD_HAVE_MPI
    if (procs > 1)
        MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, spmd_mpi_comm());
#else
    (void)procs;
#endif
    return v;
}

/*
 * Rounds of: new shardings (the last round's are gone, so no plan is cached), then the first
 * reshard (it plans), a repeated one (cached plan), one to a destination sharding made anew
 * equal to the first (on a new mesh) and one of an array on a source sharding made anew equal
 * to the first. With several processes, MPI_Alltoallv of the bytes that move, in this dtype,
 * from pre-packed buffers.
 */
static plan_result run_plan_row(layout_kind kind, int ndev, int64_t n, const config *cfg,
                                const int *proc_of, int me, int procs)
{
    plan_result res = {0, 0, 0, 0, 0, -1, -1, -1, 0, 0};
    typed_fill f = {n, cfg->dtype};
    int64_t shape[2] = {n, n};
    size_t elem = cfg->dtype == SPMD_DTYPE_F32 ? sizeof(float) : sizeof(double);
    int total = cfg->warmup + cfg->iters;
    double *t[6];
    for (int k = 0; k < 6; k++)
        t[k] = xmalloc((size_t)cfg->iters * sizeof(double));
    void *scratch = xmalloc((size_t)(n * n) * elem);
#ifdef SPMD_HAVE_MPI
    a2a xa;
    int do_a2a = procs > 1;
    bound b;
    if (do_a2a) {
        layout l;
        if (!layout_make(kind, ndev, &l))
            fail("internal: layout");
        placement src, dst;
        placement_make(l.src, n, proc_of, &src);
        placement_make(l.dst, n, proc_of, &dst);
        bound_make(&src, &dst, procs, n, &b);
        a2a_setup(&b, me, n, &xa);
        int ok = xa.ok;
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, spmd_mpi_comm());
        do_a2a = ok;
        if (!ok)
            a2a_free(&xa);
        placement_free(&src);
        placement_free(&dst);
        spmd_sharding_destroy(l.src);
        spmd_sharding_destroy(l.dst);
    }
#else
    (void)proc_of;
    (void)me;
#endif
    for (int it = 0; it < total; it++) {
        int k = it - cfg->warmup; /* timed when >= 0 */
        layout l, l2;
        if (!layout_make(kind, ndev, &l) || !layout_make(kind, ndev, &l2))
            fail("internal: layout");
        spmd_array *x = NULL, *x2 = NULL;
        CHECK(spmd_array_from_callback(2, shape, cfg->dtype, l.src, fill_typed, &f, &x));
        CHECK(spmd_array_from_callback(2, shape, cfg->dtype, l2.src, fill_typed, &f, &x2));
        call_cost cf = timed_reshard(x, l.dst, procs, &f, scratch, &res.wrong);
        call_cost cr = timed_reshard(x, l.dst, procs, &f, scratch, &res.wrong);
        call_cost cd = timed_reshard(x, l2.dst, procs, &f, scratch, &res.wrong);
        call_cost cs = timed_reshard(x2, l.dst, procs, &f, scratch, &res.wrong);
        double ta = -1;
#ifdef SPMD_HAVE_MPI
        if (do_a2a) {
            MPI_Datatype type = cfg->dtype == SPMD_DTYPE_F32 ? MPI_FLOAT : MPI_DOUBLE;
            MPI_Barrier(spmd_mpi_comm());
            double t0 = bench_now_s();
            MPI_Alltoallv(xa.send, xa.sc, xa.sd, type, xa.recv, xa.rc, xa.rd, type,
                          spmd_mpi_comm());
            ta = bench_now_s() - t0;
        }
#endif
        if (k >= 0) {
            t[0][k] = cf.seconds;
            t[1][k] = cr.seconds;
            t[2][k] = cd.seconds;
            t[3][k] = cs.seconds;
            t[4][k] = cf.plan_seconds >= 0 ? cf.plan_seconds : cf.seconds - cr.seconds;
            t[5][k] = ta;
            res.pieces = cf.pieces > res.pieces ? cf.pieces : res.pieces;
            res.steps = cf.steps > res.steps ? cf.steps : res.steps;
            res.replans += cr.built + cd.built + cs.built;
        }
        spmd_array_destroy(x);
        spmd_array_destroy(x2);
        spmd_sharding_destroy(l.src);
        spmd_sharding_destroy(l.dst);
        spmd_sharding_destroy(l2.src);
        spmd_sharding_destroy(l2.dst);
    }
    res.first = slowest_median(t[0], cfg->iters, procs);
    res.repeated = slowest_median(t[1], cfg->iters, procs);
    res.fresh_dst = slowest_median(t[2], cfg->iters, procs);
    res.fresh_src = slowest_median(t[3], cfg->iters, procs);
    res.plan = slowest_median(t[4], cfg->iters, procs);
#ifdef SPMD_HAVE_MPI
    if (do_a2a) {
        res.a2av = slowest_median(t[5], cfg->iters, procs);
        a2a_free(&xa);
    }
    if (procs > 1)
        bound_free(&b);
#endif
    res.pieces = max_over_processes(res.pieces, procs);
    res.steps = max_over_processes(res.steps, procs);
    double sums[2] = {(double)res.wrong, res.replans};
    sum_over_processes(sums, 2, procs);
    res.wrong = (int64_t)sums[0];
    res.replans = sums[1];
    for (int k = 0; k < 6; k++)
        free(t[k]);
    free(scratch);
    return res;
}

/* "%.0f", or "-" for a count the library does not report. */
static const char *fmt_count(char *buf, size_t size, double v)
{
    if (v < 0)
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%.0f", v);
    return buf;
}

static void run_plan(const config *cfg, const int *proc_of, int me, int procs, int ndev,
                     cJSON *root)
{
    cJSON *json_rows = cJSON_AddArrayToObject(root, "plan_rows");
    const char *dtype = cfg->dtype == SPMD_DTYPE_F32 ? "float32" : "float64";
    if (me == 0) {
        printf("# libspmd bench_reshard --plan: %d process(es) x %d device(s), %s N x N, median "
               "of %d rounds (slowest process), %d warm-up\n",
               procs, spmd_local_device_count(), dtype, cfg->iters, cfg->warmup);
        printf("# each round makes new shardings; first = the call that plans, repeated = the "
               "same call again,\n# fresh_dst / fresh_src = to / from a sharding made anew equal "
               "to the first (new mesh);\n# plan = time planning in the first call "
               "(spmd_reshard_stats.plan_seconds); pieces / steps = plan_pieces /\n# plan_steps "
               "of the busiest process; replans = plans built by the repeated and fresh calls;\n"
               "# a2av = MPI_Alltoallv of the bytes that move (pre-packed), ratio = repeated / "
               "a2av\n");
        printf("# %-30s %6s %11s %11s %12s %12s %11s %9s %9s %7s %10s %6s %7s\n", "layout", "N",
               "first_us", "repeated_us", "fresh_dst_us", "fresh_src_us", "plan_us", "pieces",
               "steps", "replans", "a2av_us", "ratio", "#wrong");
    }
    for (int kind = 0; kind < L_COUNT; kind++) {
        if (!cfg->layouts[kind])
            continue;
        layout l;
        if (!layout_make((layout_kind)kind, ndev, &l)) {
            if (me == 0)
                printf("  %-30s skipped\n", layout_names[kind]);
            continue;
        }
        char text[sizeof l.text];
        memcpy(text, l.text, sizeof text);
        int fits[64] = {0}, rows = 0;
        for (int64_t n = cfg->min_n; n <= cfg->max_n && rows < 64; n *= 2, rows++) {
            int64_t shape[2] = {n, n};
            fits[rows] = spmd_sharding_check_shape(l.src, 2, shape) == SPMD_OK &&
                         spmd_sharding_check_shape(l.dst, 2, shape) == SPMD_OK;
            spmd_clear_error();
        }
        /* no sharding of the layouts may outlive this: a plan cached on it would serve rounds */
        spmd_sharding_destroy(l.src);
        spmd_sharding_destroy(l.dst);
        rows = 0;
        for (int64_t n = cfg->min_n; n <= cfg->max_n && rows < 64; n *= 2) {
            if (!fits[rows++])
                continue;
            plan_result r = run_plan_row((layout_kind)kind, ndev, n, cfg, proc_of, me, procs);
            char b[12][32];
            if (me == 0) {
                printf("  %-30s %6lld %11s %11s %12s %12s %11s %9s %9s %7s %10s %6s %7lld%s\n",
                       text, (long long)n, fmt_us(b[0], 32, r.first), fmt_us(b[1], 32, r.repeated),
                       fmt_us(b[2], 32, r.fresh_dst), fmt_us(b[3], 32, r.fresh_src),
                       fmt_us(b[4], 32, r.plan), fmt_count(b[5], 32, r.pieces),
                       fmt_count(b[6], 32, r.steps), fmt_count(b[7], 32, r.replans),
                       fmt_us(b[8], 32, r.a2av), fmt_ratio(b[9], 32, r.repeated, r.a2av),
                       (long long)r.wrong, r.wrong ? "  WRONG" : "");
                fflush(stdout);
            }
            cJSON *row = cJSON_CreateObject();
            cJSON_AddStringToObject(row, "layout", layout_names[kind]);
            cJSON_AddStringToObject(row, "change", text);
            cJSON_AddStringToObject(row, "dtype", dtype);
            cJSON_AddNumberToObject(row, "n", (double)n);
            cJSON_AddNumberToObject(row, "first_med_us", r.first * 1e6);
            cJSON_AddNumberToObject(row, "repeated_med_us", r.repeated * 1e6);
            cJSON_AddNumberToObject(row, "fresh_dst_med_us", r.fresh_dst * 1e6);
            cJSON_AddNumberToObject(row, "fresh_src_med_us", r.fresh_src * 1e6);
            cJSON_AddNumberToObject(row, "plan_med_us", r.plan * 1e6);
            cJSON_AddNumberToObject(row, "plan_pieces", r.pieces);
            cJSON_AddNumberToObject(row, "plan_steps", r.steps);
            cJSON_AddNumberToObject(row, "replans", r.replans);
            if (r.a2av > 0) {
                cJSON_AddNumberToObject(row, "a2av_med_us", r.a2av * 1e6);
                cJSON_AddNumberToObject(row, "repeated_over_a2av", r.repeated / r.a2av);
            } else {
                cJSON_AddNullToObject(row, "a2av_med_us");
                cJSON_AddNullToObject(row, "repeated_over_a2av");
            }
            cJSON_AddNumberToObject(row, "wrong", (double)r.wrong);
            cJSON_AddItemToArray(json_rows, row);
        }
    }
}

int main(int argc, char **argv)
{
    config cfg;
    parse(argc, argv, &cfg);
    CHECK(spmd_init(NULL));
    int me = spmd_process_index(), procs = spmd_process_count(), ndev = spmd_device_count();
    int *proc_of = xmalloc((size_t)ndev * sizeof *proc_of);
    int one_device_each = 1;
    for (int d = 0; d < ndev; d++) {
        spmd_device_info info;
        CHECK(spmd_device_get_info(d, &info));
        proc_of[d] = info.process_index;
        one_device_each &= info.local_ordinal == 0;
    }
#ifdef SPMD_BENCH_HAVE_SCALAPACK
    const char *sl_note = "";
    if (procs > 1) {
        int blacs_me = 0, blacs_np = 0;
        Cblacs_pinfo(&blacs_me, &blacs_np); /* adopts the MPI libspmd initialized */
    }
#else
    const char *sl_note = " (built without ScaLAPACK)";
#endif
    double fault_us = me == 0 ? page_fault_us() : 0;
    cJSON *root = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(root, "rows");
    cJSON_AddNumberToObject(root, "page_fault_us", fault_us);
    cJSON_AddNumberToObject(root, "processes", procs);
    cJSON_AddNumberToObject(root, "devices", ndev);
    cJSON_AddNumberToObject(root, "iters", cfg.iters);
    cJSON_AddStringToObject(root, "dtype", "float64");

    if (cfg.plan)
        run_plan(&cfg, proc_of, me, procs, ndev, root);
    else if (me == 0) {
        printf("# libspmd bench_reshard: %d process(es) x %d device(s), float64 N x N, median of "
               "%d (slowest process), %d warm-up\n",
               procs, spmd_local_device_count(), cfg.iters, cfg.warmup);
        printf("# ratio = baseline_us / reshard_us (a2av: target >= 0.8); reshard_us includes "
               "creating the output, not destroying it; moved = reshard bytes sent / bound;\n"
               "# pgfault = minor page faults per reshard call (busiest process); a fresh page "
               "costs %.2f us here%s\n",
               fault_us, sl_note);
        if (procs == 1)
            printf("# one process: nothing crosses processes, the MPI baselines are n/a\n");
        printf("# memcpy = one thread copying the bytes reshard copies within a process (busiest "
               "process), from touched pages: the bound of its local work\n");
        printf("# a2av+self = the same Alltoallv with this process's locally copied bytes as its "
               "self-message (a hand-written MPI redistribution)\n");
        printf("# %-30s %6s %12s %12s %6s %12s %6s %12s %6s %12s %6s %10s %6s %7s %6s %7s\n",
               "layout", "N", "reshard_us", "a2av_us", "ratio", "a2av+self_us", "ratio",
               "gath_scat_us", "ratio", "pdgemr2d_us", "ratio", "memcpy_us", "ratio", "#wrong",
               "moved", "pgfault");
    }
    for (int kind = 0; kind < L_COUNT && !cfg.plan; kind++) {
        if (!cfg.layouts[kind])
            continue;
        layout l;
        if (!layout_make((layout_kind)kind, ndev, &l)) {
            if (me == 0)
                printf("  %-30s skipped: needs %s\n", layout_names[kind],
                       kind == L_TRANSPOSE_2D ? "a device count with a factor >= 2 in each axis"
                                              : "an even device count");
            continue;
        }
        for (int64_t n = cfg.min_n; n <= cfg.max_n; n *= 2) {
            int64_t shape[2] = {n, n};
            if (spmd_sharding_check_shape(l.src, 2, shape) != SPMD_OK ||
                spmd_sharding_check_shape(l.dst, 2, shape) != SPMD_OK) {
                spmd_clear_error();
                continue; /* N not divisible by the block counts */
            }
            row_result r = run_row(&l, n, &cfg, proc_of, me, procs, one_device_each);
            char b[12][32];
            char moved[32] = "-";
            if (r.bound_bytes > 0)
                snprintf(moved, sizeof moved, "%.2f", r.bytes_sent / r.bound_bytes);
            else if (procs > 1)
                snprintf(moved, sizeof moved, "%.0fB", r.bytes_sent);
            if (me == 0) {
                printf("  %-30s %6lld %12s %12s %6s %12s %6s %12s %6s %12s %6s %10s %6s %7lld %6s "
                       "%7.0f%s%s\n",
                       l.text, (long long)n, fmt_us(b[0], 32, r.reshard), fmt_us(b[1], 32, r.a2av),
                       fmt_ratio(b[2], 32, r.a2av, r.reshard), fmt_us(b[9], 32, r.a2av_self),
                       fmt_ratio(b[10], 32, r.a2av_self, r.reshard), fmt_us(b[3], 32, r.gs),
                       fmt_ratio(b[4], 32, r.gs, r.reshard), fmt_us(b[5], 32, r.sl),
                       fmt_ratio(b[6], 32, r.sl, r.reshard), fmt_us(b[7], 32, r.mc),
                       fmt_ratio(b[8], 32, r.mc, r.reshard), (long long)r.wrong, moved, r.faults,
                       r.wrong ? "  WRONG" : "", r.base_wrong ? "  WRONG(baseline)" : "");
                fflush(stdout);
            }
            cJSON *row = cJSON_CreateObject();
            cJSON_AddStringToObject(row, "layout", layout_names[kind]);
            cJSON_AddStringToObject(row, "change", l.text);
            cJSON_AddNumberToObject(row, "n", (double)n);
            cJSON_AddNumberToObject(row, "bytes", (double)(n * n) * sizeof(double));
            cJSON_AddNumberToObject(row, "reshard_med_us", r.reshard * 1e6);
            add_time(row, "a2av_med_us", "a2av_ratio", r.a2av, r.reshard);
            add_time(row, "a2av_self_med_us", "a2av_self_ratio", r.a2av_self, r.reshard);
            add_time(row, "gather_scatter_med_us", "gather_scatter_ratio", r.gs, r.reshard);
            add_time(row, "pdgemr2d_med_us", "pdgemr2d_ratio", r.sl, r.reshard);
            add_time(row, "memcpy_med_us", "memcpy_ratio", r.mc, r.reshard);
            cJSON_AddNumberToObject(row, "wrong", (double)r.wrong);
            cJSON_AddNumberToObject(row, "baseline_wrong", (double)r.base_wrong);
            cJSON_AddNumberToObject(row, "bound_bytes", r.bound_bytes);
            cJSON_AddNumberToObject(row, "reshard_bytes_sent", r.bytes_sent);
            cJSON_AddNumberToObject(row, "reshard_bytes_copied", r.bytes_copied);
            cJSON_AddNumberToObject(row, "reshard_bytes_shared", r.bytes_shared);
            cJSON_AddNumberToObject(row, "reshard_minor_faults", r.faults);
            cJSON_AddItemToArray(rows, row);
        }
        spmd_sharding_destroy(l.src);
        spmd_sharding_destroy(l.dst);
    }
    if (me == 0)
        bench_write_json(root, cfg.json_path);
    cJSON_Delete(root);
    free(proc_of);
#ifdef SPMD_BENCH_HAVE_SCALAPACK
    if (procs > 1)
        Cblacs_exit(1); /* 1: leave MPI running for spmd_finalize */
#endif
    CHECK(spmd_finalize());
    return 0;
}
