/*
 * Misuse from inside fn, and of what fn was given:
 *  - every call that runs on the devices or between processes (shard_map, plan_execute, pmap,
 *    reshard, the multihost collectives, array transfers, compat, finalize), made from fn of a
 *    shard_map and of a pmap, is refused at once (SPMD_ERR_INVALID_ARGUMENT naming the call and
 *    the enclosing one), and the enclosing call still computes the right values;
 *  - a ctx kept after fn returned is refused by every function that takes one, while a ctx
 *    used from a thread fn started works;
 *  - a failed output allocation says so, not that fn failed.
 * Runs in 1 and 2 processes with 1 and 4 devices each (one device takes another dispatch path).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "testutil.h"

/* The sanitizers would abort on the 2^48-byte request below instead of returning NULL. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What fn needs to try the nested calls: objects made before the call. */
typedef struct world {
    spmd_mesh *mesh;
    spmd_sharding *rows, *replicated;
    spmd_array *x; /* rows-sharded: element i is i + 1 */
    spmd_plan *plan;
    const char *enclosing; /* the call fn runs in, as the message must name it */
    const char *axis;      /* ... and the axis its psum runs over */
    int refused;           /* nested calls refused as expected, counted on device 0 of the mesh */
    int wrong;             /* ... or not */
    char first_wrong[512];
} world;

static pthread_mutex_t record_lock = PTHREAD_MUTEX_INITIALIZER;

static spmd_status identity(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_op_copy(ctx, &in[0], &out[0]);
}

/* One nested call: refused at once, naming itself and the enclosing call. */
static void expect_refused(world *w, spmd_status st, double started, const char *name)
{
    double took = now_s() - started;
    const char *msg = spmd_last_error();
    int ok = st == SPMD_ERR_INVALID_ARGUMENT && took < 1.0 && strstr(msg, name) &&
             strstr(msg, "inside the fn of") && strstr(msg, w->enclosing);
    pthread_mutex_lock(&record_lock);
    if (ok) {
        w->refused++;
    } else if (w->wrong++ == 0) {
        snprintf(w->first_wrong, sizeof w->first_wrong, "%s: %s after %.2f s: %s", name,
                 spmd_status_name(st), took, msg);
    }
    pthread_mutex_unlock(&record_lock);
}

#define TRY(w, name, call)                                                                         \
    do {                                                                                           \
        double t0_ = now_s();                                                                      \
        spmd_status st_ = (call);                                                                  \
        expect_refused((w), st_, t0_, (name));                                                     \
    } while (0)

static const int NESTED_CALLS = 19;

