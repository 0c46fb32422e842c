/*
 * Donation never changes results: with SPMD_DONATE fn sees distinct input and output blocks,
 * so a stencil written the natural way gives the undonated values (shard_map and pmap), the
 * donated input is deleted, and a loop that donates every step reuses two blocks per device
 * (the pool), not a new one per step. SPMD_DONATE_IN_PLACE aliases (fn sees in == out) for
 * bodies that tolerate it. Other donate values are refused.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define COLS 16384 /* 64 KiB of float32 per device row: the pool keeps blocks this large */
#define MAX_DEV 64

static int N, L, me;

static float initial(int row, int k) { return (float)((row * 131 + k * 7) % 97); }

/* Three-point stencil along each device's row, written forward into out: where out is in, it
 * would read cells it has already overwritten. Records whether in and out were the same. */
typedef struct seen {
    int aliased[MAX_DEV];
} seen;

static spmd_status stencil(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                           void *user)
{
    (void)nin, (void)nout;
    seen *s = user;
    int d = spmd_ctx_device(ctx);
    if (s && d >= 0 && d < MAX_DEV)
        s->aliased[d] = in[0].data == out[0].data;
    const float *x = in[0].data;
    float *y = out[0].data;
    int64_t n = spmd_block_size(&in[0]);
    for (int64_t k = 0; k < n; k++)
        y[k] = (k > 0 ? x[k - 1] : 0) + x[k] + (k + 1 < n ? x[k + 1] : 0);
    return SPMD_OK;
}

/* Elementwise p = p / 2 + 1: reads each element before writing it (tolerates aliasing). */
static spmd_status halve(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                         void *user)
{
    (void)nin, (void)nout;
    seen *s = user;
    int d = spmd_ctx_device(ctx);
    if (s && d >= 0 && d < MAX_DEV)
        s->aliased[d] = in[0].data == out[0].data;
    const float *x = in[0].data;
    float *y = out[0].data;
    for (int64_t k = 0; k < spmd_block_size(&in[0]); k++)
        y[k] = x[k] / 2 + 1;
    return SPMD_OK;
}

typedef struct setup {
    spmd_mesh *mesh;
    spmd_sharding *rows;
    const spmd_spec *spec[1];
    spmd_out_desc desc;
} setup;

static void setup_up(setup *s)
{
    const char *axis = "i";
    assert_ok(spmd_mesh_create(1, &N, &axis, NULL, 0, &s->mesh));
    assert_ok(spmd_sharding_create_parse(s->mesh, "'i', None", &s->rows));
    s->spec[0] = spmd_sharding_spec(s->rows);
    s->desc = (spmd_out_desc){2, {N, COLS}, SPMD_DTYPE_F32};
}

static void setup_down(setup *s)
{
    spmd_sharding_destroy(s->rows);
    spmd_mesh_destroy(s->mesh);
}

static spmd_array *make_rows(setup *s)
{
    float *local = malloc((size_t)L * COLS * sizeof *local);
    assert_non_null(local);
    for (int i = 0; i < L; i++)
        for (int k = 0; k < COLS; k++)
            local[(size_t)i * COLS + k] = initial(me * L + i, k);
    int64_t shape[2] = {L, COLS};
    spmd_array *a = NULL;
    assert_ok(
        spmd_array_from_process_local_data(s->rows, local, 2, shape, NULL, SPMD_DTYPE_F32, &a));
    free(local);
    return a;
}

/* Each local row of `a` against the stencil (or halving) of the initial rows, `steps` times;
 * `first_row`: the global row of a's row 0 (a host-local array's rows are this process's). */
static void check_rows(const spmd_array *a, int first_row, int steps, int is_stencil)
{
    float *want = malloc(COLS * sizeof *want), *next = malloc(COLS * sizeof *next),
          *got = malloc(COLS * sizeof *got);
    assert_non_null(want);
    assert_non_null(next);
    assert_non_null(got);
    for (int s = 0; s < spmd_array_num_shards(a); s++) {
        spmd_shard shard;
        assert_ok(spmd_array_shard(a, s, &shard));
        int row = first_row + (int)shard.index.start[0];
        for (int k = 0; k < COLS; k++)
            want[k] = initial(row, k);
        for (int t = 0; t < steps; t++) {
            for (int k = 0; k < COLS; k++)
                next[k] = is_stencil ? (k > 0 ? want[k - 1] : 0) + want[k] +
                                           (k + 1 < COLS ? want[k + 1] : 0)
                                     : want[k] / 2 + 1;
            memcpy(want, next, COLS * sizeof *want);
        }
        assert_ok(spmd_array_shard_to_host(a, s, got, COLS * sizeof *got));
        for (int k = 0; k < COLS; k++)
            if (got[k] != want[k])
                fail_msg("row %d element %d is %g, want %g (undonated value)", row, k,
                         (double)got[k], (double)want[k]);
    }
    free(want);
    free(next);
    free(got);
}

