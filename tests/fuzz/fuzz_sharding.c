/* libFuzzer harness: meshes, named shardings and their index math.
 *
 * The input describes, byte by byte, a call to spmd_mesh_create (ndim, axis sizes and names,
 * device ids or NULL), a partition spec (built from the mesh's axis names, or raw text) for
 * spmd_sharding_create_parse, and an array shape (rank and extents) for
 * spmd_sharding_check_shape / _shard_shape / _device_box / spmd_visualize_sharding. Every
 * call must either succeed with results that agree with an independent model of the rules in
 * mesh.h, spec.h and sharding.h (device boxes tile the array; replica ids number the copies of
 * each box), or fail with an error status, a NULL output and a non-empty spmd_last_error().
 *
 * The runtime starts once per process with SPMD_NUM_CPU_DEVICES CPU devices (8 unless the
 * environment says otherwise) and is never finalized: the objects do not outlive it. */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "spmd/mesh.h"
#include "spmd/runtime.h"
#include "spmd/sharding.h"
#include "spmd/spec.h"
#include "spmd/status.h"

#define MAX_IDS 12 /* device ids the input may list (more than the 8 devices) */
#define MAX_NDIM (SPMD_MAX_MESH_AXES + 2) /* the input may ask for too many axes */
#define MAX_RANK (SPMD_MAX_RANK + 2)      /* and for too high a rank */

static int num_devices; /* spmd_device_count() */
static FILE *sink;      /* /dev/null, for spmd_visualize_sharding */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("SPMD_NUM_CPU_DEVICES", "8", 0); /* the caller's setting wins */
    setenv("SPMD_LOG_LEVEL", "error", 0);
    spmd_init_options opts = SPMD_INIT_OPTIONS_INIT;
    opts.platform = SPMD_PLATFORM_CPU;
    opts.use_mpi = 0;
    if (spmd_init(&opts) != SPMD_OK) {
        fprintf(stderr, "fuzz_sharding: spmd_init failed: %s\n", spmd_last_error());
        exit(1);
    }
    num_devices = spmd_device_count();
    sink = fopen("/dev/null", "w");
    if (sink == NULL || num_devices < 1) {
        fprintf(stderr, "fuzz_sharding: cannot open /dev/null or no devices\n");
        exit(1);
    }
    return 0;
}

/* A failed call: error status, no object, a message. */
#define CHECK_FAILED(st, obj, what)                                                                \
    do {                                                                                           \
        FUZZ_CHECK((st) != SPMD_OK, "%s succeeded", what);                                         \
        FUZZ_CHECK((obj) == NULL, "%s failed but set its output", what);                           \
        FUZZ_CHECK(spmd_last_error()[0] != '\0', "%s returned %s without a message", what,         \
                   spmd_status_name(st));                                                          \
    } while (0)

/* ---- the mesh ------------------------------------------------------------------------------ */

/* Input layout (a byte past the end reads as 0), which the seeds in corpus/fuzz_sharding use:
 *   mesh ndim     1 byte: -1 + b % 11
 *   per axis      size byte: 1 + b % 8 below 240, else 0, negative or huge;
 *                 name byte: below 42 name_pool[b % 21] (a b c x y ...), else a string of
 *                 (next byte % 66) bytes
 *   device ids    1 byte: b % 4 == 0 for NULL; else a count byte (b % 12) and one byte per id
 *                 (b % (devices + 1) below 250, else b - 252)
 *   spec          1 byte: b % 4 == 0 for raw text (a length byte, then the text); else an entry
 *                 count byte (b % 18), then per entry a bit mask of mesh axes (0: None; bits
 *                 past the mesh's axes name an unknown axis)
 *   array rank    1 byte: -1 + b % 18
 *   extents       18 bytes: below 200, (blocks of the dimension) * (1 + b % 5); else small,
 *                 powers of two up to 2^39, or near INT64_MAX / INT64_MIN */

typedef struct mesh_case {
    int ndim;
    int shape[MAX_NDIM];
    char names[MAX_NDIM][SPMD_MAX_AXIS_NAME + 3]; /* room for a name one byte too long */
    const char *name_ptrs[MAX_NDIM];
    int use_ids;
    int num_ids;
    int ids[MAX_IDS];
} mesh_case;