static void try_nested_calls(world *w)
{
    const spmd_spec *none[1] = {NULL};
    spmd_spec *rows_spec = NULL;
    if (spmd_spec_parse("'i'", &rows_spec) != SPMD_OK)
        return;
    const spmd_spec *specs[1] = {rows_spec};
    spmd_out_desc desc = {1, {spmd_array_shape(w->x)[0]}, SPMD_DTYPE_F32};
    spmd_array *y = NULL, *ys[1] = {NULL};
    float host[64];
    int64_t shape[1] = {spmd_array_shape(w->x)[0]};
    int in_axis = 0, out_axis = 0;
    (void)none;
    TRY(w, "spmd_shard_map",
        spmd_shard_map(w->mesh, identity, NULL, 1, &w->x, specs, 1, &desc, specs, NULL, &y));
    TRY(w, "spmd_plan_execute", spmd_plan_execute(w->plan, &w->x, ys));
    TRY(w, "spmd_pmap",
        spmd_pmap(identity, NULL, 1, &w->x, &in_axis, 1, &desc, &out_axis, "p", NULL, 0, NULL, &y));
    TRY(w, "spmd_reshard", spmd_reshard(w->x, w->replicated, NULL, &y));
    TRY(w, "spmd_reshard_batch",
        spmd_reshard_batch(1, &w->x, (const spmd_sharding *const *)&w->replicated, NULL, ys));
    TRY(w, "spmd_process_allgather", spmd_process_allgather(w->x, 1, host, sizeof host));
    TRY(w, "spmd_process_gather", spmd_process_gather(w->x, 0, 1, host, sizeof host));
    TRY(w, "spmd_sync_global_devices", spmd_sync_global_devices("nested"));
    TRY(w, "spmd_broadcast_one_to_all", spmd_broadcast_one_to_all(host, 4, 0));
    TRY(w, "spmd_broadcast_array_one_to_all",
        spmd_broadcast_array_one_to_all(w->x, 0, host, sizeof host));
    TRY(w, "spmd_assert_equal", spmd_assert_equal(w->x, "nested"));
    TRY(w, "spmd_host_local_to_global", spmd_host_local_to_global(w->x, w->mesh, rows_spec, &y));
    TRY(w, "spmd_global_to_host_local", spmd_global_to_host_local(w->x, w->mesh, rows_spec, &y));
    TRY(w, "spmd_device_put", spmd_device_put(host, 1, shape, SPMD_DTYPE_F32, w->rows, &y));
    TRY(w, "spmd_array_to_host", spmd_array_to_host(w->x, host, sizeof host));
    TRY(w, "spmd_array_copy", spmd_array_copy(w->x, &y));
    int dev = spmd_local_device_id(0);
    TRY(w, "spmd_device_put_replicated",
        spmd_device_put_replicated(host, 1, shape, SPMD_DTYPE_F32, &dev, 1, &y));
    TRY(w, "spmd_array_shard_to_host", spmd_array_shard_to_host(w->x, 0, host, sizeof host));
    TRY(w, "spmd_finalize", spmd_finalize());
    spmd_spec_destroy(rows_spec);
}

/* fn of the enclosing call: device 0 tries every nested call, then all psum over w->axis. */
static spmd_status nesting_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    world *w = user;
    if (spmd_ctx_device(ctx) == 0)
        try_nested_calls(w);
    return spmd_psum(ctx, &in[0], &out[0], w->axis);
}

static void setup(world *w)
{
    memset(w, 0, sizeof *w);
    int n = spmd_device_count();
    const char *names[1] = {"i"};
    assert_true(n * 2 <= 64);
    assert_ok(spmd_mesh_create(1, &n, names, NULL, 0, &w->mesh));
    assert_ok(spmd_sharding_create_parse(w->mesh, "'i'", &w->rows));
    assert_ok(spmd_sharding_create_parse(w->mesh, "", &w->replicated));
    float host[64];
    for (int i = 0; i < 2 * n; i++)
        host[i] = (float)(i + 1);
    int64_t shape[1] = {2 * n};
    assert_ok(spmd_device_put(host, 1, shape, SPMD_DTYPE_F32, w->rows, &w->x));
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'i'", &spec));
    const spmd_spec *specs[1] = {spec};
    spmd_in_desc desc = {1, {2 * n}, SPMD_DTYPE_F32};
    assert_ok(spmd_plan_create(w->mesh, identity, NULL, 1, &desc, specs, 1, &desc, specs, NULL,
                               &w->plan));
    spmd_spec_destroy(spec);
}

static void teardown(world *w)
{
    spmd_plan_destroy(w->plan);
    spmd_array_destroy(w->x);
    spmd_sharding_destroy(w->rows);
    spmd_sharding_destroy(w->replicated);
    spmd_mesh_destroy(w->mesh);
}

/* psum over 'i' of x's blocks, blocks of 2: element k is sum over devices d of 2d + k + 1. */
static void check_psum(const spmd_array *y)
{
    int n = spmd_device_count();
    float got[64];
    assert_ok(spmd_process_allgather(y, 1, got, sizeof got));
    for (int d = 0; d < n; d++)
        for (int k = 0; k < 2; k++) {
            double want = 0;
            for (int e = 0; e < n; e++)
                want += 2.0 * e + k + 1;
            assert_float_equal(got[2 * d + k], want, 0);
        }
}

