/*
 * Migration guide, page 3: preparing inputs. Each process holds its rows of the global
 * x = arange(16).reshape(8, 2) (host-local, as pmap took them); two ways make the global array
 * on a (4, 2) mesh ('x', 'y') with P('x', 'y'): from host memory, and from an array already on
 * the process's devices (no copy). A function that needs whole rows (P('x', None)) refuses the
 * array as it is; spmd_reshard moves it, and only within processes. Needs 8 devices, an even
 * number per process.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_inputs
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_inputs
 */
#include <stdio.h>
#include <stdlib.h>

#include <spmd.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "%s failed: %s\n", #call, spmd_last_error());                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { ROWS = 8, COLS = 2 };

/* A row's sum, for blocks of whole rows: (2, 2) in, (2,) out. */
static spmd_status row_sums(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &in[0], 1, &out[0]);
}

static void *first_buffer(const spmd_array *a)
{
    spmd_shard shard;
    CHECK(spmd_array_shard(a, 0, &shard));
    return shard.data;
}

int main(void)
{
    CHECK(spmd_init(NULL));
    int L = spmd_local_device_count(), me = spmd_process_index();
    if (spmd_device_count() != 8 || L % 2 != 0) {
        fprintf(stderr,
                "needs 8 devices, an even number per process, got %d x %d; run with "
                "SPMD_NUM_CPU_DEVICES=8, or mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2\n",
                spmd_process_count(), L);
        spmd_finalize();
        return 2;
    }
    /* Process p's rows: x[R p : R (p + 1)] with R = 8 / P; 4 processes: (arange(4) + 4p). */
    int R = ROWS / spmd_process_count();
    float local[ROWS * COLS];
    for (int k = 0; k < R * COLS; k++)
        local[k] = (float)(me * R * COLS + k);

    /* [snippet:stitch] */
    const int grid[2] = {4, 2};
    const char *names[2] = {"x", "y"};
    spmd_mesh *mesh = NULL;
    spmd_sharding *blocks = NULL;
    CHECK(spmd_mesh_create(2, grid, names, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'x', 'y'", &blocks));

    /* 1. From host memory (jax.make_array_from_process_local_data): this process's rows. */
    const int64_t local_shape[2] = {R, COLS};
    spmd_array *x = NULL;
    CHECK(spmd_array_from_process_local_data(blocks, local, 2, local_shape, NULL, SPMD_DTYPE_F32,
                                             &x));

    /* 2. From a host-local array on this process's devices, laid out on the local mesh as the
     * spec says (host_local_array_to_global_array): the global array shares its buffers. */
    int local_grid[2], ids[8];
    CHECK(spmd_mesh_local_shape(mesh, local_grid)); /* (L/2, 2) */
    for (int k = 0; k < L; k++)
        ids[k] = spmd_mesh_local_device_id(mesh, k);
    spmd_mesh *local_mesh = NULL;
    spmd_sharding *local_blocks = NULL;
    spmd_array *x_local = NULL, *x2 = NULL;
    CHECK(spmd_mesh_create(2, local_grid, names, ids, L, &local_mesh));
    CHECK(spmd_sharding_create_parse(local_mesh, "'x', 'y'", &local_blocks));
    CHECK(spmd_device_put(local, 2, local_shape, SPMD_DTYPE_F32, local_blocks, &x_local));
    CHECK(spmd_host_local_to_global(x_local, mesh, spmd_sharding_spec(blocks), &x2));
    /* [end] */

    const int64_t *g = spmd_array_shape(x), *g2 = spmd_array_shape(x2);
    fprintf(stderr,
            "process %d: local (%d, %d) -> global (%lld, %lld) and (%lld, %lld); shares the "
            "local buffers: %s\n",
            me, R, COLS, (long long)g[0], (long long)g[1], (long long)g2[0], (long long)g2[1],
            first_buffer(x2) == first_buffer(x_local) ? "yes" : "no");
    for (int s = 0; s < spmd_array_num_shards(x); s++) {
        spmd_shard shard;
        float v[2], v2[2];
        CHECK(spmd_array_shard(x, s, &shard));
        CHECK(spmd_array_shard_to_host(x, s, v, sizeof v));
        CHECK(spmd_array_shard_to_host(x2, s, v2, sizeof v2));
        /* stderr: stdout keeps one line per device (the row sums below), in device order */
        fprintf(stderr, "device %d holds x[%lld:%lld, %lld]: %g %g | %g %g\n", shard.device_id,
                (long long)shard.index.start[0], (long long)shard.index.stop[0],
                (long long)shard.index.start[1], v[0], v[1], v2[0], v2[1]);
    }

    /* [snippet:reshard] */
    /* row_sums needs whole rows: in_specs P('x', None). x is P('x', 'y'), and shard_map does not
     * move data behind your back: */
    spmd_sharding *rows = NULL;
    spmd_spec *by_x = NULL;
    spmd_array *sums = NULL;
    CHECK(spmd_sharding_create_parse(mesh, "'x', None", &rows));
    CHECK(spmd_spec_parse("'x'", &by_x));
    const spmd_spec *in_specs[1] = {spmd_sharding_spec(rows)};
    const spmd_spec *out_specs[1] = {by_x}; /* (8,) by 'x', the same on both 'y' devices */
    const spmd_out_desc out = {1, {ROWS}, SPMD_DTYPE_F32};
    spmd_status st =
        spmd_shard_map(mesh, row_sums, NULL, 1, &x, in_specs, 1, &out, out_specs, NULL, &sums);
    if (me == 0)
        fprintf(stderr, "%s: %s\n", spmd_status_name(st), spmd_last_error());

    /* Say where it should be (jax.device_put(x, NamedSharding(mesh, P('x', None)))): */
    spmd_reshard_stats stats;
    spmd_reshard_options options = SPMD_RESHARD_OPTIONS_INIT;
    options.stats = &stats;
    spmd_array *x_rows = NULL;
    CHECK(spmd_reshard(x, rows, &options, &x_rows));
    CHECK(spmd_shard_map(mesh, row_sums, NULL, 1, &x_rows, in_specs, 1, &out, out_specs, NULL,
                         &sums));
    /* [end] */

    fprintf(stderr, "process %d: reshard sent %llu bytes to other processes\n", me,
            (unsigned long long)stats.bytes_sent);
    for (int s = 0; s < spmd_array_num_shards(sums); s++) {
        spmd_shard shard;
        float v[2];
        CHECK(spmd_array_shard(sums, s, &shard));
        CHECK(spmd_array_shard_to_host(sums, s, v, sizeof v));
        printf("device %d: row sums %lld:%lld = %g %g\n", shard.device_id,
               (long long)shard.index.start[0], (long long)shard.index.stop[0], v[0], v[1]);
    }

    spmd_array_destroy(sums);
    spmd_array_destroy(x_rows);
    spmd_spec_destroy(by_x);
    spmd_sharding_destroy(rows);
    spmd_array_destroy(x2);
    spmd_array_destroy(x_local);
    spmd_sharding_destroy(local_blocks);
    spmd_mesh_destroy(local_mesh);
    spmd_array_destroy(x);
    spmd_sharding_destroy(blocks);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return 0;
}