static const char *const name_pool[] = {
    "a",
    "b",
    "c",
    "x",
    "y",
    "data",
    "model",
    "i.j",
    "k-1",
    "_",
    "None",
    "",
    "a b",
    "it's",
    "P",
    "a,b",
    "a=b",
    "(",
    "\"q\"",
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
};
#define NAME_POOL ((int)(sizeof name_pool / sizeof name_pool[0]))

static void read_mesh_case(fuzz_reader *r, mesh_case *m)
{
    memset(m, 0, sizeof *m);
    m->ndim = fuzz_range(r, -1, SPMD_MAX_MESH_AXES + 1);
    int n = m->ndim < 0 ? 0 : m->ndim;
    for (int a = 0; a < n; a++) {
        uint8_t b = fuzz_byte(r);
        /* Mostly 1..8; sometimes 0, negative or huge. */
        m->shape[a] = b < 240 ? 1 + b % 8 : b < 248 ? b - 244 : b < 252 ? 1 << (b - 236) : INT_MAX;
        uint8_t k = fuzz_byte(r);
        if (k < 2 * NAME_POOL)
            snprintf(m->names[a], sizeof m->names[a], "%s", name_pool[k % NAME_POOL]);
        else
            fuzz_string(r, m->names[a], sizeof m->names[a]);
        m->name_ptrs[a] = m->names[a];
    }
    uint8_t mode = fuzz_byte(r);
    m->use_ids = mode % 4 != 0;
    if (m->use_ids) {
        m->num_ids = fuzz_range(r, 0, MAX_IDS - 1);
        for (int i = 0; i < m->num_ids; i++) {
            uint8_t b = fuzz_byte(r);
            m->ids[i] = b < 250 ? b % (num_devices + 1) : b - 252; /* a few invalid ones */
        }
    }
}

/* Whether a name meets mesh.h's rules: 1..SPMD_MAX_AXIS_NAME characters, not "None". Names
 * that also stick to letters, digits and _.- must then be accepted. */
static int name_documented_ok(const char *name)
{
    size_t len = strlen(name);
    return len >= 1 && len <= SPMD_MAX_AXIS_NAME && strcmp(name, "None") != 0;
}

static int name_plain(const char *name)
{
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '.' || *c == '-'))
            return 0;
    return 1;
}

/* 1: the documented rules hold; and *plain when every name is plain too. */
static int mesh_documented_ok(const mesh_case *m, int *plain)
{
    *plain = 1;
    if (m->ndim < 0 || m->ndim > SPMD_MAX_MESH_AXES)
        return 0;
    long long size = 1;
    for (int a = 0; a < m->ndim; a++) {
        if (!name_documented_ok(m->names[a]) || m->shape[a] < 1)
            return 0;
        *plain &= name_plain(m->names[a]);
        for (int b = 0; b < a; b++)
            if (strcmp(m->names[a], m->names[b]) == 0)
                return 0;
        size *= m->shape[a];
        if (size > num_devices)
            return 0; /* every mesh needs that many distinct devices */
    }
    if (!m->use_ids)
        return size == num_devices && m->ndim > 0;
    if (m->num_ids != size)
        return 0;
    for (int i = 0; i < m->num_ids; i++) {
        if (m->ids[i] < 0 || m->ids[i] >= num_devices)
            return 0;
        for (int j = 0; j < i; j++)
            if (m->ids[i] == m->ids[j])
                return 0;
    }
    return 1;
}

