/*
 * Migration guide, page 2: several axes of parallelism. A nested pmap,
 * pmap(pmap(f, axis_name='j'), axis_name='i'), becomes one shard_map over a (4, 2) mesh named
 * ('i', 'j') with P('i', 'j'); f sums over 'j' alone and over both axes. spmd_pmap takes the
 * nested form as axis_name "i, j". Both spellings must give the same bits. Needs 8 devices, an
 * even number per process.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_two_axes
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_two_axes
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

enum { I = 4, J = 2, K = 4 };

/* [snippet:pmap_fn] */
/* pmap's f: x[i, j] of shape (K,). */
static spmd_status f_pmap(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_status st = spmd_psum(ctx, &in[0], &out[0], "j"); /* psum(x, 'j') */
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &in[0], &out[1], "i,j"); /* psum(x, ('i', 'j')) */
    return st;
}
/* [end] */

/* [snippet:shard_map_fn] */
/* shard_map's f: the block x[i:i+1, j:j+1], shape (1, 1, K). The replicated total is returned
 * as (K,): a block's descriptor can drop its size-1 axes (x[0, 0]) without a copy. */
static spmd_status f_shard_map(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_block x00 = in[0];
    x00.ndim = 1;
    x00.shape[0] = in[0].shape[2];
    spmd_status st = spmd_psum(ctx, &in[0], &out[0], "j");
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &x00, &out[1], "i,j");
    return st;
}
/* [end] */

int main(void)
{
    CHECK(spmd_init(NULL));
    int L = spmd_local_device_count(), me = spmd_process_index();
    if (spmd_device_count() != I * J || L % J != 0) {
        fprintf(stderr,
                "needs 8 devices, an even number per process, got %d x %d; run with "
                "SPMD_NUM_CPU_DEVICES=8, or mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2\n",
                spmd_process_count(), L);
        spmd_finalize();
        return 2;
    }
    /* x = arange(32).reshape(4, 2, K): this process holds rows i of L/2 (its devices' rows). */
    int rows = L / J;
    float x_local[I * J * K], a1[I * J * K], a2[I * J * K], t1[K], t2[K];
    for (int k = 0; k < rows * J * K; k++)
        x_local[k] = (float)(me * rows * J * K + k);
    const int64_t local_shape[3] = {rows, J, K};
    const char *names[2] = {"i", "j"};

    /* [snippet:pmap] */
    /* Legacy: pmap(pmap(f, 'j'), 'i')(x_local), x_local of shape (L/2, 2, K): its two leading
     * axes map to this process's devices, laid out as P('i', 'j') on a local (L/2, 2) mesh. */
    int local_ids[I * J], local_grid[2] = {rows, J};
    for (int k = 0; k < L; k++)
        local_ids[k] = spmd_local_device_id(k);
    spmd_mesh *local_mesh = NULL;
    spmd_sharding *local_blocks = NULL;
    spmd_array *x_stacked = NULL, *out[2] = {NULL, NULL};
    CHECK(spmd_mesh_create(2, local_grid, names, local_ids, L, &local_mesh));
    CHECK(spmd_sharding_create_parse(local_mesh, "'i', 'j'", &local_blocks));
    CHECK(spmd_device_put(x_local, 3, local_shape, SPMD_DTYPE_F32, local_blocks, &x_stacked));
    const int out_axes[2] = {0, SPMD_NONE};
    const spmd_out_desc per_device[2] = {{1, {K}, SPMD_DTYPE_F32}, {1, {K}, SPMD_DTYPE_F32}};
    CHECK(spmd_pmap(f_pmap, NULL, 1, &x_stacked, NULL, 2, per_device, out_axes, "i, j", NULL, 0,
                    NULL, out));
    CHECK(spmd_array_to_host(out[0], a1, sizeof a1)); /* (L/2, 2, K) */
    CHECK(spmd_array_to_host(out[1], t1, sizeof t1)); /* (K,), once */
    /* [end] */

    /* [snippet:shard_map] */
    /* shard_map: one (4, 2) mesh for both axes; x global (4, 2, K) split by P('i', 'j'). */
    const int grid[2] = {I, J};
    spmd_mesh *mesh = NULL;
    spmd_sharding *blocks = NULL;
    spmd_spec *replicated = NULL;
    spmd_array *x = NULL, *res[2] = {NULL, NULL};
    CHECK(spmd_mesh_create(2, grid, names, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i', 'j'", &blocks));
    CHECK(spmd_spec_parse("", &replicated));
    CHECK(spmd_array_from_process_local_data(blocks, x_local, 3, local_shape, NULL, SPMD_DTYPE_F32,
                                             &x));
    const spmd_spec *in_specs[1] = {spmd_sharding_spec(blocks)};
    const spmd_spec *out_specs[2] = {spmd_sharding_spec(blocks), replicated};
    const spmd_out_desc whole[2] = {{3, {I, J, K}, SPMD_DTYPE_F32}, {1, {K}, SPMD_DTYPE_F32}};
    CHECK(spmd_shard_map(mesh, f_shard_map, NULL, 1, &x, in_specs, 2, whole, out_specs, NULL, res));
    for (int s = 0; s < spmd_array_num_shards(res[0]); s++)
        CHECK(spmd_array_shard_to_host(res[0], s, &a2[s * K], K * sizeof(float)));
    CHECK(spmd_array_to_host(res[1], t2, sizeof t2));
    /* [end] */

    for (int d = 0; d < L; d++) {
        const float *u = &a1[d * K], *v = &a2[d * K];
        printf("psum over j: device %d: %g %g %g %g | %g %g %g %g\n", local_ids[d], u[0], u[1],
               u[2], u[3], v[0], v[1], v[2], v[3]);
    }
    fprintf(stderr, "psum over i,j: process %d: %g %g %g %g | %g %g %g %g\n", me, t1[0], t1[1],
            t1[2], t1[3], t2[0], t2[1], t2[2], t2[3]);
    int same = memcmp(a1, a2, (size_t)L * K * sizeof(float)) == 0 && memcmp(t1, t2, sizeof t1) == 0;
    fprintf(stderr, "process %d: pmap and shard_map results are %s\n", me,
            same ? "bit-identical" : "DIFFERENT");

    for (int j = 0; j < 2; j++) {
        spmd_array_destroy(res[j]);
        spmd_array_destroy(out[j]);
    }
    spmd_array_destroy(x);
    spmd_spec_destroy(replicated);
    spmd_sharding_destroy(blocks);
    spmd_mesh_destroy(mesh);
    spmd_array_destroy(x_stacked);
    spmd_sharding_destroy(local_blocks);
    spmd_mesh_destroy(local_mesh);
    CHECK(spmd_finalize());
    return 0;
}