static void test_donated_stencil_is_undonated_result(void **state)
{
    (void)state;
    setup s;
    setup_up(&s);
    const int donate[1] = {SPMD_DONATE};
    spmd_shard_map_options opts = SPMD_SHARD_MAP_OPTIONS_INIT;
    opts.donate = donate;
    spmd_array *x = make_rows(&s), *y = NULL;
    seen sn;
    memset(&sn, 0xff, sizeof sn);
    assert_ok(spmd_shard_map(s.mesh, stencil, &sn, 1, &x, s.spec, 1, &s.desc, s.spec, &opts, &y));
    for (int i = 0; i < L; i++)
        assert_int_equal(sn.aliased[spmd_local_device_id(i)], 0); /* distinct blocks */
    check_rows(y, 0, 1, 1);
    float probe[4];
    assert_status(spmd_array_to_host(x, probe, sizeof probe), SPMD_ERR_INVALID_ARGUMENT, "deleted",
                  "donated to spmd_shard_map");
    spmd_array_destroy(x);
    spmd_array_destroy(y);
    setup_down(&s);
}

/* This process's initial rows as a pmap takes them: host-local, row i on local device i. */
static spmd_array *local_rows(void)
{
    int ids[MAX_DEV];
    for (int i = 0; i < L; i++)
        ids[i] = spmd_local_device_id(i);
    const char *axis = "i";
    spmd_mesh *local = NULL;
    spmd_sharding *sh = NULL;
    assert_ok(spmd_mesh_create(1, &L, &axis, ids, L, &local));
    assert_ok(spmd_sharding_create_parse(local, "'i', None", &sh));
    float *host = malloc((size_t)L * COLS * sizeof *host);
    assert_non_null(host);
    for (int i = 0; i < L; i++)
        for (int k = 0; k < COLS; k++)
            host[(size_t)i * COLS + k] = initial(me * L + i, k);
    int64_t shape[2] = {L, COLS};
    spmd_array *x = NULL;
    assert_ok(spmd_device_put(host, 2, shape, SPMD_DTYPE_F32, sh, &x));
    free(host);
    spmd_sharding_destroy(sh);
    spmd_mesh_destroy(local);
    return x;
}

static void test_donated_pmap_stencil(void **state)
{
    (void)state;
    /* host-local rows of this process, pmap over every device, donated */
    spmd_array *x = local_rows(), *y = NULL;
    const int donate[1] = {SPMD_DONATE};
    spmd_pmap_options o = SPMD_PMAP_OPTIONS_INIT;
    o.donate = donate;
    spmd_out_desc row = {1, {COLS}, SPMD_DTYPE_F32};
    seen sn;
    memset(&sn, 0xff, sizeof sn);
    assert_ok(spmd_pmap(stencil, &sn, 1, &x, NULL, 1, &row, NULL, "i", NULL, 0, &o, &y));
    for (int i = 0; i < L; i++)
        assert_int_equal(sn.aliased[spmd_local_device_id(i)], 0);
    check_rows(y, me * L, 1, 1);
    float probe[1];
    assert_int_not_equal(spmd_array_to_host(x, probe, sizeof probe), SPMD_OK); /* deleted */
    spmd_array_destroy(x);
    spmd_array_destroy(y);
}

static void test_in_place_is_opt_in(void **state)
{
    (void)state;
    setup s;
    setup_up(&s);
    const int donate[1] = {SPMD_DONATE_IN_PLACE};
    spmd_shard_map_options opts = SPMD_SHARD_MAP_OPTIONS_INIT;
    opts.donate = donate;
    spmd_array *x = make_rows(&s), *y = NULL;
    spmd_shard before;
    assert_ok(spmd_array_shard(x, 0, &before));
    seen sn;
    memset(&sn, 0, sizeof sn);
    assert_ok(spmd_shard_map(s.mesh, halve, &sn, 1, &x, s.spec, 1, &s.desc, s.spec, &opts, &y));
    for (int i = 0; i < L; i++)
        assert_int_equal(sn.aliased[spmd_local_device_id(i)], 1);
    spmd_shard after;
    assert_ok(spmd_array_shard(y, 0, &after));
    assert_ptr_equal(after.data, before.data);
    check_rows(y, 0, 1, 0);
    spmd_array_destroy(x);
    spmd_array_destroy(y);
    setup_down(&s);
}

