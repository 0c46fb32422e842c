/*
 * Migration guide, page 6: multi-process pitfalls. First what every process must do alike: the
 * same collectives (shard_map calls, broadcasts, gathers, barriers) in the same order. Then what
 * libspmd reports when they do not, within SPMD_COLLECTIVE_TIMEOUT seconds: devices of one
 * shard_map calling different collectives, a device that does not arrive, and under mpirun
 * processes at differently named barriers, a device_put of data that differs between
 * processes and a process that does not arrive. In between, a local pmap: each process maps
 * its own devices, as many times as it likes, without the others. Needs 8 devices,
 * an even number per process, and SPMD_COLLECTIVE_TIMEOUT of at most 5 seconds.
 *
 *   SPMD_COLLECTIVE_TIMEOUT=1 SPMD_NUM_CPU_DEVICES=8 ./guide_multiprocess
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 -x SPMD_COLLECTIVE_TIMEOUT=1 ./guide_multiprocess
 */
#include <stdio.h>
#include <stdlib.h>
#include <threads.h>
#include <time.h>

#include <spmd.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "%s failed: %s\n", #call, spmd_last_error());                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double timeout_s; /* SPMD_COLLECTIVE_TIMEOUT */

/* Sleeps `factor` times the collective timeout. */
static void wait_timeouts(double factor)
{
    double s = factor * timeout_s;
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    thrd_sleep(&t, NULL);
}

/* Each device contributes its position + 1 to a sum over the whole mesh. */
static spmd_status count(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                         void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    int i = 0;
    spmd_block mine;
    spmd_status st = spmd_axis_index(ctx, "i,j", &i);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 0, NULL, SPMD_DTYPE_F32, &mine);
    if (st == SPMD_OK)
        st = spmd_op_fill(ctx, &mine, i + 1);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &mine, &out[0], "i,j");
    return st;
}

/* The body of the local pmap: this device's value summed over the pmap's devices. */
static spmd_status local_sum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "i");
}

/* What the last device, 7, does in `disagree`. Under several processes it belongs to the last
 * one, not to process 0, which leads the agreements between processes: the demonstrations'
 * timing (catch_up) relies on that. */
enum mode { AGREE, MISMATCH, LATE };

/* [snippet:bad_fn] */
/* Device 7 breaks the rule that every device issues the same collectives: it calls pmax where
 * its partner on axis 'j' (device 6) calls psum (a little after it, so that the report is the
 * same on every run), or it arrives after the timeout. */
static spmd_status disagree(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)in, (void)nout;
    enum mode mode = *(const enum mode *)user;
    spmd_block mine; /* this device's (1, 1) block of ones */
    spmd_status st = spmd_ctx_alloc(ctx, out[0].ndim, out[0].shape, SPMD_DTYPE_F32, &mine);
    if (st == SPMD_OK)
        st = spmd_op_fill(ctx, &mine, 1.0);
    if (st != SPMD_OK || spmd_ctx_device(ctx) != 7 || mode == AGREE)
        return st == SPMD_OK ? spmd_psum(ctx, &mine, &out[0], "j") : st;
    wait_timeouts(mode == MISMATCH ? 0.5 : 2);
    if (mode == MISMATCH)
        return spmd_pmax(ctx, &mine, &out[0], "j");
    return spmd_psum(ctx, &mine, &out[0], "j");
}
/* [end] */

/* Prints the status every process got; process 0 prints the message too. */
static void report(const char *what, spmd_status st)
{
    fprintf(stderr, "process %d: %s: %s\n", spmd_process_index(), what, spmd_status_name(st));
    if (st != SPMD_OK && spmd_process_index() == 0)
        fprintf(stderr, "%s: %s\n", spmd_status_name(st), spmd_last_error());
}

/* Real programs stop at such an error. These go on to the next demonstration, so the processes
 * that gave up on a late one wait for it (the timeout) before their next collective. */
