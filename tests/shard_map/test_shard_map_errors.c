/* test_shard_map, part: argument validation (section 4) and fn failing on one device (5).
 * The helpers and the reference model are in test_shard_map.c. */
#define _POSIX_C_SOURCE 200809L

#include "test_shard_map.h"

/* ---- 4. validation --------------------------------------------------------------------- */

spmd_status fn_copy_all(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)user;
    for (int j = 0; j < nout; j++) {
        spmd_status st =
            j < nin ? spmd_op_copy(ctx, &in[j], &out[j]) : spmd_op_fill(ctx, &out[j], 0);
        if (st != SPMD_OK)
            return st;
    }
    return SPMD_OK;
}

/* One call expected to fail validation: `status` and fragments, no output. */
#define BAD_CALL(mesh, fn, nin, in, is, nout, d, os, opts, status, ...)                            \
    do {                                                                                           \
        spmd_array *o_[2] = {SENTINEL, SENTINEL};                                                  \
        double t0_ = now_s();                                                                      \
        EXPECT_STATUS(                                                                             \
            spmd_shard_map((mesh), (fn), NULL, (nin), (in), (is), (nout), (d), (os), (opts), o_),  \
            (status), __VA_ARGS__);                                                                \
        CHECK(now_s() - t0_ < 5.0, "validation took %.1f s", now_s() - t0_);                       \
        for (int j_ = 0; j_ < (nout) && j_ < 2; j_++)                                              \
            CHECK(o_[j_] == NULL, "a failed call left out_arrays[%d] = %p", j_, (void *)o_[j_]);   \
    } while (0)

