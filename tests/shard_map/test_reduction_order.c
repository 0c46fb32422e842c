/* One program, any layout, the same bits: psum, pmean, psum_scatter and psum_many (grouped and not)
 * over every axis and axis pair of 1-D and 2-D meshes of the run's devices must equal, bit for bit,
 * a host reference that adds in the canonical order of README "Reduction order". The reference is
 * written here on its own (level by level, not the library's binary counter), so agreeing layouts
 * alone do not pass: each must match it. Registered at 1 x 8, 2 x 4, 4 x 2, 8 x 1 and 1 x 6, 2 x 3,
 * 3 x 2, 6 x 1, with f32, f64 and bf16 data of mixed magnitudes that cancel, from 8 bytes to 4 MiB
 * per device, on blocks small enough to travel with the agreement and large ones that do not;
 * psum_scatter takes its chunk of the same sum. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT 16

static int ndev, me, nlocal;
static int bad;           /* elements that differ, counted on every process before failing */
static long long checked; /* elements compared */

typedef struct reduction_case {
    const char *axes;
    spmd_axis_groups groups; /* num_groups 0: none */
    int mean;
    int scatter; /* psum_scatter, tiled along the block */
    int many;    /* psum_many / pmean_many of the block's two halves */
} reduction_case;

typedef struct run {
    const spmd_test_mesh *m;
    spmd_dtype dtype;
    int64_t count;
    int ncases;
    reduction_case cases[MAX_OUT];
} run;

/* Mixed magnitudes (2^-20 .. 2^20) with signs, and large values that cancel between neighbours. */
static double value(int f, int64_t i)
{
    uint64_t h = (uint64_t)f * 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 1) * 0xc2b2ae3d27d4eb4full;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    double frac = 1.0 + (double)(h >> 40) / (double)(1ull << 24);
    double v = ldexp(frac, (int)(h % 41) - 20) * ((h >> 8) & 1 ? -1.0 : 1.0);
    if ((h >> 12) % 4 == 0) /* a large value its neighbour takes back, nearly */
        v = ldexp(1.0 + (double)(i % 7) / 8.0, 24) * (f % 2 ? -1.0 : 1.0) + v;
    return v;
}

static int axis_of(const spmd_test_mesh *m, const char *name, size_t len)
{
    for (int k = 0; k < m->ndim; k++)
        if (strlen(m->names[k]) == len && !strncmp(m->names[k], name, len))
            return k;
    fail_msg("no axis %.*s", (int)len, name);
    return -1;
}

/* The named axes, major first. */
static int parse(const spmd_test_mesh *m, const char *text, int *axes)
{
    int n = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        axes[n++] = axis_of(m, p, len);
        p += len + (e != NULL);
    }
    return n;
}

static void coords(const spmd_test_mesh *m, int f, int *c)
{
    for (int k = m->ndim - 1; k >= 0; k--) {
        c[k] = f % m->shape[k];
        f /= m->shape[k];
    }
}

/* The members of device f's (sub)group, in position order: their flat indices. */
static int members_of(const spmd_test_mesh *m, const reduction_case *rc, int f, int *members)
{
    int axes[SPMD_MAX_MESH_AXES], na = parse(m, rc->axes, axes), cf[SPMD_MAX_MESH_AXES];
    coords(m, f, cf);
    int total = 1;
    for (int k = 0; k < na; k++)
        total *= m->shape[axes[k]];
    int at_position[64];
    for (int g = 0; g < m->size; g++) {
        int cg[SPMD_MAX_MESH_AXES], same = 1, pos = 0;
        coords(m, g, cg);
        for (int k = 0; k < m->ndim; k++) {
            int named = 0;
            for (int j = 0; j < na; j++)
                named |= axes[j] == k;
            if (!named && cg[k] != cf[k])
                same = 0;
        }
        for (int j = 0; j < na; j++)
            pos = pos * m->shape[axes[j]] + cg[axes[j]];
        if (same)
            at_position[pos] = g;
    }
    if (!rc->groups.num_groups) {
        memcpy(members, at_position, (size_t)total * sizeof *members);
        return total;
    }
    int size = total / rc->groups.num_groups, my_pos = -1;
    for (int p = 0; p < total; p++)
        if (at_position[p] == f)
            my_pos = p;
    for (int s = 0; s < rc->groups.num_groups; s++) {
        const int *sub = rc->groups.positions + s * size;
        for (int k = 0; k < size; k++)
            if (sub[k] == my_pos) {
                for (int j = 0; j < size; j++)
                    members[j] = at_position[sub[j]];
                return size;
            }
    }
    fail_msg("position %d in no subgroup", my_pos);
    return 0;
}

/* The reference: leaves are pairs of the first 2 * rem inputs, then single inputs; each level
 * adds neighbours, left plus right. */
