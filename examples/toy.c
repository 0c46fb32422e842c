/*
 * The toy program of JAX's multi-controller guide, in C: a (4, 2) mesh named ('i', 'j') over
 * all 8 devices, the global array arange(32).reshape(4, 8) sharded P('i', 'j'); computes
 * sum(sin(x)) with shard_map and psum, which process 0 prints (the result is replicated), then
 * each process prints the shards it holds.
 *
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./toy     # 4 processes x 2 devices
 *   SPMD_NUM_CPU_DEVICES=8 ./toy                     # 1 process x 8 devices
 */
#include <stdio.h>
#include <stdlib.h>

#include <spmd.h>

#define ROWS 4
#define COLS 8

/* Fills a shard with its part of arange(32).reshape(4, 8), computed from the index box. */
static spmd_status arange_block(const spmd_box *index, void *dst, void *user)
{
    (void)user;
    int32_t *out = dst;
    for (int64_t r = index->start[0]; r < index->stop[0]; r++)
        for (int64_t c = index->start[1]; c < index->stop[1]; c++)
            *out++ = (int32_t)(r * COLS + c);
    return SPMD_OK;
}

/* numpy-style "[[8 9 10 11]]" for a 2-D int32 block. */
static void print_block(int device, const int32_t *data, int64_t rows, int64_t cols)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "device %d has local data [", device);
    for (int64_t r = 0; r < rows; r++) {
        n += snprintf(line + n, sizeof line - (size_t)n, "%s[", r ? " " : "");
        for (int64_t c = 0; c < cols; c++)
            n += snprintf(line + n, sizeof line - (size_t)n, c ? " %d" : "%d",
                          (int)data[r * cols + c]);
        n += snprintf(line + n, sizeof line - (size_t)n, "]");
    }
    printf("%s]\n", line);
}

/* shard_map body: this device's partial sum of sin(x), then the sum over the whole mesh. */
static spmd_status sum_of_sin(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin;
    (void)nout;
    (void)user;
    spmd_block x, partial;
    spmd_status st = spmd_ctx_alloc(ctx, in[0].ndim, in[0].shape, SPMD_DTYPE_F32, &x);
    if (st == SPMD_OK)
        st = spmd_op_copy(ctx, &in[0], &x); /* int32 -> float32 */
    if (st == SPMD_OK)
        st = spmd_op_unary(ctx, SPMD_UNARY_SIN, &x, &x);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 0, NULL, SPMD_DTYPE_F32, &partial);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &x, SPMD_ALL_AXES, &partial);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &partial, &out[0], "i,j");
    return st;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "%s failed: %s\n", #call, spmd_last_error());                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(void)
{
    CHECK(spmd_init(NULL));
    if (spmd_device_count() != ROWS * 2) {
        fprintf(stderr,
                "toy needs 8 devices in all, found %d: run 4 processes with "
                "SPMD_NUM_CPU_DEVICES=2, or 1 process with SPMD_NUM_CPU_DEVICES=8\n",
                spmd_device_count());
        spmd_finalize();
        return 1;
    }
    const int shape[2] = {4, 2};
    const char *names[2] = {"i", "j"};
    spmd_mesh *mesh = NULL;
    spmd_sharding *sharding = NULL;
    spmd_array *global = NULL;
    CHECK(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i', 'j'", &sharding));
    const int64_t global_shape[2] = {ROWS, COLS};
    CHECK(spmd_array_from_callback(2, global_shape, SPMD_DTYPE_I32, sharding, arange_block, NULL,
                                   &global));

    /* out_specs P(): the scalar result is replicated on every device of the mesh. */
    spmd_spec *in_spec = NULL, *out_spec = NULL;
    CHECK(spmd_spec_parse("'i', 'j'", &in_spec));
    CHECK(spmd_spec_parse("", &out_spec));
    const spmd_out_desc scalar = {0, {0}, SPMD_DTYPE_F32};
    spmd_array *result = NULL;
    CHECK(spmd_shard_map(mesh, sum_of_sin, NULL, 1, &global, (const spmd_spec *const *)&in_spec, 1,
                         &scalar, (const spmd_spec *const *)&out_spec, NULL, &result));
    float value = 0;
    CHECK(spmd_array_to_host(result, &value, sizeof value));
    /* %.9g: every bit of the float32, the same in every layout (README "Reduction order").
     * Process 0 prints it, then every process its shards in device order: the output in
     * process order (spmd launch --layouts) reads the same in every layout. */
    if (spmd_process_index() == 0)
        printf("process=0 got result: %.9g\n", value);
    for (int i = 0; i < spmd_array_num_shards(global); i++) {
        spmd_shard shard;
        CHECK(spmd_array_shard(global, i, &shard));
        int32_t block[ROWS * COLS];
        CHECK(spmd_array_shard_to_host(global, i, block, sizeof block));
        print_block(shard.device_id, block, shard.index.stop[0] - shard.index.start[0],
                    shard.index.stop[1] - shard.index.start[1]);
    }
    fflush(stdout);

    spmd_array_destroy(result);
    spmd_spec_destroy(in_spec);
    spmd_spec_destroy(out_spec);
    spmd_array_destroy(global);
    spmd_sharding_destroy(sharding);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return 0;
}
