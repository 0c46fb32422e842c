/*
 * A two-stage pipeline on disjoint halves of the devices, the MPMD pattern of JAX's
 * multi-controller guide ("Transferring data across processes with jax.device_put"):
 *
 *   stage 1 on devices [0, n/2), mesh ('model',):  h = tanh(x @ W1),  W1 split by columns
 *   stage 2 on devices [n/2, n), mesh ('batch',):  y = h @ W2 + b,    W2 and b replicated
 *
 * The batch of BATCH rows runs as MICROBATCHES microbatches. Each runs stage 1 (shard_map on
 * mesh 1, h sharded P(None, 'model')), moves to stage 2 with spmd_reshard to P('batch', None)
 * on mesh 2 (jax.device_put(h, sharding_second_half), donating h), then runs stage 2, which
 * also psums the microbatch's checksum. Processes take part only in the stages their devices
 * belong to: under `mpirun -np 4` with 2 devices each, processes 0-1 run stage 1 and 2-3 run
 * stage 2, and the reshard crosses processes; stage 1 of microbatch m+1 overlaps stage 2 of m.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./pipeline
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./pipeline
 *
 * Output (parseable):
 *   reshard process=P mb=M bytes_sent=S bytes_received=R      each process in either stage
 *   out process=P device=D mb=M row=I: y[I, 0] ... y[I, D_OUT-1]   I: row of the whole batch
 *   checksum process=P mb=M sum=S                               each stage-2 process
 *   total process=P sum=S                                       each stage-2 process
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <spmd.h>

#define BATCH 32
#define MICROBATCHES 4
#define MB (BATCH / MICROBATCHES) /* rows per microbatch */
#define D_IN 8
#define HIDDEN 16
#define D_OUT 4

/* Deterministic initialization (the checker recomputes the network from these). */
enum tensor { T_X, T_W1, T_W2, T_B };
static float init_value(enum tensor t, int64_t r, int64_t c)
{
    switch (t) {
    case T_X:
        return (float)((r * 7 + c * 3) % 37 - 18) / 24.0f;
    case T_W1:
        return (float)((r * 5 + c * 3 + 2) % 17 - 8) / 16.0f;
    case T_W2:
        return (float)((r * 3 + c * 7 + 1) % 19 - 9) / 16.0f;
    case T_B:
        return ((float)c - 1.5f) / 4.0f;
    }
    return 0.0f;
}

typedef struct init {
    enum tensor t;
    int64_t row0; /* first row of the microbatch, for x */
} init;

static spmd_status init_block(const spmd_box *index, void *dst, void *user)
{
    const init *in = user;
    float *out = dst;
    if (index->ndim == 1) {
        for (int64_t c = index->start[0]; c < index->stop[0]; c++)
            *out++ = init_value(in->t, 0, c);
        return SPMD_OK;
    }
    for (int64_t r = index->start[0]; r < index->stop[0]; r++)
        for (int64_t c = index->start[1]; c < index->stop[1]; c++)
            *out++ = init_value(in->t, in->row0 + r, c);
    return SPMD_OK;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "pipeline: %s failed: %s\n", #call, spmd_last_error());                \
            spmd_finalize();                                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Stage 1 on each device: h block (MB, HIDDEN/s) = tanh(x @ W1 block). */
static spmd_status stage1(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)nin;
    (void)nout;
    (void)user;
    spmd_status st = spmd_op_gemm(ctx, 0, 0, 1.0, &in[0], &in[1], 0.0, &out[0]);
    if (st == SPMD_OK)
        st = spmd_op_unary(ctx, SPMD_UNARY_TANH, &out[0], &out[0]);
    return st;
}

/* Stage 2 on each device: its rows of y = h @ W2 + b, and sum(y) over the whole microbatch. */
static spmd_status stage2(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)nin;
    (void)nout;
    (void)user;
    spmd_block partial;
    spmd_status st = spmd_op_gemm(ctx, 0, 0, 1.0, &in[0], &in[1], 0.0, &out[0]);
    if (st == SPMD_OK)
        st = spmd_op_binary(ctx, SPMD_BINARY_ADD, &out[0], &in[2], &out[0]); /* row broadcast */
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 0, NULL, SPMD_DTYPE_F32, &partial);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &out[0], SPMD_ALL_AXES, &partial);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &partial, &out[1], "batch");
    return st;
}

