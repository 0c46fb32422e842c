/* test_shard_map, part: plans (section 6), donation (7), the context inside fn (8) and meshes
 * over a subset of the devices (9). The helpers and the reference model are in test_shard_map.c. */
#define _POSIX_C_SOURCE 200809L

#include "test_shard_map.h"

/* ---- 6. plans -------------------------------------------------------------------------- */

/* out0 = in + 1 (same spec), out1 = psum over 'x' of the block (P()). */
static spmd_status fn_plan(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                           void *user)
{
    atomic_int *calls = user;
    atomic_fetch_add(calls, 1);
    if (nin != 1 || nout != 2)
        return SPMD_ERR_INVALID_ARGUMENT;
    spmd_status st = spmd_op_binary_scalar(ctx, SPMD_BINARY_ADD, &in[0], 1.0, &out[0]);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &in[0], &out[1], "x");
    return st;
}

typedef struct plan_expect {
    int seed;
    int n; /* devices */
} plan_expect;

/* psum over x of the (2, 4) blocks of a (2n, 4) array: sum_d v[2d + r][c]. */
static double expect_plan_sum(const int64_t *gidx, const void *user)
{
    const plan_expect *e = user;
    double s = 0;
    for (int d = 0; d < e->n; d++)
        s += gval(e->seed, (2 * d + gidx[0]) * 4 + gidx[1]);
    return s;
}

