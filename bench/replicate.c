/*
 * bench/replicate: spmd_device_put_replicated against stacking n host copies then device_put
 * of the stack, in the same run: time and peak host memory beyond the device buffers
 * (CPU devices keep their buffers in host memory, so those are subtracted), as a multiple of
 * one copy of the value (the caller's own). Peak resident memory is read from VmHWM after
 * resetting it through /proc/self/clear_refs.
 *
 *   SPMD_NUM_CPU_DEVICES=8 bench_replicate [--min-bytes N] [--max-bytes N] [--json FILE]
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define CHECK(call) BENCH_CHECK("bench_replicate", call)

/* A field of /proc/self/status in bytes ("VmHWM", "VmRSS"). */
static long status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t len = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':')
            kb = atol(line + len + 1);
    if (f)
        fclose(f);
    return kb * 1024;
}

static int reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

typedef struct measure {
    double seconds;
    long extra_host; /* peak resident bytes beyond the start and the device buffers */
    int wrong;
} measure;

static int check(const spmd_array *x, const float *value, size_t bytes)
{
    int wrong = 0;
    for (int s = 0; s < spmd_array_num_shards(x); s++) {
        spmd_shard shard;
        CHECK(spmd_array_shard(x, s, &shard));
        wrong += memcmp(shard.data, value, bytes) != 0;
    }
    return wrong;
}

static measure run(int stacked, const float *value, size_t bytes, const int *ids, int n)
{
    int64_t shape[1] = {(int64_t)(bytes / sizeof(float))};
    measure m = {0, 0, 0};
    long before = status_bytes("VmRSS");
    reset_peak();
    double start = bench_now_s();
    spmd_array *x = NULL;
    if (!stacked) {
        CHECK(spmd_device_put_replicated(value, 1, shape, SPMD_DTYPE_F32, ids, n, &x));
    } else { /* the legacy way: n host copies, then shard the stack */
        char *stack = malloc(bytes * (size_t)n);
        for (int i = 0; i < n; i++)
            memcpy(stack + bytes * (size_t)i, value, bytes);
        const char *axis = "stacked";
        spmd_mesh *mesh = NULL;
        spmd_sharding *sh = NULL;
        CHECK(spmd_mesh_create(1, &n, &axis, ids, n, &mesh));
        CHECK(spmd_sharding_create_parse(mesh, "'stacked'", &sh));
        int64_t full[2] = {n, shape[0]};
        CHECK(spmd_device_put(stack, 2, full, SPMD_DTYPE_F32, sh, &x));
        spmd_sharding_destroy(sh);
        spmd_mesh_destroy(mesh);
        free(stack);
    }
    m.seconds = bench_now_s() - start;
    m.extra_host = status_bytes("VmHWM") - before - (long)(bytes * (size_t)n);
    if (m.extra_host < 0)
        m.extra_host = 0;
    m.wrong = check(x, value, bytes);
    spmd_array_destroy(x);
    return m;
}

int main(int argc, char **argv)
{
    size_t min_bytes = (size_t)1 << 20, max_bytes = (size_t)64 << 20;
    const char *json_path = NULL;
    static const struct option options[] = {{"min-bytes", required_argument, NULL, 'm'},
                                            {"max-bytes", required_argument, NULL, 'M'},
                                            {"json", required_argument, NULL, 'j'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    for (int c; (c = getopt_long(argc, argv, "", options, NULL)) != -1;) {
        if (c == 'm')
            min_bytes = strtoull(optarg, NULL, 10);
        else if (c == 'M')
            max_bytes = strtoull(optarg, NULL, 10);
        else if (c == 'j')
            json_path = optarg;
        else {
            printf("usage: bench_replicate [--min-bytes N] [--max-bytes N] [--json FILE]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (min_bytes < sizeof(float) || max_bytes < min_bytes) {
        fprintf(stderr, "bench_replicate: need 4 <= --min-bytes <= --max-bytes\n");
        return 2;
    }
    /* Every large block straight from and back to the kernel: glibc's sliding mmap threshold
     * would otherwise keep freed blocks resident and hide the next allocation from VmHWM. */
    mallopt(M_MMAP_THRESHOLD, 1 << 16);
    /* Fresh device buffers every time: buffers reused from libspmd's pool are already resident
     * and would hide the device memory this measurement subtracts. */
    setenv("SPMD_BUFFER_POOL_MB", "0", 1);
    CHECK(spmd_init(NULL));
    int total = spmd_local_device_count();
    if (!reset_peak())
        printf("# /proc/self/clear_refs is not writable: peak memory figures are not reset\n");
    cJSON *root = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(root, "rows");
    printf("# libspmd bench_replicate: %d device(s); host memory as a multiple of one copy\n",
           total);
    printf("# %7s %10s %12s %10s %12s %10s %7s\n", "devices", "bytes", "replicated_us", "host_x",
           "stacked_us", "host_x", "#wrong");
    for (int n = 2; n <= total; n *= 2) {
        int ids[256];
        for (int i = 0; i < n; i++)
            ids[i] = spmd_local_device_id(i);
        for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
            bytes = bytes / sizeof(float) * sizeof(float);
            float *value = malloc(bytes);
            for (size_t i = 0; i < bytes / sizeof(float); i++)
                value[i] = (float)i * 0.5f;
            measure ours = run(0, value, bytes, ids, n), base = run(1, value, bytes, ids, n);
            /* the caller's copy counts as one */
            double ours_x = 1.0 + (double)ours.extra_host / (double)bytes;
            double base_x = 1.0 + (double)base.extra_host / (double)bytes;
            printf("  %7d %10zu %12.1f %10.2f %12.1f %10.2f %7d\n", n, bytes, ours.seconds * 1e6,
                   ours_x, base.seconds * 1e6, base_x, ours.wrong + base.wrong);
            cJSON *row = cJSON_CreateObject();
            cJSON_AddNumberToObject(row, "devices", n);
            cJSON_AddNumberToObject(row, "bytes", (double)bytes);
            cJSON_AddNumberToObject(row, "replicated_us", ours.seconds * 1e6);
            cJSON_AddNumberToObject(row, "replicated_host_copies", ours_x);
            cJSON_AddNumberToObject(row, "stacked_us", base.seconds * 1e6);
            cJSON_AddNumberToObject(row, "stacked_host_copies", base_x);
            cJSON_AddNumberToObject(row, "wrong", ours.wrong + base.wrong);
            cJSON_AddItemToArray(rows, row);
            free(value);
        }
    }
    bench_write_json(root, json_path);
    cJSON_Delete(root);
    CHECK(spmd_finalize());
    return 0;
}
