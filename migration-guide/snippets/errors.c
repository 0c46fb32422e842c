/*
 * Migration guide, page 7: the error index. Each call below fails on purpose, and the program
 * prints the status every process got; process 0 prints the message too, which is what the page
 * quotes. SPMD_ERR_NOT_ADDRESSABLE needs another process's device, so only mpirun shows it. Needs
 * 8 devices, at least 2 per process.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_errors
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_errors
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

/* [snippet:report] */
/* The name of the status, and (on process 0) the message: what was wrong, what to do. */
static void report(const char *what, spmd_status st)
{
    fprintf(stderr, "process %d: %s: %s\n", spmd_process_index(), what, spmd_status_name(st));
    if (st != SPMD_OK && spmd_process_index() == 0)
        fprintf(stderr, "%s: %s\n", spmd_status_name(st), spmd_last_error());
}
/* [end] */

/* Each device returns its position: different values, so the output is not replicated. */
static spmd_status position(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    int i = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &i);
    return st == SPMD_OK ? spmd_op_fill(ctx, &out[0], i) : st;
}

int main(void)
{
    CHECK(spmd_init(NULL));
    int N = spmd_device_count(), me = spmd_process_index();
    if (N != 8 || spmd_local_device_count() < 2) {
        fprintf(stderr,
                "needs 8 devices, at least 2 per process, got %d x %d; run with "
                "SPMD_NUM_CPU_DEVICES=8, or mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2\n",
                spmd_process_count(), spmd_local_device_count());
        spmd_finalize();
        return 2;
    }
    const char *axis = "i";
    spmd_mesh *mesh = NULL, *bad_mesh = NULL;
    spmd_sharding *by_rows = NULL, *bad = NULL, *replicated = NULL;
    spmd_spec *spec = NULL;
    spmd_array *x = NULL, *y = NULL;
    CHECK(spmd_mesh_create(1, &N, &axis, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i'", &by_rows));
    CHECK(spmd_sharding_create_parse(mesh, "", &replicated));
    float data[8 * 4] = {0};

    /* [snippet:caller_errors] */
    /* A mesh whose shape does not match the devices it is laid over. */
    const int three = 3;
    report("mesh of 3 over all 8 devices", spmd_mesh_create(1, &three, &axis, NULL, 0, &bad_mesh));

    /* A dimension the mesh axis does not divide: 6 rows over 8 devices. */
    const int64_t six_rows[2] = {6, 4};
    report("6 rows split 8 ways", spmd_device_put(data, 2, six_rows, SPMD_DTYPE_F32, by_rows, &x));

    /* Specs: a syntax error, and an axis the mesh does not have. */
    report("spec with a missing parenthesis", spmd_spec_parse("'i', ('j'", &spec));
    report("spec naming axis 'k'", spmd_sharding_create_parse(mesh, "'k', None", &bad));

    /* An input laid out otherwise than in_specs says (here replicated, where P('i') is asked). */
    const int64_t shape[2] = {8, 4};
    CHECK(spmd_device_put(data, 2, shape, SPMD_DTYPE_F32, replicated, &x));
    const spmd_spec *rows_spec[1] = {spmd_sharding_spec(by_rows)};
    const spmd_out_desc whole = {2, {8, 4}, SPMD_DTYPE_F32};
    report("replicated input for in_specs P('i')",
           spmd_shard_map(mesh, position, NULL, 1, &x, rows_spec, 1, &whole, rows_spec, NULL, &y));

    /* A picture of a 3-D array (only 1-D and 2-D can be drawn). */
    const int64_t cube[3] = {8, 4, 4};
    report("drawing a 3-D array", spmd_visualize_sharding(stdout, by_rows, 3, cube));
    /* [end] */

    /* [snippet:replication] */
    /* out_specs P() claims the output is the same on every device; here it is not. Devices 0
     * and 1 belong to process 0, so only process 0 makes this call. */
    if (me == 0) {
        const int two = 2, pair[2] = {0, 1};
        spmd_mesh *mesh2 = NULL;
        spmd_spec *same_everywhere = NULL;
        spmd_array *r = NULL;
        CHECK(spmd_mesh_create(1, &two, &axis, pair, 2, &mesh2));
        CHECK(spmd_spec_parse("", &same_everywhere));
        const spmd_out_desc one = {1, {1}, SPMD_DTYPE_F32};
        const spmd_spec *out_specs[1] = {same_everywhere};
        report("out_specs P() for differing values",
               spmd_shard_map(mesh2, position, NULL, 0, NULL, NULL, 1, &one, out_specs, NULL, &r));
        spmd_array_destroy(r);
        spmd_spec_destroy(same_everywhere);
        spmd_mesh_destroy(mesh2);
    }
    /* [end] */

    /* [snippet:not_addressable] */
    /* A single-device array on a device of another process. */
    if (spmd_process_count() > 1 && me == 0) {
        spmd_array *elsewhere = NULL;
        report("array on device 7 made by process 0",
               spmd_array_create_on_device(7, data, 2, shape, SPMD_DTYPE_F32, &elsewhere));
    }
    /* [end] */

    spmd_array_destroy(y);
    spmd_array_destroy(x);
    spmd_spec_destroy(spec);
    spmd_sharding_destroy(bad);
    spmd_sharding_destroy(replicated);
    spmd_sharding_destroy(by_rows);
    spmd_mesh_destroy(bad_mesh);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return 0;
}
