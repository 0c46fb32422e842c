/*
 * Unreduced partition specs (JAX's P('x', unreduced={'y'})): parsed, built and printed as JAX
 * writes them; a shard_map out_spec that leaves each device's partial sum in place (no
 * replication claim along 'y'); spmd_reshard to reduced specs adding the partials up (a psum to
 * P('x', None) and P(), a psum_scatter to P(('x', 'y'), None)); an unreduced in_spec handing fn
 * the partials again; and the refusals: reading on the host, making one from host data,
 * resharding into unreduced axes, an in_spec that drops them. Values against a reference loop.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { MAX_DEV = 64, ROWS = 4, COLS = 3 };

/* device (ix, iy)'s partial at row r (of its block), column c */
static double partial(int ix, int iy, int r, int c)
{
    return (ix * 100 + iy * 10 + r + c * 0.5) * (iy + 1);
}

/* The global value at (row, c): the sum over y of the partials of the block holding row. */
static double value(int ny, int row, int c)
{
    double v = 0;
    for (int iy = 0; iy < ny; iy++)
        v += partial(row / ROWS, iy, row % ROWS, c);
    return v;
}

static int g_ny;

static spmd_status make_partials(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                 spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    int ix = 0, iy = 0;
    spmd_status st = spmd_axis_index(ctx, "x", &ix);
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, "y", &iy);
    for (int r = 0; st == SPMD_OK && r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            ((float *)out[0].data)[r * COLS + c] = (float)partial(ix, iy, r, c);
    return st;
}

static void check_value(spmd_array *y, int nx, const char *what);

/* On a mesh (x, y, z): the partials of (ix, iy), alike along z unless *user says otherwise. */
static spmd_status make_partials_3d(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                    spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout;
    int ix = 0, iy = 0, iz = 0, vary_z = *(const int *)user;
    spmd_status st = spmd_axis_index(ctx, "x", &ix);
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, "y", &iy);
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, "z", &iz);
    for (int r = 0; st == SPMD_OK && r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            ((float *)out[0].data)[r * COLS + c] =
                (float)partial(ix, iy, r, c) + (vary_z && iz == 1 && r == 0 ? 1.0f : 0.0f);
    return st;
}

/* Partial sums over 'y' beside a replicated axis 'z' that the check hashes: holders compare
 * only with the devices of their own 'y' coordinate; a value differing along 'z' is caught. */
static void three_axes(int n)
{
    int shape[3] = {n / 4, 2, 2}, nx = n / 4;
    const char *names[3] = {"x", "y", "z"};
    spmd_test_mesh tm;
    spmd_test_mesh_build(&tm, NULL, 3, shape, names, NULL);
    spmd_spec *unreduced = NULL, *x_rows = NULL;
    spmd_sharding *s_x = NULL;
    SPMD_TEST_CHECK(spmd_spec_parse("P('x', None, unreduced={'y'})", &unreduced) == SPMD_OK &&
                        spmd_spec_parse("P('x', None)", &x_rows) == SPMD_OK &&
                        spmd_sharding_create(tm.mesh, x_rows, &s_x) == SPMD_OK,
                    "3-D specs: %s", spmd_last_error());
    const spmd_out_desc desc = {2, {(int64_t)nx * ROWS, COLS}, SPMD_DTYPE_F32};
    for (int vary_z = 0; vary_z < 2; vary_z++) {
        spmd_array *part = NULL, *y = NULL;
        spmd_status st = spmd_shard_map(tm.mesh, make_partials_3d, &vary_z, 0, NULL, NULL, 1, &desc,
                                        (const spmd_spec *[]){unreduced}, NULL, &part);
        if (vary_z) {
            SPMD_TEST_CHECK(st == SPMD_ERR_SPEC && strstr(spmd_last_error(), "'z'"),
                            "partials differing along z: %s (%s)", spmd_status_name(st),
                            spmd_last_error());
        } else {
            SPMD_TEST_CHECK(st == SPMD_OK, "partials beside z: %s", spmd_last_error());
            if (st == SPMD_OK)
                st = spmd_reshard(part, s_x, NULL, &y);
            SPMD_TEST_CHECK(st == SPMD_OK, "3-D psum: %s", spmd_last_error());
            if (st == SPMD_OK)
                check_value(y, nx, "psum over y beside z");
        }
        spmd_array_destroy(y);
        spmd_array_destroy(part);
    }
    spmd_sharding_destroy(s_x);
    spmd_spec_destroy(unreduced);
    spmd_spec_destroy(x_rows);
    spmd_mesh_destroy(tm.mesh);
}