/* A loop donating its state every step takes its output blocks from the pool: two distinct
 * block addresses per device in all, however many steps. */
static void test_donated_loop_runs_in_flat_memory(void **state)
{
    (void)state;
    setup s;
    setup_up(&s);
    const int donate[1] = {SPMD_DONATE};
    spmd_shard_map_options opts = SPMD_SHARD_MAP_OPTIONS_INIT;
    opts.donate = donate;
    spmd_array *p = make_rows(&s);
    enum { STEPS = 30, SLOTS = 8 };
    void *seen_at[MAX_DEV][SLOTS];
    int nseen[MAX_DEV] = {0};
    for (int t = 0; t < STEPS; t++) {
        spmd_array *next = NULL;
        assert_ok(
            spmd_shard_map(s.mesh, halve, NULL, 1, &p, s.spec, 1, &s.desc, s.spec, &opts, &next));
        float probe[1];
        assert_int_not_equal(spmd_array_to_host(p, probe, sizeof probe), SPMD_OK); /* deleted */
        spmd_array_destroy(p);
        p = next;
        for (int i = 0; i < spmd_array_num_shards(p) && t >= 2; i++) {
            spmd_shard sh;
            assert_ok(spmd_array_shard(p, i, &sh));
            int known = 0;
            for (int k = 0; k < nseen[i]; k++)
                known |= seen_at[i][k] == sh.data;
            if (!known) {
                assert_true(nseen[i] < SLOTS);
                seen_at[i][nseen[i]++] = sh.data;
            }
        }
    }
    for (int i = 0; i < spmd_array_num_shards(p); i++)
        if (nseen[i] > 2)
            fail_msg("device slot %d used %d block addresses over %d donated steps; want 2", i,
                     nseen[i], STEPS - 2);
    check_rows(p, 0, STEPS, 0);
    spmd_array_destroy(p);
    setup_down(&s);
}

/* The same pmap signature donated both ways: two cached plans, each with its own aliasing. */
static void test_pmap_donate_modes_cached_apart(void **state)
{
    (void)state;
    spmd_out_desc row = {1, {COLS}, SPMD_DTYPE_F32};
    const int modes[3] = {SPMD_DONATE, SPMD_DONATE_IN_PLACE, SPMD_DONATE};
    for (int m = 0; m < 3; m++) {
        spmd_array *x = local_rows(), *y = NULL;
        spmd_pmap_options o = SPMD_PMAP_OPTIONS_INIT;
        o.donate = &modes[m];
        seen sn;
        memset(&sn, 0xff, sizeof sn);
        assert_ok(spmd_pmap(halve, &sn, 1, &x, NULL, 1, &row, NULL, "i", NULL, 0, &o, &y));
        for (int i = 0; i < L; i++)
            assert_int_equal(sn.aliased[spmd_local_device_id(i)], modes[m] == SPMD_DONATE_IN_PLACE);
        check_rows(y, me * L, 1, 0);
        spmd_array_destroy(x);
        spmd_array_destroy(y);
    }
}

static void test_bad_donate_values(void **state)
{
    (void)state;
    setup s;
    setup_up(&s);
    const int bad[3] = {3, -1, 1000};
    for (int k = 0; k < 3; k++) {
        spmd_shard_map_options opts = SPMD_SHARD_MAP_OPTIONS_INIT;
        opts.donate = &bad[k];
        spmd_array *x = make_rows(&s), *y = NULL;
        assert_status(
            spmd_shard_map(s.mesh, halve, NULL, 1, &x, s.spec, 1, &s.desc, s.spec, &opts, &y),
            SPMD_ERR_INVALID_ARGUMENT, "donate[0]", "SPMD_DONATE_IN_PLACE");
        assert_null(y);
        float *probe = malloc(COLS * sizeof *probe);
        assert_non_null(probe);
        assert_ok(spmd_array_shard_to_host(x, 0, probe, COLS * sizeof *probe)); /* still alive */
        free(probe);
        spmd_array_destroy(x);
    }
    setup_down(&s);
}

int main(void)
{
    spmd_test_init();
    N = spmd_device_count();
    L = spmd_local_device_count();
    me = spmd_process_index();
    if (N > MAX_DEV)
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_donated_stencil_is_undonated_result),
        cmocka_unit_test(test_donated_pmap_stencil),
        cmocka_unit_test(test_in_place_is_opt_in),
        cmocka_unit_test(test_donated_loop_runs_in_flat_memory),
        cmocka_unit_test(test_pmap_donate_modes_cached_apart),
        cmocka_unit_test(test_bad_donate_values),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
