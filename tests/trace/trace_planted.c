/*
 * A program with a planted fault, for check_trace.sh (run with SPMD_TRACE=DIR):
 *   clean    three shard_map calls over mesh 'i' (every device): psum, all_gather, ppermute;
 *   diverge  the same, but in the 4 x 2 layout only, device 5 adds 1 to its all_gather input
 *            (collective #2) in the third call (call #3 on the mesh);
 *   hang     in the second call, device 2 never reaches collective #2: it is stuck in fn
 *            (sleeping) until the others time out or the job is killed;
 *   abort    aborts after the first call (SIGABRT); exit: exits there without spmd_finalize.
 * Prints the total of the last call's output on process 0, so layouts can be compared.
 *   craft FILE DEVICES RECORDS  writes (without spmd_init) the trace file of a process whose
 *            header claims DEVICES local devices, its ring of RECORDS full: call #1, then
 *            collectives still open, each of a device of its own and named apart.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <spmd.h>

enum {
    PER_DEVICE = 4,
    CALLS = 3,
    PLANTED_CALL = 3,
    HANG_CALL = 2,
    PLANTED_DEVICE = 5,
    STUCK_DEVICE = 2
};

typedef struct plant {
    const char *mode;
    int call; /* the call being made: 1..CALLS */
} plant;

static int device_of(spmd_ctx *ctx)
{
    int i = 0;
    return spmd_axis_index(ctx, "i", &i) == SPMD_OK ? i : -1;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* out = ppermute(the parts of all_gather(x + psum(x)) summed), shifted by one device */
static spmd_status step(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)nout;
    const plant *p = user;
    int me = device_of(ctx), n = 0;
    spmd_status st = spmd_axis_size(ctx, "i", &n);
    spmd_block sum, gathered, mine;
    int64_t one[1] = {PER_DEVICE}, all[1] = {(int64_t)PER_DEVICE * n};
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, one, SPMD_DTYPE_F32, &sum);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, one, SPMD_DTYPE_F32, &mine);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, all, SPMD_DTYPE_F32, &gathered);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &in[0], &sum, "i"); /* collective #1 */
    if (st != SPMD_OK)
        return st;
    const float *x = in[0].data, *s = sum.data;
    float *m = mine.data;
    for (int k = 0; k < PER_DEVICE; k++)
        m[k] = x[k] + s[k];
    if (strcmp(p->mode, "diverge") == 0 && p->call == PLANTED_CALL && me == PLANTED_DEVICE &&
        spmd_process_count() == 4 && spmd_local_device_count() == 2)
        m[0] += 1.0f;
    if (strcmp(p->mode, "hang") == 0 && p->call == HANG_CALL && me == STUCK_DEVICE) {
        sleep_ms(6000); /* stuck: the others wait for it in collective #2 */
        return SPMD_ERR_INTERNAL;
    }
    st = spmd_all_gather(ctx, &mine, &gathered, "i", 0, 1); /* collective #2 */
    int pairs[2 * 64];
    for (int k = 0; k < n && k < 64; k++)
        pairs[2 * k] = k, pairs[2 * k + 1] = (k + 1) % n;
    const float *g = gathered.data; /* every device's part, summed in order */
    for (int k = 0; k < PER_DEVICE && st == SPMD_OK; k++) {
        m[k] = 0;
        for (int j = 0; j < n; j++)
            m[k] += g[j * PER_DEVICE + k] * 0.125f;
    }
    if (st == SPMD_OK)
        st = spmd_ppermute(ctx, &mine, &out[0], "i", pairs, n < 64 ? n : 64); /* #3 */
    return st;
}