/* fn of an unreduced in_spec: sees its own partial, adds them up itself */
static spmd_status sum_partials(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "y");
}

static void spec_text(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"P('x', unreduced={'y'})", "P('x', unreduced={'y'})"},
        {"'x', None, unreduced = ('y',)", "P('x', None, unreduced={'y'})"},
        {"P(unreduced={'y', 'z'})", "P(unreduced={'y', 'z'})"},
        {"P(('a', 'b'), unreduced=['y'],)", "P(('a', 'b'), unreduced={'y'})"},
        {"P('x', unreduced=set())", "P('x',)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        spmd_spec *s = NULL;
        char text[128] = "";
        spmd_status st = spmd_spec_parse(cases[i].in, &s);
        if (st == SPMD_OK)
            st = spmd_spec_format(s, text, sizeof text);
        SPMD_TEST_CHECK(st == SPMD_OK && strcmp(text, cases[i].out) == 0, "%s gives %s (%s)",
                        cases[i].in, text, spmd_last_error());
        spmd_spec_destroy(s);
    }
    static const char *const bad[] = {"P('y', unreduced={'y'})", "P(unreduced={'y'}, 'x')",
                                      "P(unreduced={None})",     "P(unreduced={'y', 'y'})",
                                      "P(unreduced='y')",        "P(unreduced={'y'"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spmd_spec *s = NULL;
        spmd_status st = spmd_spec_parse(bad[i], &s);
        SPMD_TEST_CHECK(st == SPMD_ERR_SPEC && s == NULL, "%s: %s (%s)", bad[i],
                        spmd_status_name(st), spmd_last_error());
    }
    /* the builder, its overlap refusal both ways, and equivalence as sets */
    spmd_spec *a = NULL, *b = NULL;
    const char *yz[] = {"y", "z"}, *zy[] = {"z", "y"}, *x[] = {"x"};
    SPMD_TEST_CHECK(spmd_spec_create(&a) == SPMD_OK && spmd_spec_append_axis(a, "x") == SPMD_OK &&
                        spmd_spec_set_unreduced(a, 2, yz) == SPMD_OK,
                    "builder: %s", spmd_last_error());
    SPMD_TEST_CHECK(spmd_spec_set_unreduced(a, 1, x) == SPMD_ERR_SPEC &&
                        strstr(spmd_last_error(), "cannot overlap"),
                    "unreduced over a partition axis: %s", spmd_last_error());
    SPMD_TEST_CHECK(spmd_spec_append_axis(a, "y") == SPMD_ERR_SPEC, "partition over unreduced");
    SPMD_TEST_CHECK(spmd_spec_unreduced_size(a) == 2 &&
                        strcmp(spmd_spec_unreduced_axis(a, 1), "z") == 0 &&
                        spmd_spec_unreduced_axis(a, 2) == NULL && spmd_spec_length(a) == 1,
                    "accessors after refusals");
    SPMD_TEST_CHECK(spmd_spec_parse("P('x', None, unreduced={'z', 'y'})", &b) == SPMD_OK &&
                        spmd_spec_is_equivalent(a, b),
                    "equivalent as sets");
    SPMD_TEST_CHECK(spmd_spec_set_unreduced(b, 2, zy) == SPMD_OK && spmd_spec_is_equivalent(a, b),
                    "set again");
    SPMD_TEST_CHECK(spmd_spec_set_unreduced(b, 0, NULL) == SPMD_OK &&
                        !spmd_spec_is_equivalent(a, b),
                    "cleared: not equivalent");
    spmd_spec_destroy(a);
    spmd_spec_destroy(b);
}

