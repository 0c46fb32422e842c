/*
 * bench/unreplicate: the legacy `x[0]` of a stacked-replica array, two ways, in the same run:
 * spmd_unreplicate (this process's first shard, viewed without its leading axis) against
 * gather-then-index (the whole stacked array to the host, then slice 0 onto a device), for 2 to
 * all devices and shards of 1 KiB to 64 MiB. Bytes moved: what each copies (0 for unreplicate,
 * checked by comparing the result's buffer with shard 0's).
 *
 *   SPMD_NUM_CPU_DEVICES=8 bench_unreplicate [--min-bytes N] [--max-bytes N] [--iters N]
 *                                            [--json FILE]
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define CHECK(call) BENCH_CHECK("bench_unreplicate", call)

/* Gather-then-index: the whole array to the host, slice 0 back onto its first device. */
static size_t gather_then_index(const spmd_array *x, void *all, size_t slice, spmd_array **out)
{
    int n = (int)spmd_array_shape(x)[0];
    spmd_shard first;
    CHECK(spmd_array_to_host(x, all, slice * (size_t)n));
    CHECK(spmd_array_shard(x, 0, &first));
    int64_t shape[1] = {(int64_t)(slice / sizeof(float))};
    CHECK(spmd_array_create_on_device(first.device_id, all, 1, shape, SPMD_DTYPE_F32, out));
    return slice * (size_t)n + slice;
}

int main(int argc, char **argv)
{
    size_t min_bytes = 1024, max_bytes = (size_t)64 << 20;
    int iters = 20;
    const char *json_path = NULL;
    static const struct option options[] = {{"min-bytes", required_argument, NULL, 'm'},
                                            {"max-bytes", required_argument, NULL, 'M'},
                                            {"iters", required_argument, NULL, 'i'},
                                            {"json", required_argument, NULL, 'j'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    for (int c; (c = getopt_long(argc, argv, "", options, NULL)) != -1;) {
        if (c == 'm')
            min_bytes = strtoull(optarg, NULL, 10);
        else if (c == 'M')
            max_bytes = strtoull(optarg, NULL, 10);
        else if (c == 'i')
            iters = atoi(optarg);
        else if (c == 'j')
            json_path = optarg;
        else {
            printf("usage: bench_unreplicate [--min-bytes N] [--max-bytes N] [--iters N] "
                   "[--json FILE]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (min_bytes < sizeof(float) || max_bytes < min_bytes || iters < 1) {
        fprintf(stderr, "bench_unreplicate: need 4 <= --min-bytes <= --max-bytes, --iters >= 1\n");
        return 2;
    }
    CHECK(spmd_init(NULL));
    int total = spmd_local_device_count();
    cJSON *root = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(root, "rows");
    printf("# libspmd bench_unreplicate: %d device(s), median of %d\n", total, iters);
    printf("# %7s %10s %12s %12s %12s %12s %8s\n", "devices", "slice", "unrepl_us", "unrepl_B",
           "gather_us", "gather_B", "speedup");
    double *t_ours = malloc((size_t)iters * sizeof *t_ours);
    double *t_base = malloc((size_t)iters * sizeof *t_base);
    for (int n = 2; n <= total; n *= 2) {
        int ids[256];
        for (int i = 0; i < n; i++)
            ids[i] = spmd_local_device_id(i);
        for (size_t slice = min_bytes; slice <= max_bytes; slice *= 16) {
            size_t count = slice / sizeof(float);
            slice = count * sizeof(float);
            float *value = malloc(slice), *all = malloc(slice * (size_t)n);
            for (size_t i = 0; i < count; i++)
                value[i] = (float)i;
            int64_t shape[1] = {(int64_t)count};
            spmd_array *x = NULL;
            CHECK(spmd_device_put_replicated(value, 1, shape, SPMD_DTYPE_F32, ids, n, &x));
            spmd_shard first;
            CHECK(spmd_array_shard(x, 0, &first));
            size_t ours_bytes = 0, base_bytes = 0;
            long wrong = 0;
            /* separate loops: the baseline's traffic would otherwise evict what unreplicate
             * touches and charge it a cold start */
            for (int k = 0; k < iters; k++) {
                spmd_array *u = NULL;
                double start = bench_now_s();
                CHECK(spmd_unreplicate(x, &u));
                t_ours[k] = bench_now_s() - start;
                spmd_shard view;
                CHECK(spmd_array_shard(u, 0, &view));
                ours_bytes = view.data == first.data ? 0 : slice;
                if (k == iters - 1) /* checked once: reading the slice would evict the rest */
                    wrong += memcmp(view.data, value, slice) != 0;
                spmd_array_destroy(u);
            }
            for (int k = 0; k < iters; k++) {
                spmd_array *g = NULL;
                double start = bench_now_s();
                base_bytes = gather_then_index(x, all, slice, &g);
                t_base[k] = bench_now_s() - start;
                spmd_shard gs;
                CHECK(spmd_array_shard(g, 0, &gs));
                wrong += memcmp(gs.data, value, slice) != 0;
                spmd_array_destroy(g);
            }
            double ours = bench_quantile(t_ours, iters, 0.5) * 1e6,
                   base = bench_quantile(t_base, iters, 0.5) * 1e6;
            printf("  %7d %10zu %12.2f %12zu %12.1f %12zu %8.0f%s\n", n, slice, ours, ours_bytes,
                   base, base_bytes, base / ours, wrong ? "  WRONG" : "");
            cJSON *row = cJSON_CreateObject();
            cJSON_AddNumberToObject(row, "devices", n);
            cJSON_AddNumberToObject(row, "slice_bytes", (double)slice);
            cJSON_AddNumberToObject(row, "unreplicate_us", ours);
            cJSON_AddNumberToObject(row, "unreplicate_bytes_moved", (double)ours_bytes);
            cJSON_AddNumberToObject(row, "gather_then_index_us", base);
            cJSON_AddNumberToObject(row, "gather_then_index_bytes_moved", (double)base_bytes);
            cJSON_AddNumberToObject(row, "wrong", (double)wrong);
            cJSON_AddItemToArray(rows, row);
            spmd_array_destroy(x);
            free(value);
            free(all);
        }
    }
    bench_write_json(root, json_path);
    cJSON_Delete(root);
    free(t_ours);
    free(t_base);
    CHECK(spmd_finalize());
    return 0;
}