void test_validation(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    rmesh x, pl;
    mesh_x(&x);
    mesh_pl(&pl);
    rspec sx = rs(1, "0");
    spmd_array *a = make_input(&x, &sx, 1, (int64_t[]){2 * ndev}, SPMD_DTYPE_F32, 0);
    spmd_spec *px = spec_parse("'x'"), *pnone = spec_parse(""), *pz = spec_parse("'z'");
    spmd_spec *pxx = spec_parse("'x', None"), *pnx = spec_parse("None, 'x'");
    const spmd_spec *is_x[1] = {px}, *is_none[1] = {pnone}, *is_z[1] = {pz}, *is_xx[1] = {pxx};
    const spmd_spec *is_nx[1] = {pnx}, *is_null[1] = {NULL};
    spmd_out_desc d_block = {1, {2 * ndev}, SPMD_DTYPE_F32};
    spmd_out_desc d_scalar = {0, {0}, SPMD_DTYPE_F32};
    spmd_array *in1[1] = {a}, *in_null[1] = {NULL};

    /* NULLs and counts */
    BAD_CALL(NULL, fn_copy_all, 1, in1, is_x, 1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "mesh");
    BAD_CALL(x.mesh, NULL, 1, in1, is_x, 1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT, "fn");
    EXPECT_STATUS(
        spmd_shard_map(x.mesh, fn_copy_all, NULL, 1, in1, is_x, 1, &d_block, is_x, NULL, NULL),
        SPMD_ERR_INVALID_ARGUMENT, "out_arrays");
    BAD_CALL(x.mesh, fn_copy_all, 1, NULL, is_x, 1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "in_arrays");
    BAD_CALL(x.mesh, fn_copy_all, 1, in_null, is_x, 1, &d_block, is_x, NULL,
             SPMD_ERR_INVALID_ARGUMENT, "in_arrays[0]");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, NULL, 1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "in_specs");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, NULL, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "out_descs");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_block, NULL, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "out_specs");
    BAD_CALL(x.mesh, fn_copy_all, -1, in1, is_x, 1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "nin");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, -1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "nout");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_null, 1, &d_block, is_x, NULL,
             SPMD_ERR_INVALID_ARGUMENT, "in_specs[0]");

    /* options */
    spmd_shard_map_options bad_version = SPMD_SHARD_MAP_OPTIONS_INIT;
    bad_version.version = 99;
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_block, is_x, &bad_version,
             SPMD_ERR_INVALID_ARGUMENT, "version");
    spmd_shard_map_options o;
    EXPECT_STATUS(spmd_shard_map_options_init(&o, 99), SPMD_ERR_INVALID_ARGUMENT, "version");
    EXPECT_STATUS(spmd_shard_map_options_init(NULL, SPMD_SHARD_MAP_OPTIONS_VERSION),
                  SPMD_ERR_INVALID_ARGUMENT, "NULL");

    /* specs */
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_z, 1, &d_block, is_x, NULL, SPMD_ERR_SPEC,
             "in_specs[0]", "z");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_block, is_z, NULL, SPMD_ERR_SPEC,
             "out_specs[0]", "z");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_xx, 1, &d_block, is_x, NULL, SPMD_ERR_SHAPE, "input 0",
             "rank");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_scalar, is_x, NULL, SPMD_ERR_SHAPE,
             "output 0", "rank");
    spmd_out_desc d_neg = {-1, {0}, SPMD_DTYPE_F32}, d_dtype = {1, {2 * ndev}, SPMD_DTYPE_COUNT};
    spmd_out_desc d_zero = {1, {0}, SPMD_DTYPE_F32};
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_neg, is_x, NULL, SPMD_ERR_SHAPE, "out");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_dtype, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "dtype");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_zero, is_none, NULL, SPMD_ERR_SHAPE,
             "output 0");

    /* divisibility: needs an axis of more than one device */
    if (ndev > 1) {
        rspec rep = rs(0);
        int64_t odd[2] = {2 * ndev + 1, 2};
        spmd_array *b = make_input(&x, &rep, 2, odd, SPMD_DTYPE_F32, 0);
        spmd_array *inb[1] = {b};
        spmd_out_desc d_odd = {2, {2 * ndev + 1, 2}, SPMD_DTYPE_F32};
        char size_text[32];
        snprintf(size_text, sizeof size_text, "%d", 2 * ndev + 1);
        BAD_CALL(x.mesh, fn_copy_all, 1, inb, is_x, 1, &d_odd, is_none, NULL, SPMD_ERR_SHAPE,
                 "input 0", size_text);
        spmd_out_desc d_odd_out = {1, {ndev + 1}, SPMD_DTYPE_F32};
        snprintf(size_text, sizeof size_text, "%d", ndev + 1);
        BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_odd_out, is_x, NULL, SPMD_ERR_SHAPE,
                 "output 0", size_text);
        spmd_array_destroy(b);
    }

    /* an input laid out differently from its in_spec on this mesh */
    if (ndev > 1) {
        rspec s2 = rs(1, "0");
        int64_t sq[2] = {2 * ndev, 2 * ndev};
        spmd_array *b = make_input(&x, &s2, 2, sq, SPMD_DTYPE_F32, 0);
        spmd_array *inb[1] = {b};
        spmd_out_desc d_sq = {2, {2 * ndev, 2 * ndev}, SPMD_DTYPE_F32};
        BAD_CALL(x.mesh, fn_copy_all, 1, inb, is_nx, 1, &d_sq, is_nx, NULL,
                 SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "P('x',)", "P(None, 'x')", "devices",
                 "reshard");
        /* replicated input passed as sharded */
        rspec rep = rs(0);
        spmd_array *r = make_input(&x, &rep, 1, (int64_t[]){2 * ndev}, SPMD_DTYPE_F32, 0);
        spmd_array *inr[1] = {r};
        BAD_CALL(x.mesh, fn_copy_all, 1, inr, is_x, 1, &d_block, is_x, NULL,
                 SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "reshard");
        spmd_array_destroy(r);
        spmd_array_destroy(b);

        /* the same spec on a mesh over the devices in another order */
        rmesh rev;
        int ids[MAX_DEV];
        for (int d = 0; d < ndev; d++)
            ids[d] = ndev - 1 - d;
        const char *xn[] = {"x"};
        spmd_test_mesh_build(&rev, NULL, 1, (int[]){ndev}, xn, ids);
        spmd_array *c = make_input(&rev, &sx, 1, (int64_t[]){2 * ndev}, SPMD_DTYPE_F32, 0);
        spmd_array *inc[1] = {c};
        BAD_CALL(x.mesh, fn_copy_all, 1, inc, is_x, 1, &d_block, is_x, NULL,
                 SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "devices", "reshard");
        spmd_array_destroy(c);
        rmesh_fini(&rev);

        /* an array on a mesh of device 0 alone */
        rmesh one;
        spmd_test_mesh_build(&one, NULL, 1, (int[]){1}, xn, (int[]){0});
        rspec rep1 = rs(0);
        spmd_array *e = make_input(&one, &rep1, 1, (int64_t[]){2 * ndev}, SPMD_DTYPE_F32, 0);
        spmd_array *ine[1] = {e};
        BAD_CALL(x.mesh, fn_copy_all, 1, ine, is_none, 1, &d_block, is_none, NULL,
                 SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "devices", "reshard");
        spmd_array_destroy(e);
        rmesh_fini(&one);
    }

    /* Equivalent layouts are accepted with no resharding: P(('p', 'l')) on the (p, l) mesh is
     * P('x') on x, and P('x', None) is P('x') spelled with a trailing None. */
    {
        rspec spl = rs(1, "01");
        spmd_array *b = make_input(&pl, &spl, 1, (int64_t[]){2 * ndev}, SPMD_DTYPE_F32, 4);
        spmd_array *inb[1] = {b}, *out = SENTINEL;
        if (EXPECT_OK(spmd_shard_map(x.mesh, fn_copy_all, NULL, 1, inb, is_x, 1, &d_block, is_x,
                                     NULL, &out))) {
            seed_expect e = {1, {2 * ndev}, 4, 1.0, 0.0};
            verify_array(out, &x, &sx, 1, e.shape, SPMD_DTYPE_F32, expect_seeded, &e,
                         "input from an equivalent sharding on another mesh");
            spmd_array_destroy(out);
        }
        spmd_array_destroy(b);

        rspec s2 = rs(1, "0");
        int64_t shp[2] = {2 * ndev, 3};
        spmd_array *c = make_input(&x, &s2, 2, shp, SPMD_DTYPE_I32, 5);
        spmd_array *inc[1] = {c};
        spmd_out_desc d2 = {2, {2 * ndev, 3}, SPMD_DTYPE_I32};
        out = SENTINEL;
        if (EXPECT_OK(spmd_shard_map(x.mesh, fn_copy_all, NULL, 1, inc, is_xx, 1, &d2, is_x, NULL,
                                     &out))) {
            seed_expect e = {2, {2 * ndev, 3}, 5, 1.0, 0.0};
            verify_array(out, &x, &s2, 2, shp, SPMD_DTYPE_I32, expect_seeded, &e,
                         "P('x') input passed with in_spec P('x', None)");
            spmd_array_destroy(out);
        }
        spmd_array_destroy(c);
    }

    /* plans validate the same way */
    {
        spmd_plan *plan = (spmd_plan *)(void *)&sentinel_byte;
        spmd_in_desc di = {1, {2 * ndev}, SPMD_DTYPE_F32};
        EXPECT_STATUS(spmd_plan_create(x.mesh, fn_copy_all, NULL, 1, &di, is_z, 1, &d_block, is_x,
                                       NULL, &plan),
                      SPMD_ERR_SPEC, "z");
        CHECK(plan == NULL, "a failed spmd_plan_create left *out = %p", (void *)plan);
        plan = (spmd_plan *)(void *)&sentinel_byte;
        EXPECT_STATUS(
            spmd_plan_create(x.mesh, NULL, NULL, 1, &di, is_x, 1, &d_block, is_x, NULL, &plan),
            SPMD_ERR_INVALID_ARGUMENT, "fn");
        CHECK(plan == NULL, "a failed spmd_plan_create left *out = %p", (void *)plan);
        EXPECT_STATUS(spmd_plan_create(x.mesh, fn_copy_all, NULL, 1, &di, is_x, 1, &d_block, is_x,
                                       NULL, NULL),
                      SPMD_ERR_INVALID_ARGUMENT, "out");
        spmd_array *out = NULL;
        EXPECT_STATUS(spmd_plan_execute(NULL, in1, &out), SPMD_ERR_INVALID_ARGUMENT, "plan");
        spmd_plan_destroy(NULL);
    }

    spmd_spec_destroy(px);
    spmd_spec_destroy(pnone);
    spmd_spec_destroy(pz);
    spmd_spec_destroy(pxx);
    spmd_spec_destroy(pnx);
    spmd_array_destroy(a);
    rmesh_fini(&x);
    rmesh_fini(&pl);
    end_test(before);
}

