/*
 * axis_index_groups: psum/pmean/pmax/pmin (even, uneven, permuted member order), all_gather,
 * psum_scatter and all_to_all (tiled and untiled) within subgroups, on a line of every device
 * and over each axis of a 2-D mesh, inside shard_map and pmap bodies; pswapaxes, pshuffle,
 * pargmax and pargmin; JAX's docstring values; every group error. Each result is checked
 * against a host loop over the devices of the subgroup.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define ELEMS 6
#define MAX_DEV 64

/* ---- the host reference ---- */

/* Device data: flat mesh position d, element k (small integers: every sum is exact). */
static float value(int d, int k) { return (float)(((d * 37 + k * 11) % 29) - 14 + d * 64); }

typedef struct layout {
    int ndim, shape[2];
    int naxes, axes[2]; /* the named axes, major first */
} layout;

static int coord(const layout *l, int d, int a)
{
    return a == 0 ? d / l->shape[1] : d % l->shape[1];
}

static int group_size_of(const layout *l)
{
    int n = 1;
    for (int k = 0; k < l->naxes; k++)
        n *= l->shape[l->axes[k]];
    return n;
}

static int position(const layout *l, int d)
{
    int p = 0;
    for (int k = 0; k < l->naxes; k++)
        p = p * l->shape[l->axes[k]] + coord(l, d, l->axes[k]);
    return p;
}

/* The device with d's coordinates off the named axes, at position p over them. */
static int device_at(const layout *l, int d, int p)
{
    int c[2] = {coord(l, d, 0), coord(l, d, 1)};
    for (int k = l->naxes - 1; k >= 0; k--) {
        int a = l->axes[k];
        c[a] = p % l->shape[a];
        p /= l->shape[a];
    }
    return c[0] * l->shape[1] + c[1];
}

/* The members (flat devices, in member order) of d's subgroup; returns their number and d's
 * index among them. */
static int members_of(const layout *l, const spmd_axis_groups *g, int d, int *members, int *me)
{
    int n = group_size_of(l), p = position(l, d);
    for (int k = 0, i = 0; k < g->num_groups; k++) {
        int size = g->sizes ? g->sizes[k] : n / g->num_groups;
        int found = -1;
        for (int j = 0; j < size; j++)
            if (g->positions[i + j] == p)
                found = j;
        if (found >= 0) {
            for (int j = 0; j < size; j++)
                members[j] = device_at(l, d, g->positions[i + j]);
            *me = found;
            return size;
        }
        i += size;
    }
    fail_msg("position %d is in no group", p);
    return 0;
}

/* ---- the body ---- */

typedef enum op {
    PSUM,
    PMEAN,
    PMAX,
    PMIN,
    GATHER,
    GATHER_TILED,
    SCATTER,
    SCATTER_TILED,
    A2A,
    A2A_TILED,
    NUM_OPS
} op;
static const char *const op_names[] = {"psum",         "pmean",
                                       "pmax",         "pmin",
                                       "all_gather",   "all_gather tiled",
                                       "psum_scatter", "psum_scatter tiled",
                                       "all_to_all",   "all_to_all tiled"};

typedef struct job {
    op op;
    const char *axes;
    const spmd_axis_groups *groups;
    int sub;  /* subgroup size */
    int e, c; /* elements of a reduced or gathered block; of a scattered chunk */
} job;

/* Per-device output elements of an op (its block is flat; the collective sees its own shape). */
static int out_elems(const job *j)
{
    switch (j->op) {
    case GATHER:
    case GATHER_TILED:
        return j->sub * j->e;
    case SCATTER:
    case SCATTER_TILED:
        return j->c;
    case A2A:
    case A2A_TILED:
        return j->sub * j->c;
    default:
        return j->e;
    }
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    const job *j = user;
    int d = spmd_mesh_device_position(spmd_ctx_mesh(ctx), spmd_ctx_device(ctx));
    int n = j->sub;
    /* in: e values for the reductions and gathers; n x c for scatter and all_to_all */
    int64_t count =
        (j->op == SCATTER || j->op == SCATTER_TILED || j->op == A2A || j->op == A2A_TILED)
            ? (int64_t)n * j->c
            : j->e;
    spmd_block x;
    spmd_status st = spmd_ctx_alloc(ctx, 1, &count, SPMD_DTYPE_F32, &x);
    if (st != SPMD_OK)
        return st;
    for (int64_t k = 0; k < count; k++)
        ((float *)x.data)[k] = value(d, (int)k);
    spmd_block o = out[0];
    switch (j->op) {
    case PSUM:
        return spmd_psum_groups(ctx, &x, &o, j->axes, j->groups);
    case PMEAN:
        return spmd_pmean_groups(ctx, &x, &o, j->axes, j->groups);
    case PMAX:
        return spmd_pmax_groups(ctx, &x, &o, j->axes, j->groups);
    case PMIN:
        return spmd_pmin_groups(ctx, &x, &o, j->axes, j->groups);
    case GATHER: /* (n, e) */
        o.ndim = 2, o.shape[0] = n, o.shape[1] = j->e;
        return spmd_all_gather_groups(ctx, &x, &o, j->axes, 0, 0, j->groups);
    case GATHER_TILED:
        return spmd_all_gather_groups(ctx, &x, &o, j->axes, 0, 1, j->groups);
    case SCATTER: /* (n, c) -> (c) */
        x.ndim = 2, x.shape[0] = n, x.shape[1] = j->c;
        return spmd_psum_scatter_groups(ctx, &x, &o, j->axes, 0, 0, j->groups);
    case SCATTER_TILED: /* (c n) -> (c) */
        return spmd_psum_scatter_groups(ctx, &x, &o, j->axes, 0, 1, j->groups);
    case A2A: /* (n, c) -> (n, c): row h from member h */
        x.ndim = 2, x.shape[0] = n, x.shape[1] = j->c;
        o.ndim = 2, o.shape[0] = n, o.shape[1] = j->c;
        return spmd_all_to_all_groups(ctx, &x, &o, j->axes, 0, 0, 0, j->groups);
    case A2A_TILED: /* (c n) -> (c n): chunk h from member h */
        return spmd_all_to_all_groups(ctx, &x, &o, j->axes, 0, 0, 1, j->groups);
    default:
        return SPMD_ERR_INTERNAL;
    }
}