void test_plan(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    rmesh x;
    mesh_x(&x);
    rspec sx = rs(1, "0"), none = rs(0);
    spmd_spec *px = spec_parse("'x'"), *pn = spec_parse("");
    const spmd_spec *is[1] = {px}, *os[2] = {px, pn};
    int64_t shape[2] = {2 * ndev, 4};
    spmd_in_desc di = {2, {2 * ndev, 4}, SPMD_DTYPE_F32};
    spmd_out_desc d[2] = {{2, {2 * ndev, 4}, SPMD_DTYPE_F32}, {2, {2, 4}, SPMD_DTYPE_F32}};
    atomic_int calls = 0;
    spmd_plan *plan = NULL;
    assert_ok(spmd_plan_create(x.mesh, fn_plan, &calls, 1, &di, is, 2, d, os, NULL, &plan));
    assert_non_null(plan);

    spmd_array *last = NULL; /* the last accepted input, kept alive for a while */
    for (int t = 0; t < 50; t++) {
        int seed = 1000 * t;
        spmd_array *in = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, seed);
        spmd_array *out[2] = {SENTINEL, SENTINEL};
        if (EXPECT_OK(spmd_plan_execute(plan, &in, out))) {
            char what[64];
            snprintf(what, sizeof what, "plan execution %d, output 0", t);
            seed_expect e = {2, {2 * ndev, 4}, seed, 1.0, 1.0};
            verify_array(out[0], &x, &sx, 2, shape, SPMD_DTYPE_F32, expect_seeded, &e, what);
            snprintf(what, sizeof what, "plan execution %d, output 1", t);
            plan_expect pe = {seed, ndev};
            verify_array(out[1], &x, &none, 2, (int64_t[]){2, 4}, SPMD_DTYPE_F32, expect_plan_sum,
                         &pe, what);
            spmd_array_destroy(out[0]);
            spmd_array_destroy(out[1]);
        }
        if (t == 49)
            last = in;
        else
            spmd_array_destroy(in);
    }
    CHECK(atomic_load(&calls) == 50 * x.num_local, "fn ran %d times, expected %d",
          atomic_load(&calls), 50 * x.num_local);

    /* wrong shape, wrong dtype, other layout: refused before running, plan still usable */
    spmd_array *out[2] = {SENTINEL, SENTINEL};
    spmd_array *wrong = make_input(&x, &sx, 2, (int64_t[]){2 * ndev, 5}, SPMD_DTYPE_F32, 0);
    EXPECT_STATUS(spmd_plan_execute(plan, &wrong, out), SPMD_ERR_SHAPE, "input 0");
    CHECK(out[0] == NULL && out[1] == NULL, "failed execution left outputs%s", "");
    spmd_array_destroy(wrong);
    wrong = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F64, 0);
    EXPECT_STATUS(spmd_plan_execute(plan, &wrong, out), SPMD_ERR_SHAPE, "input 0");
    spmd_array_destroy(wrong);
    wrong = make_input(&x, &sx, 1, (int64_t[]){8 * ndev}, SPMD_DTYPE_F32, 0);
    EXPECT_STATUS(spmd_plan_execute(plan, &wrong, out), SPMD_ERR_SHAPE, "input 0");
    spmd_array_destroy(wrong);
    if (ndev > 1) {
        /* While the last accepted input is alive (so no new array can share its address). */
        rmesh rev; /* the same spec over the devices in reverse order */
        int ids[MAX_DEV];
        for (int dv = 0; dv < ndev; dv++)
            ids[dv] = ndev - 1 - dv;
        const char *xn[] = {"x"};
        spmd_test_mesh_build(&rev, NULL, 1, (int[]){ndev}, xn, ids);
        spmd_array *other = make_input(&x, &none, 2, shape, SPMD_DTYPE_F32, 0);
        EXPECT_STATUS(spmd_plan_execute(plan, &other, out), SPMD_ERR_INCOMPATIBLE_DEVICES,
                      "input 0", "reshard");
        CHECK(out[0] == NULL && out[1] == NULL, "failed execution left outputs%s", "");
        spmd_array_destroy(other);
        other = make_input(&rev, &sx, 2, shape, SPMD_DTYPE_F32, 0);
        EXPECT_STATUS(spmd_plan_execute(plan, &other, out), SPMD_ERR_INCOMPATIBLE_DEVICES,
                      "input 0", "reshard");
        spmd_array_destroy(other);
        rmesh_fini(&rev);
    }
    spmd_array_destroy(last);
    EXPECT_STATUS(spmd_plan_execute(plan, NULL, out), SPMD_ERR_INVALID_ARGUMENT, "in_arrays");
    {
        spmd_array *in = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 77);
        EXPECT_STATUS(spmd_plan_execute(plan, &in, NULL), SPMD_ERR_INVALID_ARGUMENT, "out_arrays");
        if (EXPECT_OK(spmd_plan_execute(plan, &in, out))) {
            seed_expect e = {2, {2 * ndev, 4}, 77, 1.0, 1.0};
            verify_array(out[0], &x, &sx, 2, shape, SPMD_DTYPE_F32, expect_seeded, &e,
                         "plan execution after refused inputs");
            spmd_array_destroy(out[0]);
            spmd_array_destroy(out[1]);
        }
        spmd_array_destroy(in);
    }
    spmd_plan_destroy(plan);

    /* After an accepted input is destroyed, a new array may be allocated at its address; the
     * plan must still check the new one. Done on a mesh of this process's own devices, so that
     * a process where a wrong input were accepted leaves no other process waiting for it. */
    if (nlocal > 1) {
        rmesh mine;
        int ids[MAX_DEV];
        for (int k = 0; k < nlocal; k++)
            ids[k] = me * nlocal + k;
        const char *xn[] = {"x"};
        spmd_test_mesh_build(&mine, NULL, 1, (int[]){nlocal}, xn, ids);
        int64_t lshape[2] = {2 * nlocal, 4};
        spmd_in_desc ldi = {2, {2 * nlocal, 4}, SPMD_DTYPE_F32};
        spmd_out_desc ld = {2, {2 * nlocal, 4}, SPMD_DTYPE_F32};
        spmd_plan *lp = NULL;
        assert_ok(
            spmd_plan_create(mine.mesh, fn_copy_all, NULL, 1, &ldi, is, 1, &ld, is, NULL, &lp));
        for (int round = 0; round < 20; round++) {
            spmd_array *good = make_input(&mine, &sx, 2, lshape, SPMD_DTYPE_F32, round);
            const void *accepted = spmd_array_sharding(good);
            spmd_array *lo = SENTINEL;
            if (EXPECT_OK(spmd_plan_execute(lp, &good, &lo)))
                spmd_array_destroy(lo);
            spmd_array_destroy(good);
            spmd_array *bad = make_input(&mine, &none, 2, lshape, SPMD_DTYPE_F32, round);
            lo = SENTINEL;
            spmd_status st = spmd_plan_execute(lp, &bad, &lo);
            if (!EXPECT_STATUS(st, SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "reshard"))
                fprintf(stderr, "  (round %d: a P() input for a P('x') plan%s)\n", round,
                        (const void *)spmd_array_sharding(bad) == accepted
                            ? ", whose sharding took the address of the last accepted input's"
                            : "");
            if (st == SPMD_OK)
                spmd_array_destroy(lo);
            spmd_array_destroy(bad);
            if (st != SPMD_ERR_INCOMPATIBLE_DEVICES)
                break;
        }
        spmd_plan_destroy(lp);
        rmesh_fini(&mine);
    }
    spmd_spec_destroy(px);
    spmd_spec_destroy(pn);
    rmesh_fini(&x);
    end_test(before);
}

