/*
 * Soak: 10 000 shard_map calls with mixed collectives (psum, all_gather, ppermute, pmax,
 * psum_scatter) on fresh arrays each call, every result checked against a host reference;
 * resident memory and open file descriptors are sampled every 1 000 calls and must stay flat
 * from call 1 000 on (leaks show up as steady growth). Label `soak`, outside the default run:
 *
 *   ctest --test-dir build -L soak --output-on-failure
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

enum { CALLS = 10000, SAMPLE_EVERY = 1000, COLS = 4 };
/* Allowed growth of resident memory between call 1 000 and the last call: the allocator's
 * arenas settle within it; a leak of even 100 bytes per call exceeds it. */
#define RSS_SLACK_BYTES (768L << 10)

static long resident_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory stream itself */
}

/* Each device: psum and pmax of its row, the gathered rows, its left neighbour's row, and the
 * reduce-scattered sum of a (n, COLS) block of its row repeated. */
static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin;
    (void)nout;
    const int *n = user;
    spmd_status st = spmd_psum(ctx, &in[0], &out[0], "i");
    if (st == SPMD_OK)
        st = spmd_pmax(ctx, &in[0], &out[1], "i");
    if (st == SPMD_OK)
        st = spmd_all_gather_invariant(ctx, &in[0], &out[2], "i", 0, 1);
    int pairs[2 * SPMD_TEST_MAX_DEVICES];
    for (int k = 0; k < *n; k++) {
        pairs[2 * k] = k;
        pairs[2 * k + 1] = (k + 1) % *n;
    }
    if (st == SPMD_OK)
        st = spmd_ppermute(ctx, &in[0], &out[3], "i", pairs, *n);
    spmd_block repeated;
    int64_t shape[2] = {*n, COLS};
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, shape, SPMD_DTYPE_F32, &repeated);
    for (int k = 0; st == SPMD_OK && k < *n * COLS; k++)
        ((float *)repeated.data)[k] = ((const float *)in[0].data)[k % COLS];
    if (st == SPMD_OK)
        st = spmd_psum_scatter(ctx, &repeated, &out[4], "i", 0, 1);
    return st;
}

static float value(int call, int row, int col) { return (float)((row * COLS + col + call) % 97); }

/* Checks output `k` of call `call` on this process's first shard; returns the mismatches. */
static int check(spmd_array *const *outs, int call, int n)
{
    int bad = 0;
    float got[SPMD_TEST_MAX_DEVICES * COLS];
    spmd_shard s;
    for (int k = 0; k < 5; k++) {
        if (spmd_array_num_shards(outs[k]) == 0)
            continue;
        if (spmd_array_shard(outs[k], 0, &s) != SPMD_OK ||
            spmd_array_shard_to_host(outs[k], 0, got, sizeof got) != SPMD_OK)
            return 1;
        int row0 = (int)s.index.start[0], rows = (int)(s.index.stop[0] - s.index.start[0]);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < COLS; c++) {
                float want = 0;
                if (k == 0 || k == 4) { /* psum; psum_scatter of the repeated rows */
                    for (int q = 0; q < n; q++)
                        want += value(call, q, c);
                } else if (k == 1) {
                    for (int q = 0; q < n; q++)
                        want = q == 0 || value(call, q, c) > want ? value(call, q, c) : want;
                } else if (k == 2) {
                    want = value(call, r, c);
                } else { /* device at row p receives row p - 1 */
                    want = value(call, (row0 + r + n - 1) % n, c);
                }
                bad += got[r * COLS + c] != want;
            }
    }
    return bad;
}

int main(void)
{
    spmd_test_init();
    int n = spmd_device_count(), failures = 0;
    if (n > SPMD_TEST_MAX_DEVICES) {
        fprintf(stderr, "soak: at most %d devices\n", SPMD_TEST_MAX_DEVICES);
        return spmd_test_finish(1);
    }
    const char *names[1] = {"i"};
    spmd_mesh *mesh = NULL;
    spmd_spec *rows = NULL, *rep = NULL;
    spmd_sharding *sharding = NULL;
    assert_ok(spmd_mesh_create(1, &n, names, NULL, 0, &mesh));
    assert_ok(spmd_spec_parse("'i'", &rows));
    assert_ok(spmd_spec_parse("", &rep));
    assert_ok(spmd_sharding_create(mesh, rows, &sharding));
    const spmd_spec *in_specs[1] = {rows};
    const spmd_spec *out_specs[5] = {rep, rep, rep, rows, rows};
    spmd_out_desc descs[5] = {{2, {1, COLS}, SPMD_DTYPE_F32},
                              {2, {1, COLS}, SPMD_DTYPE_F32},
                              {2, {n, COLS}, SPMD_DTYPE_F32},
                              {2, {n, COLS}, SPMD_DTYPE_F32},
                              {2, {n, COLS}, SPMD_DTYPE_F32}};
    float *host = malloc((size_t)n * COLS * sizeof *host);
    long rss_first = 0, rss_last = 0;
    int fds_first = 0, fds_last = 0;
    int64_t shape[2] = {n, COLS};
    for (int call = 1; call <= CALLS && failures == 0; call++) {
        for (int r = 0; r < n; r++)
            for (int c = 0; c < COLS; c++)
                host[r * COLS + c] = value(call, r, c);
        spmd_array *x = NULL, *outs[5] = {NULL};
        spmd_status st = spmd_device_put(host, 2, shape, SPMD_DTYPE_F32, sharding, &x);
        if (st == SPMD_OK)
            st = spmd_shard_map(mesh, body, &n, 1, &x, in_specs, 5, descs, out_specs, NULL, outs);
        if (st != SPMD_OK) {
            fprintf(stderr, "call %d: %s\n", call, spmd_last_error());
            failures++;
        } else if (check(outs, call, n) != 0) {
            fprintf(stderr, "call %d: wrong values\n", call);
            failures++;
        }
        spmd_array_destroy(x);
        for (int k = 0; k < 5; k++)
            spmd_array_destroy(outs[k]);
        if (call % SAMPLE_EVERY == 0) {
            rss_last = resident_bytes();
            fds_last = open_fds();
            if (call == SAMPLE_EVERY) {
                rss_first = rss_last;
                fds_first = fds_last;
            }
            printf("process %d call %d: resident %ld KiB, open fds %d\n", spmd_process_index(),
                   call, rss_last >> 10, fds_last);
            fflush(stdout);
        }
    }
    if (failures == 0 && (rss_last - rss_first > RSS_SLACK_BYTES || fds_last != fds_first)) {
        fprintf(stderr,
                "process %d: resident memory %ld -> %ld KiB, open fds %d -> %d between call %d "
                "and %d (allowed: %ld KiB growth, no new fd)\n",
                spmd_process_index(), rss_first >> 10, rss_last >> 10, fds_first, fds_last,
                SAMPLE_EVERY, CALLS, RSS_SLACK_BYTES >> 10);
        failures++;
    }
    free(host);
    spmd_sharding_destroy(sharding);
    spmd_spec_destroy(rows);
    spmd_spec_destroy(rep);
    spmd_mesh_destroy(mesh);
    return spmd_test_finish(failures);
}