static void check_mesh(const spmd_mesh *mesh, const mesh_case *m)
{
    int size = 1;
    for (int a = 0; a < m->ndim; a++)
        size *= m->shape[a];
    FUZZ_CHECK(spmd_mesh_ndim(mesh) == m->ndim, "ndim %d, want %d", spmd_mesh_ndim(mesh), m->ndim);
    FUZZ_CHECK(spmd_mesh_size(mesh) == size, "size %d, want %d", spmd_mesh_size(mesh), size);
    FUZZ_CHECK(spmd_mesh_is_current(mesh), "a new mesh is not current");
    for (int a = 0; a < m->ndim; a++) {
        FUZZ_CHECK(spmd_mesh_axis_size(mesh, a) == m->shape[a], "axis %d size", a);
        FUZZ_CHECK(strcmp(spmd_mesh_axis_name(mesh, a), m->names[a]) == 0, "axis %d name", a);
        FUZZ_CHECK(spmd_mesh_axis_index(mesh, m->names[a]) == a, "axis index of '%s'", m->names[a]);
    }
    FUZZ_CHECK(spmd_mesh_axis_size(mesh, m->ndim) == -1 && spmd_mesh_axis_name(mesh, -1) == NULL,
               "axis queries out of range");
    FUZZ_CHECK(spmd_mesh_device_id(mesh, size) == -1 && spmd_mesh_device_id(mesh, -1) == -1,
               "device_id out of range");
    for (int f = 0; f < size; f++) {
        int id = m->use_ids ? m->ids[f] : f;
        FUZZ_CHECK(spmd_mesh_device_id(mesh, f) == id, "device at %d is %d, want %d", f,
                   spmd_mesh_device_id(mesh, f), id);
        FUZZ_CHECK(spmd_mesh_device_position(mesh, id) == f, "position of device %d", id);
        int coords[SPMD_MAX_MESH_AXES];
        FUZZ_CHECK(spmd_mesh_device_coords(mesh, id, coords) == SPMD_OK, "coords of device %d: %s",
                   id, spmd_last_error());
        int flat = 0; /* row-major */
        for (int a = 0; a < m->ndim; a++) {
            FUZZ_CHECK(coords[a] >= 0 && coords[a] < m->shape[a], "coordinate %d of device %d", a,
                       id);
            flat = flat * m->shape[a] + coords[a];
        }
        FUZZ_CHECK(flat == f, "device %d has coordinates of position %d, not %d", id, flat, f);
    }
    for (int id = -1; id <= num_devices; id++) {
        int in_mesh = 0;
        for (int f = 0; f < size; f++)
            in_mesh |= spmd_mesh_device_id(mesh, f) == id;
        if (!in_mesh) {
            int coords[SPMD_MAX_MESH_AXES];
            FUZZ_CHECK(spmd_mesh_device_position(mesh, id) == -1, "device %d has a position", id);
            FUZZ_CHECK(spmd_mesh_device_coords(mesh, id, coords) == SPMD_ERR_INVALID_ARGUMENT &&
                           spmd_last_error()[0] != '\0',
                       "coords of device %d, not in the mesh", id);
        }
    }
    /* One process: every device is local, and the mesh is its own local mesh. */
    FUZZ_CHECK(spmd_mesh_num_local_devices(mesh) == size, "local devices");
    FUZZ_CHECK(spmd_mesh_has_process(mesh, 0) && !spmd_mesh_has_process(mesh, 1), "processes");
    FUZZ_CHECK(spmd_mesh_is_contiguous(mesh), "a 1-process mesh is not contiguous");
    int local[SPMD_MAX_MESH_AXES];
    FUZZ_CHECK(spmd_mesh_local_shape(mesh, local) == SPMD_OK, "local shape: %s", spmd_last_error());
    for (int a = 0; a < m->ndim; a++)
        FUZZ_CHECK(local[a] == m->shape[a], "local shape of axis %d", a);
    FUZZ_CHECK(spmd_mesh_equal(mesh, mesh), "a mesh differs from itself");
    char text[1024];
    FUZZ_CHECK(spmd_mesh_format(mesh, text, sizeof text) == SPMD_OK, "mesh format: %s",
               spmd_last_error());
}

/* ---- the spec ------------------------------------------------------------------------------ */

/* Either a spec made of the mesh's axis names (so that the sharding often exists), or raw
 * text. Returns a new string. */