/* What device d's output holds (out_elems floats). */
static void reference(const layout *l, const job *j, int d, float *want)
{
    int members[MAX_DEV], me = 0;
    int n = members_of(l, j->groups, d, members, &me);
    if (j->sub) /* even groups: the size the body assumed */
        assert_int_equal(n, j->sub);
    switch (j->op) {
    case PSUM:
    case PMEAN:
    case PMAX:
    case PMIN:
        for (int k = 0; k < j->e; k++) {
            float acc = value(members[0], k);
            for (int h = 1; h < n; h++) {
                float v = value(members[h], k);
                acc = j->op == PMAX ? fmaxf(acc, v) : j->op == PMIN ? fminf(acc, v) : acc + v;
            }
            want[k] = j->op == PMEAN ? acc / (float)n : acc;
        }
        break;
    case GATHER:
    case GATHER_TILED: /* both give member h's block at h */
        for (int h = 0; h < n; h++)
            for (int k = 0; k < j->e; k++)
                want[h * j->e + k] = value(members[h], k);
        break;
    case SCATTER:
    case SCATTER_TILED: /* row (chunk) `me` of the subgroup's sum */
        for (int c = 0; c < j->c; c++) {
            float acc = 0;
            for (int h = 0; h < n; h++)
                acc += value(members[h], me * j->c + c);
            want[c] = acc;
        }
        break;
    case A2A:
    case A2A_TILED: /* slot h: member h's chunk `me` */
        for (int h = 0; h < n; h++)
            for (int c = 0; c < j->c; c++)
                want[h * j->c + c] = value(members[h], me * j->c + c);
        break;
    default:
        break;
    }
}

static int N; /* devices */

/* Every device on one axis 'i'. */
static spmd_mesh *line_mesh(void)
{
    const char *name[1] = {"i"};
    spmd_mesh *line = NULL;
    assert_ok(spmd_mesh_create(1, &N, name, NULL, 0, &line));
    return line;
}

/* The spec that shards an output's flat blocks over every axis of the mesh, in flat order. */
static spmd_spec *all_axes_spec(const spmd_mesh *mesh)
{
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_create(&spec));
    const char *names[2] = {spmd_mesh_axis_name(mesh, 0), spmd_mesh_axis_name(mesh, 1)};
    assert_ok(spmd_spec_append(spec, spmd_mesh_ndim(mesh), names));
    return spec;
}

/* Runs j on `mesh`, fetches every device's output and checks it. */
static void run_and_check(spmd_mesh *mesh, const layout *l, job *j)
{
    int per = out_elems(j);
    spmd_spec *spec = all_axes_spec(mesh);
    const spmd_spec *specs[1] = {spec};
    spmd_out_desc desc = {1, {(int64_t)N * per}, SPMD_DTYPE_F32};
    spmd_array *o = NULL;
    spmd_status st = spmd_shard_map(mesh, body, j, 0, NULL, NULL, 1, &desc, specs, NULL, &o);
    if (st != SPMD_OK)
        fail_msg("%s over %s: %s", op_names[j->op], j->axes, spmd_last_error());
    float *got = malloc((size_t)N * (size_t)per * sizeof *got),
          *want = malloc((size_t)per * sizeof *want);
    assert_non_null(got);
    assert_non_null(want);
    assert_ok(spmd_process_allgather(o, 1, got, (size_t)N * (size_t)per * sizeof *got));
    for (int d = 0; d < N; d++) {
        reference(l, j, d, want);
        for (int k = 0; k < per; k++)
            if (got[d * per + k] != want[k])
                fail_msg("%s over %s: device %d element %d is %g, want %g", op_names[j->op],
                         j->axes, d, k, (double)got[d * per + k], (double)want[k]);
    }
    free(got);
    free(want);
    spmd_array_destroy(o);
    spmd_spec_destroy(spec);
}

/* The groupings of n positions the tests use: pairs in order, pairs in a permuted order
 * ([[0,2],[3,1]] per four), all in reverse, uneven (the last alone, then the rest). */
typedef struct groupings {
    int pairs[MAX_DEV], permuted[MAX_DEV], reversed[MAX_DEV], uneven[MAX_DEV];
    int uneven_sizes[2];
    spmd_axis_groups g_pairs, g_permuted, g_reversed, g_uneven;
} groupings;

