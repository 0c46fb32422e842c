/*
 * The distributed matmul of JAX's multi-controller guide, in C:
 *
 *   mesh = jax.make_mesh((jax.device_count() // 2, 2), ('a', 'b'))
 *   x = device_put(jnp.ones((4096, 2048)), P('a', 'b'))
 *   y = device_put(jnp.ones((2048, 4096)), P('b', None))
 *   z = jax.nn.relu(x @ y)           # sharded P('a',): the matmul psums over 'b'
 *   jax.debug.visualize_array_sharding(z); print(z.sharding)    # on process 0
 *
 * written out as the shard_map that XLA generates: each device multiplies its (M/A, K/2) block
 * of x by its (K/2, N) block of y, the partial products are summed over 'b' (the contraction
 * dimension is split over it), and relu is applied to the sum. Then the same program on small
 * signed data, where relu matters, printing every element each process can see.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./matmul [M K N]         # the docs' 4096 2048 4096 by default
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./matmul [M K N]
 *
 * Output (parseable; process 0 also draws the picture):
 *   docs process=P device=D index=[r0:r1, c0:c1] min=V max=V sum=S   one line per shard
 *   docs process=P total=S                                           sum(z), via psum
 *   values process=P device=D row=I: z[I, 0] ... z[I, N-1]            each row of each shard
 *   values process=P total=S
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>

/* The small example: z = relu(x @ y), x (ROWS_PER_A * A, VK), y (VK, VN), exact in float32. */
#define ROWS_PER_A 4
#define VK 8
#define VN 8

static float x_value(int64_t i, int64_t k) { return (float)((i * 5 + k * 3 + 1) % 11 - 5) * 0.25f; }
static float y_value(int64_t k, int64_t j) { return (float)((k * 7 + j * 2 + 3) % 9 - 4) * 0.125f; }

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "matmul: %s failed: %s\n", #call, spmd_last_error());                  \
            spmd_finalize();                                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Fills a shard with ones (jnp.ones), or with x_value / y_value in the small example. */
typedef struct fill {
    float (*value)(int64_t, int64_t); /* NULL: ones */
} fill;

static spmd_status fill_block(const spmd_box *index, void *dst, void *user)
{
    const fill *f = user;
    float *out = dst;
    for (int64_t r = index->start[0]; r < index->stop[0]; r++)
        for (int64_t c = index->start[1]; c < index->stop[1]; c++)
            *out++ = f->value ? f->value(r, c) : 1.0f;
    return SPMD_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/*
 * jax.make_array_from_process_local_data: this process builds only the rows and columns its
 * devices hold (along each dimension, its distinct blocks in increasing order, packed), as a
 * data loader would.
 */
static spmd_status from_local_part(const spmd_sharding *sharding, const int64_t *shape,
                                   float (*value)(int64_t, int64_t), spmd_array **out)
{
    int64_t shard[2], starts[2][SPMD_MAX_CPU_DEVICES], local_shape[2];
    int nstarts[2] = {0, 0};
    spmd_status st = spmd_sharding_shard_shape(sharding, 2, shape, shard);
    int ndev = spmd_sharding_num_addressable_devices(sharding);
    for (int i = 0; st == SPMD_OK && i < ndev; i++) {
        spmd_box box;
        st = spmd_sharding_device_box(sharding, 2, shape,
                                      spmd_sharding_addressable_device_id(sharding, i), &box);
        for (int d = 0; st == SPMD_OK && d < 2; d++) {
            int seen = 0;
            for (int s = 0; s < nstarts[d]; s++)
                seen |= starts[d][s] == box.start[d];
            if (!seen)
                starts[d][nstarts[d]++] = box.start[d];
        }
    }
    if (st != SPMD_OK)
        return st;
    for (int d = 0; d < 2; d++) {
        qsort(starts[d], (size_t)nstarts[d], sizeof starts[d][0], cmp_i64);
        local_shape[d] = nstarts[d] * shard[d];
    }
    float *local = malloc((size_t)(local_shape[0] * local_shape[1]) * sizeof *local);
    if (!local) {
        fprintf(stderr, "matmul: out of memory\n");
        return SPMD_ERR_OUT_OF_MEMORY;
    }
    for (int64_t r = 0; r < local_shape[0]; r++)
        for (int64_t c = 0; c < local_shape[1]; c++)
            local[r * local_shape[1] + c] = value(starts[0][r / shard[0]] + r % shard[0],
                                                  starts[1][c / shard[1]] + c % shard[1]);
    st = spmd_array_from_process_local_data(sharding, local, 2, local_shape, shape, SPMD_DTYPE_F32,
                                            out);
    free(local);
    return st;
}

/* shard_map body: z_block = relu(psum_b(x_block @ y_block)), in place in the output. */
static spmd_status relu_matmul(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin;
    (void)nout;
    (void)user;
    spmd_status st = spmd_op_gemm(ctx, 0, 0, 1.0, &in[0], &in[1], 0.0, &out[0]);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &out[0], &out[0], "b"); /* K is split over 'b' */
    if (st == SPMD_OK)
        st = spmd_op_unary(ctx, SPMD_UNARY_RELU, &out[0], &out[0]);
    return st;
}

