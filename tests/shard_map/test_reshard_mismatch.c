/*
 * Processes that disagree about a reshard: every process returns SPMD_ERR_COLLECTIVE_MISMATCH
 * quoting both calls, no data lands in an array it was not meant for, and the next reshard
 * works. Two cases, with the processes split by parity:
 *   - the even processes make a reshard that moves data between processes, the odd ones one
 *     whose every part stays in its process (which once skipped the agreement, so that its next
 *     reshard was matched with the others' first);
 *   - every process moves data, the two halves to different target shardings.
 * Run with 2 and 4 processes of 2 devices. Values are checked element by element against the
 * global index; checks are recorded, not fatal, so that every process keeps making the same
 * calls.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int P, me, nfail;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "[process %d] %s:%d: check failed: %s: ", me, __FILE__, __LINE__,      \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            nfail++;                                                                               \
        }                                                                                          \
    } while (0)

/* Every element of every shard of x holds its global row-major index plus `offset`. */
static void check_values(const spmd_array *x, float offset, const char *what)
{
    int ndim = spmd_array_ndim(x);
    const int64_t *shape = spmd_array_shape(x);
    for (int s = 0; s < spmd_array_num_shards(x); s++) {
        spmd_shard info;
        if (spmd_array_shard(x, s, &info) != SPMD_OK) {
            CHECK(0, "%s: shard %d: %s", what, s, spmd_last_error());
            continue;
        }
        int64_t extent[2] = {1, 1}, start[2] = {0, 0};
        for (int d = 0; d < ndim; d++) {
            extent[d] = info.index.stop[d] - info.index.start[d];
            start[d] = info.index.start[d];
        }
        float *host = malloc((size_t)(extent[0] * extent[1]) * sizeof *host);
        if (spmd_array_shard_to_host(x, s, host, (size_t)(extent[0] * extent[1]) * sizeof *host) !=
            SPMD_OK) {
            CHECK(0, "%s: shard %d to host: %s", what, s, spmd_last_error());
            free(host);
            continue;
        }
        int64_t cols = ndim == 2 ? shape[1] : 1;
        for (int64_t i = 0; i < extent[0]; i++)
            for (int64_t j = 0; j < extent[1]; j++) {
                float want = (float)((start[0] + i) * cols + start[1] + j) + offset;
                float got = host[i * extent[1] + j];
                if (got != want) {
                    CHECK(got == want, "%s: shard %d element (%lld, %lld) is %g instead of %g",
                          what, s, (long long)i, (long long)j, got, want);
                    i = extent[0];
                    break;
                }
            }
        free(host);
    }
}

static spmd_array *filled(spmd_sharding *sh, int64_t rows, int64_t cols, float offset)
{
    float *v = malloc((size_t)(rows * cols) * sizeof *v);
    for (int64_t i = 0; i < rows * cols; i++)
        v[i] = (float)i + offset;
    int64_t shape[2] = {rows, cols};
    spmd_array *x = NULL;
    assert_ok(spmd_device_put(v, 2, shape, SPMD_DTYPE_F32, sh, &x));
    free(v);
    return x;
}

typedef struct layouts {
    spmd_mesh *grid;         /* (processes, local devices) */
    spmd_sharding *by_block; /* P('p', 'l'): one block per device */
    spmd_sharding *by_host;  /* P('p', None): each process keeps its rows, replicated inside */
    spmd_sharding *all;      /* P(): everything everywhere (needs every other process's rows) */
    spmd_sharding *by_cols;  /* P(None, ('p', 'l')): rows go everywhere */
} layouts;