static char *read_spec_text(fuzz_reader *r, const mesh_case *m)
{
    char *text = calloc(1, 2048);
    if (text == NULL)
        abort();
    if (fuzz_byte(r) % 4 == 0) {
        fuzz_string(r, text, 256);
        return text;
    }
    size_t len = 0;
    int entries = fuzz_range(r, 0, SPMD_MAX_RANK + 1);
    int ndim = m->ndim < 0 ? 0 : m->ndim;
    for (int i = 0; i < entries; i++) {
        uint8_t axes = fuzz_byte(r); /* bit a: use mesh axis a (or an unknown one at bit 7) */
        len += (size_t)snprintf(text + len, 2048 - len, i ? ", " : "");
        int count = 0;
        char entry[1024] = "";
        size_t elen = 0;
        for (int a = 0; a < 8; a++) {
            if (!(axes >> a & 1))
                continue;
            const char *name = a < ndim ? m->names[a] : "zz";
            elen += (size_t)snprintf(entry + elen, sizeof entry - elen, "%s'%s'", count ? ", " : "",
                                     name);
            count++;
        }
        if (count == 0)
            len += (size_t)snprintf(text + len, 2048 - len, "None");
        else if (count == 1)
            len += (size_t)snprintf(text + len, 2048 - len, "%s", entry);
        else
            len += (size_t)snprintf(text + len, 2048 - len, "(%s)", entry);
        if (len >= 2047)
            break;
    }
    return text;
}

/* ---- the sharding and the array ----------------------------------------------------------- */

/* Blocks of array dimension j: the product of its axes' sizes (1 past the spec). */
static int model_blocks(const spmd_mesh *mesh, const spmd_spec *spec, int j)
{
    int n = 1;
    if (j >= spmd_spec_length(spec))
        return 1;
    for (int k = 0; k < spmd_spec_entry_size(spec, j); k++)
        n *=
            spmd_mesh_axis_size(mesh, spmd_mesh_axis_index(mesh, spmd_spec_entry_axis(spec, j, k)));
    return n;
}

/* Block of dimension j that the device at `coords` holds: its coordinates on the entry's axes
 * read as a number, the first axis major. */
static int model_block(const spmd_mesh *mesh, const spmd_spec *spec, int j, const int *coords)
{
    int b = 0;
    if (j >= spmd_spec_length(spec))
        return 0;
    for (int k = 0; k < spmd_spec_entry_size(spec, j); k++) {
        int a = spmd_mesh_axis_index(mesh, spmd_spec_entry_axis(spec, j, k));
        b = b * spmd_mesh_axis_size(mesh, a) + coords[a];
    }
    return b;
}

/* Replica id: the row-major rank of the coordinates on the axes the spec does not use. */
static int model_replica(const spmd_mesh *mesh, const spmd_spec *spec, const int *coords)
{
    int r = 0;
    for (int a = 0; a < spmd_mesh_ndim(mesh); a++) {
        int used = 0;
        for (int j = 0; j < spmd_spec_length(spec); j++)
            for (int k = 0; k < spmd_spec_entry_size(spec, j); k++)
                used |= strcmp(spmd_spec_entry_axis(spec, j, k), spmd_mesh_axis_name(mesh, a)) == 0;
        if (!used)
            r = r * spmd_mesh_axis_size(mesh, a) + coords[a];
    }
    return r;
}

static void read_shape(fuzz_reader *r, const spmd_mesh *mesh, const spmd_spec *spec, int *ndim,
                       int64_t *shape)
{
    *ndim = fuzz_range(r, -1, SPMD_MAX_RANK + 1);
    for (int j = 0; j < MAX_RANK; j++) {
        uint8_t b = fuzz_byte(r);
        int blocks = mesh != NULL && spec != NULL ? model_blocks(mesh, spec, j) : 1;
        if (b < 200)
            shape[j] = (int64_t)blocks * (1 + b % 5); /* divisible */
        else if (b < 220)
            shape[j] = b - 210; /* small, often not divisible, some < 1 */
        else if (b < 240)
            shape[j] = (int64_t)1 << (b - 200); /* up to 2^39: products overflow */
        else if (b < 250)
            shape[j] = INT64_MAX - (b - 240);
        else
            shape[j] = INT64_MIN + (b - 250);
    }
}

/* What sharding.h says check_shape must decide: 1 valid, 0 invalid, -1 valid but too many
 * elements for size_t (a library may refuse that). */
