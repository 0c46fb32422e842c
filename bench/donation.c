/*
 * Memory of a donated update loop: 100 steps of p = p / 2 + 1 over every device, each step
 * donating p (SPMD_DONATE: its memory recycled through the pool; SPMD_DONATE_IN_PLACE: fn works
 * in p's memory) or not donating it (the caller destroys the old p after each step: the
 * baseline). Prints the process's peak and current resident memory (VmHWM, VmRSS) after the
 * set-up, after step 10 and after the last step, and checks the values against a host loop.
 *
 *   SPMD_NUM_CPU_DEVICES=4 bench_donation donate|in_place|none [MiB per device] [steps]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "%s failed: %s\n", #call, spmd_last_error());                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* VmHWM and VmRSS of this process, in MiB. */
static void memory_mib(double *peak, double *now)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    *peak = *now = -1;
    while (f && fgets(line, sizeof line, f)) {
        long kb = 0;
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            *peak = (double)kb / 1024;
        else if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            *now = (double)kb / 1024;
    }
    if (f)
        fclose(f);
}

static spmd_status halve(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                         void *user)
{
    (void)ctx, (void)nin, (void)nout, (void)user;
    const float *x = in[0].data;
    float *y = out[0].data;
    for (int64_t k = 0; k < spmd_block_size(&in[0]); k++)
        y[k] = x[k] / 2 + 1;
    return SPMD_OK;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "donate";
    int mib = argc > 2 ? atoi(argv[2]) : 64, steps = argc > 3 ? atoi(argv[3]) : 100;
    int donate = strcmp(mode, "donate") == 0     ? SPMD_DONATE
                 : strcmp(mode, "in_place") == 0 ? SPMD_DONATE_IN_PLACE
                 : strcmp(mode, "none") == 0     ? 0
                                                 : -1;
    if (donate < 0 || mib < 1 || steps < 1) {
        fprintf(stderr, "usage: %s donate|in_place|none [MiB per device] [steps]\n", argv[0]);
        return 2;
    }
    CHECK(spmd_init(NULL));
    int n = spmd_device_count();
    int64_t cols = (int64_t)mib << 18; /* floats per device */
    const char *axis = "i";
    spmd_mesh *mesh = NULL;
    spmd_sharding *rows = NULL;
    CHECK(spmd_mesh_create(1, &n, &axis, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i', None", &rows));
    int64_t shape[2] = {n, cols};
    spmd_array *p = NULL;
    float *host = calloc((size_t)(n * cols), sizeof *host); /* p = 0 */
    if (!host)
        return 1;
    CHECK(spmd_device_put(host, 2, shape, SPMD_DTYPE_F32, rows, &p));
    free(host);
    const spmd_spec *spec[1] = {spmd_sharding_spec(rows)};
    spmd_out_desc desc = {2, {n, cols}, SPMD_DTYPE_F32};
    spmd_shard_map_options opts = SPMD_SHARD_MAP_OPTIONS_INIT;
    opts.donate = donate ? &donate : NULL;
    double peak, now;
    memory_mib(&peak, &now);
    printf("%s, %d devices x %d MiB, %d steps\n", mode, n, mib, steps);
    printf("after set-up:  peak %8.1f MiB  current %8.1f MiB\n", peak, now);
    float want = 0;
    for (int t = 1; t <= steps; t++) {
        spmd_array *next = NULL;
        CHECK(spmd_shard_map(mesh, halve, NULL, 1, &p, spec, 1, &desc, spec, &opts, &next));
        spmd_array_destroy(p);
        p = next;
        want = want / 2 + 1;
        if (t == 10 || t == steps) {
            memory_mib(&peak, &now);
            printf("after step %3d: peak %8.1f MiB  current %8.1f MiB\n", t, peak, now);
        }
    }
    int wrong = 0;
    for (int s = 0; s < spmd_array_num_shards(p); s++) {
        spmd_shard shard;
        CHECK(spmd_array_shard(p, s, &shard));
        const float *x = shard.data; /* cpu devices: host memory */
        for (int64_t k = 0; k < cols; k += 4099)
            wrong += x[k] != want;
    }
    printf("#wrong %d\n", wrong);
    spmd_array_destroy(p);
    spmd_sharding_destroy(rows);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return wrong != 0;
}