/* The global value of a reduced array against the reference. */
static void check_value(spmd_array *y, int nx, const char *what)
{
    static float got[MAX_DEV / 2 * ROWS * COLS];
    spmd_status st = spmd_process_allgather(y, 1, got, sizeof(float) * (size_t)nx * ROWS * COLS);
    SPMD_TEST_CHECK(st == SPMD_OK, "%s: %s", what, spmd_last_error());
    for (int row = 0; st == SPMD_OK && row < nx * ROWS; row++)
        for (int c = 0; c < COLS; c++)
            SPMD_TEST_CHECK(got[row * COLS + c] == (float)value(g_ny, row, c),
                            "%s: (%d, %d) is %g, want %g", what, row, c, got[row * COLS + c],
                            value(g_ny, row, c));
}

int main(void)
{
    int n = spmd_test_init_devices(MAX_DEV);
    spec_text();
    if (n % 2) /* the mesh is (n/2, 2) */
        return spmd_test_finish(spmd_test_failed_checks());
    int nx = n / 2, shape[2] = {n / 2, 2};
    g_ny = 2;
    const char *names[2] = {"x", "y"};
    spmd_test_mesh tm;
    spmd_test_mesh_build(&tm, NULL, 2, shape, names, NULL);
    spmd_mesh *mesh = tm.mesh;
    spmd_spec *unreduced = NULL, *x_rows = NULL, *xy_rows = NULL, *replicated = NULL;
    SPMD_TEST_CHECK(spmd_spec_parse("P('x', None, unreduced={'y'})", &unreduced) == SPMD_OK &&
                        spmd_spec_parse("P('x', None)", &x_rows) == SPMD_OK &&
                        spmd_spec_parse("P(('x', 'y'), None)", &xy_rows) == SPMD_OK &&
                        spmd_spec_parse("P()", &replicated) == SPMD_OK,
                    "specs: %s", spmd_last_error());
    spmd_sharding *s_unreduced = NULL, *s_x = NULL, *s_xy = NULL, *s_rep = NULL, *s_bad = NULL;
    SPMD_TEST_CHECK(spmd_sharding_create(mesh, unreduced, &s_unreduced) == SPMD_OK &&
                        spmd_sharding_create(mesh, x_rows, &s_x) == SPMD_OK &&
                        spmd_sharding_create(mesh, xy_rows, &s_xy) == SPMD_OK &&
                        spmd_sharding_create(mesh, replicated, &s_rep) == SPMD_OK,
                    "shardings: %s", spmd_last_error());
    SPMD_TEST_CHECK(spmd_sharding_create_parse(mesh, "P(unreduced={'q'})", &s_bad) ==
                            SPMD_ERR_SPEC &&
                        strstr(spmd_last_error(), "'q'"),
                    "an unreduced axis the mesh lacks: %s", spmd_last_error());

    /* partial sums out of shard_map: no replication claim along 'y' */
    const spmd_out_desc desc = {2, {(int64_t)nx * ROWS, COLS}, SPMD_DTYPE_F32};
    spmd_array *part = NULL;
    spmd_status st = spmd_shard_map(mesh, make_partials, NULL, 0, NULL, NULL, 1, &desc,
                                    (const spmd_spec *[]){unreduced}, NULL, &part);
    SPMD_TEST_CHECK(st == SPMD_OK, "partials: %s", spmd_last_error());
    if (st == SPMD_OK) {
        char text[256] = "";
        SPMD_TEST_CHECK(spmd_sharding_format(spmd_array_sharding(part), text, sizeof text) ==
                                SPMD_OK &&
                            strstr(text, "unreduced={'y'}"),
                        "its sharding prints %s", text);
        float host[MAX_DEV / 2 * ROWS * COLS];
        st = spmd_array_to_host(part, host, sizeof host);
        SPMD_TEST_CHECK(
            st == SPMD_ERR_INVALID_ARGUMENT && strstr(spmd_last_error(), "partial sums"),
            "to_host of partial sums: %s (%s)", spmd_status_name(st), spmd_last_error());
        st = spmd_process_allgather(part, 1, host, sizeof host);
        SPMD_TEST_CHECK(st == SPMD_ERR_INVALID_ARGUMENT, "allgather of partial sums: %s",
                        spmd_last_error());
        /* reduced: psum into P('x', None), psum_scatter into P(('x', 'y'), None), psum into P() */
        const spmd_sharding *targets[3] = {s_x, s_xy, s_rep};
        const char *labels[3] = {"psum to P('x', None)", "psum_scatter to P(('x', 'y'), None)",
                                 "psum to P()"};
        for (int t = 0; t < 3; t++) {
            spmd_array *y = NULL;
            st = spmd_reshard(part, targets[t], NULL, &y);
            SPMD_TEST_CHECK(st == SPMD_OK, "%s: %s", labels[t], spmd_last_error());
            if (st == SPMD_OK)
                check_value(y, nx, labels[t]);
            spmd_array_destroy(y);
        }
        /* into unreduced axes: refused */
        spmd_array *y = NULL;
        spmd_sharding *s_other = NULL;
        if (spmd_sharding_create_parse(mesh, "P(None, None, unreduced={'y'})", &s_other) ==
            SPMD_OK) {
            st = spmd_reshard(part, s_other, NULL, &y);
            SPMD_TEST_CHECK(st == SPMD_ERR_UNSUPPORTED && y == NULL,
                            "into other unreduced placement: %s (%s)", spmd_status_name(st),
                            spmd_last_error());
        }
        spmd_sharding_destroy(s_other);
        /* the same placement: a copy */
        st = spmd_reshard(part, s_unreduced, NULL, &y);
        SPMD_TEST_CHECK(st == SPMD_OK, "to its own sharding: %s", spmd_last_error());
        spmd_array_destroy(y);
        y = NULL;
        /* an unreduced in_spec: fn sees the partials */
        st = spmd_shard_map(mesh, sum_partials, NULL, 1, &part, (const spmd_spec *[]){unreduced}, 1,
                            &desc, (const spmd_spec *[]){x_rows}, NULL, &y);
        SPMD_TEST_CHECK(st == SPMD_OK, "unreduced in_spec: %s", spmd_last_error());
        if (st == SPMD_OK)
            check_value(y, nx, "psum in fn of the unreduced input");
        spmd_array_destroy(y);
        y = NULL;
        st = spmd_shard_map(mesh, sum_partials, NULL, 1, &part, (const spmd_spec *[]){x_rows}, 1,
                            &desc, (const spmd_spec *[]){x_rows}, NULL, &y);
        SPMD_TEST_CHECK(st != SPMD_OK && y == NULL, "an in_spec without the unreduced axes: %s",
                        spmd_status_name(st));
    }
    spmd_array_destroy(part);
    /* from host data: refused */
    float zeros[MAX_DEV / 2 * ROWS * COLS] = {0};
    spmd_array *made = NULL;
    st = spmd_device_put(zeros, 2, desc.shape, SPMD_DTYPE_F32, s_unreduced, &made);
    SPMD_TEST_CHECK(st == SPMD_ERR_INVALID_ARGUMENT && made == NULL &&
                        strstr(spmd_last_error(), "partial sums"),
                    "device_put onto partial sums: %s (%s)", spmd_status_name(st),
                    spmd_last_error());
    if (n % 4 == 0)
        three_axes(n);
    spmd_sharding_destroy(s_unreduced);
    spmd_sharding_destroy(s_x);
    spmd_sharding_destroy(s_xy);
    spmd_sharding_destroy(s_rep);
    spmd_spec_destroy(unreduced);
    spmd_spec_destroy(x_rows);
    spmd_spec_destroy(xy_rows);
    spmd_spec_destroy(replicated);
    spmd_mesh_destroy(mesh);
    return spmd_test_finish(spmd_test_failed_checks());
}
