/*
 * The legacy `unreplicate` (flax's tree_map(lambda x: x[0], tree)) of parameters that
 * device_put_replicated stacked onto every device, two ways (SEMANTICS.md (h)):
 *
 *   anti-pattern  the whole stacked (n, 3, 4) array gathered to the host (spmd_array_to_host
 *                 only works when one process holds every device; spmd_process_allgather
 *                 always does), then slice 0 taken and put back on a device: n slices move,
 *                 (n - local devices) of them from other processes, and one more is copied;
 *   fix           spmd_unreplicate: this process's first shard without its leading axis, a
 *                 view of that device's buffer (0 bytes communicated or copied), and
 *                 spmd_unreplicate_to_host: the same slice copied to the host.
 *
 * Both give the same values, which the program prints with the byte counts of each way.
 *
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./unreplicate
 *   SPMD_NUM_CPU_DEVICES=8 ./unreplicate
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "unreplicate: %s failed (%s): %s\n", #call, spmd_status_name(st_),     \
                    spmd_last_error());                                                            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define ROWS 3
#define COLS 4
#define MAX_DEVICES 4096

/* numpy's "[[a b c d] [e f g h] ...]" of a ROWS x COLS slice. */
static void format_slice(char *buf, size_t size, const float *v)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int r = 0; r < ROWS && n < size; r++) {
        n += (size_t)snprintf(buf + n, size - n, r ? " [" : "[");
        for (int c = 0; c < COLS && n < size; c++)
            n += (size_t)snprintf(buf + n, size - n, c ? " %g" : "%g", (double)v[r * COLS + c]);
        if (n < size)
            n += (size_t)snprintf(buf + n, size - n, "]");
    }
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

int main(void)
{
    CHECK(spmd_init(NULL));
    const int n = spmd_device_count(), me = spmd_process_index(), local = spmd_local_device_count();
    if (n > MAX_DEVICES) {
        fprintf(stderr, "unreplicate supports at most %d devices, got %d\n", MAX_DEVICES, n);
        spmd_finalize();
        return 2;
    }
    /* The "parameters": w[r, c] = (4r + c) / 4 - 1. */
    float params[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        params[i] = (float)i * 0.25f - 1.0f;
    const int64_t shape[2] = {ROWS, COLS};
    const size_t slice_bytes = sizeof params;
    static int devices[MAX_DEVICES];
    for (int d = 0; d < n; d++)
        devices[d] = d;
    fprintf(stderr, "process=%d devices=%d local_devices=%d slice_shape=(%d, %d) slice_bytes=%zu\n",
            me, n, local, ROWS, COLS, slice_bytes);

    /* (n, 3, 4): params on every device, each shard written from `params` */
    spmd_array *stacked = NULL;
    CHECK(spmd_device_put_replicated(params, 2, shape, SPMD_DTYPE_F32, devices, n, &stacked));
    const int64_t *s = spmd_array_shape(stacked);
    fprintf(stderr, "process=%d stacked shape=(%lld, %lld, %lld) shards=%d stacked_replicas=%d\n",
            me, (long long)s[0], (long long)s[1], (long long)s[2], spmd_array_num_shards(stacked),
            spmd_array_has_stacked_replicas(stacked));

    /* Anti-pattern: np.asarray(x)[0]. The whole array first; across processes it is not ours
     * to read, so the legacy code needs a process gather. */
    int gathered_ndim;
    int64_t gathered_shape[SPMD_MAX_RANK];
    CHECK(spmd_process_allgather_shape(stacked, 1, &gathered_ndim, gathered_shape));
    size_t gathered_bytes = sizeof(float);
    for (int d = 0; d < gathered_ndim; d++)
        gathered_bytes *= (size_t)gathered_shape[d];
    float *all = malloc(gathered_bytes);
    if (!all) {
        fprintf(stderr, "unreplicate: out of memory\n");
        return 1;
    }
    spmd_status st = spmd_array_to_host(stacked, all, gathered_bytes);
    fprintf(stderr, "process=%d antipattern array_to_host=%s\n", me, spmd_status_name(st));
    spmd_clear_error();
    CHECK(spmd_process_allgather(stacked, 1, all, gathered_bytes));
    spmd_array *legacy = NULL; /* x[0], back on this process's first device */
    CHECK(spmd_array_create_on_device(spmd_local_device_id(0), all, 2, shape, SPMD_DTYPE_F32,
                                      &legacy));
    float anti[ROWS * COLS];
    char text[1024];
    CHECK(spmd_array_to_host(legacy, anti, sizeof anti));
    format_slice(text, sizeof text, anti);
    const int remote = n - spmd_array_num_shards(stacked);
    fprintf(stderr,
            "process=%d antipattern gathered_bytes=%zu from_other_processes=%zu "
            "index0_copy_bytes=%zu values=%s\n",
            me, gathered_bytes, (size_t)remote * slice_bytes, slice_bytes, text);

    /* Fix: this process's first shard, viewed without the leading axis. */
    spmd_array *fixed = NULL;
    spmd_shard first, view;
    CHECK(spmd_unreplicate(stacked, &fixed));
    CHECK(spmd_array_shard(stacked, 0, &first));
    CHECK(spmd_array_shard(fixed, 0, &view));
    const size_t moved = view.data == first.data ? 0 : slice_bytes; /* 0: the same buffer */
    float fix[ROWS * COLS], fix_host[ROWS * COLS];
    CHECK(spmd_array_to_host(fixed, fix, sizeof fix)); /* only to print it */
    const int64_t *fs = spmd_array_shape(fixed);
    format_slice(text, sizeof text, fix);
    fprintf(stderr,
            "process=%d fix unreplicate device=%d shape=(%lld, %lld) bytes_moved=%zu values=%s\n",
            me, view.device_id, (long long)fs[0], (long long)fs[1], moved, text);
    CHECK(spmd_unreplicate_to_host(stacked, fix_host, sizeof fix_host));
    format_slice(text, sizeof text, fix_host);
    fprintf(stderr, "process=%d fix unreplicate_to_host host_copy_bytes=%zu values=%s\n", me,
            slice_bytes, text);
    const int identical =
        memcmp(anti, fix, sizeof anti) == 0 && memcmp(anti, fix_host, sizeof anti) == 0;
    fprintf(stderr, "process=%d identical=%d\n", me, identical);
    /* What each process holds and moves depends on the layout: stderr, above. Process 0's
     * result goes to stdout, the same in every layout (spmd launch --layouts compares it). */
    if (me == 0)
        printf("x[0] = %s, %s by the gather, spmd_unreplicate and spmd_unreplicate_to_host\n", text,
               identical ? "the same" : "NOT the same");
    fflush(stdout);

    spmd_array_destroy(fixed);
    spmd_array_destroy(legacy);
    free(all);
    spmd_array_destroy(stacked);
    CHECK(spmd_finalize());
    return 0;
}