/* The "craft" mode (a file for `spmd trace show` alone: no run makes such a ring). */
static int craft(const char *path, long devices, long records)
{
    if (devices < 1 || devices > (1L << 20) || records < 2 || records > (1L << 24)) {
        fprintf(stderr, "usage: trace_planted craft FILE DEVICES(1..2^20) RECORDS(2..2^24)\n");
        return 2;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    unsigned char page[SPMD_TRACE_HEADER_BYTES] = {0};
    spmd_trace_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, SPMD_TRACE_MAGIC, sizeof h.magic);
    h.format_version = SPMD_TRACE_FORMAT_VERSION;
    h.header_bytes = SPMD_TRACE_HEADER_BYTES;
    h.record_bytes = sizeof(spmd_trace_record);
    h.capacity = (uint32_t)records;
    h.num_processes = 1;
    h.num_local_devices = (int32_t)devices;
    h.pid = 1;
    h.state = SPMD_TRACE_RUNNING;
    h.next = (uint64_t)records;
    snprintf(h.host, sizeof h.host, "crafted");
    snprintf(h.program, sizeof h.program, "trace_planted craft");
    memcpy(page, &h, sizeof h);
    int ok = fwrite(page, 1, sizeof page, f) == sizeof page;
    for (long k = 0; k < records && ok; k++) {
        spmd_trace_record r;
        memset(&r, 0, sizeof r);
        r.stamp = (uint64_t)k + 1; /* slot k holds record k */
        r.status = SPMD_TRACE_OPEN;
        r.call = 1;
        r.start_ns = k;
        if (k == 0) {
            r.kind = SPMD_TRACE_CALL;
            r.device = -1;
            snprintf(r.what, sizeof r.what, "spmd_shard_map (crafted)");
        } else {
            r.kind = SPMD_TRACE_COLLECTIVE;
            r.device = (int32_t)((k - 1) % devices);
            r.seq = 1;
            snprintf(r.what, sizeof r.what, "psum float32[4] over ('i') #%ld", k);
        }
        ok = fwrite(&r, sizeof r, 1, f) == 1;
    }
    if (fclose(f) != 0 || !ok) {
        perror(path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "craft") == 0)
        return craft(argv[2], atol(argv[3]), atol(argv[4]));
    plant p = {argc > 1 ? argv[1] : "clean", 0};
    if (strcmp(p.mode, "clean") && strcmp(p.mode, "diverge") && strcmp(p.mode, "hang") &&
        strcmp(p.mode, "abort") && strcmp(p.mode, "exit")) {
        fprintf(stderr, "usage: trace_planted clean|diverge|hang|abort|exit, or craft FILE "
                        "DEVICES RECORDS\n");
        return 2;
    }
    spmd_status st = spmd_init(NULL);
    int n = spmd_device_count();
    const char *names[1] = {"i"};
    spmd_mesh *mesh = NULL;
    spmd_spec *split = NULL;
    spmd_sharding *sharding = NULL;
    spmd_array *x = NULL;
    float data[PER_DEVICE * 64];
    for (int k = 0; k < PER_DEVICE * n && k < PER_DEVICE * 64; k++)
        data[k] = (float)(k % 7) * 0.5f;
    const int64_t shape[1] = {(int64_t)PER_DEVICE * n};
    const spmd_out_desc desc = {1, {(int64_t)PER_DEVICE * n}, SPMD_DTYPE_F32};
    if (st == SPMD_OK && n > 64)
        st = SPMD_ERR_INVALID_ARGUMENT;
    if (st == SPMD_OK)
        st = spmd_mesh_create(1, &n, names, NULL, 0, &mesh);
    if (st == SPMD_OK)
        st = spmd_spec_parse("'i'", &split);
    if (st == SPMD_OK)
        st = spmd_sharding_create(mesh, split, &sharding);
    if (st == SPMD_OK)
        st = spmd_device_put(data, 1, shape, SPMD_DTYPE_F32, sharding, &x);
    for (p.call = 1; p.call <= CALLS && st == SPMD_OK; p.call++) {
        spmd_array *y = NULL;
        st = spmd_shard_map(mesh, step, &p, 1, &x, (const spmd_spec *[]){split}, 1, &desc,
                            (const spmd_spec *[]){split}, NULL, &y);
        if (st == SPMD_OK) {
            spmd_array_destroy(x);
            x = y;
        }
        if (strcmp(p.mode, "abort") == 0)
            abort(); /* a fatal signal */
        if (strcmp(p.mode, "exit") == 0)
            exit(0); /* no spmd_finalize */
    }
    float result[PER_DEVICE * 64];
    if (st == SPMD_OK)
        st = spmd_process_allgather(x, 1, result, sizeof result); /* the global array */
    if (st == SPMD_OK && spmd_process_index() == 0) {
        double total = 0;
        for (int k = 0; k < PER_DEVICE * n; k++)
            total += result[k];
        printf("total %.9g\n", total);
    }
    if (st != SPMD_OK)
        fprintf(stderr, "process %d: %s\n", spmd_process_index(), spmd_last_error());
    spmd_array_destroy(x);
    spmd_sharding_destroy(sharding);
    spmd_spec_destroy(split);
    spmd_mesh_destroy(mesh);
    if (spmd_is_initialized())
        spmd_finalize();
    return st == SPMD_OK ? 0 : 1;
}