static int model_shape_ok(const spmd_mesh *mesh, const spmd_spec *spec, int ndim,
                          const int64_t *shape)
{
    if (ndim < 0 || ndim > SPMD_MAX_RANK || spmd_spec_length(spec) > ndim)
        return 0;
    for (int j = 0; j < ndim; j++)
        if (shape[j] < 1 || shape[j] % model_blocks(mesh, spec, j) != 0)
            return 0;
    size_t elements = 1;
    for (int j = 0; j < ndim; j++) {
        if (elements > SIZE_MAX / (size_t)shape[j])
            return -1;
        elements *= (size_t)shape[j];
    }
    return 1;
}

/* Every device's box against the model, and the boxes tile the array: each block of the
 * block grid is held by the same number of devices, with replica ids 0, 1, ... */
static void check_boxes(const spmd_sharding *sh, const spmd_mesh *mesh, const spmd_spec *spec,
                        int ndim, const int64_t *shape, const int64_t *shard)
{
    int size = spmd_mesh_size(mesh);
    int total_blocks = 1;
    for (int j = 0; j < ndim; j++)
        total_blocks *= model_blocks(mesh, spec, j);
    FUZZ_CHECK(total_blocks >= 1 && size % total_blocks == 0, "%d blocks on %d devices",
               total_blocks, size);
    int copies = size / total_blocks;
    int holders[8 * 8] = {0}; /* per block: how many devices hold it; bit per replica id */
    unsigned replica_bits[8 * 8] = {0};
    FUZZ_CHECK(total_blocks <= 64, "more blocks than devices");

    for (int f = 0; f < size; f++) {
        int id = spmd_mesh_device_id(mesh, f);
        int coords[SPMD_MAX_MESH_AXES];
        spmd_box box;
        memset(&box, 0xa5, sizeof box);
        FUZZ_CHECK(spmd_mesh_device_coords(mesh, id, coords) == SPMD_OK, "coords");
        spmd_status st = spmd_sharding_device_box(sh, ndim, shape, id, &box);
        FUZZ_CHECK(st == SPMD_OK, "device_box of device %d failed after check_shape passed: %s", id,
                   spmd_last_error());
        FUZZ_CHECK(box.ndim == ndim, "box rank %d, want %d", box.ndim, ndim);
        int flat_block = 0;
        for (int j = 0; j < ndim; j++) {
            int b = model_block(mesh, spec, j, coords);
            FUZZ_CHECK(box.start[j] == b * shard[j] && box.stop[j] == box.start[j] + shard[j],
                       "device %d dim %d: box [%lld, %lld), want block %d of size %lld", id, j,
                       (long long)box.start[j], (long long)box.stop[j], b, (long long)shard[j]);
            FUZZ_CHECK(box.start[j] >= 0 && box.stop[j] <= shape[j], "box outside the array");
            flat_block = flat_block * model_blocks(mesh, spec, j) + b;
        }
        int replica = spmd_sharding_replica_id(sh, id);
        FUZZ_CHECK(replica == model_replica(mesh, spec, coords), "replica id %d of device %d",
                   replica, id);
        FUZZ_CHECK(replica >= 0 && replica < copies, "replica id %d of %d copies", replica, copies);
        FUZZ_CHECK(!(replica_bits[flat_block] >> replica & 1), "two replicas %d of block %d",
                   replica, flat_block);
        replica_bits[flat_block] |= 1u << replica;
        holders[flat_block]++;
    }
    for (int b = 0; b < total_blocks; b++)
        FUZZ_CHECK(holders[b] == copies, "block %d held by %d devices, want %d", b, holders[b],
                   copies);
}

