/*
 * Migration guide, page 5: device_put_sharded and device_put_replicated. The compat functions
 * keep the legacy results (a stacked leading axis, sharded over a 1-D mesh of the given
 * devices); the shard_map-native spellings are a NamedSharding array built from a callback,
 * and a P() array that is replicated without the stacked axis. Any number of devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_device_put
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_device_put
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

enum { COLS = 3, MAX_DEVICES = 64 };

/* [snippet:callback] */
/* Fills one device's box of the (N, 3) array whose row i is (10 i, 10 i + 1, 10 i + 2). */
static spmd_status fill_rows(const spmd_box *box, void *dst, void *user)
{
    (void)user;
    float *out = dst;
    for (int64_t i = box->start[0]; i < box->stop[0]; i++)
        for (int64_t c = 0; c < COLS; c++)
            *out++ = (float)(10 * i + c);
    return SPMD_OK;
}
/* [end] */

static void describe(const char *what, const spmd_array *a)
{
    char text[256];
    CHECK(spmd_sharding_format(spmd_array_sharding(a), text, sizeof text));
    const int64_t *s = spmd_array_shape(a);
    if (spmd_array_ndim(a) == 2)
        fprintf(stderr, "process %d: %s: (%lld, %lld), %s, fully replicated: %s\n",
                spmd_process_index(), what, (long long)s[0], (long long)s[1], text,
                spmd_sharding_is_fully_replicated(spmd_array_sharding(a)) ? "yes" : "no");
    else
        fprintf(stderr, "process %d: %s: (%lld,), %s, fully replicated: %s\n", spmd_process_index(),
                what, (long long)s[0], text,
                spmd_sharding_is_fully_replicated(spmd_array_sharding(a)) ? "yes" : "no");
}

int main(void)
{
    CHECK(spmd_init(NULL));
    int N = spmd_device_count();
    if (N > MAX_DEVICES) {
        fprintf(stderr, "needs at most %d devices, got %d\n", MAX_DEVICES, N);
        spmd_finalize();
        return 2;
    }
    static float rows[MAX_DEVICES][COLS];
    const void *shards[MAX_DEVICES];
    int devices[MAX_DEVICES];
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < COLS; c++)
            rows[i][c] = (float)(10 * i + c);
        shards[i] = rows[i]; /* other processes' entries are not read (they may be NULL) */
        devices[i] = i;
    }
    const float w[COLS] = {0.5f, 1.5f, 2.5f};
    const int64_t row_shape[1] = {COLS};

    /* [snippet:legacy] */
    /* Legacy: a = jax.device_put_sharded(rows, jax.devices())     # (N, 3): row i on device i
     *         b = jax.device_put_replicated(w, jax.devices())     # (N, 3): w on every device */
    spmd_array *a = NULL, *b = NULL;
    CHECK(spmd_device_put_sharded(N, shards, 1, row_shape, SPMD_DTYPE_F32, devices, &a));
    CHECK(spmd_device_put_replicated(w, 1, row_shape, SPMD_DTYPE_F32, devices, N, &b));
    /* [end] */

    /* [snippet:native] */
    /* shard_map-native: a NamedSharding on a mesh of your own, each device's box filled where
     * it lives (jax.make_array_from_callback), and true replication: P(), no stacked axis. */
    const char *axis = "i";
    spmd_mesh *mesh = NULL;
    spmd_sharding *by_rows = NULL, *replicated = NULL;
    spmd_array *a2 = NULL, *b2 = NULL;
    CHECK(spmd_mesh_create(1, &N, &axis, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i'", &by_rows));
    CHECK(spmd_sharding_create_parse(mesh, "", &replicated));
    const int64_t shape[2] = {N, COLS};
    CHECK(spmd_array_from_callback(2, shape, SPMD_DTYPE_F32, by_rows, fill_rows, NULL, &a2));
    CHECK(spmd_device_put(w, 1, row_shape, SPMD_DTYPE_F32, replicated, &b2));
    /* [end] */

    describe("device_put_sharded", a);
    describe("from_callback", a2);
    describe("device_put_replicated", b);
    describe("device_put P()", b2);
    fprintf(stderr, "process %d: device_put_replicated marks stacked replicas: %s\n",
            spmd_process_index(), spmd_array_has_stacked_replicas(b) ? "yes" : "no");
    for (int s = 0; s < spmd_array_num_shards(a); s++) {
        spmd_shard sa;
        float va[COLS], va2[COLS], vb[COLS], vb2[COLS];
        CHECK(spmd_array_shard(a, s, &sa));
        CHECK(spmd_array_shard_to_host(a, s, va, sizeof va));
        CHECK(spmd_array_shard_to_host(a2, s, va2, sizeof va2));
        CHECK(spmd_array_shard_to_host(b, s, vb, sizeof vb));
        CHECK(spmd_array_shard_to_host(b2, s, vb2, sizeof vb2));
        printf("device %d: row %g %g %g | %g %g %g; copy %g %g %g | %g %g %g; %s\n", sa.device_id,
               va[0], va[1], va[2], va2[0], va2[1], va2[2], vb[0], vb[1], vb[2], vb2[0], vb2[1],
               vb2[2],
               memcmp(va, va2, sizeof va) == 0 && memcmp(vb, vb2, sizeof vb) == 0 ? "bit-identical"
                                                                                  : "DIFFERENT");
    }

    spmd_array_destroy(b2);
    spmd_array_destroy(a2);
    spmd_sharding_destroy(replicated);
    spmd_sharding_destroy(by_rows);
    spmd_mesh_destroy(mesh);
    spmd_array_destroy(b);
    spmd_array_destroy(a);
    CHECK(spmd_finalize());
    return 0;
}