static void test_nested_in_shard_map(void **state)
{
    (void)state;
    world w;
    setup(&w);
    w.enclosing = "spmd_shard_map";
    w.axis = "i";
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'i'", &spec));
    const spmd_spec *specs[1] = {spec};
    spmd_out_desc desc = {1, {2 * spmd_device_count()}, SPMD_DTYPE_F32};
    spmd_array *y = NULL;
    assert_ok(spmd_shard_map(w.mesh, nesting_body, &w, 1, &w.x, specs, 1, &desc, specs, NULL, &y));
    if (w.wrong)
        fail_msg("%d nested calls not refused as expected; first: %s", w.wrong, w.first_wrong);
    if (spmd_process_index() == 0)
        assert_int_equal(w.refused, NESTED_CALLS);
    check_psum(y);
    spmd_array_destroy(y);
    /* the mesh and runtime still work */
    assert_ok(spmd_shard_map(w.mesh, identity, NULL, 1, &w.x, specs, 1, &desc, specs, NULL, &y));
    spmd_array_destroy(y);
    spmd_spec_destroy(spec);
    teardown(&w);
}

static void test_nested_in_pmap(void **state)
{
    (void)state;
    world w;
    setup(&w);
    w.enclosing = "spmd_pmap";
    w.axis = "p";
    /* one process's devices: a [local, 2] array mapped over its leading axis */
    int local = spmd_local_device_count();
    float host[128];
    for (int i = 0; i < 2 * local; i++)
        host[i] = (float)(i + 1);
    int64_t shape[2] = {local, 2};
    spmd_array *in = NULL, *out = NULL;
    int dev[64];
    for (int k = 0; k < local; k++)
        dev[k] = spmd_local_device_id(k);
    const void *shards[64];
    for (int k = 0; k < local; k++)
        shards[k] = host + 2 * k;
    assert_ok(spmd_device_put_sharded(local, shards, 1, shape + 1, SPMD_DTYPE_F32, dev, &in));
    int in_axis = 0, out_axis = 0;
    spmd_out_desc desc = {1, {2}, SPMD_DTYPE_F32}; /* fn's block */
    assert_ok(spmd_pmap(nesting_body, &w, 1, &in, &in_axis, 1, &desc, &out_axis, "p", NULL, 0, NULL,
                        &out));
    if (w.wrong)
        fail_msg("%d nested calls not refused as expected; first: %s", w.wrong, w.first_wrong);
    if (spmd_process_index() == 0)
        assert_int_equal(w.refused, NESTED_CALLS);
    float got[128];
    assert_ok(spmd_array_to_host(out, got, sizeof got));
    for (int k = 0; k < local; k++)
        for (int j = 0; j < 2; j++) {
            double want = 0; /* pmap over every device: each process adds the same values */
            for (int e = 0; e < local; e++)
                want += host[2 * e + j];
            want *= spmd_process_count();
            assert_float_equal(got[2 * k + j], want, 0);
        }
    spmd_array_destroy(in);
    spmd_array_destroy(out);
    teardown(&w);
}

/* ---- a ctx kept after its fn returned ---- */

static spmd_ctx *kept;

typedef struct helper_arg {
    spmd_ctx *ctx;
    spmd_status st;
    int index;
} helper_arg;

static void *use_ctx_from_thread(void *p)
{
    helper_arg *h = p;
    h->st = spmd_axis_index(h->ctx, "i", &h->index);
    return NULL;
}

static spmd_status keeping_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    int index = -1;
    spmd_status st = spmd_axis_index(ctx, "i", &index);
    if (st != SPMD_OK)
        return st;
    /* a thread fn starts may use ctx while fn runs */
    helper_arg h = {ctx, SPMD_ERR_INTERNAL, -2};
    pthread_t t;
    if (pthread_create(&t, NULL, use_ctx_from_thread, &h) != 0)
        return SPMD_ERR_INTERNAL;
    pthread_join(t, NULL);
    if (h.st != SPMD_OK)
        return h.st;
    if (h.index != index)
        return SPMD_ERR_INTERNAL;
    if (spmd_ctx_device(ctx) == spmd_local_device_id(0))
        kept = ctx;
    return spmd_op_copy(ctx, &in[0], &out[0]);
}