/* ---- 7. donation ----------------------------------------------------------------------- */

typedef struct donate_job {
    int expect_alias; /* 1: in[0].data must be out[0].data; 0: must not */
    atomic_int wrong_alias;
} donate_job;

/* out[0] = 2 * in[0], converting to out's dtype; in place when aliased. */
static spmd_status fn_double(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    donate_job *J = user;
    int bad = 0;
    (void)nin;
    (void)nout;
    int aliased = in[0].data == out[0].data;
    FN_CHECK(aliased == J->expect_alias, "device %d: in[0].data %s out[0].data",
             spmd_ctx_device(ctx), aliased ? "==" : "!=");
    if (bad)
        atomic_fetch_add(&J->wrong_alias, 1);
    spmd_status st = SPMD_OK;
    if (!aliased)
        st = spmd_op_copy(ctx, &in[0], &out[0]);
    if (st == SPMD_OK)
        st = spmd_op_binary_scalar(ctx, SPMD_BINARY_MUL, &out[0], 2.0, &out[0]);
    return bad ? SPMD_ERR_INVALID_ARGUMENT : st;
}

static void check_deleted(spmd_array *a, const rmesh *m, const char *what)
{
    float buf[256];
    EXPECT_STATUS(spmd_array_to_host(a, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT, "deleted");
    /* passing it again fails the same way, on every process, before anything runs */
    spmd_spec *px = spec_parse("'x'");
    spmd_out_desc d = {2, {2 * ndev, 3}, SPMD_DTYPE_F32};
    spmd_array *out = SENTINEL;
    EXPECT_STATUS(spmd_shard_map(m->mesh, fn_copy_all, NULL, 1, &a, (const spmd_spec *const *)&px,
                                 1, &d, (const spmd_spec *const *)&px, NULL, &out),
                  SPMD_ERR_INVALID_ARGUMENT, "deleted");
    CHECK(out == NULL, "%s: a failed call left an output", what);
    spmd_spec_destroy(px);
}

void test_donation(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    rmesh x;
    mesh_x(&x);
    rspec sx = rs(1, "0");
    int64_t shape[2] = {2 * ndev, 3};
    spmd_spec *px = spec_parse("'x'");
    const spmd_spec *is[2] = {px, px};
    int donate_first[2] = {SPMD_DONATE_IN_PLACE, 0};
    spmd_shard_map_options opts = SPMD_SHARD_MAP_OPTIONS_INIT;
    opts.donate = donate_first;

    /* matching output: aliased, no copy */
    {
        spmd_array *a = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 3);
        void *before_data[MAX_DEV] = {0};
        for (int i = 0; i < spmd_array_num_shards(a); i++) {
            spmd_shard s;
            if (EXPECT_OK(spmd_array_shard(a, i, &s)))
                before_data[i] = s.data;
        }
        spmd_out_desc d = {2, {2 * ndev, 3}, SPMD_DTYPE_F32};
        donate_job job = {1, 0};
        spmd_array *out = SENTINEL;
        if (EXPECT_OK(spmd_shard_map(x.mesh, fn_double, &job, 1, &a, is, 1, &d, is, &opts, &out))) {
            seed_expect e = {2, {2 * ndev, 3}, 3, 2.0, 0.0};
            verify_array(out, &x, &sx, 2, shape, SPMD_DTYPE_F32, expect_seeded, &e,
                         "donated input, matching output");
            for (int i = 0; i < spmd_array_num_shards(out); i++) {
                spmd_shard s;
                if (EXPECT_OK(spmd_array_shard(out, i, &s)))
                    CHECK(s.data == before_data[i],
                          "output shard %d does not reuse the donated buffer", i);
            }
            spmd_array_destroy(out);
        }
        check_deleted(a, &x, "donated input");
        spmd_array_destroy(a);
    }

    /* no output of the same block shape and dtype: still runs, input deleted */
    {
        spmd_array *a = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 5);
        spmd_out_desc d = {2, {2 * ndev, 3}, SPMD_DTYPE_F64};
        donate_job job = {0, 0};
        spmd_array *out = SENTINEL;
        if (EXPECT_OK(spmd_shard_map(x.mesh, fn_double, &job, 1, &a, is, 1, &d, is, &opts, &out))) {
            seed_expect e = {2, {2 * ndev, 3}, 5, 2.0, 0.0};
            verify_array(out, &x, &sx, 2, shape, SPMD_DTYPE_F64, expect_seeded, &e,
                         "donated input, no matching output");
            spmd_array_destroy(out);
        }
        check_deleted(a, &x, "donated input without a matching output");
        spmd_array_destroy(a);
    }

    /* buffers shared with other arrays: not reused, the other arrays keep their data */
    {
        spmd_array *a = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 9);
        spmd_array *singles[MAX_DEV] = {0};
        int ns = spmd_array_num_shards(a);
        for (int i = 0; i < ns; i++) {
            spmd_shard s;
            float buf[6];
            assert_ok(spmd_array_shard(a, i, &s));
            assert_ok(spmd_array_shard_to_host(a, i, buf, sizeof buf));
            assert_ok(spmd_array_create_on_device(s.device_id, buf, 2, (int64_t[]){2, 3},
                                                  SPMD_DTYPE_F32, &singles[i]));
        }
        spmd_sharding *sh = sharding_make(&x, &sx);
        spmd_array *g = NULL;
        assert_ok(
            spmd_array_from_single_device_arrays(2, shape, SPMD_DTYPE_F32, sh, ns, singles, &g));
        spmd_sharding_destroy(sh);
        spmd_out_desc d = {2, {2 * ndev, 3}, SPMD_DTYPE_F32};
        donate_job job = {0, 0};
        spmd_array *out = SENTINEL;
        if (EXPECT_OK(spmd_shard_map(x.mesh, fn_double, &job, 1, &g, is, 1, &d, is, &opts, &out))) {
            seed_expect e = {2, {2 * ndev, 3}, 9, 2.0, 0.0};
            verify_array(out, &x, &sx, 2, shape, SPMD_DTYPE_F32, expect_seeded, &e,
                         "donated input sharing its buffers");
            spmd_array_destroy(out);
        }
        check_deleted(g, &x, "donated input sharing its buffers");
        for (int i = 0; i < ns; i++) {
            float buf[6] = {0};
            int f = x.local_flat[i];
            if (EXPECT_OK(spmd_array_to_host(singles[i], buf, sizeof buf)))
                for (int k = 0; k < 6; k++)
                    CHECK(buf[k] == (float)gval(9, f * 6 + k),
                          "single-device array %d changed after the donation: %g", i,
                          (double)buf[k]);
            spmd_array_destroy(singles[i]);
        }
        spmd_array_destroy(g);
        spmd_array_destroy(a);
    }

    /* one array donated and also read as another input of the same call: refused */
    {
        spmd_array *a = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 11);
        spmd_array *ins[2] = {a, a}, *outs[2] = {SENTINEL, SENTINEL};
        spmd_out_desc d[2] = {{2, {2 * ndev, 3}, SPMD_DTYPE_F32},
                              {2, {2 * ndev, 3}, SPMD_DTYPE_F32}};
        int donate_second[2] = {0, 1};
        spmd_shard_map_options o2 = SPMD_SHARD_MAP_OPTIONS_INIT;
        o2.donate = donate_second;
        EXPECT_STATUS(spmd_shard_map(x.mesh, fn_copy_all, NULL, 2, ins, is, 2, d, is, &o2, outs),
                      SPMD_ERR_INVALID_ARGUMENT, "donated");
        CHECK(outs[0] == NULL && outs[1] == NULL, "refused call left outputs%s", "");
        /* donated as input 0, read as input 1 */
        outs[0] = outs[1] = SENTINEL;
        spmd_status st =
            spmd_shard_map(x.mesh, fn_copy_all, NULL, 2, ins, is, 2, d, is, &opts, outs);
        EXPECT_STATUS(st, SPMD_ERR_INVALID_ARGUMENT, "donated");
        for (int j = 0; j < 2; j++)
            if (outs[j] != SENTINEL)
                spmd_array_destroy(outs[j]);
        /* a refused call leaves the array alive */
        if (st != SPMD_OK) {
            float buf[6];
            EXPECT_OK(spmd_array_shard_to_host(a, 0, buf, sizeof buf));
        }
        spmd_array_destroy(a);
    }

    /* plans donate the same way, every execution */
    {
        spmd_in_desc di = {2, {2 * ndev, 3}, SPMD_DTYPE_F32};
        spmd_out_desc d = {2, {2 * ndev, 3}, SPMD_DTYPE_F32};
        donate_job job = {1, 0};
        spmd_plan *plan = NULL;
        assert_ok(spmd_plan_create(x.mesh, fn_double, &job, 1, &di, is, 1, &d, is, &opts, &plan));
        for (int t = 0; t < 3; t++) {
            spmd_array *a = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 100 * t);
            spmd_array *out = SENTINEL;
            if (EXPECT_OK(spmd_plan_execute(plan, &a, &out))) {
                seed_expect e = {2, {2 * ndev, 3}, 100 * t, 2.0, 0.0};
                verify_array(out, &x, &sx, 2, shape, SPMD_DTYPE_F32, expect_seeded, &e,
                             "plan with a donated input");
                spmd_array_destroy(out);
            }
            float buf[4];
            EXPECT_STATUS(spmd_array_to_host(a, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT,
                          "deleted");
            out = SENTINEL;
            EXPECT_STATUS(spmd_plan_execute(plan, &a, &out), SPMD_ERR_INVALID_ARGUMENT, "deleted");
            CHECK(out == NULL, "refused execution left an output%s", "");
            spmd_array_destroy(a);
        }
        spmd_plan_destroy(plan);
    }
    spmd_spec_destroy(px);
    rmesh_fini(&x);
    end_test(before);
}