static void layouts_build(layouts *l)
{
    int shape[2] = {P, spmd_local_device_count()};
    const char *names[2] = {"p", "l"};
    assert_ok(spmd_mesh_create(2, shape, names, NULL, 0, &l->grid));
    assert_ok(spmd_sharding_create_parse(l->grid, "'p', 'l'", &l->by_block));
    assert_ok(spmd_sharding_create_parse(l->grid, "'p', None", &l->by_host));
    assert_ok(spmd_sharding_create_parse(l->grid, "", &l->all));
    assert_ok(spmd_sharding_create_parse(l->grid, "None, ('p', 'l')", &l->by_cols));
}

static void layouts_free(layouts *l)
{
    spmd_sharding_destroy(l->by_block);
    spmd_sharding_destroy(l->by_host);
    spmd_sharding_destroy(l->all);
    spmd_sharding_destroy(l->by_cols);
    spmd_mesh_destroy(l->grid);
}

/* The mismatch on every process, both calls quoted, nothing returned, sources intact; then the
 * same reshard everywhere works. */
static void expect_mismatch(spmd_array *x, spmd_sharding *mine, const char *mine_spec,
                            const char *other_spec, spmd_sharding *next, const char *what)
{
    spmd_array *y = (spmd_array *)&nfail; /* must come back NULL */
    spmd_status st = spmd_reshard(x, mine, NULL, &y);
    const char *msg = spmd_last_error();
    CHECK(st == SPMD_ERR_COLLECTIVE_MISMATCH, "%s: %s instead of SPMD_ERR_COLLECTIVE_MISMATCH: %s",
          what, spmd_status_name(st), msg);
    CHECK(strstr(msg, mine_spec) && strstr(msg, other_spec),
          "%s: the message does not quote both %s and %s: %s", what, mine_spec, other_spec, msg);
    CHECK(y == NULL, "%s: the output is not reset to NULL", what);
    if (st == SPMD_OK)
        spmd_array_destroy(y);
    check_values(x, 0, what); /* nothing landed in the source */
    /* the next reshard, the same everywhere, works and moves the right values */
    spmd_array *z = NULL;
    st = spmd_reshard(x, next, NULL, &z);
    CHECK(st == SPMD_OK, "%s: the next reshard: %s", what, spmd_last_error());
    if (st == SPMD_OK)
        check_values(z, 0, what);
    spmd_array_destroy(z);
}

static void test_local_only_against_moving(void **state)
{
    (void)state;
    if (P < 2)
        skip();
    layouts l;
    layouts_build(&l);
    spmd_array *x = filled(l.by_block, 2 * P, 4 * spmd_local_device_count(), 0);
    /* even processes: to P() (moves rows between processes); odd: to P('p', None) (every row
     * stays in its process) */
    int even = me % 2 == 0;
    expect_mismatch(x, even ? l.all : l.by_host, even ? "-> P()" : "-> P('p', None)",
                    even ? "-> P('p', None)" : "-> P()", l.all, "local-only against moving");
    /* twice in a row, with the roles swapped: no call is matched with another's */
    expect_mismatch(x, even ? l.by_host : l.all, even ? "-> P('p', None)" : "-> P()",
                    even ? "-> P()" : "-> P('p', None)", l.by_cols, "swapped");
    spmd_array_destroy(x);
    layouts_free(&l);
}

static void test_different_targets(void **state)
{
    (void)state;
    if (P < 2)
        skip();
    layouts l;
    layouts_build(&l);
    spmd_array *x = filled(l.by_block, 2 * P, 4 * spmd_local_device_count(), 0);
    int even = me % 2 == 0;
    expect_mismatch(x, even ? l.all : l.by_cols, even ? "-> P()" : "-> P(None, ('p', 'l'))",
                    even ? "-> P(None, ('p', 'l'))" : "-> P()", l.by_cols, "different targets");
    spmd_array_destroy(x);
    layouts_free(&l);
}

int main(void)
{
    spmd_test_init();
    P = spmd_process_count();
    me = spmd_process_index();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_only_against_moving),
        cmocka_unit_test(test_different_targets),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    if (nfail)
        failures++;
    return spmd_test_finish(failures);
}
