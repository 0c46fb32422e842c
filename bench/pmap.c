/*
 * bench/pmap: dispatch of an empty pmap (one mapped input, no output) on 1, 2, 4, 8 ... devices
 * against the equivalent reused shard_map plan, in the same run: median and p99 per call.
 *
 *   SPMD_NUM_CPU_DEVICES=8 bench_pmap [--calls N] [--json FILE]
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

#define CHECK(call) BENCH_CHECK("bench_pmap", call)

static spmd_status empty(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                         void *user)
{
    (void)ctx, (void)nin, (void)in, (void)nout, (void)out, (void)user;
    return SPMD_OK;
}

int main(int argc, char **argv)
{
    int calls = 20000;
    const char *json_path = NULL;
    static const struct option options[] = {{"calls", required_argument, NULL, 'c'},
                                            {"json", required_argument, NULL, 'j'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    for (int c; (c = getopt_long(argc, argv, "", options, NULL)) != -1;) {
        if (c == 'c')
            calls = atoi(optarg);
        else if (c == 'j')
            json_path = optarg;
        else {
            printf("usage: bench_pmap [--calls N] [--json FILE]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (calls < 10) {
        fprintf(stderr, "bench_pmap: --calls must be at least 10\n");
        return 2;
    }
    CHECK(spmd_init(NULL));
    int total = spmd_local_device_count();
    double *t_pmap = malloc((size_t)calls * sizeof *t_pmap);
    double *t_plan = malloc((size_t)calls * sizeof *t_plan);
    cJSON *root = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(root, "rows");
    printf("# libspmd bench_pmap: empty fn, one mapped input, %d calls each, interleaved\n", calls);
    printf("# %7s %12s %12s %12s %12s %8s %8s\n", "devices", "pmap_med_us", "pmap_p99_us",
           "plan_med_us", "plan_p99_us", "med_x", "p99_x");
    for (int n = 1; n <= total; n *= 2) {
        const char *name = "i";
        spmd_mesh *mesh = NULL;
        spmd_spec *spec = NULL;
        spmd_sharding *sh = NULL;
        int devices[256];
        for (int d = 0; d < n; d++)
            devices[d] = d;
        CHECK(spmd_mesh_create(1, &n, &name, devices, n, &mesh));
        CHECK(spmd_spec_parse("'i'", &spec));
        CHECK(spmd_sharding_create(mesh, spec, &sh));
        float *host = calloc((size_t)n, sizeof *host);
        int64_t shape[2] = {n, 1};
        spmd_array *x = NULL;
        CHECK(spmd_device_put(host, 2, shape, SPMD_DTYPE_F32, sh, &x));
        spmd_in_desc desc = {2, {n, 1}, SPMD_DTYPE_F32};
        const spmd_spec *specs[1] = {spec};
        spmd_plan *plan = NULL;
        CHECK(spmd_plan_create(mesh, empty, NULL, 1, &desc, specs, 0, NULL, NULL, NULL, &plan));
        for (int k = 0; k < 100; k++) { /* warm-up: caches, plan creation */
            CHECK(spmd_pmap(empty, NULL, 1, &x, NULL, 0, NULL, NULL, "i", devices, n, NULL, NULL));
            CHECK(spmd_plan_execute(plan, &x, NULL));
        }
        for (int k = 0; k < calls; k++) {
            double start = bench_now_s();
            CHECK(spmd_pmap(empty, NULL, 1, &x, NULL, 0, NULL, NULL, "i", devices, n, NULL, NULL));
            t_pmap[k] = bench_now_s() - start;
            start = bench_now_s();
            CHECK(spmd_plan_execute(plan, &x, NULL));
            t_plan[k] = bench_now_s() - start;
        }
        double pm = bench_quantile(t_pmap, calls, 0.5) * 1e6;
        double pp = bench_quantile(t_pmap, calls, 0.99) * 1e6;
        double sm = bench_quantile(t_plan, calls, 0.5) * 1e6;
        double sp = bench_quantile(t_plan, calls, 0.99) * 1e6;
        printf("  %7d %12.2f %12.2f %12.2f %12.2f %8.2f %8.2f\n", n, pm, pp, sm, sp, pm / sm,
               pp / sp);
        cJSON *row = cJSON_CreateObject();
        cJSON_AddNumberToObject(row, "devices", n);
        cJSON_AddNumberToObject(row, "pmap_median_us", pm);
        cJSON_AddNumberToObject(row, "pmap_p99_us", pp);
        cJSON_AddNumberToObject(row, "plan_median_us", sm);
        cJSON_AddNumberToObject(row, "plan_p99_us", sp);
        cJSON_AddItemToArray(rows, row);
        spmd_plan_destroy(plan);
        spmd_array_destroy(x);
        free(host);
        spmd_sharding_destroy(sh);
        spmd_spec_destroy(spec);
        spmd_mesh_destroy(mesh);
    }
    bench_write_json(root, json_path);
    cJSON_Delete(root);
    free(t_pmap);
    free(t_plan);
    spmd_pmap_clear_cache();
    CHECK(spmd_finalize());
    return 0;
}