/* ---- 8. the context inside fn ---------------------------------------------------------- */

typedef struct ctx_job {
    const rmesh *m;
    atomic_int calls[MAX_DEV];
} ctx_job;

#define NTEMP 40

static spmd_status fn_ctx(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    ctx_job *J = user;
    const rmesh *m = J->m;
    int bad = 0;
    (void)nin;
    (void)in;
    int dev = spmd_ctx_device(ctx);
    int f = rmesh_flat_of(m, dev);
    FN_CHECK(f >= 0 && owner(dev) == me, "spmd_ctx_device gave %d", dev);
    if (f < 0)
        return SPMD_ERR_INVALID_ARGUMENT;
    atomic_fetch_add(&J->calls[f], 1);
    const spmd_mesh *cm = spmd_ctx_mesh(ctx);
    FN_CHECK(cm != NULL && spmd_mesh_equal(cm, m->mesh), "spmd_ctx_mesh is not the call's mesh%s",
             "");
    FN_CHECK(cm == NULL || spmd_mesh_device_position(cm, dev) == f,
             "device %d is not at position %d of spmd_ctx_mesh", dev, f);
    if (spmd_runtime_platform() == SPMD_PLATFORM_CPU) {
        FN_CHECK(spmd_ctx_stream(ctx) == NULL, "spmd_ctx_stream is not NULL on cpu%s", "");
        FN_CHECK(spmd_ctx_cublas(ctx) == NULL, "spmd_ctx_cublas is not NULL on cpu%s", "");
    }

    /* temporaries: shapes as asked, distinct memory, usable by the ops */
    spmd_block t[NTEMP];
    int64_t tshape[2] = {3, 5};
    for (int k = 0; k < NTEMP; k++) {
        spmd_status st =
            spmd_ctx_alloc(ctx, 2, tshape, k % 2 ? SPMD_DTYPE_F64 : SPMD_DTYPE_I32, &t[k]);
        FN_CHECK(st == SPMD_OK, "spmd_ctx_alloc %d: %s", k, spmd_last_error());
        if (st != SPMD_OK)
            return SPMD_ERR_INVALID_ARGUMENT;
        FN_CHECK(t[k].data != NULL && t[k].ndim == 2 && t[k].shape[0] == 3 && t[k].shape[1] == 5 &&
                     t[k].dtype == (k % 2 ? SPMD_DTYPE_F64 : SPMD_DTYPE_I32),
                 "temporary %d is not a (3, 5) block of its dtype", k);
        FN_CHECK(spmd_block_size(&t[k]) == 15 && spmd_block_nbytes(&t[k]) == (k % 2 ? 120u : 60u),
                 "temporary %d has size %lld / %zu bytes", k, (long long)spmd_block_size(&t[k]),
                 spmd_block_nbytes(&t[k]));
        if (spmd_op_iota(ctx, &t[k], (double)(1000 * dev + 100 * k), 1.0) != SPMD_OK)
            bad = 1;
    }
    for (int k = 0; k < NTEMP; k++)
        for (int e = 0; e < 15; e++)
            if (spmd_test_load(t[k].dtype, t[k].data, e) != (double)(1000 * dev + 100 * k + e)) {
                FN_CHECK(0, "device %d: temporary %d was overwritten (element %d)", dev, k, e);
                break;
            }
    spmd_block scalar;
    FN_CHECK(spmd_ctx_alloc(ctx, 0, NULL, SPMD_DTYPE_F32, &scalar) == SPMD_OK && scalar.ndim == 0 &&
                 spmd_block_size(&scalar) == 1,
             "rank-0 temporary: %s", spmd_last_error());
    spmd_block junk;
    FN_CHECK(spmd_ctx_alloc(ctx, 2, tshape, SPMD_DTYPE_COUNT, &junk) == SPMD_ERR_INVALID_ARGUMENT,
             "spmd_ctx_alloc took a bad dtype%s", "");
    FN_CHECK(spmd_ctx_alloc(ctx, 2, tshape, SPMD_DTYPE_F32, NULL) == SPMD_ERR_INVALID_ARGUMENT,
             "spmd_ctx_alloc took a NULL block%s", "");
    FN_CHECK(spmd_ctx_alloc(ctx, 1, (int64_t[]){0}, SPMD_DTYPE_F32, &junk) == SPMD_ERR_SHAPE,
             "spmd_ctx_alloc took a zero extent%s", "");
    FN_CHECK(spmd_ctx_alloc(ctx, -1, tshape, SPMD_DTYPE_F32, &junk) == SPMD_ERR_SHAPE,
             "spmd_ctx_alloc took rank -1%s", "");
    FN_CHECK(spmd_last_error()[0] != '\0', "a failed spmd_ctx_alloc left no message%s", "");

    /* out[0] (P('x'), block (1,)) = this device's id; out[1] (P()) = psum of the first
     * temporary's elements over 'x'. */
    int size = 0;
    FN_CHECK(spmd_axis_size(ctx, "x", &size) == SPMD_OK && size == m->size, "axis_size('x') = %d",
             size);
    spmd_status st = spmd_op_fill(ctx, &out[0], (double)dev);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &t[1], SPMD_ALL_AXES, &scalar);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &scalar, &out[1], "x");
    (void)nout;
    return bad ? SPMD_ERR_INVALID_ARGUMENT : st;
}