static void make_groupings(int n, groupings *gs)
{
    for (int p = 0; p < n; p++) {
        gs->pairs[p] = p;
        gs->reversed[p] = n - 1 - p;
        gs->uneven[p] = (p + n - 1) % n; /* n-1, 0, 1, ... */
    }
    int b = 0;
    for (; b + 3 < n; b += 4) {
        const int block[4] = {0, 2, 3, 1};
        for (int i = 0; i < 4; i++)
            gs->permuted[b + i] = b + block[i];
    }
    if (b < n) /* two left: a pair, swapped */
        gs->permuted[b] = b + 1, gs->permuted[b + 1] = b;
    gs->uneven_sizes[0] = 1;
    gs->uneven_sizes[1] = n - 1;
    gs->g_pairs = (spmd_axis_groups){n / 2, NULL, gs->pairs};
    gs->g_permuted = (spmd_axis_groups){n / 2, NULL, gs->permuted};
    gs->g_reversed = (spmd_axis_groups){1, NULL, gs->reversed};
    gs->g_uneven = (spmd_axis_groups){2, gs->uneven_sizes, gs->uneven};
}

static void check_all_ops(spmd_mesh *mesh, const layout *l, const char *axes)
{
    int n = group_size_of(l);
    if (n < 2 || n % 2)
        return;
    groupings gs;
    make_groupings(n, &gs);
    const spmd_axis_groups *even[3] = {&gs.g_pairs, &gs.g_permuted, &gs.g_reversed};
    for (int g = 0; g < 3; g++)
        for (int o = 0; o < NUM_OPS; o++) {
            job j = {(op)o, axes, even[g], even[g]->num_groups == 1 ? n : 2, ELEMS, 2};
            run_and_check(mesh, l, &j);
        }
    if (n > 2)
        for (int o = PSUM; o <= PMIN; o++) {
            if (o == PMEAN)
                continue;
            job j = {(op)o, axes, &gs.g_uneven, 0, ELEMS, 2};
            run_and_check(mesh, l, &j);
        }
}

static void test_groups_on_a_line(void **state)
{
    (void)state;
    spmd_mesh *line = line_mesh();
    layout l = {1, {1, N}, 1, {1, 0}}; /* a line is a 1 x N grid's second axis */
    check_all_ops(line, &l, "i");
    spmd_mesh_destroy(line);
}

/* Blocks past 64 KiB take MPI's own collectives between processes: each subgroup must get its
 * own communicator, or two subgroups spanning the same processes could be paired wrongly. */
static void test_large_groups(void **state)
{
    (void)state;
    if (N < 2 || N % 2)
        skip();
    spmd_mesh *line = line_mesh();
    layout l = {1, {1, N}, 1, {1, 0}};
    groupings gs;
    make_groupings(N, &gs);
    enum { BIG = 20000 }; /* 80 KB per block; 40 KB chunks, 80 KB and more exchanged */
    const op ops[4] = {PSUM, GATHER_TILED, SCATTER_TILED, A2A_TILED};
    for (int k = 0; k < 4; k++) {
        job j = {ops[k], "i", &gs.g_permuted, 2, BIG, BIG / 2};
        run_and_check(line, &l, &j);
    }
    spmd_mesh_destroy(line);
}

static void test_groups_on_a_grid(void **state)
{
    (void)state;
    if (N < 4 || N % 2)
        skip();
    int shape[2] = {2, N / 2};
    const char *names[2] = {"a", "b"};
    spmd_mesh *grid = NULL;
    assert_ok(spmd_mesh_create(2, shape, names, NULL, 0, &grid));
    layout la = {2, {2, N / 2}, 1, {0, 0}}, lb = {2, {2, N / 2}, 1, {1, 0}};
    layout lab = {2, {2, N / 2}, 2, {0, 1}}, lba = {2, {2, N / 2}, 2, {1, 0}};
    check_all_ops(grid, &la, "a");
    check_all_ops(grid, &lb, "b");
    check_all_ops(grid, &lab, "a,b");
    check_all_ops(grid, &lba, "b,a"); /* positions follow the order named */
    spmd_mesh_destroy(grid);
}

/* A grouping used only by some processes in a failed call must not shift how the processes
 * number the groupings after it (their tags): process 0 runs a psum within pairs of its own
 * devices while the others fail at once; the next call's grouping spans processes. */
static spmd_status fail_elsewhere(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                  spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)out;
    if (spmd_process_index() != 0)
        return SPMD_ERR_INVALID_ARGUMENT; /* fails on purpose */
    float v = 1, sum = 0;
    spmd_block x = {&v, SPMD_DTYPE_F32, 0, {0}}, y = {&sum, SPMD_DTYPE_F32, 0, {0}};
    return spmd_psum_groups(ctx, &x, &y, "i", user);
}