static void catch_up(int late_process)
{
    if (spmd_process_count() > 1 && spmd_process_index() != late_process)
        wait_timeouts(1);
}

/* Runs `disagree` in `mode` on a fresh (4, 2) mesh, then, when a process was late, a correct
 * call on the same mesh: across processes the mesh is unusable after such a failure. */
static void demonstrate(const char *what, enum mode mode, int late_process)
{
    const int grid[2] = {4, 2};
    const char *names[2] = {"i", "j"};
    spmd_mesh *mesh = NULL;
    spmd_spec *by_i = NULL;
    spmd_array *out = NULL;
    CHECK(spmd_mesh_create(2, grid, names, NULL, 0, &mesh));
    CHECK(spmd_spec_parse("'i', 'j'", &by_i));
    const spmd_out_desc desc = {2, {4, 2}, SPMD_DTYPE_F32};
    const spmd_spec *specs[1] = {by_i};
    report(what, spmd_shard_map(mesh, disagree, &mode, 0, NULL, NULL, 1, &desc, specs, NULL, &out));
    if (late_process >= 0) {
        catch_up(late_process);
        enum mode agree = AGREE;
        spmd_array_destroy(out);
        out = NULL;
        report("the same mesh afterwards",
               spmd_shard_map(mesh, disagree, &agree, 0, NULL, NULL, 1, &desc, specs, NULL, &out));
    }
    spmd_array_destroy(out);
    spmd_spec_destroy(by_i);
    spmd_mesh_destroy(mesh);
}

