/*
 * Calls on a sub-mesh between calls on the full mesh, for check_trace.sh (run with
 * SPMD_TRACE=DIR): `spmd trace diff` must pair the calls of two layouts by what they are, not by
 * each process's call numbers, which differ once a process skips the sub-mesh's calls.
 *
 * Mesh 'i' holds every device, mesh 'j' the first half (under 2 processes x 2 devices: process
 * 0's alone). `trace_submesh MODE [ROUNDS]` makes ROUNDS (3) rounds of: a shard_map on 'i'
 * (psum), a shard_map on 'j' (psum), spmd_sync_global_devices("round"), spmd_process_allgather
 * of the 'i' result. MODE:
 *   skip   the processes without a device of 'j' do not call its shard_map;
 *   call   every process calls it (those outside run nothing);
 *   plant  as skip, but with 2 processes device 1 adds 1 to its psum input in call #2 on 'j';
 *   other  as skip, but with 2 processes the last call on 'i' takes pmax, not psum, and the
 *          last spmd_sync_global_devices is named "last".
 * Prints, on process 0, the total of the gathered 'i' result and device 0's block of 'j's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>

enum { PER_DEVICE = 4, MAX_DEVICES = 64, PLANTED_ROUND = 2, PLANTED_DEVICE = 1 };

typedef struct plant {
    const char *mode;
    const char *axis;
    int round, rounds; /* 1..rounds */
} plant;

static int two_processes(void) { return spmd_process_count() == 2; }

/* out = x + psum(x) / 4 over the mesh's axis */
static spmd_status step(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)nout;
    const plant *p = user;
    int me = 0;
    spmd_status st = spmd_axis_index(ctx, p->axis, &me);
    spmd_block x, sum;
    int64_t one[1] = {PER_DEVICE};
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, one, SPMD_DTYPE_F32, &x);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, one, SPMD_DTYPE_F32, &sum);
    if (st != SPMD_OK)
        return st;
    memcpy(x.data, in[0].data, sizeof(float) * PER_DEVICE);
    int sub = strcmp(p->axis, "j") == 0;
    if (strcmp(p->mode, "plant") == 0 && sub && p->round == PLANTED_ROUND && me == PLANTED_DEVICE &&
        two_processes())
        ((float *)x.data)[0] += 1.0f;
    if (strcmp(p->mode, "other") == 0 && !sub && p->round == p->rounds && two_processes())
        st = spmd_pmax(ctx, &x, &sum, p->axis);
    else
        st = spmd_psum(ctx, &x, &sum, p->axis);
    const float *a = x.data, *s = sum.data;
    float *o = out[0].data;
    for (int k = 0; k < PER_DEVICE && st == SPMD_OK; k++)
        o[k] = a[k] + 0.25f * s[k];
    return st;
}

/* x over `mesh`, split along its axis, through every shard_map round */
typedef struct chain {
    spmd_mesh *mesh;
    spmd_spec *split;
    spmd_array *x;
    spmd_out_desc desc;
    plant p;
} chain;

static spmd_status chain_start(chain *c, int n, const int *ids, const char *axis, const char *mode,
                               int rounds)
{
    memset(c, 0, sizeof *c);
    c->p = (plant){mode, axis, 0, rounds};
    float data[PER_DEVICE * MAX_DEVICES];
    for (int k = 0; k < PER_DEVICE * n; k++)
        data[k] = (float)(k % 5) * 0.5f + (axis[0] == 'j');
    const int64_t shape[1] = {(int64_t)PER_DEVICE * n};
    c->desc = (spmd_out_desc){1, {shape[0]}, SPMD_DTYPE_F32};
    spmd_sharding *sharding = NULL;
    spmd_status st = spmd_mesh_create(1, &n, &axis, ids, ids ? n : 0, &c->mesh);
    if (st == SPMD_OK)
        st = spmd_spec_parse(axis[0] == 'i' ? "'i'" : "'j'", &c->split);
    if (st == SPMD_OK)
        st = spmd_sharding_create(c->mesh, c->split, &sharding);
    if (st == SPMD_OK) /* every process: one outside the mesh gets no shards */
        st = spmd_device_put(data, 1, shape, SPMD_DTYPE_F32, sharding, &c->x);
    spmd_sharding_destroy(sharding);
    return st;
}

static spmd_status chain_step(chain *c)
{
    spmd_array *y = NULL;
    spmd_status st = spmd_shard_map(c->mesh, step, &c->p, 1, &c->x, (const spmd_spec *[]){c->split},
                                    1, &c->desc, (const spmd_spec *[]){c->split}, NULL, &y);
    if (st == SPMD_OK) {
        spmd_array_destroy(c->x);
        c->x = y;
    }
    return st;
}

static void chain_end(chain *c)
{
    spmd_array_destroy(c->x);
    spmd_spec_destroy(c->split);
    spmd_mesh_destroy(c->mesh);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "skip";
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    if ((strcmp(mode, "skip") && strcmp(mode, "call") && strcmp(mode, "plant") &&
         strcmp(mode, "other")) ||
        rounds < 1 || rounds > 1000) {
        fprintf(stderr, "usage: trace_submesh skip|call|plant|other [ROUNDS]\n");
        return 2;
    }
    spmd_status st = spmd_init(NULL);
    int n = spmd_device_count(), half = n / 2, ids[MAX_DEVICES];
    for (int d = 0; d < half; d++)
        ids[d] = d;
    chain all, sub;
    memset(&all, 0, sizeof all);
    memset(&sub, 0, sizeof sub);
    if (st == SPMD_OK && (n < 2 || n % 2 || n > MAX_DEVICES))
        st = SPMD_ERR_INVALID_ARGUMENT;
    if (st == SPMD_OK)
        st = chain_start(&all, n, NULL, "i", mode, rounds);
    if (st == SPMD_OK)
        st = chain_start(&sub, half, ids, "j", mode, rounds);
    int in_sub = st == SPMD_OK && spmd_mesh_num_local_devices(sub.mesh) > 0;
    float gathered[PER_DEVICE * MAX_DEVICES];
    for (int r = 1; r <= rounds && st == SPMD_OK; r++) {
        all.p.round = sub.p.round = r;
        st = chain_step(&all);
        if (st == SPMD_OK && (in_sub || strcmp(mode, "call") == 0))
            st = chain_step(&sub);
        int last = strcmp(mode, "other") == 0 && r == rounds && two_processes();
        if (st == SPMD_OK)
            st = spmd_sync_global_devices(last ? "last" : "round");
        if (st == SPMD_OK)
            st = spmd_process_allgather(all.x, 1, gathered, sizeof gathered);
    }
    if (st == SPMD_OK && spmd_process_index() == 0) {
        float block[PER_DEVICE];
        double total = 0;
        for (int k = 0; k < PER_DEVICE * n; k++)
            total += gathered[k];
        st = spmd_array_shard_to_host(sub.x, 0, block, sizeof block);
        printf("total %.9g; device 0 of 'j': %g %g %g %g\n", total, (double)block[0],
               (double)block[1], (double)block[2], (double)block[3]);
    }
    if (st != SPMD_OK)
        fprintf(stderr, "process %d: %s\n", spmd_process_index(), spmd_last_error());
    chain_end(&all);
    chain_end(&sub);
    if (spmd_is_initialized())
        spmd_finalize();
    return st == SPMD_OK ? 0 : 1;
}