static void check_array(fuzz_reader *r, const spmd_sharding *sh, const spmd_mesh *mesh,
                        const spmd_spec *spec)
{
    int ndim;
    int64_t shape[MAX_RANK], shard[MAX_RANK];
    read_shape(r, mesh, spec, &ndim, shape);
    int want = model_shape_ok(mesh, spec, ndim, shape);

    spmd_status st = spmd_sharding_check_shape(sh, ndim, shape);
    FUZZ_CHECK(want != 1 || st == SPMD_OK, "check_shape refused a valid shape: %s",
               spmd_last_error());
    FUZZ_CHECK(want != 0 || st != SPMD_OK, "check_shape accepted an invalid shape (rank %d)", ndim);
    if (st != SPMD_OK) {
        FUZZ_CHECK(st == SPMD_ERR_SHAPE, "check_shape returned %s", spmd_status_name(st));
        FUZZ_CHECK(spmd_last_error()[0] != '\0', "check_shape failed without a message");
        st = spmd_sharding_shard_shape(sh, ndim, shape, shard);
        FUZZ_CHECK(st == SPMD_ERR_SHAPE && spmd_last_error()[0] != '\0', "shard_shape: %s",
                   spmd_status_name(st));
        spmd_box box;
        st = spmd_sharding_device_box(sh, ndim, shape, spmd_mesh_device_id(mesh, 0), &box);
        FUZZ_CHECK(st == SPMD_ERR_SHAPE && spmd_last_error()[0] != '\0', "device_box: %s",
                   spmd_status_name(st));
        if (ndim == 1 || ndim == 2) {
            st = spmd_visualize_sharding(sink, sh, ndim, shape);
            FUZZ_CHECK(st == SPMD_ERR_SHAPE && spmd_last_error()[0] != '\0', "visualize: %s",
                       spmd_status_name(st));
        }
        return;
    }

    st = spmd_sharding_shard_shape(sh, ndim, shape, shard);
    FUZZ_CHECK(st == SPMD_OK, "shard_shape failed after check_shape passed: %s", spmd_last_error());
    for (int j = 0; j < ndim; j++)
        FUZZ_CHECK(shard[j] * model_blocks(mesh, spec, j) == shape[j] && shard[j] >= 1,
                   "shard extent %lld of dimension %d", (long long)shard[j], j);
    check_boxes(sh, mesh, spec, ndim, shape, shard);

    /* A device outside the mesh has no box. */
    for (int id = -1; id <= num_devices; id++) {
        if (spmd_mesh_device_position(mesh, id) >= 0)
            continue;
        spmd_box box;
        st = spmd_sharding_device_box(sh, ndim, shape, id, &box);
        FUZZ_CHECK(st == SPMD_ERR_INVALID_ARGUMENT && spmd_last_error()[0] != '\0',
                   "device_box of device %d, not in the mesh: %s", id, spmd_status_name(st));
        FUZZ_CHECK(spmd_sharding_replica_id(sh, id) == -1, "replica id of device %d", id);
    }

    st = spmd_visualize_sharding(sink, sh, ndim, shape);
    if (ndim == 1 || ndim == 2)
        FUZZ_CHECK(st == SPMD_OK, "visualize failed: %s", spmd_last_error());
    else
        FUZZ_CHECK(st == SPMD_ERR_UNSUPPORTED && spmd_last_error()[0] != '\0', "visualize: %s",
                   spmd_status_name(st));
}

