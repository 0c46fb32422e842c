/*
 * spmd_process_allgather of an array on a mesh over the first half of the devices, called by
 * every process, as JAX's is: the processes outside the mesh get the same global arrays with no
 * shards from the same constructors (spmd_device_put, spmd_shard_map, which runs nothing there).
 * What the gather gives depends on where the mesh lies, as JAX's is_fully_addressable says:
 *   - the mesh spans several processes (4 x 2: processes 0 and 1): the global value, its global
 *     shape, on every process, processes 2 and 3 included;
 *   - one process holds the whole mesh and is the only process (1 x 8): the same, by P = 1;
 *   - one process holds the whole mesh and others hold none of it (2 x 4): host-local on
 *     process 0, global on process 1; the call fails at once on every process, naming both.
 * Values are checked against a host loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define COLS 3

static spmd_status column_sums(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "x");
}

int main(void)
{
    spmd_test_init();
    int n = spmd_device_count(), P = spmd_process_count(), me = spmd_process_index();
    int half = n / 2, per = spmd_local_device_count();
    if (half < 1 || n % 2) {
        printf("skipped: needs an even number of devices\n");
        spmd_test_finish(0);
        return SPMD_TEST_SKIP;
    }
    int failures = 0;
    int *ids = malloc((size_t)half * sizeof *ids);
    for (int d = 0; d < half; d++)
        ids[d] = d;
    const char *names[1] = {"x"};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &half, names, ids, half, &mesh));
    spmd_sharding *rows = NULL;
    assert_ok(spmd_sharding_create_parse(mesh, "'x'", &rows));
    float *host = malloc((size_t)half * COLS * sizeof *host);
    for (int k = 0; k < half * COLS; k++)
        host[k] = (float)(k * 3 % 11) - 5;
    int64_t shape[2] = {half, COLS};
    spmd_array *x = NULL;
    assert_ok(spmd_device_put(host, 2, shape, SPMD_DTYPE_F32, rows, &x));
    int holders = (half + per - 1) / per; /* processes 0 .. holders-1 hold the mesh */
    SPMD_TEST_CHECK(spmd_array_num_shards(x) ==
                        (me < holders ? (half - me * per < per ? half - me * per : per) : 0),
                    "process %d holds %d shards of x", me, spmd_array_num_shards(x));
    int fully = spmd_array_is_fully_addressable(x);
    SPMD_TEST_CHECK(fully == (holders == 1 && me == 0), "process %d: is_fully_addressable %d", me,
                    fully);
    int ndim = 0;
    int64_t got_shape[SPMD_MAX_RANK];
    assert_ok(spmd_process_allgather_shape(x, 1, &ndim, got_shape));
    int64_t want_rows = fully ? (int64_t)half * P : half;
    SPMD_TEST_CHECK(ndim == 2 && got_shape[0] == want_rows && got_shape[1] == COLS,
                    "process %d: the gather's shape is (%lld, %lld), want (%lld, %d)", me,
                    (long long)got_shape[0], (long long)got_shape[1], (long long)want_rows, COLS);
    float *out = calloc((size_t)want_rows * COLS, sizeof *out);
    spmd_status st = spmd_process_allgather(x, 1, out, (size_t)want_rows * COLS * sizeof *out);
    if (holders > 1 || P == 1) {
        SPMD_TEST_CHECK(st == SPMD_OK, "process %d: the gather failed: %s", me, spmd_last_error());
        for (int k = 0; st == SPMD_OK && k < half * COLS; k++)
            SPMD_TEST_CHECK(out[k] == host[k], "process %d: element %d is %g, want %g", me, k,
                            out[k], host[k]);
    } else {
        /* host-local on process 0, global elsewhere: a mismatch at once, both named */
        SPMD_TEST_CHECK(st == SPMD_ERR_COLLECTIVE_MISMATCH && strstr(spmd_last_error(), "global") &&
                            strstr(spmd_last_error(), "host-local"),
                        "process %d: %s: %s", me, spmd_status_name(st), spmd_last_error());
        if (me == 0)
            printf("refused: %s\n", spmd_last_error());
    }
    free(out);
    /* shard_map on the mesh from every process: those outside run nothing and get no shards;
     * the column sums, gathered where the gather gives global values */
    spmd_spec *split = NULL, *replicated = NULL;
    assert_ok(spmd_spec_parse("'x'", &split));
    assert_ok(spmd_spec_parse("", &replicated));
    const spmd_out_desc sums_desc = {2, {1, COLS}, SPMD_DTYPE_F32};
    spmd_array *y = NULL;
    st = spmd_shard_map(mesh, column_sums, NULL, 1, &x, (const spmd_spec *[]){split}, 1, &sums_desc,
                        (const spmd_spec *[]){replicated}, NULL, &y);
    SPMD_TEST_CHECK(st == SPMD_OK, "process %d: shard_map: %s", me, spmd_last_error());
    if (st == SPMD_OK) {
        SPMD_TEST_CHECK(spmd_array_num_shards(y) == spmd_array_num_shards(x),
                        "process %d: y has %d shards, x %d", me, spmd_array_num_shards(y),
                        spmd_array_num_shards(x));
        float sums[COLS];
        st = holders > 1 || P == 1 ? spmd_process_allgather(y, 1, sums, sizeof sums) : SPMD_OK;
        SPMD_TEST_CHECK(st == SPMD_OK, "process %d: the gather of y failed: %s", me,
                        spmd_last_error());
        for (int c = 0; st == SPMD_OK && (holders > 1 || P == 1) && c < COLS; c++) {
            float want = 0;
            for (int r = 0; r < half; r++)
                want += host[r * COLS + c];
            SPMD_TEST_CHECK(sums[c] == want, "process %d: column %d sums to %g, want %g", me, c,
                            sums[c], want);
        }
    }
    spmd_spec_destroy(split);
    spmd_spec_destroy(replicated);
    spmd_array_destroy(y);
    spmd_array_destroy(x);
    spmd_sharding_destroy(rows);
    spmd_mesh_destroy(mesh);
    free(host);
    free(ids);
    if (me == 0)
        printf("%d processes x %d devices: the gather of a half-mesh array %s\n", P, per,
               holders > 1 || P == 1 ? "gave its global value everywhere"
                                     : "was refused everywhere");
    return spmd_test_finish(failures + spmd_test_failed_checks());
}