static spmd_spec *spec(const char *text)
{
    spmd_spec *s = NULL;
    CHECK(spmd_spec_parse(text, &s));
    return s;
}

static spmd_sharding *sharding(spmd_mesh *mesh, const spmd_spec *s)
{
    spmd_sharding *out = NULL;
    CHECK(spmd_sharding_create(mesh, s, &out));
    return out;
}

static spmd_array *make(int ndim, const int64_t *shape, const spmd_sharding *sh, init how)
{
    spmd_array *out = NULL;
    CHECK(spmd_array_from_callback(ndim, shape, SPMD_DTYPE_F32, sh, init_block, &how, &out));
    return out;
}

/* Prints this process's rows of microbatch m's output. */
static void print_rows(const spmd_array *y, int m)
{
    for (int s = 0; s < spmd_array_num_shards(y); s++) {
        spmd_shard shard;
        float block[MB * D_OUT];
        CHECK(spmd_array_shard(y, s, &shard));
        CHECK(spmd_array_shard_to_host(y, s, block, sizeof block));
        int64_t rows = shard.index.stop[0] - shard.index.start[0];
        for (int64_t r = 0; r < rows; r++) {
            char line[512]; /* one write per line: lines stay whole */
            int len = snprintf(line, sizeof line, "out process=%d device=%d mb=%d row=%" PRId64 ":",
                               spmd_process_index(), shard.device_id, m,
                               (int64_t)m * MB + shard.index.start[0] + r);
            for (int c = 0; c < D_OUT && len < (int)sizeof line; c++)
                len +=
                    snprintf(line + len, sizeof line - (size_t)len, " %.9g", block[r * D_OUT + c]);
            fprintf(stderr, "%s\n", line);
        }
    }
}