static void test_grouping_after_failed_call(void **state)
{
    (void)state;
    int L = spmd_local_device_count();
    if (spmd_process_count() < 2 || L % 2)
        skip();
    spmd_mesh *line = line_mesh();
    groupings gs;
    make_groupings(N, &gs); /* pairs [2k, 2k+1] lie within a process: L is even */
    spmd_status st =
        spmd_shard_map(line, fail_elsewhere, &gs.g_pairs, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL);
    assert_int_equal(st, SPMD_ERR_INVALID_ARGUMENT);
    layout l = {1, {1, N}, 1, {1, 0}};
    job j = {PSUM, "i", &gs.g_permuted, 2, ELEMS, 2}; /* [[0,2],[3,1]]: across processes */
    run_and_check(line, &l, &j);
    spmd_mesh_destroy(line);
}

/* ---- JAX's docstring values, on groups of 4 ---- */

static spmd_status docstring_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                  spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    int i = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &i);
    int64_t four = 4, one = 1;
    spmd_block row, scalar;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &four, SPMD_DTYPE_F32, &row);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &one, SPMD_DTYPE_F32, &scalar);
    if (st != SPMD_OK)
        return st;
    for (int k = 0; k < 4; k++)
        ((float *)row.data)[k] = (float)(4 * i + k); /* row i of arange(16).reshape(4, 4) */
    ((float *)scalar.data)[0] = (float)i;            /* element i of arange(4) */
    static const int halves[4] = {0, 1, 2, 3}, crossed[4] = {0, 2, 3, 1};
    const spmd_axis_groups g_halves = {2, NULL, halves}, g_crossed = {2, NULL, crossed};
    spmd_block sum = out[0], gathered = out[1], scattered = out[2];
    sum.ndim = 1, sum.shape[0] = 1;
    gathered.ndim = 2, gathered.shape[0] = 2, gathered.shape[1] = 4;
    scattered.ndim = 1, scattered.shape[0] = 2;
    st = spmd_psum_groups(ctx, &scalar, &sum, "i", &g_halves);
    if (st == SPMD_OK)
        st = spmd_all_gather_groups(ctx, &row, &gathered, "i", 0, 0, &g_crossed);
    if (st == SPMD_OK)
        st = spmd_psum_scatter_groups(ctx, &row, &scattered, "i", 0, 1, &g_crossed);
    return st;
}

static void test_jax_docstring_values(void **state)
{
    (void)state;
    if (N % 4)
        skip();
    int shape[2] = {4, N / 4};
    const char *names[2] = {"i", "r"};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    spmd_spec *spec = all_axes_spec(mesh);
    const spmd_spec *specs[3] = {spec, spec, spec};
    spmd_out_desc descs[3] = {{1, {(int64_t)N}, SPMD_DTYPE_F32},
                              {1, {(int64_t)N * 8}, SPMD_DTYPE_F32},
                              {1, {(int64_t)N * 2}, SPMD_DTYPE_F32}};
    spmd_array *o[3] = {NULL, NULL, NULL};
    assert_ok(spmd_shard_map(mesh, docstring_body, NULL, 0, NULL, NULL, 3, descs, specs, NULL, o));
    float sums[MAX_DEV], gathered[MAX_DEV * 8], scattered[MAX_DEV * 2];
    assert_ok(spmd_process_allgather(o[0], 1, sums, (size_t)N * sizeof(float)));
    assert_ok(spmd_process_allgather(o[1], 1, gathered, (size_t)N * 8 * sizeof(float)));
    assert_ok(spmd_process_allgather(o[2], 1, scattered, (size_t)N * 2 * sizeof(float)));
    /* psum(arange(4), groups [[0,1],[2,3]]) -> [1, 1, 5, 5] */
    static const float want_sum[4] = {1, 1, 5, 5};
    /* all_gather with [[0,2],[3,1]]: 0 and 2 get [row0, row2]; 1 and 3 get [row3, row1] */
    static const float want_gather[4][8] = {{0, 1, 2, 3, 8, 9, 10, 11},
                                            {12, 13, 14, 15, 4, 5, 6, 7},
                                            {0, 1, 2, 3, 8, 9, 10, 11},
                                            {12, 13, 14, 15, 4, 5, 6, 7}};
    /* psum_scatter tiled with [[0,2],[3,1]] -> [8,10], [20,22], [12,14], [16,18] */
    static const float want_scatter[4][2] = {{8, 10}, {20, 22}, {12, 14}, {16, 18}};
    for (int d = 0; d < N; d++) {
        int i = d / (N / 4);
        assert_true(sums[d] == want_sum[i]);
        for (int k = 0; k < 8; k++)
            assert_true(gathered[d * 8 + k] == want_gather[i][k]);
        for (int k = 0; k < 2; k++)
            assert_true(scattered[d * 2 + k] == want_scatter[i][k]);
    }
    for (int k = 0; k < 3; k++)
        spmd_array_destroy(o[k]);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
}

/* ---- grouped collectives in a pmap body ---- */

static spmd_status pmap_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    const spmd_axis_groups *g = user;
    spmd_status st = spmd_psum_groups(ctx, &in[0], &out[0], "i", g);
    if (st == SPMD_OK)
        st = spmd_pmax_groups(ctx, &in[0], &out[1], "i", g);
    return st;
}

