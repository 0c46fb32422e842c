/*
 * Migration guide, page 2: axis_index_groups. A legacy pmap body that sums over pairs of
 * devices (psum with axis_index_groups [[0, 1], [2, 3], ...]) ported with spmd_psum_groups, and
 * the same sum rewritten over a 2-D mesh (pairs x members), which needs no groups at all. Both
 * must give the same bits. An even number of devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_groups
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_groups
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

enum { MAX_DEVICES = 64 };

/* [snippet:fn] */
/* Legacy: lambda x: jax.lax.psum(x, 'i', axis_index_groups=[[0, 1], [2, 3], ...]) */
static spmd_status pair_sum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)nout;
    const spmd_axis_groups *pairs = user;
    return spmd_psum_groups(ctx, &in[0], &out[0], "i", pairs);
}

/* The 2-D rewrite: the pairs are a mesh axis, and the sum runs over the other one. */
static spmd_status member_sum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "member");
}
/* [end] */

int main(void)
{
    CHECK(spmd_init(NULL));
    int N = spmd_device_count(), L = spmd_local_device_count(), me = spmd_process_index();
    if (N % 2 || N > MAX_DEVICES) {
        fprintf(stderr, "needs an even number of devices, at most %d; got %d\n", MAX_DEVICES, N);
        spmd_finalize();
        return 2;
    }
    float x_local[MAX_DEVICES], y1[MAX_DEVICES], y2[MAX_DEVICES];
    for (int k = 0; k < L; k++) /* device d holds d + 1 */
        x_local[k] = (float)(me * L + k + 1);

    /* [snippet:pmap] */
    int positions[MAX_DEVICES];
    for (int p = 0; p < N; p++)
        positions[p] = p; /* [[0, 1], [2, 3], ...]: N / 2 groups, listed one after another */
    const spmd_axis_groups pairs = {N / 2, NULL, positions};
    const char *axis = "i";
    spmd_mesh *local = NULL;
    spmd_sharding *by_device = NULL;
    int local_ids[MAX_DEVICES];
    for (int k = 0; k < L; k++)
        local_ids[k] = spmd_local_device_id(k);
    CHECK(spmd_mesh_create(1, &L, &axis, local_ids, L, &local));
    CHECK(spmd_sharding_create_parse(local, "'i'", &by_device));
    const int64_t local_shape[1] = {L};
    spmd_array *x = NULL, *y = NULL;
    CHECK(spmd_device_put(x_local, 1, local_shape, SPMD_DTYPE_F32, by_device, &x));
    const spmd_out_desc scalar = {0, {0}, SPMD_DTYPE_F32};
    CHECK(
        spmd_pmap(pair_sum, (void *)&pairs, 1, &x, NULL, 1, &scalar, NULL, "i", NULL, 0, NULL, &y));
    CHECK(spmd_array_to_host(y, y1, (size_t)L * sizeof(float)));
    /* [end] */

    /* [snippet:mesh] */
    const int grid[2] = {N / 2, 2};
    const char *names[2] = {"pair", "member"};
    spmd_mesh *mesh = NULL;
    spmd_sharding *flat = NULL;
    CHECK(spmd_mesh_create(2, grid, names, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "('pair', 'member')", &flat));
    spmd_array *gx = NULL, *gy = NULL;
    CHECK(spmd_array_from_process_local_data(flat, x_local, 1, local_shape, NULL, SPMD_DTYPE_F32,
                                             &gx));
    const spmd_spec *spec[1] = {spmd_sharding_spec(flat)};
    const spmd_out_desc whole = {1, {N}, SPMD_DTYPE_F32};
    CHECK(spmd_shard_map(mesh, member_sum, NULL, 1, &gx, spec, 1, &whole, spec, NULL, &gy));
    /* [end] */

    for (int s = 0; s < spmd_array_num_shards(gy); s++)
        CHECK(spmd_array_shard_to_host(gy, s, &y2[s], sizeof(float)));
    for (int k = 0; k < L; k++)
        printf("device %d: %g\n", local_ids[k], y1[k]);
    fprintf(stderr, "process %d: grouped psum and 2-D mesh psum are %s\n", me,
            memcmp(y1, y2, (size_t)L * sizeof(float)) == 0 ? "bit-identical" : "DIFFERENT");

    spmd_array_destroy(gx);
    spmd_array_destroy(gy);
    spmd_sharding_destroy(flat);
    spmd_mesh_destroy(mesh);
    spmd_array_destroy(x);
    spmd_array_destroy(y);
    spmd_sharding_destroy(by_device);
    spmd_mesh_destroy(local);
    CHECK(spmd_finalize());
    return 0;
}