static void test_ctx_after_fn(void **state)
{
    (void)state;
    world w;
    setup(&w);
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'i'", &spec));
    const spmd_spec *specs[1] = {spec};
    spmd_out_desc desc = {1, {2 * spmd_device_count()}, SPMD_DTYPE_F32};
    spmd_array *y = NULL;
    kept = NULL;
    assert_ok(
        spmd_shard_map(w.mesh, keeping_body, NULL, 1, &w.x, specs, 1, &desc, specs, NULL, &y));
    assert_non_null(kept);
    int index = 0;
    float data[2] = {1, 2};
    spmd_block b = {data, SPMD_DTYPE_F32, 1, {2}}, c = b;
    const char *why = "not the context of a running fn";
    assert_status(spmd_axis_index(kept, "i", &index), SPMD_ERR_INVALID_ARGUMENT, "spmd_axis_index",
                  why);
    assert_status(spmd_axis_size(kept, "i", &index), SPMD_ERR_INVALID_ARGUMENT, why);
    assert_status(spmd_psum(kept, &b, &c, "i"), SPMD_ERR_INVALID_ARGUMENT, "spmd_psum", why);
    assert_status(spmd_all_gather(kept, &b, &c, "i", 0, 1), SPMD_ERR_INVALID_ARGUMENT, why);
    assert_status(spmd_ctx_alloc(kept, 1, b.shape, SPMD_DTYPE_F32, &c), SPMD_ERR_INVALID_ARGUMENT,
                  "spmd_ctx_alloc", why);
    assert_status(spmd_op_fill(kept, &b, 3.0), SPMD_ERR_INVALID_ARGUMENT, "spmd_op_fill", why);
    assert_float_equal(data[0], 1.0, 0);    /* refused before touching the block */
    assert_ok(spmd_op_fill(NULL, &b, 3.0)); /* host blocks need no ctx */
    assert_float_equal(data[1], 3.0, 0);
    assert_int_equal(spmd_ctx_device(kept), -1);
    assert_null(spmd_ctx_mesh(kept));
    assert_null(spmd_ctx_stream(kept));
    assert_null(spmd_ctx_cublas(kept));
    spmd_array_destroy(y);
    spmd_spec_destroy(spec);
    teardown(&w);
}

/* ---- an output that cannot be allocated ---- */

static spmd_status never_runs(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)ctx, (void)nin, (void)in, (void)nout, (void)out;
    *(int *)user = 1;
    return SPMD_OK;
}

static void test_output_allocation_failure(void **state)
{
    (void)state;
    world w;
    setup(&w);
    spmd_spec *rows = NULL;
    assert_ok(spmd_spec_parse("'i'", &rows));
    const spmd_spec *in_specs[1] = {rows}, *out_specs[2] = {rows, rows};
    int n = spmd_device_count();
    /* a 256 TiB block on every device: more than overcommitted memory maps */
    spmd_out_desc descs[2] = {{1, {2 * n}, SPMD_DTYPE_F32},
                              {1, {(int64_t)n << 46}, SPMD_DTYPE_F32}};
    spmd_array *ys[2] = {NULL, NULL};
    int ran = 0;
    assert_status(
        spmd_shard_map(w.mesh, never_runs, &ran, 1, &w.x, in_specs, 2, descs, out_specs, NULL, ys),
        SPMD_ERR_OUT_OF_MEMORY, "could not allocate output 1", "fn did not run");
    assert_false(strstr(spmd_last_error(), "fn failed") != NULL);
    assert_int_equal(ran, 0);
    assert_null(ys[0]);
    assert_null(ys[1]);
    spmd_spec_destroy(rows);
    teardown(&w);
}

int main(void)
{
    spmd_test_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested_in_shard_map),
        cmocka_unit_test(test_nested_in_pmap),
        cmocka_unit_test(test_ctx_after_fn),
        cmocka_unit_test(test_output_allocation_failure),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
