/* The README's first program: 0..63 split over every device, summed with shard_map and psum. */
#include <stdio.h>

#include <spmd.h>

static spmd_status block_sum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_block partial; /* a scalar: this device's block summed */
    spmd_status st = spmd_ctx_alloc(ctx, 0, NULL, SPMD_DTYPE_F32, &partial);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &in[0], SPMD_ALL_AXES, &partial);
    return st == SPMD_OK ? spmd_psum(ctx, &partial, &out[0], "i") : st; /* over the mesh */
}

int main(void)
{
    float data[64], total = 0;
    for (int k = 0; k < 64; k++)
        data[k] = (float)k;
    const int64_t shape[1] = {64};
    const char *names[1] = {"i"};
    const spmd_out_desc scalar = {0, {0}, SPMD_DTYPE_F32};
    spmd_mesh *mesh = NULL;
    spmd_spec *split = NULL, *replicated = NULL;
    spmd_sharding *sharding = NULL;
    spmd_array *x = NULL, *sum = NULL;
    spmd_status st = spmd_init(NULL); /* under mpirun: one MPI rank per process */
    int n = spmd_device_count();
    if (st == SPMD_OK && (st = spmd_mesh_create(1, &n, names, NULL, 0, &mesh)) == SPMD_OK &&
        (st = spmd_spec_parse("'i'", &split)) == SPMD_OK &&
        (st = spmd_spec_parse("", &replicated)) == SPMD_OK &&
        (st = spmd_sharding_create(mesh, split, &sharding)) == SPMD_OK &&
        (st = spmd_device_put(data, 1, shape, SPMD_DTYPE_F32, sharding, &x)) == SPMD_OK &&
        (st = spmd_shard_map(mesh, block_sum, NULL, 1, &x, (const spmd_spec *[]){split}, 1, &scalar,
                             (const spmd_spec *[]){replicated}, NULL, &sum)) == SPMD_OK &&
        (st = spmd_array_shard_to_host(sum, 0, &total, sizeof total)) == SPMD_OK &&
        spmd_process_index() == 0) /* replicated: every process has it, one prints it */
        printf("sum of 0..63 over %d devices = %g\n", n, total);
    if (st != SPMD_OK)
        fprintf(stderr, "%s\n", spmd_last_error());
    spmd_array_destroy(sum);
    spmd_array_destroy(x);
    spmd_sharding_destroy(sharding);
    spmd_spec_destroy(split);
    spmd_spec_destroy(replicated);
    spmd_mesh_destroy(mesh);
    if (spmd_is_initialized())
        spmd_finalize();
    return st == SPMD_OK ? 0 : 1;
}