/* shard_map body: sum(z) replicated everywhere; z's row blocks differ only along 'a'. */
static spmd_status total(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                         void *user)
{
    (void)nin;
    (void)nout;
    (void)user;
    spmd_block partial;
    spmd_status st = spmd_ctx_alloc(ctx, 0, NULL, SPMD_DTYPE_F32, &partial);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &in[0], SPMD_ALL_AXES, &partial);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &partial, &out[0], "a");
    return st;
}

/* z = relu(x @ y) with x P('a', 'b') and y P('b', None); z comes out P('a',). */
static void run(spmd_mesh *mesh, const char *tag, int64_t m, int64_t k, int64_t n,
                float (*xv)(int64_t, int64_t), float (*yv)(int64_t, int64_t), int draw)
{
    const int me = spmd_process_index();
    spmd_spec *x_spec = NULL, *y_spec = NULL, *z_spec = NULL, *scalar_spec = NULL;
    spmd_sharding *x_sharding = NULL, *y_sharding = NULL;
    spmd_array *x = NULL, *y = NULL, *z = NULL, *sum = NULL;
    CHECK(spmd_spec_parse("'a', 'b'", &x_spec));
    CHECK(spmd_spec_parse("'b', None", &y_spec));
    CHECK(spmd_spec_parse("'a'", &z_spec));
    CHECK(spmd_spec_parse("", &scalar_spec));
    CHECK(spmd_sharding_create(mesh, x_spec, &x_sharding));
    CHECK(spmd_sharding_create(mesh, y_spec, &y_sharding));
    const int64_t x_shape[2] = {m, k}, y_shape[2] = {k, n};
    fill xf = {xv}, yf = {yv};
    if (xv) /* the small example loads x per process, as a data loader would */
        CHECK(from_local_part(x_sharding, x_shape, xv, &x));
    else
        CHECK(
            spmd_array_from_callback(2, x_shape, SPMD_DTYPE_F32, x_sharding, fill_block, &xf, &x));
    CHECK(spmd_array_from_callback(2, y_shape, SPMD_DTYPE_F32, y_sharding, fill_block, &yf, &y));

    spmd_array *in[2] = {x, y};
    const spmd_spec *in_specs[2] = {x_spec, y_spec};
    const spmd_out_desc z_desc = {2, {m, n}, SPMD_DTYPE_F32};
    CHECK(spmd_shard_map(mesh, relu_matmul, NULL, 2, in, in_specs, 1, &z_desc,
                         (const spmd_spec *const *)&z_spec, NULL, &z));
    const spmd_out_desc scalar = {0, {0}, SPMD_DTYPE_F32};
    CHECK(spmd_shard_map(mesh, total, NULL, 1, &z, (const spmd_spec *const *)&z_spec, 1, &scalar,
                         (const spmd_spec *const *)&scalar_spec, NULL, &sum));

    if (draw && me == 0) { /* as the docs: only process 0 draws */
        char text[256];
        CHECK(spmd_visualize_sharding(stdout, spmd_array_sharding(z), 2, spmd_array_shape(z)));
        CHECK(spmd_sharding_format(spmd_array_sharding(z), text, sizeof text));
        printf("\n%s\n", text);
    }
    /* z.addressable_shards: no communication, each process sees its own devices' blocks. They
     * go to stderr, with what else depends on the layout: stdout (process 0's drawing and
     * total) then reads the same in every layout (spmd launch --layouts compares it). */
    int64_t rows = m / spmd_sharding_num_blocks(spmd_array_sharding(z), 0);
    float *block = malloc((size_t)(rows * n) * sizeof *block);
    if (!block) {
        fprintf(stderr, "matmul: out of memory\n");
        spmd_finalize();
        exit(1);
    }
    for (int s = 0; s < spmd_array_num_shards(z); s++) {
        spmd_shard shard;
        CHECK(spmd_array_shard(z, s, &shard));
        CHECK(spmd_array_shard_to_host(z, s, block, (size_t)(rows * n) * sizeof *block));
        const spmd_box *b = &shard.index;
        if (!xv) {
            double lo = block[0], hi = block[0], acc = 0;
            for (int64_t e = 0; e < rows * n; e++) {
                lo = block[e] < lo ? block[e] : lo;
                hi = block[e] > hi ? block[e] : hi;
                acc += block[e];
            }
            fprintf(stderr,
                    "%s process=%d device=%d index=[%" PRId64 ":%" PRId64 ", %" PRId64 ":%" PRId64
                    "] min=%.9g max=%.9g sum=%.17g\n",
                    tag, me, shard.device_id, b->start[0], b->stop[0], b->start[1], b->stop[1], lo,
                    hi, acc);
            continue;
        }
        for (int64_t r = 0; r < rows; r++) { /* one write per line: lines stay whole */
            char line[1024];
            int len = snprintf(line, sizeof line, "%s process=%d device=%d row=%" PRId64 ":", tag,
                               me, shard.device_id, b->start[0] + r);
            for (int64_t c = 0; c < n && len < (int)sizeof line; c++)
                len += snprintf(line + len, sizeof line - (size_t)len, " %.9g", block[r * n + c]);
            fprintf(stderr, "%s\n", line);
        }
    }
    free(block);
    float value = 0;
    CHECK(spmd_array_to_host(sum, &value, sizeof value)); /* replicated: every process has it */
    /* process 0 on stdout; the others' copies on stderr */
    fprintf(me == 0 ? stdout : stderr, "%s total=%.9g\n", tag, value);
    fflush(stdout);

    spmd_array_destroy(sum);
    spmd_array_destroy(z);
    spmd_array_destroy(y);
    spmd_array_destroy(x);
    spmd_sharding_destroy(y_sharding);
    spmd_sharding_destroy(x_sharding);
    spmd_spec_destroy(scalar_spec);
    spmd_spec_destroy(z_spec);
    spmd_spec_destroy(y_spec);
    spmd_spec_destroy(x_spec);
}