static double expect_device_id(const int64_t *gidx, const void *user)
{
    return (double)((const rmesh *)user)->ids[gidx[0]];
}

void test_context(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    /* a mesh over the devices in reverse order, so that ids and positions differ */
    rmesh m;
    int ids[MAX_DEV];
    for (int d = 0; d < ndev; d++)
        ids[d] = ndev - 1 - d;
    const char *xn[] = {"x"};
    spmd_test_mesh_build(&m, NULL, 1, (int[]){ndev}, xn, ids);
    ctx_job *J = calloc(1, sizeof *J);
    assert_non_null(J);
    J->m = &m;
    spmd_spec *px = spec_parse("'x'"), *pn = spec_parse("");
    const spmd_spec *os[2] = {px, pn};
    spmd_out_desc d[2] = {{1, {ndev}, SPMD_DTYPE_I32}, {0, {0}, SPMD_DTYPE_F32}};
    spmd_array *out[2] = {SENTINEL, SENTINEL};
    if (EXPECT_OK(spmd_shard_map(m.mesh, fn_ctx, J, 0, NULL, NULL, 2, d, os, NULL, out))) {
        rspec sx = rs(1, "0"), none = rs(0);
        verify_array(out[0], &m, &sx, 1, (int64_t[]){ndev}, SPMD_DTYPE_I32, expect_device_id, &m,
                     "spmd_ctx_device per position");
        /* sum over devices d of sum_e (1000 d + 100 + e), e < 15 */
        double want = 0;
        for (int dv = 0; dv < ndev; dv++)
            for (int e = 0; e < 15; e++)
                want += 1000.0 * dv + 100.0 + e;
        verify_array(out[1], &m, &none, 0, NULL, SPMD_DTYPE_F32, expect_const, &want,
                     "psum of temporaries");
        spmd_array_destroy(out[0]);
        spmd_array_destroy(out[1]);
    }
    for (int f = 0; f < m.size; f++)
        CHECK(atomic_load(&J->calls[f]) == (owner(m.ids[f]) == me), "fn ran %d times for device %d",
              atomic_load(&J->calls[f]), m.ids[f]);
    /* outside fn */
    spmd_block b;
    EXPECT_STATUS(spmd_ctx_alloc(NULL, 1, (int64_t[]){2}, SPMD_DTYPE_F32, &b),
                  SPMD_ERR_INVALID_ARGUMENT, "ctx");
    CHECK(spmd_block_size(NULL) == 0 && spmd_block_nbytes(NULL) == 0,
          "spmd_block_size(NULL) is not 0%s", "");
    spmd_spec_destroy(px);
    spmd_spec_destroy(pn);
    free(J);
    rmesh_fini(&m);
    end_test(before);
}

