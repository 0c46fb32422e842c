/*
 * Migration guide, page 2: collectives over a pytree. A data-parallel step's gradient mean,
 * jax.lax.pmean(grads, 'i') over a tree of three leaves of different shapes and dtypes, ported
 * as one spmd_pmean_many: one collective for the whole tree, as XLA makes one all-reduce.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_pytree
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_pytree
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

enum { MAX_DEVICES = 64 };

/* [snippet:fn] */
/* Legacy: lambda grads: jax.lax.pmean(grads, 'i'), grads = {'w': f32[2,2], 'b': f32[2],
 * 'scale': f64[]}: the leaves are fn's inputs, their means its outputs, in the same order. */
static spmd_status mean_grads(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nout, (void)user;
    return spmd_pmean_many(ctx, nin, in, out, "i"); /* one collective for the whole tree */
}
/* [end] */

int main(void)
{
    CHECK(spmd_init(NULL));
    int N = spmd_device_count(), L = spmd_local_device_count(), me = spmd_process_index();
    if (N > MAX_DEVICES) {
        fprintf(stderr, "needs at most %d devices; got %d\n", MAX_DEVICES, N);
        spmd_finalize();
        return 2;
    }
    /* device d's gradients: w = d + 1, b = 2 (d + 1), scale = 3 (d + 1) */
    float w_local[MAX_DEVICES][2][2], b_local[MAX_DEVICES][2];
    double s_local[MAX_DEVICES];
    for (int k = 0; k < L; k++) {
        float v = (float)(me * L + k + 1);
        for (int i = 0; i < 2; i++) {
            b_local[k][i] = 2 * v;
            for (int j = 0; j < 2; j++)
                w_local[k][i][j] = v;
        }
        s_local[k] = 3.0 * v;
    }

    /* [snippet:pmap] */
    const char *axis = "i";
    int local_ids[MAX_DEVICES];
    for (int k = 0; k < L; k++)
        local_ids[k] = spmd_local_device_id(k);
    spmd_mesh *local = NULL;
    spmd_sharding *by_device = NULL;
    CHECK(spmd_mesh_create(1, &L, &axis, local_ids, L, &local));
    CHECK(spmd_sharding_create_parse(local, "'i'", &by_device));
    const int64_t w_shape[3] = {L, 2, 2}, b_shape[2] = {L, 2}, s_shape[1] = {L};
    spmd_array *grads[3] = {NULL, NULL, NULL}, *means[3] = {NULL, NULL, NULL};
    CHECK(spmd_device_put(w_local, 3, w_shape, SPMD_DTYPE_F32, by_device, &grads[0]));
    CHECK(spmd_device_put(b_local, 2, b_shape, SPMD_DTYPE_F32, by_device, &grads[1]));
    CHECK(spmd_device_put(s_local, 1, s_shape, SPMD_DTYPE_F64, by_device, &grads[2]));
    const spmd_out_desc leaves[3] = {
        {2, {2, 2}, SPMD_DTYPE_F32}, {1, {2}, SPMD_DTYPE_F32}, {0, {0}, SPMD_DTYPE_F64}};
    CHECK(spmd_pmap(mean_grads, NULL, 3, grads, NULL, 3, leaves, NULL, "i", NULL, 0, NULL, means));
    /* [end] */

    float w[MAX_DEVICES][2][2], b[MAX_DEVICES][2];
    double s[MAX_DEVICES];
    CHECK(spmd_array_to_host(means[0], w, (size_t)L * sizeof w[0]));
    CHECK(spmd_array_to_host(means[1], b, (size_t)L * sizeof b[0]));
    CHECK(spmd_array_to_host(means[2], s, (size_t)L * sizeof s[0]));
    for (int k = 0; k < L; k++)
        printf("device %d: w [[%g, %g], [%g, %g]] b [%g, %g] scale %g\n", local_ids[k], w[k][0][0],
               w[k][0][1], w[k][1][0], w[k][1][1], b[k][0], b[k][1], s[k]);

    for (int a = 0; a < 3; a++) {
        spmd_array_destroy(grads[a]);
        spmd_array_destroy(means[a]);
    }
    spmd_sharding_destroy(by_device);
    spmd_mesh_destroy(local);
    CHECK(spmd_finalize());
    return 0;
}