static void test_groups_in_pmap(void **state)
{
    (void)state;
    if (N % 2)
        skip();
    int L = spmd_local_device_count(), me = spmd_process_index();
    int ids[MAX_DEV];
    for (int i = 0; i < L; i++)
        ids[i] = spmd_local_device_id(i);
    const char *name = "i";
    spmd_mesh *local = NULL;
    assert_ok(spmd_mesh_create(1, &L, &name, ids, L, &local));
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(local, "'i'", &sh));
    float host[MAX_DEV * ELEMS];
    for (int i = 0; i < L; i++)
        for (int k = 0; k < ELEMS; k++)
            host[i * ELEMS + k] = value(me * L + i, k);
    int64_t shape[2] = {L, ELEMS};
    spmd_array *x = NULL;
    assert_ok(spmd_device_put(host, 2, shape, SPMD_DTYPE_F32, sh, &x));
    groupings gs;
    make_groupings(N, &gs);
    int in_axis = 0, out_axes[2] = {0, 0};
    spmd_out_desc descs[2] = {{1, {ELEMS}, SPMD_DTYPE_F32}, {1, {ELEMS}, SPMD_DTYPE_F32}};
    spmd_array *y[2] = {NULL, NULL};
    assert_ok(spmd_pmap(pmap_body, &gs.g_permuted, 1, &x, &in_axis, 2, descs, out_axes, "i", NULL,
                        0, NULL, y));
    float sums[MAX_DEV * ELEMS], maxes[MAX_DEV * ELEMS];
    assert_ok(spmd_array_to_host(y[0], sums, (size_t)L * ELEMS * sizeof(float)));
    assert_ok(spmd_array_to_host(y[1], maxes, (size_t)L * ELEMS * sizeof(float)));
    layout l = {1, {1, N}, 1, {1, 0}};
    for (int i = 0; i < L; i++) {
        int members[MAX_DEV], mine = 0, d = me * L + i;
        int n = members_of(&l, &gs.g_permuted, d, members, &mine);
        for (int k = 0; k < ELEMS; k++) {
            float s = 0, m = -INFINITY;
            for (int h = 0; h < n; h++) {
                s += value(members[h], k);
                m = fmaxf(m, value(members[h], k));
            }
            assert_true(sums[i * ELEMS + k] == s);
            assert_true(maxes[i * ELEMS + k] == m);
        }
    }
    spmd_array_destroy(x);
    spmd_array_destroy(y[0]);
    spmd_array_destroy(y[1]);
    spmd_sharding_destroy(sh);
    spmd_mesh_destroy(local);
}

/* ---- more distinct groupings than a mesh keeps at once (32) ---- */

enum { MANY = 40, PER_CALL = 8 };

/* 40 distinct groupings of the N positions of a line: 0..N-5 in order, then the last four in
 * the (k / 2)-th of their 24 orders (lexicographic), as one group (k even) or as groups of 1 and
 * N - 1 (k odd). */
typedef struct many_groupings {
    int positions[MANY][MAX_DEV];
    int sizes[2];
    spmd_axis_groups g[MANY];
} many_groupings;

static void make_many_groupings(int n, many_groupings *m)
{
    m->sizes[0] = 1;
    m->sizes[1] = n - 1;
    for (int k = 0; k < MANY; k++) {
        int *pos = m->positions[k];
        for (int i = 0; i < n - 4; i++)
            pos[i] = i;
        int left[4] = {n - 4, n - 3, n - 2, n - 1}, rank = k / 2;
        for (int i = 0, radix = 6; i < 4; i++) { /* rank in the factorial number system */
            int digit = rank / radix;
            rank %= radix;
            pos[n - 4 + i] = left[digit];
            memmove(&left[digit], &left[digit + 1], (size_t)(3 - i - digit) * sizeof(int));
            radix /= i < 3 ? 3 - i : 1;
        }
        m->g[k] = k % 2 ? (spmd_axis_groups){2, m->sizes, pos} : (spmd_axis_groups){1, NULL, pos};
    }
}

typedef struct many_job {
    const spmd_axis_groups *g[MANY];
    int count;
} many_job;

/* A psum within each of the job's groupings in turn, each into its slice of the output. */
static spmd_status many_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout;
    const many_job *j = user;
    int d = spmd_mesh_device_position(spmd_ctx_mesh(ctx), spmd_ctx_device(ctx));
    int64_t count = ELEMS;
    spmd_block x;
    spmd_status st = spmd_ctx_alloc(ctx, 1, &count, SPMD_DTYPE_F32, &x);
    for (int k = 0; st == SPMD_OK && k < ELEMS; k++)
        ((float *)x.data)[k] = value(d, k);
    for (int i = 0; st == SPMD_OK && i < j->count; i++) {
        spmd_block o = out[0];
        o.data = (float *)out[0].data + (size_t)i * ELEMS;
        o.shape[0] = ELEMS;
        st = spmd_psum_groups(ctx, &x, &o, "i", j->g[i]);
    }
    return st;
}

/* Runs groupings first, first + 1, ... (count of them, modulo MANY) in one call and checks
 * every device's sums against the host; returns the call's status otherwise. */