int main(void)
{
    CHECK(spmd_init(NULL));
    const int n = spmd_device_count(), me = spmd_process_index();
    const int s = n / 2; /* devices per stage */
    if (n % 2 != 0 || MB % s != 0 || HIDDEN % s != 0) {
        fprintf(stderr,
                "pipeline needs an even number of devices whose half divides %d (2, 4, 8 or 16 "
                "in all), got %d; run with SPMD_NUM_CPU_DEVICES=8, or 4 processes x 2\n",
                MB, n);
        spmd_finalize();
        return 2;
    }
    int first[MB], second[MB]; /* s <= MB */
    for (int i = 0; i < s; i++) {
        first[i] = i;
        second[i] = s + i;
    }
    const char *model[1] = {"model"}, *batch[1] = {"batch"};
    spmd_mesh *mesh1 = NULL, *mesh2 = NULL;
    CHECK(spmd_mesh_create(1, &s, model, first, s, &mesh1));
    CHECK(spmd_mesh_create(1, &s, batch, second, s, &mesh2));
    const int in1 = spmd_mesh_num_local_devices(mesh1) > 0;
    const int in2 = spmd_mesh_num_local_devices(mesh2) > 0;
    /* What each process holds and moves depends on the layout: stderr. The process of stage 2's
     * first device reports the results on stdout, one process in every layout, so stdout reads
     * the same in each (spmd launch --layouts compares it). */
    const int reporter = in2 && spmd_mesh_local_device_id(mesh2, 0) == s;

    spmd_spec *rep = spec(""), *cols = spec("None, 'model'"), *rows = spec("'batch', None");
    spmd_sharding *rep1 = sharding(mesh1, rep), *cols1 = sharding(mesh1, cols);
    spmd_sharding *rep2 = sharding(mesh2, rep), *rows2 = sharding(mesh2, rows);
    const int64_t x_shape[2] = {MB, D_IN}, w1_shape[2] = {D_IN, HIDDEN};
    const int64_t h_shape[2] = {MB, HIDDEN}, w2_shape[2] = {HIDDEN, D_OUT}, b_shape[1] = {D_OUT};

    /* Each stage builds its weights and a plan on its own mesh, on its own processes. */
    spmd_array *w1 = NULL, *w2 = NULL, *b = NULL;
    spmd_plan *plan1 = NULL, *plan2 = NULL;
    if (in1) {
        w1 = make(2, w1_shape, cols1, (init){T_W1, 0});
        const spmd_in_desc ins[2] = {{2, {MB, D_IN}, SPMD_DTYPE_F32},
                                     {2, {D_IN, HIDDEN}, SPMD_DTYPE_F32}};
        const spmd_spec *in_specs[2] = {rep, cols};
        const spmd_out_desc outs[1] = {{2, {MB, HIDDEN}, SPMD_DTYPE_F32}};
        CHECK(spmd_plan_create(mesh1, stage1, NULL, 2, ins, in_specs, 1, outs,
                               (const spmd_spec *const *)&cols, NULL, &plan1));
    }
    if (in2) {
        w2 = make(2, w2_shape, rep2, (init){T_W2, 0});
        b = make(1, b_shape, rep2, (init){T_B, 0});
        const spmd_in_desc ins[3] = {{2, {MB, HIDDEN}, SPMD_DTYPE_F32},
                                     {2, {HIDDEN, D_OUT}, SPMD_DTYPE_F32},
                                     {1, {D_OUT}, SPMD_DTYPE_F32}};
        const spmd_spec *in_specs[3] = {rows, rep, rep};
        const spmd_out_desc outs[2] = {{2, {MB, D_OUT}, SPMD_DTYPE_F32}, {0, {0}, SPMD_DTYPE_F32}};
        const spmd_spec *out_specs[2] = {rows, rep};
        CHECK(spmd_plan_create(mesh2, stage2, NULL, 3, ins, in_specs, 2, outs, out_specs, NULL,
                               &plan2));
    }

    double total = 0;
    for (int m = 0; m < MICROBATCHES; m++) {
        spmd_array *h = NULL, *h2 = NULL;
        if (in1) {
            spmd_array *x = make(2, x_shape, rep1, (init){T_X, (int64_t)m * MB});
            spmd_array *args[2] = {x, w1};
            CHECK(spmd_plan_execute(plan1, args, &h));
            spmd_array_destroy(x);
        } else { /* no device of stage 1 here: the same global array, with no shards */
            CHECK(spmd_array_from_single_device_arrays(2, h_shape, SPMD_DTYPE_F32, cols1, 0, NULL,
                                                       &h));
        }
        /* The hand-off: collective over the processes of both stages. */
        spmd_reshard_stats stats;
        spmd_reshard_options opts = SPMD_RESHARD_OPTIONS_INIT;
        opts.donate = 1; /* h is not needed after the move */
        opts.stats = &stats;
        CHECK(spmd_reshard(h, rows2, &opts, &h2));
        spmd_array_destroy(h);
        fprintf(stderr,
                "reshard process=%d mb=%d bytes_sent=%" PRIu64 " bytes_received=%" PRIu64 "\n", me,
                m, stats.bytes_sent, stats.bytes_received);
        if (in2) {
            spmd_array *args[3] = {h2, w2, b}, *outs[2] = {NULL, NULL};
            float sum = 0;
            CHECK(spmd_plan_execute(plan2, args, outs));
            print_rows(outs[0], m);
            CHECK(spmd_array_to_host(outs[1], &sum, sizeof sum));
            fprintf(stderr, "checksum process=%d mb=%d sum=%.9g\n", me, m, sum);
            if (reporter)
                printf("result mb=%d sum=%.9g\n", m, sum);
            total += sum;
            spmd_array_destroy(outs[0]);
            spmd_array_destroy(outs[1]);
        }
        spmd_array_destroy(h2);
        fflush(stdout);
    }
    if (in2)
        fprintf(stderr, "total process=%d sum=%.9g\n", me, total);
    if (reporter)
        printf("result total=%.9g\n", total);
    fflush(stdout);

    spmd_plan_destroy(plan2);
    spmd_plan_destroy(plan1);
    spmd_array_destroy(b);
    spmd_array_destroy(w2);
    spmd_array_destroy(w1);
    spmd_sharding_destroy(rows2);
    spmd_sharding_destroy(rep2);
    spmd_sharding_destroy(cols1);
    spmd_sharding_destroy(rep1);
    spmd_spec_destroy(rows);
    spmd_spec_destroy(cols);
    spmd_spec_destroy(rep);
    spmd_mesh_destroy(mesh2);
    spmd_mesh_destroy(mesh1);
    CHECK(spmd_finalize());
    return 0;
}
