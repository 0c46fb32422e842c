/*
 * Migration guide, page 4: consuming outputs. A shard_map output is a global array: on one
 * process it is read whole, under mpirun only its own rows are local, and the whole value takes
 * a process_allgather. The legacy "replicated" state was stacked, one copy per device, and read
 * with x[0]; spmd_unreplicate reads this process's first copy without moving anything, and
 * out_specs P() avoids the stacked copies altogether. Any number of devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_outputs
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_outputs
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

enum { COLS = 3, MAX_DEVICES = 64 };

/* A training step stand-in: p / 2 + 1, elementwise. */
static spmd_status step(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_status st = spmd_op_binary_scalar(ctx, SPMD_BINARY_MUL, &in[0], 0.5, &out[0]);
    if (st == SPMD_OK)
        st = spmd_op_binary_scalar(ctx, SPMD_BINARY_ADD, &out[0], 1.0, &out[0]);
    return st;
}

int main(void)
{
    CHECK(spmd_init(NULL));
    int N = spmd_device_count(), L = spmd_local_device_count(), me = spmd_process_index();
    if (N > MAX_DEVICES) {
        fprintf(stderr, "needs at most %d devices, got %d\n", MAX_DEVICES, N);
        spmd_finalize();
        return 2;
    }
    const char *axis = "i";
    spmd_mesh *mesh = NULL;
    spmd_sharding *by_rows = NULL, *replicated = NULL;
    CHECK(spmd_mesh_create(1, &N, &axis, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i'", &by_rows));
    CHECK(spmd_sharding_create_parse(mesh, "", &replicated));
    const spmd_out_desc whole = {2, {N, COLS}, SPMD_DTYPE_F32};
    const spmd_spec *rows_spec[1] = {spmd_sharding_spec(by_rows)};

    /* x[r] = (3 r, 3 r + 1, 3 r + 2), split by rows; y = step(x), split the same way. */
    static float host[MAX_DEVICES * COLS], all[MAX_DEVICES * COLS];
    for (int k = 0; k < N * COLS; k++)
        host[k] = (float)k;
    spmd_array *x = NULL, *y = NULL;
    CHECK(spmd_device_put(host, 2, whole.shape, SPMD_DTYPE_F32, by_rows, &x));
    CHECK(spmd_shard_map(mesh, step, NULL, 1, &x, rows_spec, 1, &whole, rows_spec, NULL, &y));

    /* [snippet:global] */
    /* np.asarray(y) works when this process holds every block of y: one process, or a
     * replicated y. Under mpirun this process holds only its rows: */
    spmd_status st = spmd_array_to_host(y, all, sizeof all);
    fprintf(stderr, "process %d: reading all of y here: %s\n", me, spmd_status_name(st));
    if (st != SPMD_OK && me == 0)
        fprintf(stderr, "%s: %s\n", spmd_status_name(st), spmd_last_error());

    /* The whole value on every process: a collective, called by all of them. */
    CHECK(spmd_process_allgather(y, 1, all, sizeof all)); /* tiled: (N, 3) */

    /* This process's part, the host-local view pmap returned: (L, 3), no copy. */
    spmd_array *y_local = NULL;
    CHECK(spmd_global_to_host_local(y, mesh, rows_spec[0], &y_local));
    /* [end] */
    for (int r = 0; r < N; r++) {
        fprintf(stderr, "process %d: allgather row %d: %g %g %g\n", me, r, all[r * COLS],
                all[r * COLS + 1], all[r * COLS + 2]);
        if (me == 0) /* the same in every layout: stdout */
            printf("allgather row %d: %g %g %g\n", r, all[r * COLS], all[r * COLS + 1],
                   all[r * COLS + 2]);
    }
    const int64_t *ls = spmd_array_shape(y_local);
    float mine[MAX_DEVICES * COLS];
    CHECK(spmd_array_to_host(y_local, mine, sizeof mine));
    fprintf(stderr, "process %d: host-local part (%lld, %lld), first row %g %g %g\n", me,
            (long long)ls[0], (long long)ls[1], mine[0], mine[1], mine[2]);

    /* [snippet:unreplicate] */
    /* Legacy: state = jax.device_put_replicated(params, jax.local_devices())
     *         state = jax.pmap(step)(state); params = state[0]          (x[0]: a gather) */
    const float params[COLS] = {1, 2, 3};
    const int64_t shape[1] = {COLS};
    int local_ids[MAX_DEVICES];
    for (int k = 0; k < L; k++)
        local_ids[k] = spmd_local_device_id(k);
    spmd_array *state = NULL, *stepped = NULL, *first = NULL;
    CHECK(spmd_device_put_replicated(params, 1, shape, SPMD_DTYPE_F32, local_ids, L, &state));
    const spmd_out_desc row = {1, {COLS}, SPMD_DTYPE_F32};
    CHECK(spmd_pmap(step, NULL, 1, &state, NULL, 1, &row, NULL, "i", NULL, 0, NULL, &stepped));
    CHECK(spmd_unreplicate(stepped, &first)); /* (3,) on this process's first device */
    spmd_shard a, b;
    CHECK(spmd_array_shard(stepped, 0, &a));
    CHECK(spmd_array_shard(first, 0, &b)); /* the same memory: nothing moved */

    /* Better: no stacked copies at all. P() in and out; each device keeps its own (3,). */
    spmd_array *p = NULL, *p2 = NULL;
    const spmd_spec *copies[1] = {spmd_sharding_spec(replicated)};
    CHECK(spmd_device_put(params, 1, shape, SPMD_DTYPE_F32, replicated, &p));
    CHECK(spmd_shard_map(mesh, step, NULL, 1, &p, copies, 1, &row, copies, NULL, &p2));
    /* [end] */
    float u[COLS], v[COLS];
    CHECK(spmd_array_to_host(first, u, sizeof u));
    CHECK(spmd_array_to_host(p2, v, sizeof v)); /* replicated: readable on every process */
    fprintf(stderr, "process %d: unreplicate: %g %g %g on device %d, copied: %s\n", me, u[0], u[1],
            u[2], b.device_id, a.data == b.data ? "no" : "yes");
    fprintf(stderr, "process %d: replicated P(): %g %g %g\n", me, v[0], v[1], v[2]);
    if (me == 0)
        printf("replicated P(): %g %g %g\n", v[0], v[1], v[2]);

    spmd_array_destroy(p2);
    spmd_array_destroy(p);
    spmd_array_destroy(first);
    spmd_array_destroy(stepped);
    spmd_array_destroy(state);
    spmd_array_destroy(y_local);
    spmd_array_destroy(y);
    spmd_array_destroy(x);
    spmd_sharding_destroy(replicated);
    spmd_sharding_destroy(by_rows);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return 0;
}