static spmd_status run_many(spmd_mesh *line, const many_groupings *m, int first, int count)
{
    many_job j = {{NULL}, count};
    for (int i = 0; i < count; i++)
        j.g[i] = &m->g[(first + i) % MANY];
    int per = count * ELEMS;
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'i'", &spec));
    const spmd_spec *specs[1] = {spec};
    spmd_out_desc desc = {1, {(int64_t)N * per}, SPMD_DTYPE_F32};
    spmd_array *o = NULL;
    spmd_status st = spmd_shard_map(line, many_body, &j, 0, NULL, NULL, 1, &desc, specs, NULL, &o);
    spmd_spec_destroy(spec);
    if (st != SPMD_OK)
        return st;
    float *got = malloc((size_t)N * (size_t)per * sizeof *got);
    assert_non_null(got);
    assert_ok(spmd_process_allgather(o, 1, got, (size_t)N * (size_t)per * sizeof *got));
    layout l = {1, {1, N}, 1, {1, 0}};
    for (int d = 0; d < N; d++)
        for (int i = 0; i < count; i++) {
            int members[MAX_DEV], me = 0;
            int n = members_of(&l, j.g[i], d, members, &me);
            for (int k = 0; k < ELEMS; k++) {
                float want = 0;
                for (int h = 0; h < n; h++)
                    want += value(members[h], k);
                float v = got[(size_t)d * (size_t)per + (size_t)i * ELEMS + (size_t)k];
                if (v != want)
                    fail_msg("grouping %d (call of %d from %d): device %d element %d is %g, "
                             "want %g",
                             (first + i) % MANY, count, first, d, k, (double)v, (double)want);
            }
        }
    free(got);
    spmd_array_destroy(o);
    return SPMD_OK;
}

/* 40 groupings over several calls: the least recently used tables make room, and a grouping
 * used again after its table went is built anew, with the right values. One call may use at
 * most 32 distinct groupings: the 33rd is refused on every device, and the mesh goes on. */
static void test_many_groupings(void **state)
{
    (void)state;
    if (N < 4)
        skip(); /* 20 orders of 4 positions, each as 1 or 2 groups: 40 groupings */
    spmd_mesh *line = line_mesh();
    many_groupings *m = malloc(sizeof *m);
    assert_non_null(m);
    make_many_groupings(N, m);
    /* 0-7 ... 32-39 (the last evicts 0-7), then 0-7 again (evicting 8-15), then 8-15 */
    for (int c = 0; c < MANY / PER_CALL + 2; c++)
        assert_ok(run_many(line, m, (c % (MANY / PER_CALL)) * PER_CALL, PER_CALL));
    spmd_status st = run_many(line, m, 0, 33);
    if (st != SPMD_ERR_UNSUPPORTED ||
        !strstr(spmd_last_error(), "at most 32 distinct axis_index_groups per shard_map call"))
        fail_msg("33 groupings in one call: got %s (%s)", spmd_status_name(st), spmd_last_error());
    assert_ok(run_many(line, m, 32, 8));
    assert_ok(run_many(line, m, 36, 32)); /* 36-39, 0-27: all 32 slots in one call */
    free(m);
    spmd_mesh_destroy(line);
}

/* ---- pswapaxes, pshuffle, pargmax, pargmin ---- */

typedef struct legacy_job {
    int n;
    const int *perm;
    float nan_at; /* pargmax: the device position whose element 0 is NaN, or -1 */
} legacy_job;

static float arg_value(int d, int k) { return (float)((d * 5 + k * 3) % 7); }

static spmd_status legacy_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout;
    const legacy_job *j = user;
    int d = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &d);
    int64_t shape[2] = {j->n, 2};
    spmd_block x, args;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, shape, SPMD_DTYPE_F32, &x);
    if (st != SPMD_OK)
        return st;
    for (int k = 0; k < 2 * j->n; k++)
        ((float *)x.data)[k] = value(d, k);
    spmd_block swapped = out[0], shuffled = out[1], amax = out[2], amin = out[3];
    swapped.ndim = 2, swapped.shape[0] = j->n, swapped.shape[1] = 2;
    shuffled.ndim = 2, shuffled.shape[0] = j->n, shuffled.shape[1] = 2;
    st = spmd_pswapaxes(ctx, &x, &swapped, "i", 0, NULL);
    if (st == SPMD_OK)
        st = spmd_pshuffle(ctx, &x, &shuffled, "i", j->perm, j->n);
    int64_t four = 4;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &four, SPMD_DTYPE_F32, &args);
    if (st != SPMD_OK)
        return st;
    for (int k = 0; k < 4; k++)
        ((float *)args.data)[k] = (j->nan_at == d && k == 0) ? NAN : arg_value(d, k);
    st = spmd_pargmax(ctx, &args, &amax, "i");
    if (st == SPMD_OK)
        st = spmd_pargmin(ctx, &args, &amin, "i");
    return st;
}

/* legacy_body on every device of `line`: pswapaxes, pshuffle, pargmax and pargmin into o. */
static void run_legacy(spmd_mesh *line, legacy_job *j, spmd_array *o[4])
{
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'i'", &spec));
    const spmd_spec *specs[4] = {spec, spec, spec, spec};
    spmd_out_desc descs[4] = {{1, {(int64_t)N * N * 2}, SPMD_DTYPE_F32},
                              {1, {(int64_t)N * N * 2}, SPMD_DTYPE_F32},
                              {1, {(int64_t)N * 4}, SPMD_DTYPE_I32},
                              {1, {(int64_t)N * 4}, SPMD_DTYPE_I32}};
    assert_ok(spmd_shard_map(line, legacy_body, j, 0, NULL, NULL, 4, descs, specs, NULL, o));
    spmd_spec_destroy(spec);
}