static int64_t parse_extent(const char *text)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    return *end == '\0' && v > 0 ? (int64_t)v : -1;
}

int main(int argc, char **argv)
{
    int64_t m = 4096, k = 2048, n = 4096; /* the docs' shapes */
    if (argc == 4) {
        m = parse_extent(argv[1]);
        k = parse_extent(argv[2]);
        n = parse_extent(argv[3]);
    }
    if ((argc != 1 && argc != 4) || m < 0 || k < 0 || n < 0) {
        fprintf(stderr, "usage: matmul [M K N]   (x: M x K, y: K x N; default 4096 2048 4096)\n");
        return 2;
    }
    CHECK(spmd_init(NULL));
    const int ndev = spmd_device_count();
    const int a = ndev / 2;
    /* the mesh is (devices / 2, 2); M must split over 'a', K over 'b' */
    if (ndev % 2 != 0 || m % a != 0 || k % 2 != 0) {
        fprintf(stderr,
                "matmul needs an even number of devices whose half divides M, and an even K; got "
                "%d devices, M=%" PRId64 ", K=%" PRId64
                " (run with SPMD_NUM_CPU_DEVICES=8, or 4 processes x 2)\n",
                ndev, m, k);
        spmd_finalize();
        return 2;
    }
    const int shape[2] = {a, 2};
    const char *names[2] = {"a", "b"};
    spmd_mesh *mesh = NULL;
    CHECK(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));

    run(mesh, "docs", m, k, n, NULL, NULL, 1);
    run(mesh, "values", (int64_t)ROWS_PER_A * a, VK, VN, x_value, y_value, 0);

    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return 0;
}
