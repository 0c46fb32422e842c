/*
 * A mesh over half of the devices: the first n/2 by id, which under 4 processes x 2 devices
 * belong to processes 0 and 1 only. Every process runs the same program:
 *
 *   1. spmd_device_put of an (n, 3) array, P('x') on the subset mesh: processes without a
 *      device of the mesh take part and get an array with 0 shards;
 *   2. shard_map with a psum of the column sums over the subset mesh: only the processes that
 *      own a device of the mesh call it (the others describe the same P() result with no
 *      shards, through spmd_array_from_single_device_arrays with no arrays);
 *   3. spmd_reshard of the sums onto a mesh over all devices, P(): every process now holds
 *      them and prints the same total;
 *   4. the input resharded onto all devices (one row each) and back onto the subset mesh.
 *
 * Each step prints the shards this process holds (device, index box, values) and, for the
 * reshards, the bytes this process received from other processes.
 *
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./subset_mesh
 *   SPMD_NUM_CPU_DEVICES=8 ./subset_mesh
 */
#include <stdio.h>
#include <stdlib.h>

#include <spmd.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "subset_mesh: %s failed (%s): %s\n", #call, spmd_status_name(st_),     \
                    spmd_last_error());                                                            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define COLS 3
#define MAX_DEVICES 1024

/* Prints "process=p step=s shards=k", then one line per shard: device, index box, values; on
 * stderr, with everything else that depends on the layout: stdout (process 0's results) then
 * reads the same in every layout (spmd launch --layouts compares it). */
static void print_shards(const char *step, const spmd_array *x)
{
    const int me = spmd_process_index();
    fprintf(stderr, "process=%d step=%s shards=%d\n", me, step, spmd_array_num_shards(x));
    for (int i = 0; i < spmd_array_num_shards(x); i++) {
        spmd_shard shard;
        float block[MAX_DEVICES * COLS];
        char line[8192];
        CHECK(spmd_array_shard(x, i, &shard));
        CHECK(spmd_array_shard_to_host(x, i, block, sizeof block));
        size_t n = (size_t)snprintf(line, sizeof line, "process=%d step=%s device=%d index=[", me,
                                    step, shard.device_id);
        for (int d = 0; d < shard.index.ndim; d++)
            n += (size_t)snprintf(line + n, sizeof line - n, d ? ",%lld:%lld" : "%lld:%lld",
                                  (long long)shard.index.start[d], (long long)shard.index.stop[d]);
        n += (size_t)snprintf(line + n, sizeof line - n, "] values=[");
        for (size_t k = 0; k < shard.nbytes / sizeof(float) && n < sizeof line; k++)
            n += (size_t)snprintf(line + n, sizeof line - n, k ? " %g" : "%g", (double)block[k]);
        fprintf(stderr, "%s]\n", line);
    }
}

/* shard_map body: this device's column sums, then their sum over the (subset) mesh. */
static spmd_status column_sums(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin;
    (void)nout;
    (void)user;
    spmd_block partial;
    const int64_t cols = in[0].shape[1];
    spmd_status st = spmd_ctx_alloc(ctx, 1, &cols, SPMD_DTYPE_F32, &partial);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &in[0], 0, &partial);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &partial, &out[0], "x");
    return st;
}

/* spmd_reshard with the bytes it received printed. */
static spmd_array *reshard(const char *step, spmd_array *x, const spmd_sharding *to)
{
    spmd_reshard_stats stats;
    spmd_reshard_options opts = SPMD_RESHARD_OPTIONS_INIT;
    opts.stats = &stats;
    spmd_array *out = NULL;
    CHECK(spmd_reshard(x, to, &opts, &out));
    fprintf(stderr, "process=%d step=%s received_bytes=%llu\n", spmd_process_index(), step,
            (unsigned long long)stats.bytes_received);
    print_shards(step, out);
    return out;
}

