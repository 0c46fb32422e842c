/*
 * Host-local ⇄ global arrays, the examples of the docstring of
 * jax.experimental.multihost_utils.host_local_array_to_global_array, in C:
 *
 *   x           Mesh(jax.devices(), 'x'), P('x'), local = arange(4) * process_index:
 *               global shape (4 * processes,), value (0,0,0,0, 0,1,2,3, 0,2,4,6, 0,3,6,9, ...),
 *               each process's slice split over its devices;
 *   host_dev    Mesh(devices.reshape(processes, local devices), ('host', 'dev')), P('host'):
 *               the same value, each process's slice replicated over its devices;
 *   replicated  the same mesh, P(), local = arange(4) on every process: shape (4,), (0,1,2,3)
 *               on every device;
 *   transposed  the (host, dev) mesh transposed, ('dev', 'host'), with P('host', 'dev') and
 *               local (2, L) = arange(2L) + 2L * process_index: global arange(2PL) as (2P, L),
 *               whatever the order of the mesh (JAX's test_host_local_to_global values).
 *
 * For each, every process prints its local data, the global shape (from
 * spmd_local_to_global_shape and from the array), every shard it holds (device, replica id,
 * index box, values), the whole global value (gathered only to show it) and its part taken back
 * with spmd_global_to_host_local; zero_copy=1 says that the conversion shared the buffers.
 *
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./multihost_convert
 *   SPMD_NUM_CPU_DEVICES=8 ./multihost_convert
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "multihost_convert: %s failed (%s): %s\n", #call,                      \
                    spmd_status_name(st_), spmd_last_error());                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_DEVICES 256

/* Python's repr of a shape: "(4,)", "(2, 8)". */
static void format_shape(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t n = (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < ndim && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (n < size)
        snprintf(buf + n, size - n, ndim == 1 ? ",)" : ")");
}

/* numpy's layout of a 1-D or 2-D int32 value: "[0 1 2]", "[[0 1] [2 3]]". */
static void format_values(char *buf, size_t size, int ndim, const int64_t *shape, const int32_t *v)
{
    int64_t rows = ndim == 2 ? shape[0] : 1, cols = shape[ndim - 1];
    size_t n = ndim == 2 ? (size_t)snprintf(buf, size, "[") : 0;
    for (int64_t r = 0; r < rows && n < size; r++) {
        n += (size_t)snprintf(buf + n, size - n, r ? " [" : "[");
        for (int64_t c = 0; c < cols && n < size; c++)
            n += (size_t)snprintf(buf + n, size - n, c ? " %d" : "%d", (int)v[r * cols + c]);
        if (n < size)
            n += (size_t)snprintf(buf + n, size - n, "]");
    }
    if (ndim == 2 && n < size)
        snprintf(buf + n, size - n, "]");
}

/* "[0:2,1:2]": the index box of a shard. */
static void format_box(char *buf, size_t size, const spmd_box *box)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < box->ndim && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, d ? ",%lld:%lld" : "%lld:%lld",
                              (long long)box->start[d], (long long)box->stop[d]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

/* 1 when every shard of a is the buffer of b's shard on the same device (nothing copied). */
static int shares_buffers(const spmd_array *a, const spmd_array *b)
{
    for (int i = 0; i < spmd_array_num_shards(a); i++) {
        spmd_shard sa, sb;
        int found = 0;
        CHECK(spmd_array_shard(a, i, &sa));
        for (int j = 0; j < spmd_array_num_shards(b); j++) {
            CHECK(spmd_array_shard(b, j, &sb));
            if (sb.device_id == sa.device_id)
                found = sb.data == sa.data;
        }
        if (!found)
            return 0;
    }
    return 1;
}

/*
 * One conversion: `local` (this process's part, of local_shape) laid out on the local mesh
 * (this process's subcube of `mesh`, same axis names), converted to the global array with
 * `spec_text`, printed, and converted back.
 */
static void run_case(const char *name, spmd_mesh *mesh, const char *spec_text, int ndim,
                     const int64_t *local_shape, const int32_t *local)
{
    const int me = spmd_process_index();
    char mesh_text[256], spec_buf[128], shape_a[64], shape_b[64], values[16384];
    spmd_spec *spec = NULL;
    CHECK(spmd_spec_parse(spec_text, &spec));
    CHECK(spmd_mesh_format(mesh, mesh_text, sizeof mesh_text));
    CHECK(spmd_spec_format(spec, spec_buf, sizeof spec_buf));
    format_shape(shape_a, sizeof shape_a, ndim, local_shape);
    format_values(values, sizeof values, ndim, local_shape, local);
    /* What each process holds depends on the layout: stderr. Process 0's verdict on the round
     * trip goes to stdout, which then reads the same in every layout (spmd launch --layouts). */
    fprintf(stderr, "case=%s process=%d mesh=%s spec=%s local_shape=%s local=%s\n", name, me,
            mesh_text, spec_buf, shape_a, values);

    /* The local mesh: this process's subcube, in the mesh's flat order. */
    int mesh_ndim = spmd_mesh_ndim(mesh), local_mesh_shape[SPMD_MAX_MESH_AXES];
    int ids[MAX_DEVICES], nlocal = spmd_mesh_num_local_devices(mesh);
    const char *names[SPMD_MAX_MESH_AXES];
    CHECK(spmd_mesh_local_shape(mesh, local_mesh_shape));
    for (int a = 0; a < mesh_ndim; a++)
        names[a] = spmd_mesh_axis_name(mesh, a);
    for (int i = 0; i < nlocal; i++)
        ids[i] = spmd_mesh_local_device_id(mesh, i);
    spmd_mesh *local_mesh = NULL;
    spmd_sharding *local_sharding = NULL;
    spmd_array *local_array = NULL, *global = NULL, *back = NULL;
    CHECK(spmd_mesh_create(mesh_ndim, local_mesh_shape, names, ids, nlocal, &local_mesh));
    CHECK(spmd_sharding_create(local_mesh, spec, &local_sharding));
    CHECK(spmd_device_put(local, ndim, local_shape, SPMD_DTYPE_I32, local_sharding, &local_array));

    int64_t computed[SPMD_MAX_RANK];
    CHECK(spmd_local_to_global_shape(mesh, spec, ndim, local_shape, computed));
    CHECK(spmd_host_local_to_global(local_array, mesh, spec, &global));
    format_shape(shape_a, sizeof shape_a, ndim, computed);
    format_shape(shape_b, sizeof shape_b, spmd_array_ndim(global), spmd_array_shape(global));
    fprintf(stderr, "case=%s process=%d global_shape=%s local_to_global_shape=%s zero_copy=%d\n",
            name, me, shape_b, shape_a, shares_buffers(global, local_array));

    for (int i = 0; i < spmd_array_num_shards(global); i++) {
        spmd_shard shard;
        int32_t block[1024];
        int64_t block_shape[SPMD_MAX_RANK];
        char box[128];
        CHECK(spmd_array_shard(global, i, &shard));
        CHECK(spmd_array_shard_to_host(global, i, block, sizeof block));
        for (int d = 0; d < ndim; d++)
            block_shape[d] = shard.index.stop[d] - shard.index.start[d];
        format_box(box, sizeof box, &shard.index);
        format_values(values, sizeof values, ndim, block_shape, block);
        fprintf(stderr, "case=%s process=%d device=%d replica=%d index=%s values=%s\n", name, me,
                shard.device_id, shard.replica_id, box, values);
    }

    /* The whole value, to show it: a process gather, not part of the conversion. */
    int gathered_ndim;
    int64_t gathered_shape[SPMD_MAX_RANK];
    CHECK(spmd_process_allgather_shape(global, 1, &gathered_ndim, gathered_shape));
    size_t gathered_bytes = (size_t)spmd_array_size(global) * sizeof(int32_t);
    int32_t *all = malloc(gathered_bytes);
    if (!all) {
        fprintf(stderr, "multihost_convert: out of memory\n");
        exit(1);
    }
    CHECK(spmd_process_allgather(global, 1, all, gathered_bytes));
    format_values(values, sizeof values, gathered_ndim, gathered_shape, all);
    fprintf(stderr, "case=%s process=%d global_value=%s\n", name, me, values);
    free(all);

    /* And back: this process's part, over the same buffers. */
    CHECK(spmd_global_to_host_local(global, mesh, spec, &back));
    int32_t mine[1024];
    CHECK(spmd_array_to_host(back, mine, sizeof mine));
    format_shape(shape_a, sizeof shape_a, spmd_array_ndim(back), spmd_array_shape(back));
    format_values(values, sizeof values, spmd_array_ndim(back), spmd_array_shape(back), mine);
    fprintf(stderr, "case=%s process=%d back_shape=%s back=%s zero_copy=%d\n", name, me, shape_a,
            values, shares_buffers(back, global));
    int64_t count = 1;
    for (int d = 0; d < ndim; d++)
        count *= local_shape[d];
    int same =
        spmd_array_ndim(back) == ndim &&
        memcmp(spmd_array_shape(back), local_shape, (size_t)ndim * sizeof *local_shape) == 0 &&
        memcmp(mine, local, (size_t)count * sizeof *local) == 0;
    if (me == 0)
        printf("case=%s spec=%s round trip host-local -> global -> host-local: %s\n", name,
               spec_buf, same ? "the same data" : "DIFFERENT");
    fflush(stdout);

    spmd_array_destroy(back);
    spmd_array_destroy(global);
    spmd_array_destroy(local_array);
    spmd_sharding_destroy(local_sharding);
    spmd_mesh_destroy(local_mesh);
    spmd_spec_destroy(spec);
}

static int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

int main(void)
{
    CHECK(spmd_init(NULL));
    const int procs = spmd_process_count(), per = spmd_local_device_count(),
              n = spmd_device_count(), me = spmd_process_index();
    if (n != procs * per || n > MAX_DEVICES || per > 64) {
        fprintf(stderr,
                "multihost_convert needs the same number of devices (at most 64) in every "
                "process, got %d in all over %d processes; set SPMD_NUM_CPU_DEVICES\n",
                n, procs);
        spmd_finalize();
        return 2;
    }

    /* x: the docstring's 1-D mesh. Its local data needs a length the local devices divide:
     * arange(4) (the docs' "assumes jax.local_device_count() divides 4"), else lcm(4, L). */
    {
        const char *axis = "x";
        spmd_mesh *mesh = NULL;
        CHECK(spmd_mesh_create(1, &n, &axis, NULL, 0, &mesh));
        int k = 4 / gcd(4, per) * per;
        int32_t local[256];
        for (int i = 0; i < k; i++)
            local[i] = i * me;
        const int64_t shape[1] = {k};
        run_case("x", mesh, "'x'", 1, shape, local);
        spmd_mesh_destroy(mesh);
    }
    /* host_dev and replicated: the docstring's (processes, local devices) mesh. */
    {
        const int mesh_shape[2] = {procs, per};
        const char *names[2] = {"host", "dev"};
        spmd_mesh *mesh = NULL;
        CHECK(spmd_mesh_create(2, mesh_shape, names, NULL, 0, &mesh));
        int32_t local[4];
        const int64_t shape[1] = {4};
        for (int i = 0; i < 4; i++)
            local[i] = i * me;
        run_case("host_dev", mesh, "'host'", 1, shape, local);
        for (int i = 0; i < 4; i++)
            local[i] = i; /* P(): every process passes the same value */
        run_case("replicated", mesh, "", 1, shape, local);
        spmd_mesh_destroy(mesh);
    }
    /* transposed: mesh position (j, p) holds device p * L + j; each process is a column. */
    {
        const int mesh_shape[2] = {per, procs};
        const char *names[2] = {"dev", "host"};
        int ids[MAX_DEVICES];
        for (int j = 0; j < per; j++)
            for (int p = 0; p < procs; p++)
                ids[j * procs + p] = p * per + j;
        spmd_mesh *mesh = NULL;
        CHECK(spmd_mesh_create(2, mesh_shape, names, ids, n, &mesh));
        int32_t local[128];
        const int64_t shape[2] = {2, per};
        for (int i = 0; i < 2 * per; i++)
            local[i] = i + 2 * per * me;
        run_case("transposed", mesh, "'host', 'dev'", 2, shape, local);
        spmd_mesh_destroy(mesh);
    }
    CHECK(spmd_finalize());
    return 0;
}
