/*
 * The collective trace's file, read back as `spmd trace` reads it: a record per call, per fn
 * and per collective, with what they were, their order, their times and the digests of their
 * blocks (checked against each other and against the data); the ring's length; stop; refusals.
 */
#define _GNU_SOURCE /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

enum { PER = 2, MAX_DEVICES = 64 };

static spmd_mesh *mesh;
static spmd_spec *split, *replicated;
static spmd_array *g_x;
static int ndev, me;
static float host_x[PER * MAX_DEVICES];

static spmd_status sum_over_i(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "i");
}

/* One shard_map call: psum of each device's block; the result checked against the host. */
static void one_call(void)
{
    const spmd_out_desc desc = {1, {PER}, SPMD_DTYPE_F32};
    spmd_array *y = NULL;
    assert_ok(spmd_shard_map(mesh, sum_over_i, NULL, 1, &g_x, (const spmd_spec *[]){split}, 1,
                             &desc, (const spmd_spec *[]){replicated}, NULL, &y));
    float got[PER];
    assert_ok(spmd_array_shard_to_host(y, 0, got, sizeof got));
    for (int k = 0; k < PER; k++) {
        float want = 0;
        for (int d = 0; d < ndev; d++)
            want += host_x[d * PER + k];
        SPMD_TEST_CHECK(got[k] == want, "psum element %d is %g, want %g", k, got[k], want);
    }
    spmd_array_destroy(y);
}

typedef struct read_trace {
    spmd_trace_header h;
    spmd_trace_record *r; /* the valid records, in their order */
    int n;
} read_trace;

static int by_stamp(const void *a, const void *b)
{
    uint64_t x = ((const spmd_trace_record *)a)->stamp, y = ((const spmd_trace_record *)b)->stamp;
    return x < y ? -1 : x > y;
}

static void read_file(const char *dir, read_trace *t)
{
    char path[512];
    snprintf(path, sizeof path, "%s/trace.%d.spmd", dir, me);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("process %d: no trace file %s", me, path);
    unsigned char page[SPMD_TRACE_HEADER_BYTES];
    assert_int_equal(fread(page, 1, sizeof page, f), sizeof page);
    memcpy(&t->h, page, sizeof t->h);
    assert_memory_equal(t->h.magic, SPMD_TRACE_MAGIC, 8);
    t->r = calloc(t->h.capacity, sizeof *t->r);
    assert_non_null(t->r);
    size_t got = fread(t->r, sizeof *t->r, t->h.capacity, f);
    fclose(f);
    assert_int_equal(got, t->h.capacity);
    t->n = 0;
    for (size_t k = 0; k < got; k++)
        if (t->r[k].stamp && (t->r[k].stamp - 1) % t->h.capacity == k)
            t->r[t->n++] = t->r[k];
    qsort(t->r, (size_t)t->n, sizeof *t->r, by_stamp);
}

static void make_dir(char *dir, size_t size)
{
    snprintf(dir, size, "/tmp/spmd_test_trace.XXXXXX");
    if (!mkdtemp(dir))
        fail_msg("mkdtemp failed");
}

static void remove_dir(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/trace.%d.spmd", dir, me);
    unlink(path);
    rmdir(dir);
}

/* A trace of `records` records, with digests or not, in a new directory `dir`. */
static void start_in_new_dir(char *dir, size_t size, long records, int digests)
{
    make_dir(dir, size);
    spmd_trace_options o = SPMD_TRACE_OPTIONS_INIT;
    o.records = records;
    o.digests = digests;
    assert_ok(spmd_trace_start(dir, &o));
}