int main(void)
{
    CHECK(spmd_init(NULL));
    const int n = spmd_device_count(), me = spmd_process_index();
    if (n < 2 || n % 2 || n > MAX_DEVICES) {
        fprintf(stderr,
                "subset_mesh needs an even number of devices (2 to %d), got %d; set "
                "SPMD_NUM_CPU_DEVICES\n",
                MAX_DEVICES, n);
        spmd_finalize();
        return 2;
    }
    const int half = n / 2;
    int ids[MAX_DEVICES];
    for (int d = 0; d < half; d++)
        ids[d] = d;
    const char *axis = "x";
    spmd_mesh *subset = NULL, *all = NULL;
    CHECK(spmd_mesh_create(1, &half, &axis, ids, half, &subset));
    CHECK(spmd_mesh_create(1, &n, &axis, NULL, 0, &all));
    spmd_sharding *subset_rows = NULL, *subset_replicated = NULL, *all_rows = NULL,
                  *all_replicated = NULL;
    CHECK(spmd_sharding_create_parse(subset, "'x'", &subset_rows));
    CHECK(spmd_sharding_create_parse(subset, "", &subset_replicated));
    CHECK(spmd_sharding_create_parse(all, "'x'", &all_rows));
    CHECK(spmd_sharding_create_parse(all, "", &all_replicated));
    const int mine = spmd_mesh_num_local_devices(subset);
    fprintf(stderr, "process=%d subset_mesh_devices=%d local_devices_in_it=%d\n", me, half, mine);

    /* (n, 3) with x[i, j] = 3i + j + 1; identical on every process, as device_put wants. */
    float *host = malloc((size_t)n * COLS * sizeof *host);
    if (!host) {
        fprintf(stderr, "subset_mesh: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n * COLS; i++)
        host[i] = (float)(i + 1);
    const int64_t shape[2] = {n, COLS}, sums_shape[1] = {COLS};
    spmd_array *x = NULL, *sums = NULL;
    CHECK(spmd_device_put(host, 2, shape, SPMD_DTYPE_F32, subset_rows, &x));
    print_shards("put", x);

    if (mine > 0) {
        spmd_spec *in_spec = NULL, *out_spec = NULL;
        CHECK(spmd_spec_parse("'x'", &in_spec));
        CHECK(spmd_spec_parse("", &out_spec));
        const spmd_out_desc desc = {1, {COLS}, SPMD_DTYPE_F32};
        CHECK(spmd_shard_map(subset, column_sums, NULL, 1, &x, (const spmd_spec *const *)&in_spec,
                             1, &desc, (const spmd_spec *const *)&out_spec, NULL, &sums));
        spmd_spec_destroy(in_spec);
        spmd_spec_destroy(out_spec);
    } else {
        /* Not in the mesh: shard_map is not ours to call, but the reshard below is, on an
         * array that describes the same result and holds none of it. */
        fprintf(stderr, "process=%d step=psum not_in_mesh\n", me);
        CHECK(spmd_array_from_single_device_arrays(1, sums_shape, SPMD_DTYPE_F32, subset_replicated,
                                                   0, NULL, &sums));
    }
    print_shards("psum", sums);

    spmd_array *sums_all = reshard("sums_to_all", sums, all_replicated);
    float total_cols[COLS];
    CHECK(spmd_array_to_host(sums_all, total_cols, sizeof total_cols));
    double total = 0;
    for (int j = 0; j < COLS; j++)
        total += total_cols[j];
    fprintf(stderr, "process=%d total=%g\n", me, total);
    if (me == 0)
        printf("column sums of x [%g %g %g], total %g\n", total_cols[0], total_cols[1],
               total_cols[2], total);

    spmd_array *x_all = reshard("x_to_all", x, all_rows);
    spmd_array *x_back = reshard("x_back", x_all, subset_rows);

    spmd_array_destroy(x_back);
    spmd_array_destroy(x_all);
    spmd_array_destroy(sums_all);
    spmd_array_destroy(sums);
    spmd_array_destroy(x);
    free(host);
    spmd_sharding_destroy(subset_rows);
    spmd_sharding_destroy(subset_replicated);
    spmd_sharding_destroy(all_rows);
    spmd_sharding_destroy(all_replicated);
    spmd_mesh_destroy(subset);
    spmd_mesh_destroy(all);
    CHECK(spmd_finalize());
    return 0;
}