#define DEFINE_TREE(name, T)                                                                       \
    static T name(const T *x, int n)                                                               \
    {                                                                                              \
        int p2 = 1;                                                                                \
        while (p2 * 2 <= n)                                                                        \
            p2 *= 2;                                                                               \
        int rem = n - p2;                                                                          \
        T leaf[64];                                                                                \
        for (int i = 0; i < p2; i++)                                                               \
            leaf[i] = i < rem ? x[2 * i] + x[2 * i + 1] : x[i + rem];                              \
        for (int width = p2; width > 1; width /= 2)                                                \
            for (int i = 0; i < width / 2; i++)                                                    \
                leaf[i] = leaf[2 * i] + leaf[2 * i + 1];                                           \
        return leaf[0];                                                                            \
    }
DEFINE_TREE(tree_f64, double)
DEFINE_TREE(tree_f32, float)

/* The expected bytes of element i of a result over `members` (flat indices, position order). */
static void expected(const run *r, const reduction_case *rc, const char *host, const int *members,
                     int n, int64_t i, void *out)
{
    if (r->dtype == SPMD_DTYPE_F64) {
        double x[64];
        for (int k = 0; k < n; k++)
            x[k] = spmd_test_load(r->dtype, host, (int64_t)members[k] * r->count + i);
        double s = tree_f64(x, n);
        if (rc->mean)
            s *= 1.0 / n;
        memcpy(out, &s, sizeof s);
        return;
    }
    float x[64];
    for (int k = 0; k < n; k++) /* bf16 inputs add up in float32 */
        x[k] = (float)spmd_test_load(r->dtype, host, (int64_t)members[k] * r->count + i);
    float s = tree_f32(x, n);
    if (rc->mean)
        s *= (float)(1.0 / n);
    spmd_test_store(r->dtype, out, 0, s);
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    const run *r = user;
    (void)nin;
    for (int j = 0; j < nout; j++) {
        const reduction_case *rc = &r->cases[j];
        spmd_block y = out[j];
        const spmd_axis_groups *g = rc->groups.num_groups ? &rc->groups : NULL;
        if (rc->many) {
            spmd_block xs[2] = {in[0], in[0]}, ys[2] = {y, y};
            size_t half = (size_t)in[0].shape[1] / 2 * spmd_dtype_size(in[0].dtype);
            for (int k = 0; k < 2; k++) {
                xs[k].shape[1] = ys[k].shape[1] = in[0].shape[1] / 2;
                xs[k].data = (char *)in[0].data + k * half;
                ys[k].data = (char *)y.data + k * half;
            }
            spmd_status st = rc->mean ? spmd_pmean_many(ctx, 2, xs, ys, rc->axes)
                                      : spmd_psum_many(ctx, 2, xs, ys, rc->axes);
            if (st != SPMD_OK)
                return st;
            continue;
        }
        spmd_status st = rc->scatter ? spmd_psum_scatter_groups(ctx, &in[0], &y, rc->axes, 1, 1, g)
                         : rc->mean  ? spmd_pmean_groups(ctx, &in[0], &y, rc->axes, g)
                                     : spmd_psum_groups(ctx, &in[0], &y, rc->axes, g);
        if (st != SPMD_OK)
            return st;
    }
    return SPMD_OK;
}

static void run_all(run *r)
{
    const spmd_test_mesh *m = r->m;
    size_t esz = spmd_dtype_size(r->dtype), block = (size_t)r->count * esz;
    char *host = malloc(block * (size_t)m->size);
    assert_non_null(host);
    for (int f = 0; f < m->size; f++)
        for (int64_t i = 0; i < r->count; i++)
            spmd_test_store(r->dtype, host, (int64_t)f * r->count + i, value(f, i));
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_create(&spec));
    assert_ok(spmd_spec_append(spec, m->ndim, m->names));
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create(m->mesh, spec, &sh));
    int64_t gshape[2] = {m->size, r->count};
    spmd_array *x = NULL, *outs[MAX_OUT] = {NULL};
    assert_ok(spmd_device_put(host, 2, gshape, r->dtype, sh, &x));
    const spmd_spec *out_specs[MAX_OUT];
    spmd_out_desc descs[MAX_OUT];
    for (int j = 0; j < r->ncases; j++) {
        int members[64], n = members_of(m, &r->cases[j], 0, members);
        int64_t out_count = r->cases[j].scatter ? r->count / n : r->count;
        out_specs[j] = spec;
        descs[j] = (spmd_out_desc){.ndim = 2, .shape = {m->size, out_count}, .dtype = r->dtype};
    }
    const spmd_spec *in_specs[1] = {spec};
    spmd_status st =
        spmd_shard_map(m->mesh, body, r, 1, &x, in_specs, r->ncases, descs, out_specs, NULL, outs);
    if (st != SPMD_OK)
        fail_msg("%s %s x %lld: %s", m->label, spmd_dtype_name(r->dtype), (long long)r->count,
                 spmd_last_error());
    char want[8];
    for (int j = 0; j < r->ncases; j++) {
        const reduction_case *rc = &r->cases[j];
        int wrong = 0;
        for (int s = 0; s < spmd_array_num_shards(outs[j]); s++) {
            spmd_shard shard;
            assert_ok(spmd_array_shard(outs[j], s, &shard));
            int f = (int)shard.index.start[0], members[64], n = members_of(m, rc, f, members);
            int64_t out_count = rc->scatter ? r->count / n : r->count, first = 0;
            for (int k = 0; rc->scatter && k < n; k++)
                if (members[k] == f)
                    first = k * out_count; /* the chunk of f's position */
            for (int64_t i = 0; i < out_count; i++) {
                expected(r, rc, host, members, n, first + i, want);
                checked++;
                if (memcmp(want, (const char *)shard.data + (size_t)i * esz, esz) != 0 &&
                    wrong++ < 3)
                    print_error("[process %d] %s %s %s%s%s x %lld: device %d element %lld is "
                                "%.9g, the canonical order gives %.9g\n",
                                me, m->label,
                                rc->scatter ? "psum_scatter"
                                : rc->mean  ? "pmean"
                                            : "psum",
                                rc->axes, rc->groups.num_groups ? " grouped" : "", "",
                                (long long)r->count, shard.device_id, (long long)i,
                                spmd_test_load(r->dtype, shard.data, i),
                                spmd_test_load(r->dtype, want, 0));
            }
        }
        bad += wrong;
        spmd_array_destroy(outs[j]);
    }
    spmd_array_destroy(x);
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(spec);
    free(host);
}