/* ---- 5. fn failing on one device ------------------------------------------------------- */

typedef struct fail_job {
    int device; /* the device whose fn fails */
    spmd_status status;
    int collective; /* the others psum over every axis */
} fail_job;

static spmd_status fn_fail_one(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin;
    (void)in;
    (void)nout;
    const fail_job *J = user;
    if (spmd_ctx_device(ctx) == J->device)
        return J->status;
    if (!J->collective)
        return spmd_op_fill(ctx, &out[0], 1.0);
    spmd_block ones;
    spmd_status st = spmd_ctx_alloc(ctx, 1, (int64_t[]){4}, SPMD_DTYPE_F32, &ones);
    if (st == SPMD_OK)
        st = spmd_op_fill(ctx, &ones, 1.0);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &ones, &out[0], "x");
    return st;
}

static spmd_status run_fail(const rmesh *m, fail_job *job, spmd_array **out)
{
    spmd_spec *os = spec_parse("");
    spmd_out_desc d = {1, {4}, SPMD_DTYPE_F32};
    *out = SENTINEL;
    spmd_status st = spmd_shard_map(m->mesh, fn_fail_one, job, 0, NULL, NULL, 1, &d,
                                    (const spmd_spec *const *)&os, NULL, out);
    spmd_spec_destroy(os);
    return st;
}