static void check_sharding(const spmd_sharding *sh, spmd_mesh *mesh, const spmd_spec *spec)
{
    FUZZ_CHECK(spmd_sharding_mesh(sh) == mesh, "the sharding's mesh");
    const spmd_spec *own = spmd_sharding_spec(sh);
    FUZZ_CHECK(own != NULL && spmd_spec_is_equivalent(own, spec) &&
                   spmd_spec_length(own) == spmd_spec_length(spec),
               "the sharding's spec");
    int used = 1;
    for (int j = 0; j < SPMD_MAX_RANK; j++) {
        FUZZ_CHECK(spmd_sharding_num_blocks(sh, j) == model_blocks(mesh, spec, j),
                   "num_blocks(%d) = %d, want %d", j, spmd_sharding_num_blocks(sh, j),
                   model_blocks(mesh, spec, j));
        used *= model_blocks(mesh, spec, j);
    }
    FUZZ_CHECK(spmd_sharding_num_blocks(sh, -1) == -1 &&
                   spmd_sharding_num_blocks(sh, SPMD_MAX_RANK) == -1,
               "num_blocks out of range");
    FUZZ_CHECK(spmd_sharding_is_fully_replicated(sh) == (used == 1), "is_fully_replicated");
    int size = spmd_mesh_size(mesh);
    FUZZ_CHECK(spmd_sharding_num_devices(sh) == size, "num_devices");
    FUZZ_CHECK(spmd_sharding_num_addressable_devices(sh) == size, "num_addressable_devices");
    FUZZ_CHECK(spmd_sharding_is_fully_addressable(sh), "is_fully_addressable");
    for (int i = 0; i < size; i++)
        FUZZ_CHECK(spmd_sharding_addressable_device_id(sh, i) == spmd_mesh_device_id(mesh, i),
                   "addressable device %d", i);
    FUZZ_CHECK(spmd_sharding_addressable_device_id(sh, size) == -1, "addressable out of range");
    for (int n = spmd_spec_length(spec); n <= SPMD_MAX_RANK; n++)
        FUZZ_CHECK(spmd_sharding_is_equivalent(sh, sh, n), "not equivalent to itself at rank %d",
                   n);
    char text[4096];
    FUZZ_CHECK(spmd_sharding_format(sh, text, sizeof text) == SPMD_OK, "format: %s",
               spmd_last_error());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_reader r = {data, size, 0};
    mesh_case m;
    spmd_mesh *mesh = NULL;
    spmd_sharding *sh = NULL;
    spmd_spec *spec = NULL;

    read_mesh_case(&r, &m);
    int plain = 0;
    int documented = mesh_documented_ok(&m, &plain);
    spmd_clear_error();
    spmd_status st =
        spmd_mesh_create(m.ndim, m.shape, m.name_ptrs, m.use_ids ? m.ids : NULL, m.num_ids, &mesh);
    if (st == SPMD_OK) {
        FUZZ_CHECK(mesh != NULL, "mesh_create succeeded with NULL");
        FUZZ_CHECK(documented, "mesh_create accepted a mesh that breaks mesh.h's rules");
        check_mesh(mesh, &m);
    } else {
        CHECK_FAILED(st, mesh, "spmd_mesh_create");
        FUZZ_CHECK(st == SPMD_ERR_INVALID_ARGUMENT, "mesh_create returned %s",
                   spmd_status_name(st));
        FUZZ_CHECK(!(documented && plain), "mesh_create refused a valid mesh: %s",
                   spmd_last_error());
    }

    char *text = read_spec_text(&r, &m);
    spmd_status parsed = spmd_spec_parse(text, &spec);
    spmd_clear_error();
    sh = (spmd_sharding *)&r; /* must be overwritten */
    st = spmd_sharding_create_parse(mesh, text, &sh);
    if (parsed != SPMD_OK) {
        CHECK_FAILED(st, sh, "create_parse of a bad spec");
        FUZZ_CHECK(st == parsed, "create_parse returned %s, the parser %s", spmd_status_name(st),
                   spmd_status_name(parsed));
    } else if (mesh == NULL) {
        CHECK_FAILED(st, sh, "create_parse on no mesh");
        FUZZ_CHECK(st == SPMD_ERR_INVALID_ARGUMENT, "create_parse on no mesh returned %s",
                   spmd_status_name(st));
    } else {
        int known = 1;
        for (int j = 0; j < spmd_spec_length(spec); j++)
            for (int k = 0; k < spmd_spec_entry_size(spec, j); k++)
                known &= spmd_mesh_axis_index(mesh, spmd_spec_entry_axis(spec, j, k)) >= 0;
        if (known) {
            FUZZ_CHECK(st == SPMD_OK && sh != NULL, "create_parse(\"%s\") failed: %s", text,
                       spmd_last_error());
            check_sharding(sh, mesh, spec);
            check_array(&r, sh, mesh, spec);
        } else {
            CHECK_FAILED(st, sh, "create_parse with an unknown axis");
            FUZZ_CHECK(st == SPMD_ERR_SPEC, "create_parse with an unknown axis returned %s",
                       spmd_status_name(st));
        }
    }
    /* The sharding holds its own references: destroy the mesh first. */
    spmd_mesh_destroy(mesh);
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(spec);
    free(text);
    return 0;
}