int main(void)
{
    const char *t = getenv("SPMD_COLLECTIVE_TIMEOUT");
    timeout_s = t ? strtod(t, NULL) : 0;
    CHECK(spmd_init(NULL));
    int me = spmd_process_index(), P = spmd_process_count();
    if (spmd_device_count() != 8 || spmd_local_device_count() % 2 != 0 || timeout_s <= 0 ||
        timeout_s > 5) {
        fprintf(stderr, "needs 8 devices, an even number per process, and SPMD_COLLECTIVE_TIMEOUT "
                        "of at most 5 s; run with SPMD_COLLECTIVE_TIMEOUT=1 and "
                        "SPMD_NUM_CPU_DEVICES=8, or under mpirun -np 4 with "
                        "SPMD_NUM_CPU_DEVICES=2\n");
        spmd_finalize();
        return 2;
    }

    /* [snippet:same_order] */
    /* Process 0 reads the configuration; broadcast_one_to_all gives everyone its bytes. */
    int32_t seed = me == 0 ? 1234 : 0;
    CHECK(spmd_broadcast_one_to_all(&seed, sizeof seed, 0));

    /* The same shard_map on every process, in the same order: sum of 1..8 over the mesh. */
    const int grid[2] = {4, 2};
    const char *names[2] = {"i", "j"};
    spmd_mesh *mesh = NULL;
    spmd_spec *replicated = NULL;
    spmd_array *total = NULL;
    CHECK(spmd_mesh_create(2, grid, names, NULL, 0, &mesh));
    CHECK(spmd_spec_parse("", &replicated));
    const spmd_out_desc scalar = {0, {0}, SPMD_DTYPE_F32};
    const spmd_spec *out_specs[1] = {replicated};
    CHECK(spmd_shard_map(mesh, count, NULL, 0, NULL, NULL, 1, &scalar, out_specs, NULL, &total));
    CHECK(spmd_assert_equal(total, "the total differs between processes"));

    /* One value per process, gathered on every process: (P,). */
    float mine = (float)(10 * me), every[64];
    const int64_t none[1] = {0};
    spmd_array *value = NULL;
    CHECK(spmd_array_create_on_device(spmd_local_device_id(0), &mine, 0, none, SPMD_DTYPE_F32,
                                      &value));
    CHECK(spmd_process_allgather(value, 0, every, sizeof every));

    /* A barrier: no process goes on until every process has reached it. */
    CHECK(spmd_sync_global_devices("checkpoint written"));
    /* [end] */

    float sum = 0;
    CHECK(spmd_array_to_host(total, &sum, sizeof sum));
    char line[1024]; /* one write per line: lines stay whole */
    int len =
        snprintf(line, sizeof line, "process %d: seed %d, total %g, gathered", me, (int)seed, sum);
    for (int p = 0; p < P && len < (int)sizeof line; p++)
        len += snprintf(line + len, sizeof line - (size_t)len, " %g", every[p]);
    fprintf(stderr, "%s\n", line);
    if (me == 0) /* the same on every process, in every layout */
        printf("seed %d, total %g\n", (int)seed, sum);
    fflush(stdout);

    /* [snippet:local_pmap] */
    /* pmap(f, devices=jax.local_devices()): each process maps its own devices, on its own. */
    int L = spmd_local_device_count(), local[64];
    for (int i = 0; i < L; i++)
        local[i] = spmd_local_device_id(i);
    const char *axis = "i";
    spmd_mesh *mine_only = NULL;
    spmd_sharding *by_device = NULL;
    spmd_array *x = NULL, *sums = NULL;
    CHECK(spmd_mesh_create(1, &L, &axis, local, L, &mine_only));
    CHECK(spmd_sharding_create_parse(mine_only, "'i'", &by_device));
    float xs[64];
    for (int i = 0; i < L; i++)
        xs[i] = (float)(10 * me + i); /* this process's own data */
    const int64_t length[1] = {L};
    CHECK(spmd_device_put(xs, 1, length, SPMD_DTYPE_F32, by_device, &x));
    const spmd_out_desc one_value = {0, {0}, SPMD_DTYPE_F32};
    for (int call = 0; call <= me; call++) { /* as many calls as it likes: no one waits */
        spmd_array_destroy(sums);
        CHECK(spmd_pmap(local_sum, NULL, 1, &x, NULL, 1, &one_value, NULL, "i", local, L, NULL,
                        &sums));
    }
    /* [end] */

    float got[64];
    CHECK(spmd_array_to_host(sums, got, sizeof got));
    len = snprintf(line, sizeof line, "process %d: local pmap over %d devices, %d call(s): sums",
                   me, L, me + 1);
    for (int i = 0; i < L && len < (int)sizeof line; i++)
        len += snprintf(line + len, sizeof line - (size_t)len, " %g", got[i]);
    fprintf(stderr, "%s\n", line);
    spmd_array_destroy(sums);
    spmd_array_destroy(x);
    spmd_sharding_destroy(by_device);
    spmd_mesh_destroy(mine_only);

    /* [snippet:demos] */
    spmd_device_info device7;
    CHECK(spmd_device_get_info(7, &device7));
    demonstrate("devices call different collectives", MISMATCH, -1);
    demonstrate("a device arrives late", LATE, device7.process_index);
    if (P > 1) {
        /* Process 1 names its barrier differently: every process is told, with both names. */
        report("barrier names differ", spmd_sync_global_devices(me == 1 ? "epoch 2" : "epoch 1"));
        /* The last process puts other host data onto the whole mesh: device_put checks, as
         * JAX does, that every process passed the same, and tells every process who did not. */
        float weights[8] = {0};
        weights[0] = me == P - 1 ? 1.0f : 0.0f;
        const int64_t eight[1] = {8};
        spmd_sharding *everywhere = NULL;
        spmd_array *w = NULL;
        CHECK(spmd_sharding_create(mesh, replicated, &everywhere));
        report("device_put data differs",
               spmd_device_put(weights, 1, eight, SPMD_DTYPE_F32, everywhere, &w));
        spmd_sharding_destroy(everywhere);
        /* The last process arrives after the timeout: the others are told which one is late. */
        if (me == P - 1)
            wait_timeouts(2);
        report("a process arrives late", spmd_sync_global_devices("late"));
        catch_up(P - 1);
    }
    /* [end] */

    spmd_array_destroy(value);
    spmd_array_destroy(total);
    spmd_spec_destroy(replicated);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return 0;
}