/* mean 2: psum_scatter where the block divides evenly (every group size divides 24); 3 and 4:
 * psum_many and pmean_many */
static void add(run *r, const char *axes, int mean)
{
    if (mean == 2 && r->count % 24)
        return;
    r->cases[r->ncases++] =
        (reduction_case){axes, {0, NULL, NULL}, mean == 1 || mean == 4, mean == 2, mean >= 3};
}

static void add_groups(run *r, int num_groups, const int *positions, int mean)
{
    if (mean == 2 && r->count % 24)
        return;
    r->cases[r->ncases++] =
        (reduction_case){"i", {num_groups, NULL, positions}, mean == 1, mean == 2, 0};
}

static void test_layouts(void **state)
{
    (void)state;
    int n = ndev, half = n / 2;
    int ids[64] = {0};
    for (int k = 0; k < n; k++)
        ids[k] = k;
    spmd_test_mesh line, wide, tall;
    const char *line_names[1] = {"i"}, *grid_names[2] = {"x", "y"};
    int line_shape[1] = {n}, wide_shape[2] = {2, half}, tall_shape[2] = {half, 2};
    spmd_test_mesh_build(&line, "line", 1, line_shape, line_names, ids);
    spmd_test_mesh_build(&wide, "wide", 2, wide_shape, grid_names, ids);
    spmd_test_mesh_build(&tall, "tall", 2, tall_shape, grid_names, ids);
    /* halves; every other position; every other, reversed (scattered over processes) */
    int halves[64], strided[64], reversed[64];
    for (int k = 0; k < n; k++) {
        halves[k] = k;
        strided[k] = k < half ? 2 * k : 2 * (k - half) + 1;
        reversed[k] = n - 1 - strided[k];
    }
    const spmd_dtype dtypes[3] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_BF16};
    const int64_t counts[5] = {2, 24, 960, 24000, 24 * 21846}; /* 8 B to 2 or 4 MiB */
    for (int d = 0; d < 3; d++)
        for (int c = 0; c < 5; c++) {
            int means = dtypes[d] != SPMD_DTYPE_BF16;
            run r = {&line, dtypes[d], counts[c], 0, {{0}}};
            add(&r, "i", 0);
            if (means)
                add(&r, "i", 1);
            add_groups(&r, 2, halves, 0);
            add_groups(&r, 2, strided, 0);
            add_groups(&r, 2, reversed, means);
            add(&r, "i", 2);
            add(&r, "i", means ? 4 : 3);
            add_groups(&r, 2, strided, 2);
            add_groups(&r, 2, reversed, 2);
            run_all(&r);
            if (counts[c] > 24000)
                continue; /* the grids at smaller sizes */
            const spmd_test_mesh *grids[2] = {&wide, &tall};
            for (int g = 0; g < 2; g++) {
                run q = {grids[g], dtypes[d], counts[c], 0, {{0}}};
                add(&q, "x", 0);
                add(&q, "y", 0);
                add(&q, "x,y", 0);
                add(&q, "y,x", means);
                add(&q, "x", 2);
                add(&q, "y,x", 2);
                add(&q, "x,y", 3);
                run_all(&q);
            }
        }
    spmd_mesh_destroy(line.mesh);
    spmd_mesh_destroy(wide.mesh);
    spmd_mesh_destroy(tall.mesh);
    printf("process %d: %lld elements compared, %d differ from the canonical order\n", me, checked,
           bad);
    if (bad)
        fail_msg("%d element(s) differ from the canonical order on process %d", bad, me);
}

int main(void)
{
    spmd_test_init();
    ndev = spmd_device_count();
    me = spmd_process_index();
    nlocal = spmd_local_device_count();
    if (ndev % 2 || ndev > 64) {
        fprintf(stderr, "test_reduction_order: needs an even number of devices up to 64\n");
        return spmd_test_finish(1);
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_layouts)};
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