/* Three calls: every record is there, in order, and the digests agree with the data. */
static void test_records(void **state)
{
    (void)state;
    char dir[64];
    start_in_new_dir(dir, sizeof dir, 256, 1);
    assert_int_equal(spmd_trace_active(), 1);
    for (int c = 0; c < 3; c++)
        one_call();
    read_trace t;
    read_file(dir, &t);
    int nl = spmd_local_device_count(), first = spmd_local_device_id(0);
    /* digests are taken of host memory only (CPU devices): README, SPMD_TRACE_DIGESTS */
    int host_digests = spmd_runtime_platform() == SPMD_PLATFORM_CPU;
    assert_int_equal(t.h.format_version, SPMD_TRACE_FORMAT_VERSION);
    assert_int_equal(t.h.capacity, 256);
    assert_int_equal(t.h.process, me);
    assert_int_equal(t.h.num_processes, spmd_process_count());
    assert_int_equal(t.h.num_local_devices, nl);
    assert_int_equal(t.h.first_local_device, first);
    assert_int_equal(t.h.digests, 1);
    assert_int_equal(t.h.state, SPMD_TRACE_RUNNING);
    assert_int_equal(t.h.pid, getpid());
    /* per call: the call, then fn and one psum on each local device */
    assert_int_equal(t.n, 3 * (1 + 2 * nl));
    assert_int_equal((int)t.h.next, t.n);
    uint64_t first_call = t.r[0].call;
    for (int c = 0; c < 3; c++) {
        const spmd_trace_record *call = NULL;
        uint64_t fn_in[MAX_DEVICES] = {0}, fn_out[MAX_DEVICES] = {0};
        uint64_t coll_in[MAX_DEVICES] = {0}, coll_out[MAX_DEVICES] = {0}, fp = 0;
        for (int k = 0; k < t.n; k++) {
            const spmd_trace_record *r = &t.r[k];
            if (r->call != first_call + (uint64_t)c)
                continue;
            assert_true(r->end_ns >= r->start_ns);
            assert_int_equal(r->status, SPMD_OK);
            if (r->kind == SPMD_TRACE_CALL) {
                call = r;
                continue;
            }
            assert_non_null(call); /* the call is recorded before what runs in it */
            assert_true(r->start_ns >= call->start_ns && r->end_ns <= call->end_ns);
            assert_int_equal(r->mesh_call, (uint64_t)c + 1);
            int d = r->device - first;
            assert_true(d >= 0 && d < nl);
            if (r->kind == SPMD_TRACE_FN) {
                assert_string_equal(r->what, "fn");
                fn_in[d] = r->digest_in, fn_out[d] = r->digest_out;
            } else {
                assert_int_equal(r->kind, SPMD_TRACE_COLLECTIVE);
                assert_int_equal(r->seq, 1);
                assert_string_equal(r->what, "psum float32[2] over ('i') #1");
                if (fp)
                    assert_true(r->fingerprint == fp); /* alike on every device */
                fp = r->fingerprint;
                coll_in[d] = r->digest_in, coll_out[d] = r->digest_out;
            }
        }
        assert_non_null(call);
        char want[64];
        snprintf(want, sizeof want, "spmd_shard_map on Mesh('i': %d, axis_types=(Auto,))", ndev);
        assert_true(strncmp(call->what, want, strlen(want)) == 0);
        assert_int_equal(call->device, -1);
        assert_int_equal(call->mesh_call, (uint64_t)c + 1);
        for (int d = 0; d < nl && !host_digests; d++) /* none of device memory */
            assert_true(fn_in[d] == 0 && fn_out[d] == 0 && coll_in[d] == 0 && coll_out[d] == 0);
        for (int d = 0; d < nl && host_digests; d++) {
            if (!(fn_in[d] != 0 && coll_in[d] == fn_in[d]))
                fail_msg("device %d: fn in %llx, psum in %llx", d, (unsigned long long)fn_in[d],
                         (unsigned long long)coll_in[d]);
            assert_true(coll_out[d] != 0 && fn_out[d] == coll_out[d]);
            assert_true(coll_out[d] == coll_out[0]); /* the psum is the same everywhere */
            if (d > 0) /* each device's block differs from the others (host_x) */
                assert_true(coll_in[d] != coll_in[0]);
        }
    }
    free(t.r);
    assert_ok(spmd_trace_stop());
    assert_int_equal(spmd_trace_active(), 0);
    read_file(dir, &t);
    assert_int_equal(t.h.state, SPMD_TRACE_STOPPED);
    int before = t.n;
    free(t.r);
    one_call(); /* nothing recorded once stopped */
    read_file(dir, &t);
    assert_int_equal(t.n, before);
    free(t.r);
    remove_dir(dir);
}

/* A ring of 64 records keeps the last 64, in order, and counts all. */
static void test_ring(void **state)
{
    (void)state;
    char dir[64];
    start_in_new_dir(dir, sizeof dir, 64, 0);
    int nl = spmd_local_device_count(), calls = 40;
    for (int c = 0; c < calls; c++)
        one_call();
    assert_ok(spmd_trace_stop());
    read_trace t;
    read_file(dir, &t);
    assert_int_equal((int)t.h.next, calls * (1 + 2 * nl));
    assert_int_equal(t.n, 64);
    for (int k = 0; k < t.n; k++) {
        assert_int_equal(t.r[k].stamp, t.h.next - 63 + (uint64_t)k);
        assert_true(t.r[k].digest_in == 0 && t.r[k].digest_out == 0); /* none asked for */
    }
    free(t.r);
    remove_dir(dir);
}

static void test_refusals(void **state)
{
    (void)state;
    char dir[64];
    make_dir(dir, sizeof dir);
    assert_ok(spmd_trace_start(dir, NULL));
    assert_status(spmd_trace_start(dir, NULL), SPMD_ERR_INVALID_ARGUMENT, "spmd_trace_start",
                  "already running", "spmd_trace_stop");
    assert_ok(spmd_trace_stop());
    assert_ok(spmd_trace_stop()); /* none runs: nothing to do */
    spmd_trace_options o = SPMD_TRACE_OPTIONS_INIT;
    o.records = 10;
    assert_status(spmd_trace_start(dir, &o), SPMD_ERR_INVALID_ARGUMENT, "options.records is 10",
                  "64..");
    assert_status(spmd_trace_start("/proc/no/such/dir", NULL), SPMD_ERR_INVALID_ARGUMENT,
                  "cannot make the trace directory '/proc/no/such/dir'");
    assert_int_equal(spmd_trace_active(), 0);
    remove_dir(dir);
}

int main(void)
{
    spmd_test_init();
    me = spmd_process_index();
    ndev = spmd_device_count();
    if (ndev > MAX_DEVICES) {
        spmd_test_finish(0);
        return SPMD_TEST_SKIP;
    }
    SPMD_TEST_CHECK(!spmd_trace_active(), "a trace runs though SPMD_TRACE is unset");
    for (int k = 0; k < PER * ndev; k++)
        host_x[k] = (float)(k * 3 % 11) + 0.25f;
    spmd_test_line line = spmd_test_line_create(PER, host_x);
    mesh = line.mesh, split = line.split, replicated = line.replicated, g_x = line.x;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_refusals),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    spmd_test_line_destroy(&line);
    return spmd_test_finish(failed + spmd_test_failed_checks());
}