static void test_legacy_collectives(void **state)
{
    (void)state;
    spmd_mesh *line = line_mesh();
    int perm[MAX_DEV];
    for (int i = 0; i < N; i++)
        perm[i] = (i * 3 + 1) % N; /* a permutation when gcd(3, N) == 1 */
    if (N % 3 == 0)
        for (int i = 0; i < N; i++)
            perm[i] = N - 1 - i;
    for (int with_nan = 0; with_nan < 2; with_nan++) {
        legacy_job j = {N, perm, with_nan ? (float)(N - 1) : -1.0f};
        spmd_array *o[4] = {NULL, NULL, NULL, NULL};
        run_legacy(line, &j, o);
        size_t block = (size_t)N * 2;
        float *sw = malloc((size_t)N * block * sizeof(float)),
              *sh = malloc((size_t)N * block * sizeof(float));
        int32_t amax[MAX_DEV * 4], amin[MAX_DEV * 4];
        assert_non_null(sw);
        assert_non_null(sh);
        assert_ok(spmd_process_allgather(o[0], 1, sw, (size_t)N * block * sizeof(float)));
        assert_ok(spmd_process_allgather(o[1], 1, sh, (size_t)N * block * sizeof(float)));
        assert_ok(spmd_process_allgather(o[2], 1, amax, (size_t)N * 4 * sizeof(int32_t)));
        assert_ok(spmd_process_allgather(o[3], 1, amin, (size_t)N * 4 * sizeof(int32_t)));
        for (int d = 0; d < N; d++) {
            for (int h = 0; h < N; h++)
                for (int c = 0; c < 2; c++) {
                    /* pswapaxes: row h of d's out is row d of h's in */
                    assert_true(sw[d * block + (size_t)h * 2 + c] == value(h, d * 2 + c));
                    /* pshuffle: d's out is perm[d]'s in */
                    assert_true(sh[d * block + (size_t)h * 2 + c] == value(perm[d], h * 2 + c));
                }
            for (int k = 0; k < 4; k++) {
                int best_max = 0, best_min = 0;
                for (int e = 1; e < N; e++) {
                    if (arg_value(e, k) > arg_value(best_max, k))
                        best_max = e;
                    if (arg_value(e, k) < arg_value(best_min, k))
                        best_min = e;
                }
                if (with_nan && k == 0) /* a NaN is the extreme nobody equals, as in JAX */
                    best_max = best_min = INT32_MAX;
                assert_int_equal(amax[d * 4 + k], best_max);
                assert_int_equal(amin[d * 4 + k], best_min);
            }
        }
        free(sw);
        free(sh);
        for (int k = 0; k < 4; k++)
            spmd_array_destroy(o[k]);
    }
    spmd_mesh_destroy(line);
}

/* ---- errors ---- */

typedef struct error_job {
    int which;
    const spmd_axis_groups *groups;
    const int *perm; /* pshuffle (case 8) */
    int n;
} error_job;

static spmd_status error_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)out;
    const error_job *j = user;
    int64_t shape[1] = {(int64_t)N * 2};
    spmd_block x, y;
    spmd_status st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &x);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &y);
    if (st != SPMD_OK)
        return st;
    memset(x.data, 0, (size_t)N * 2 * sizeof(float));
    spmd_block z = y; /* x's shape */
    y.shape[0] = 2;   /* what a subgroup of N/... would give: never reached */
    static const int perm_bad[3] = {0, 0, 1};
    switch (j->which) {
    case 0:
        return spmd_psum_groups(ctx, &x, &x, "i", j->groups);
    case 1:
        return spmd_pmean_groups(ctx, &x, &x, "i", j->groups);
    case 2:
        return spmd_all_gather_groups(ctx, &x, &y, "i", 0, 1, j->groups);
    case 3:
        return spmd_psum_scatter_groups(ctx, &x, &y, "i", 0, 1, j->groups);
    case 4:
        return spmd_all_to_all_groups(ctx, &x, &x, "i", 0, 0, 1, j->groups);
    case 5:
        return spmd_pshuffle(ctx, &x, &x, "i", perm_bad, 3);
    case 6:
        return spmd_pargmax(ctx, &x, &x, "i");
    case 8:
        return spmd_pshuffle(ctx, &x, &z, "i", j->perm, j->n);
    default:
        return spmd_pargmin(ctx, &x, &x, "i,i");
    }
}

static void expect_error(spmd_mesh *line, int which, const spmd_axis_groups *g, spmd_status want,
                         const char *phrase)
{
    error_job j = {which, g, NULL, 0};
    spmd_status st = spmd_shard_map(line, error_body, &j, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL);
    if (st != want || !strstr(spmd_last_error(), phrase))
        fail_msg("case %d: got %s (%s), want %s with \"%s\"", which, spmd_status_name(st),
                 spmd_last_error(), spmd_status_name(want), phrase);
}