/* ---- 9. meshes over a subset of the devices -------------------------------------------- */

/* out[0] (P()) = psum over 'x' of the input block. */
static spmd_status fn_psum_x(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin;
    (void)nout;
    (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "x");
}

typedef struct subset_expect {
    int n; /* mesh size */
    int seed;
} subset_expect;

/* (2n,) array P('x'): the psum of the blocks (2,) is sum_d v[2d + c]. */
static double expect_subset_sum(const int64_t *gidx, const void *user)
{
    const subset_expect *e = user;
    double s = 0;
    for (int d = 0; d < e->n; d++)
        s += gval(e->seed, 2 * d + gidx[0]);
    return s;
}

static void run_subset(const rmesh *m, const char *what)
{
    rspec sx = rs(1, "0"), none = rs(0);
    spmd_spec *px = spec_parse("'x'"), *pn = spec_parse("");
    spmd_out_desc d = {1, {2}, SPMD_DTYPE_F32};
    /* every process can build the input; those without devices hold no shard of it */
    spmd_array *a = make_input(m, &sx, 1, (int64_t[]){2 * m->size}, SPMD_DTYPE_F32, 3);
    spmd_array *out = SENTINEL;
    double t0 = now_s();
    spmd_status st = spmd_shard_map(m->mesh, fn_psum_x, NULL, 1, &a, (const spmd_spec *const *)&px,
                                    1, &d, (const spmd_spec *const *)&pn, NULL, &out);
    double dt = now_s() - t0;
    if (m->num_local > 0) {
        if (EXPECT_OK(st)) {
            subset_expect e = {m->size, 3};
            verify_array(out, m, &none, 1, (int64_t[]){2}, SPMD_DTYPE_F32, expect_subset_sum, &e,
                         what);
            spmd_array_destroy(out);
        }
    } else {
        /* outside the mesh, as in JAX: nothing runs, at once, and the output is the same global
         * array with no shards */
        if (EXPECT_OK(st)) {
            CHECK(out != NULL && out != SENTINEL && spmd_array_num_shards(out) == 0 &&
                      spmd_array_ndim(out) == 1 && spmd_array_shape(out)[0] == 2 &&
                      spmd_array_dtype(out) == SPMD_DTYPE_F32,
                  "%s: a process outside the mesh got no (2,) float32 array without shards", what);
            if (out != SENTINEL)
                spmd_array_destroy(out);
        }
        CHECK(dt < 1.0, "%s: the call outside the mesh took %.2f s", what, dt);
    }
    spmd_array_destroy(a);
    spmd_spec_destroy(px);
    spmd_spec_destroy(pn);
}

void test_subset_meshes(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    const char *xn[] = {"x"};
    int ids[MAX_DEV], n = 0;

    /* process 0's devices, in reverse order */
    rmesh p0;
    for (int k = 0; k < nlocal; k++)
        ids[k] = nlocal - 1 - k;
    spmd_test_mesh_build(&p0, NULL, 1, (int[]){nlocal}, xn, ids);
    run_subset(&p0, "mesh over process 0's devices");
    run_subset(&p0, "mesh over process 0's devices, second call");
    rmesh_fini(&p0);

    /* every other device */
    rmesh eo;
    for (int d = 0; d < ndev; d += 2)
        ids[n++] = d;
    spmd_test_mesh_build(&eo, NULL, 1, (int[]){n}, xn, ids);
    run_subset(&eo, "mesh over every other device");
    rmesh_fini(&eo);

    /* the last process's devices (a mesh that leaves process 0 out) */
    rmesh last;
    for (int k = 0; k < nlocal; k++)
        ids[k] = (nproc - 1) * nlocal + k;
    spmd_test_mesh_build(&last, NULL, 1, (int[]){nlocal}, xn, ids);
    run_subset(&last, "mesh over the last process's devices");
    rmesh_fini(&last);
    end_test(before);
}
