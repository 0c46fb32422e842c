/*
 * What the replication check costs: a shard_map whose fn psums a block into a replicated
 * output, unchecked (check_replication 0), checked (1: the psum proves the block, nothing is
 * hashed) and strict (SPMD_CHECK_REPLICATION_STRICT: every block hashed), alternated in rounds
 * in one run. Usage: bench_replication_check [--bytes N] [--iters N] [--rounds N] [--json F]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#ifndef SPMD_CHECK_REPLICATION_STRICT
#define SPMD_CHECK_REPLICATION_STRICT 2 /* an older libspmd: 2 checks as 1 did (hashing) */
#endif

static const char *const program = "bench_replication_check";

static spmd_status psum_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "i");
}

int main(int argc, char **argv)
{
    long long bytes = 16 << 20;
    int iters = 10, rounds = 3;
    const char *json = NULL;
    for (int a = 1; a < argc; a++) {
        if (a + 1 < argc && strcmp(argv[a], "--bytes") == 0)
            bytes = atoll(argv[++a]);
        else if (a + 1 < argc && strcmp(argv[a], "--iters") == 0)
            iters = atoi(argv[++a]);
        else if (a + 1 < argc && strcmp(argv[a], "--rounds") == 0)
            rounds = atoi(argv[++a]);
        else if (a + 1 < argc && strcmp(argv[a], "--json") == 0)
            json = argv[++a];
        else {
            fprintf(stderr, "usage: %s [--bytes N] [--iters N] [--rounds N] [--json FILE]\n",
                    program);
            return 2;
        }
    }
    if (bytes < 4 || iters < 1 || iters > 100000 || rounds < 1 || rounds > 1000) {
        fprintf(stderr, "%s: --bytes >= 4, --iters 1..100000, --rounds 1..1000\n", program);
        return 2;
    }
    BENCH_CHECK(program, spmd_init(NULL));
    int n = spmd_device_count();
    int64_t elems = bytes / 4;
    const char *names[1] = {"i"};
    spmd_mesh *mesh = NULL;
    spmd_spec *split = NULL, *replicated = NULL;
    spmd_sharding *sh = NULL;
    spmd_array *x = NULL;
    BENCH_CHECK(program, spmd_mesh_create(1, &n, names, NULL, 0, &mesh));
    BENCH_CHECK(program, spmd_spec_parse("'i'", &split));
    BENCH_CHECK(program, spmd_spec_parse("", &replicated));
    BENCH_CHECK(program, spmd_sharding_create(mesh, split, &sh));
    float *host = malloc((size_t)elems * (size_t)n * sizeof *host);
    if (!host)
        return 1;
    for (int64_t k = 0; k < elems * n; k++)
        host[k] = (float)(k % 17);
    const int64_t shape[1] = {elems * n};
    BENCH_CHECK(program, spmd_device_put(host, 1, shape, SPMD_DTYPE_F32, sh, &x));
    free(host);
    const spmd_out_desc desc = {1, {elems}, SPMD_DTYPE_F32};
    enum { VARIANTS = 3 };
    const int checks[VARIANTS] = {0, 1, SPMD_CHECK_REPLICATION_STRICT};
    const char *labels[VARIANTS] = {"unchecked", "checked (proven)", "strict (hashed)"};
    double *times[VARIANTS];
    for (int v = 0; v < VARIANTS; v++)
        times[v] = malloc((size_t)iters * (size_t)rounds * sizeof(double));
    for (int r = 0; r < rounds; r++)
        for (int v = 0; v < VARIANTS; v++)
            for (int i = -1; i < iters; i++) { /* one warm-up call per variant and round */
                spmd_shard_map_options o = SPMD_SHARD_MAP_OPTIONS_INIT;
                o.check_replication = checks[v];
                spmd_array *y = NULL;
                double t0 = bench_now_s();
                BENCH_CHECK(program, spmd_shard_map(mesh, psum_body, NULL, 1, &x,
                                                    (const spmd_spec *[]){split}, 1, &desc,
                                                    (const spmd_spec *[]){replicated}, &o, &y));
                double t = bench_now_s() - t0;
                spmd_array_destroy(y);
                if (i >= 0)
                    times[v][r * iters + i] = t;
            }
    double median[VARIANTS];
    for (int v = 0; v < VARIANTS; v++)
        median[v] = bench_quantile(times[v], iters * rounds, 0.5);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "processes", spmd_process_count());
    cJSON_AddNumberToObject(root, "devices", n);
    cJSON_AddNumberToObject(root, "bytes", (double)bytes);
    if (spmd_process_index() == 0) {
        printf("# %s: %d process(es), %d devices in all, a psum of %lld bytes into a replicated "
               "output\n",
               program, spmd_process_count(), n, bytes);
        for (int v = 0; v < VARIANTS; v++) {
            printf("%-18s median %.3f ms  ratio to unchecked %.2f\n", labels[v], median[v] * 1e3,
                   median[v] / median[0]);
            cJSON *row = cJSON_AddObjectToObject(root, v == 0   ? "unchecked"
                                                       : v == 1 ? "checked"
                                                                : "strict");
            cJSON_AddNumberToObject(row, "median_ms", median[v] * 1e3);
            cJSON_AddNumberToObject(row, "ratio", median[v] / median[0]);
        }
        bench_write_json(root, json);
    }
    cJSON_Delete(root);
    for (int v = 0; v < VARIANTS; v++)
        free(times[v]);
    spmd_array_destroy(x);
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(split);
    spmd_spec_destroy(replicated);
    spmd_mesh_destroy(mesh);
    spmd_finalize();
    return 0;
}