/* A correct call (every device psums ones) after a failed one. */
static spmd_status run_after_failure(const rmesh *m, const char *what)
{
    fail_job ok = {-1, SPMD_OK, 1};
    spmd_array *out = NULL;
    double t0 = now_s();
    spmd_status st = run_fail(m, &ok, &out);
    double dt = now_s() - t0;
    if (st == SPMD_OK) {
        double n = (double)m->size;
        rspec none = rs(0);
        verify_array(out, m, &none, 1, (int64_t[]){4}, SPMD_DTYPE_F32, expect_const, &n, what);
        spmd_array_destroy(out);
    } else {
        CHECK(out == NULL, "%s: failed call left an output", what);
    }
    CHECK(dt < 10.0, "%s took %.1f s", what, dt);
    return st;
}

static void fail_scenario(int device, const char *what)
{
    rmesh x;
    mesh_x(&x);
    /* warm the mesh up first, so that the failure hits a mesh in use */
    EXPECT_OK(run_after_failure(&x, "a correct call before the failure"));

    fail_job job = {device, SPMD_ERR_INVALID_ARGUMENT, 1};
    spmd_array *out = NULL;
    double t0 = now_s();
    spmd_status st = run_fail(&x, &job, &out);
    double dt = now_s() - t0;
    char dev_text[32];
    snprintf(dev_text, sizeof dev_text, "device %d", device);
    if (!EXPECT_STATUS(st, SPMD_ERR_INVALID_ARGUMENT, dev_text))
        fprintf(stderr, "  (%s)\n", what);
    CHECK(out == NULL, "%s: the failed call left an output", what);
    CHECK(dt < 10.0, "%s: the failure took %.1f s to be reported (the collective timeout is 60 s)",
          what, dt);
    CHECK(same_on_all_processes((int)st), "%s: processes disagree on the status (%s here)", what,
          spmd_status_name(st));

    /* The same mesh again: fine in one process; across processes the mesh may have been given
     * up (SPMD_ERR_DISTRIBUTED, create a new one), but every process must say the same. */
    spmd_status again = run_after_failure(&x, "the same mesh after a failed call");
    if (nproc == 1)
        EXPECT_OK(again);
    else if (again != SPMD_OK)
        EXPECT_STATUS(again, SPMD_ERR_DISTRIBUTED, "new mesh");
    CHECK(same_on_all_processes((int)again),
          "%s: processes disagree on the status of the next call (%s here)", what,
          spmd_status_name(again));
    rmesh_fini(&x);

    rmesh fresh;
    mesh_x(&fresh);
    EXPECT_OK(run_after_failure(&fresh, "a fresh mesh after a failed call"));
    rmesh_fini(&fresh);
}

/* Phase 0: every device meets an error it handles (a refused spmd_ctx_alloc) and succeeds.
 * Phase 1: device 0 returns an error without any message of its own. */
static spmd_status fn_stale(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin;
    (void)in;
    (void)nout;
    (void)out;
    if (*(const int *)user == 0) {
        spmd_block b;
        if (spmd_ctx_alloc(ctx, 1, (int64_t[]){0}, SPMD_DTYPE_F32, &b) == SPMD_OK)
            return SPMD_ERR_INTERNAL; /* a zero extent must be refused */
        return SPMD_OK;
    }
    return spmd_ctx_device(ctx) == 0 ? SPMD_ERR_INVALID_ARGUMENT : SPMD_OK;
}

void test_fn_failure(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    fail_scenario(0, "fn fails on device 0 while the others psum over 'x'");
    fail_scenario(ndev - 1, "fn fails on the last device while the others psum over 'x'");

    /* no collectives: the others simply finish */
    rmesh x;
    mesh_x(&x);
    fail_job job = {0, SPMD_ERR_SHAPE, 0};
    spmd_array *out = NULL;
    EXPECT_STATUS(run_fail(&x, &job, &out), SPMD_ERR_SHAPE, "device 0");
    CHECK(out == NULL, "the failed call left an output%s", "");
    spmd_status again = run_after_failure(&x, "the same mesh after a failure without collectives");
    if (nproc == 1)
        EXPECT_OK(again);
    else if (again != SPMD_OK)
        EXPECT_STATUS(again, SPMD_ERR_DISTRIBUTED, "new mesh");
    CHECK(same_on_all_processes((int)again), "processes disagree (%s here)",
          spmd_status_name(again));
    rmesh_fini(&x);

    /* The message of an fn failure must not repeat an older, handled error of the worker. */
    rmesh y;
    mesh_x(&y);
    for (int phase = 0; phase < 2; phase++) {
        spmd_status st =
            spmd_shard_map(y.mesh, fn_stale, &phase, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL);
        if (phase == 0) {
            EXPECT_OK(st);
        } else if (EXPECT_STATUS(st, SPMD_ERR_INVALID_ARGUMENT, "device 0")) {
            CHECK(strstr(spmd_last_error(), "spmd_ctx_alloc") == NULL,
                  "fn returned a bare status, but the message blames an earlier, handled error: "
                  "%s",
                  spmd_last_error());
        }
    }
    rmesh_fini(&y);
    end_test(before);
}
