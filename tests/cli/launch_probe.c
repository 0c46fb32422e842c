/* A program for the spmd launch and SpmdTesting tests.
 *   launch_probe sum     process 0 prints the sum of squares of arange(48) sharded over every
 *                        device: the same in every layout
 *   launch_probe layout  process 0 prints the numbers of processes and devices: differs
 *                        between layouts
 *   launch_probe devices every process prints a line per local device, in device order, and
 *                        one with its process number on stderr: in process order, the same in
 *                        every layout
 *   launch_probe exit K  the last process exits with status K, the others with 0
 *   launch_probe nul     process 0 prints "result", a NUL byte, then the device count: differs
 *                        between layouts after the NUL only
 *   launch_probe sleep S every process says "ready" on stderr, then sleeps S seconds
 *   launch_probe big M   process 0 prints M MiB of 64-byte numbered lines */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spmd.h>

#define LENGTH 48 /* divisible by every device count the tests use */

static spmd_status squares(const spmd_box *index, void *dst, void *user)
{
    (void)user;
    int64_t *out = dst;
    for (int64_t i = index->start[0]; i < index->stop[0]; i++)
        *out++ = i * i;
    return SPMD_OK;
}

static spmd_status total(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                         void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_block partial;
    spmd_status st = spmd_ctx_alloc(ctx, 0, NULL, SPMD_DTYPE_I64, &partial);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &in[0], SPMD_ALL_AXES, &partial);
    return st == SPMD_OK ? spmd_psum(ctx, &partial, &out[0], "x") : st;
}

static int fail(const char *what)
{
    fprintf(stderr, "launch_probe: %s: %s\n", what, spmd_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "sum";
    /* big: in 64 KiB writes; a write per line through mpiexec's terminal made the 200 MiB of
     * cli_launch take 30 s */
    static char buffer[1 << 16];
    if (strcmp(mode, "big") == 0)
        setvbuf(stdout, buffer, _IOFBF, sizeof buffer);
    if (spmd_init(NULL) != SPMD_OK)
        return fail("spmd_init");
    int me = spmd_process_index(), procs = spmd_process_count(), n = spmd_device_count();
    int code = 0;
    if (strcmp(mode, "exit") == 0) {
        code = me == procs - 1 && argc > 2 ? atoi(argv[2]) : 0;
    } else if (strcmp(mode, "devices") == 0) {
        for (int i = 0; i < spmd_local_device_count(); i++)
            printf("device %d of %d\n", spmd_local_device_id(i), n);
        fprintf(stderr, "process %d of %d\n", me, procs);
    } else if (strcmp(mode, "layout") == 0) {
        if (me == 0)
            printf("processes %d devices %d\n", procs, n);
    } else if (strcmp(mode, "big") == 0) {
        long lines = (argc > 2 ? atol(argv[2]) : 1) * (1 << 20) / 64;
        for (long i = 0; me == 0 && i < lines; i++) /* 64 bytes with the newline */
            printf("line %010ld of the big output, the same in every layout ...\n", i);
    } else if (strcmp(mode, "sleep") == 0) {
        fprintf(stderr, "ready\n");
        sleep(argc > 2 ? (unsigned)atoi(argv[2]) : 60);
    } else if (strcmp(mode, "nul") == 0) {
        if (me == 0) {
            fwrite("result\0 ", 1, 8, stdout);
            printf("%d\nsecond line\n", n);
        }
    } else {
        const char *name = "x";
        spmd_mesh *mesh = NULL;
        spmd_sharding *sharding = NULL;
        spmd_spec *in_spec = NULL, *out_spec = NULL;
        spmd_array *x = NULL, *sum = NULL;
        const int64_t shape[1] = {LENGTH};
        const spmd_out_desc scalar = {0, {0}, SPMD_DTYPE_I64};
        int64_t value = 0;
        if (spmd_mesh_create(1, &n, &name, NULL, 0, &mesh) != SPMD_OK ||
            spmd_sharding_create_parse(mesh, "'x'", &sharding) != SPMD_OK ||
            spmd_spec_parse("'x'", &in_spec) != SPMD_OK || spmd_spec_parse("", &out_spec) ||
            spmd_array_from_callback(1, shape, SPMD_DTYPE_I64, sharding, squares, NULL, &x) ||
            spmd_shard_map(mesh, total, NULL, 1, &x, (const spmd_spec *const *)&in_spec, 1, &scalar,
                           (const spmd_spec *const *)&out_spec, NULL, &sum) ||
            spmd_array_to_host(sum, &value, sizeof value))
            code = fail("the sum");
        else if (me == 0)
            printf("sum of squares %lld\n", (long long)value);
        spmd_array_destroy(sum);
        spmd_array_destroy(x);
        spmd_spec_destroy(in_spec);
        spmd_spec_destroy(out_spec);
        spmd_sharding_destroy(sharding);
        spmd_mesh_destroy(mesh);
    }
    fflush(stdout);
    if (spmd_finalize() != SPMD_OK)
        return fail("spmd_finalize");
    return code;
}