/* pshuffle with perm of n entries on the line of N: refused on every device, naming both. */
static void expect_pshuffle_error(spmd_mesh *line, const int *perm, int n, const char *phrase)
{
    error_job j = {8, NULL, perm, n};
    spmd_status st = spmd_shard_map(line, error_body, &j, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL);
    if (st != SPMD_ERR_INVALID_ARGUMENT || !strstr(spmd_last_error(), phrase))
        fail_msg("pshuffle with %d entries: got %s (%s), want SPMD_ERR_INVALID_ARGUMENT with "
                 "\"%s\"",
                 n, spmd_status_name(st), spmd_last_error(), phrase);
}

/* JAX's docstring rule: perm holds each of 0..N-1 exactly once for an axis of N positions. */
static void test_pshuffle_size(void **state)
{
    (void)state;
    if (N < 2)
        skip();
    spmd_mesh *line = line_mesh();
    int perm[MAX_DEV + 1];
    for (int i = 0; i <= N; i++)
        perm[i] = i; /* 0..n-1 is a permutation of range(n) for every n: only the size is off */
    const int sizes[4] = {N - 1, 1, 0, N + 1};
    for (int k = 0; k < 4; k++) {
        int n = sizes[k];
        char want[160];
        snprintf(want, sizeof want,
                 "pshuffle: perm has %d entries but axis 'i' has %d positions; perm must hold "
                 "each of 0..%d exactly once",
                 n, N, N - 1);
        expect_pshuffle_error(line, k == 2 ? NULL : perm, n, want);
    }
    int dup[MAX_DEV];
    for (int i = 0; i < N; i++)
        dup[i] = i;
    dup[N - 1] = 0;
    expect_pshuffle_error(line, dup, N, "does not represent a permutation");
    /* the mesh still works: the right size shuffles (reversed) */
    int reversed[MAX_DEV];
    for (int i = 0; i < N; i++)
        reversed[i] = N - 1 - i;
    legacy_job lj = {N, reversed, -1.0f};
    spmd_array *o[4] = {NULL, NULL, NULL, NULL};
    run_legacy(line, &lj, o);
    size_t block = (size_t)N * 2;
    float *sh = malloc((size_t)N * block * sizeof(float));
    assert_non_null(sh);
    assert_ok(spmd_process_allgather(o[1], 1, sh, (size_t)N * block * sizeof(float)));
    for (int d = 0; d < N; d++)
        for (size_t e = 0; e < block; e++)
            assert_true(sh[d * block + e] == value(N - 1 - d, (int)e));
    free(sh);
    for (int k = 0; k < 4; k++)
        spmd_array_destroy(o[k]);
    spmd_mesh_destroy(line);
}

static void test_group_errors(void **state)
{
    (void)state;
    if (N < 4)
        skip();
    spmd_mesh *line = line_mesh();
    int order[MAX_DEV], dup[MAX_DEV], wide[MAX_DEV];
    for (int p = 0; p < N; p++)
        order[p] = dup[p] = wide[p] = p;
    dup[N - 1] = 0;
    wide[N - 1] = N;
    int sizes[2] = {1, N - 1}, too_many[2] = {1, N};
    const spmd_axis_groups g_dup = {2, NULL, dup}, g_wide = {2, NULL, wide},
                           g_uneven = {2, sizes, order}, g_count = {2, too_many, order},
                           g_undivided = {3, NULL, order}, g_none = {0, NULL, order};
    const spmd_status INV = SPMD_ERR_INVALID_ARGUMENT;
    expect_error(line, 0, &g_dup, INV, "must cover all indices exactly once");
    expect_error(line, 0, &g_dup, INV, "listed twice");
    expect_error(line, 0, &g_wide, INV, "out of range");
    expect_error(line, 0, &g_count, INV, "must cover all indices exactly once");
    expect_error(line, 0, &g_none, INV, "axis_index_groups");
    if (N % 3)
        expect_error(line, 0, &g_undivided, INV, "cannot split");
    expect_error(line, 1, &g_uneven, INV, "axis_index_groups must all be the same size");
    expect_error(line, 2, &g_uneven, INV, "axis_index_groups must all be the same size");
    expect_error(line, 3, &g_uneven, INV, "axis_index_groups must all be the same size");
    expect_error(line, 4, &g_uneven, INV, "Replica groups must be equally sized");
    expect_error(line, 5, NULL, INV, "perm has 3 entries but axis 'i' has"); /* {0, 0, 1} */
    expect_error(line, 6, NULL, SPMD_ERR_SHAPE, "int32");
    expect_error(line, 7, NULL, INV, "only accepts a single axis");
    /* the mesh still works */
    groupings gs;
    make_groupings(N, &gs);
    layout l = {1, {1, N}, 1, {1, 0}};
    job j = {PSUM, "i", &gs.g_uneven, 0, ELEMS, 2};
    run_and_check(line, &l, &j);
    spmd_mesh_destroy(line);
}

int main(void)
{
    spmd_test_init();
    N = spmd_device_count();
    if (N > MAX_DEV)
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups_on_a_line),
        cmocka_unit_test(test_large_groups),
        cmocka_unit_test(test_grouping_after_failed_call),
        cmocka_unit_test(test_groups_on_a_grid),
        cmocka_unit_test(test_jax_docstring_values),
        cmocka_unit_test(test_groups_in_pmap),
        cmocka_unit_test(test_many_groupings),
        cmocka_unit_test(test_legacy_collectives),
        cmocka_unit_test(test_pshuffle_size),
        cmocka_unit_test(test_group_errors),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
