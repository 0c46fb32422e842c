/* Device meshes under mpirun: every query against values computed here (row-major coordinates,
 * process = id / d), the contiguity (subcube) rule of SEMANTICS.md (a), formatting, equality,
 * reference counting, and bad input. Every rank makes the same calls in the same order. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 64

static char sentinel_byte;
/* A non-NULL value that a failing constructor must overwrite with NULL. */
#define SENTINEL_MESH ((spmd_mesh *)(void *)&sentinel_byte)

static int nproc, ndev, ntotal, me; /* processes, devices per process, all devices, this rank */

static const char *const axis_names[] = {"a", "b", "c", "d", "e", "f", "g", "h"};

/* ---- the model --------------------------------------------------------------------------- */

typedef struct model {
    int ndim;
    int shape[SPMD_MAX_MESH_AXES];
    int size;
    int ids[MAX_DEVICES]; /* global id at each flat position */
} model;

static int process_of(int id) { return id / ndev; }

static void unflatten(const model *m, int flat, int *coords)
{
    for (int a = m->ndim - 1; a >= 0; a--) {
        coords[a] = flat % m->shape[a];
        flat /= m->shape[a];
    }
}

/*
 * The subcube rule, written independently of the library: a process is fine when the bounding
 * box of its devices' coordinates holds exactly as many cells as it has devices (then every
 * cell of the box is one of its own). Returns the first offending process, or -1 when every
 * process is fine; fills this process's box extents when it has devices in the mesh.
 */
static int first_offender(const model *m, int *local_shape, int *local_count)
{
    int offender = -1;
    *local_count = 0;
    for (int p = 0; p < nproc; p++) {
        int lo[SPMD_MAX_MESH_AXES], hi[SPMD_MAX_MESH_AXES], c[SPMD_MAX_MESH_AXES];
        int count = 0;
        for (int f = 0; f < m->size; f++) {
            if (process_of(m->ids[f]) != p)
                continue;
            unflatten(m, f, c);
            for (int a = 0; a < m->ndim; a++) {
                if (count == 0 || c[a] < lo[a])
                    lo[a] = c[a];
                if (count == 0 || c[a] > hi[a])
                    hi[a] = c[a];
            }
            count++;
        }
        if (count == 0)
            continue;
        int volume = 1;
        for (int a = 0; a < m->ndim; a++)
            volume *= hi[a] - lo[a] + 1;
        if (volume != count && offender < 0)
            offender = p;
        if (p == me) {
            *local_count = count;
            for (int a = 0; a < m->ndim; a++)
                local_shape[a] = hi[a] - lo[a] + 1;
        }
    }
    return offender;
}

/* ---- checking one mesh against its model ------------------------------------------------- */

static spmd_mesh *create_mesh(const model *m, int ids_null)
{
    spmd_mesh *mesh = SENTINEL_MESH;
    assert_ok(spmd_mesh_create(m->ndim, m->shape, axis_names, ids_null ? NULL : m->ids,
                               ids_null ? 0 : m->size, &mesh));
    assert_non_null(mesh);
    assert_ptr_not_equal(mesh, SENTINEL_MESH);
    return mesh;
}

static void check_mesh(const spmd_mesh *mesh, const model *m)
{
    assert_int_equal(spmd_mesh_ndim(mesh), m->ndim);
    assert_int_equal(spmd_mesh_size(mesh), m->size);
    for (int a = 0; a < m->ndim; a++) {
        assert_int_equal(spmd_mesh_axis_size(mesh, a), m->shape[a]);
        assert_string_equal(spmd_mesh_axis_name(mesh, a), axis_names[a]);
        assert_int_equal(spmd_mesh_axis_index(mesh, axis_names[a]), a);
    }
    assert_int_equal(spmd_mesh_axis_size(mesh, m->ndim), -1);
    assert_int_equal(spmd_mesh_axis_size(mesh, -1), -1);
    assert_null(spmd_mesh_axis_name(mesh, m->ndim));
    assert_null(spmd_mesh_axis_name(mesh, -1));
    assert_int_equal(spmd_mesh_axis_index(mesh, "zz"), -1);
    if (m->ndim < SPMD_MAX_MESH_AXES)
        assert_int_equal(spmd_mesh_axis_index(mesh, axis_names[m->ndim]), -1);
    assert_int_equal(spmd_mesh_axis_index(mesh, NULL), -1);

    /* flat order, positions and coordinates */
    int in_mesh[MAX_DEVICES] = {0};
    for (int f = 0; f < m->size; f++) {
        int id = m->ids[f];
        in_mesh[id] = 1;
        assert_int_equal(spmd_mesh_device_id(mesh, f), id);
        assert_int_equal(spmd_mesh_device_position(mesh, id), f);
        int want[SPMD_MAX_MESH_AXES], got[SPMD_MAX_MESH_AXES + 1];
        unflatten(m, f, want);
        got[m->ndim] = 12345; /* must not be written */
        assert_ok(spmd_mesh_device_coords(mesh, id, got));
        for (int a = 0; a < m->ndim; a++)
            if (got[a] != want[a])
                fail_msg("device %d (flat %d): coordinate %d is %d, want %d", id, f, a, got[a],
                         want[a]);
        assert_int_equal(got[m->ndim], 12345);
    }
    assert_int_equal(spmd_mesh_device_id(mesh, -1), -1);
    assert_int_equal(spmd_mesh_device_id(mesh, m->size), -1);
    assert_int_equal(spmd_mesh_device_position(mesh, -1), -1);
    assert_int_equal(spmd_mesh_device_position(mesh, ntotal), -1);
    for (int id = 0; id < ntotal; id++) {
        if (in_mesh[id])
            continue;
        assert_int_equal(spmd_mesh_device_position(mesh, id), -1);
        int c[SPMD_MAX_MESH_AXES];
        assert_status(spmd_mesh_device_coords(mesh, id, c), SPMD_ERR_INVALID_ARGUMENT,
                      "not in this mesh");
    }

    /* this process's devices, in flat order */
    int local[MAX_DEVICES], nlocal = 0;
    for (int f = 0; f < m->size; f++)
        if (process_of(m->ids[f]) == me)
            local[nlocal++] = m->ids[f];
    assert_int_equal(spmd_mesh_num_local_devices(mesh), nlocal);
    for (int i = 0; i < nlocal; i++)
        assert_int_equal(spmd_mesh_local_device_id(mesh, i), local[i]);
    assert_int_equal(spmd_mesh_local_device_id(mesh, nlocal), -1);
    assert_int_equal(spmd_mesh_local_device_id(mesh, -1), -1);
    for (int p = 0; p < nproc; p++) {
        int has = 0;
        for (int f = 0; f < m->size; f++)
            has |= process_of(m->ids[f]) == p;
        assert_int_equal(spmd_mesh_has_process(mesh, p), has);
    }
    assert_int_equal(spmd_mesh_has_process(mesh, nproc), 0);
    assert_int_equal(spmd_mesh_has_process(mesh, -1), 0);

    /* the subcube rule */
    int want_local[SPMD_MAX_MESH_AXES], local_count = 0;
    int offender = first_offender(m, want_local, &local_count);
    assert_int_equal(local_count, nlocal);
    assert_int_equal(spmd_mesh_is_contiguous(mesh), offender < 0);
    int got_local[SPMD_MAX_MESH_AXES + 1];
    got_local[m->ndim] = 12345;
    if (offender >= 0) {
        char who[32];
        snprintf(who, sizeof who, "process %d ", offender);
        assert_status(spmd_mesh_check_contiguous(mesh), SPMD_ERR_INVALID_ARGUMENT, who,
                      "contiguous", "spmd_array_from_single_device_arrays");
        assert_status(spmd_mesh_local_shape(mesh, got_local), SPMD_ERR_INVALID_ARGUMENT, who);
    } else {
        assert_ok(spmd_mesh_check_contiguous(mesh));
        if (nlocal == 0) {
            assert_status(spmd_mesh_local_shape(mesh, got_local), SPMD_ERR_INVALID_ARGUMENT,
                          "no device");
        } else {
            assert_ok(spmd_mesh_local_shape(mesh, got_local));
            for (int a = 0; a < m->ndim; a++)
                if (got_local[a] != want_local[a])
                    fail_msg("local shape axis %d is %d, want %d", a, got_local[a], want_local[a]);
        }
    }
    assert_int_equal(got_local[m->ndim], 12345);
}

static void check_model(const model *m, int ids_null)
{
    spmd_mesh *mesh = create_mesh(m, ids_null);
    check_mesh(mesh, m);
    spmd_mesh_destroy(mesh);
}

static void set_shape(model *m, int ndim, const int *shape)
{
    m->ndim = ndim;
    m->size = 1;
    for (int a = 0; a < ndim; a++) {
        m->shape[a] = shape[a];
        m->size *= shape[a];
    }
}

static void iota(model *m)
{
    for (int f = 0; f < m->size; f++)
        m->ids[f] = f;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_runtime_layout(void **state)
{
    (void)state;
    /* The model's assumptions: ids are process-major, d per process. */
    assert_int_equal(ntotal, nproc * ndev);
    assert_true(ntotal <= MAX_DEVICES);
    for (int k = 0; k < ndev; k++)
        assert_int_equal(spmd_local_device_id(k), me * ndev + k);
    for (int id = 0; id < ntotal; id++) {
        spmd_device_info info;
        assert_ok(spmd_device_get_info(id, &info));
        assert_int_equal(info.id, id);
        assert_int_equal(info.process_index, process_of(id));
        assert_int_equal(info.local_ordinal, id % ndev);
    }
}

/* Meshes over every device in id order (device_ids NULL and explicit): (n,), (P, d), (d, P),
 * and every 2-D and 3-D factorisation of n. */
static void test_all_devices(void **state)
{
    (void)state;
    model m;
    int shape[3];

    shape[0] = ntotal;
    set_shape(&m, 1, shape);
    iota(&m);
    check_model(&m, 1);
    check_model(&m, 0);
    {
        spmd_mesh *mesh = create_mesh(&m, 1);
        int local[1];
        assert_ok(spmd_mesh_check_contiguous(mesh));
        assert_ok(spmd_mesh_local_shape(mesh, local));
        assert_int_equal(local[0], ndev);
        spmd_mesh_destroy(mesh);
    }

    shape[0] = nproc;
    shape[1] = ndev;
    set_shape(&m, 2, shape);
    iota(&m);
    check_model(&m, 1);
    {
        spmd_mesh *mesh = create_mesh(&m, 1);
        int local[2];
        assert_true(spmd_mesh_is_contiguous(mesh));
        assert_ok(spmd_mesh_local_shape(mesh, local));
        assert_int_equal(local[0], 1);
        assert_int_equal(local[1], ndev);
        /* row p of the (P, d) mesh is process p */
        for (int i = 0; i < ndev; i++)
            assert_int_equal(spmd_mesh_local_device_id(mesh, i), me * ndev + i);
        int c[2];
        assert_ok(spmd_mesh_device_coords(mesh, me * ndev + ndev - 1, c));
        assert_int_equal(c[0], me);
        assert_int_equal(c[1], ndev - 1);
        spmd_mesh_destroy(mesh);
    }

    shape[0] = ndev;
    shape[1] = nproc;
    set_shape(&m, 2, shape);
    iota(&m);
    check_model(&m, 1);

    int checked = 0;
    for (int x = 1; x <= ntotal; x++) {
        if (ntotal % x)
            continue;
        shape[0] = x;
        shape[1] = ntotal / x;
        set_shape(&m, 2, shape);
        iota(&m);
        check_model(&m, 1);
        for (int y = 1; y <= ntotal / x; y++) {
            if ((ntotal / x) % y)
                continue;
            shape[1] = y;
            shape[2] = ntotal / x / y;
            set_shape(&m, 3, shape);
            iota(&m);
            check_model(&m, 1);
            checked++;
        }
    }
    assert_true(checked >= 1);

    /* Axes of size 1 anywhere, up to SPMD_MAX_MESH_AXES axes. */
    int eight[SPMD_MAX_MESH_AXES] = {1, 1, 1, 1, 1, 1, 1, 1};
    eight[5] = ntotal;
    set_shape(&m, SPMD_MAX_MESH_AXES, eight);
    iota(&m);
    check_model(&m, 1);
}

/* Interleaved order [p0d0, p1d0, ..., p0d1, p1d1, ...]: as a 1-D mesh not contiguous when there
 * are 2+ processes with 2+ devices each (process 0's hull holds p1d0); as a (d, P) mesh each
 * process owns one column and it is. */
static void test_interleaved(void **state)
{
    (void)state;
    model m;
    int shape[2] = {ntotal, 0};
    set_shape(&m, 1, shape);
    for (int k = 0; k < ndev; k++)
        for (int p = 0; p < nproc; p++)
            m.ids[k * nproc + p] = p * ndev + k;
    check_model(&m, 0);
    spmd_mesh *mesh = create_mesh(&m, 0);
    int local[1];
    if (nproc >= 2 && ndev >= 2) {
        assert_false(spmd_mesh_is_contiguous(mesh));
        assert_status(spmd_mesh_check_contiguous(mesh), SPMD_ERR_INVALID_ARGUMENT, "process 0 ",
                      "spmd_array_from_single_device_arrays");
        assert_status(spmd_mesh_local_shape(mesh, local), SPMD_ERR_INVALID_ARGUMENT, "process 0 ",
                      "spmd_array_from_single_device_arrays");
    } else {
        assert_true(spmd_mesh_is_contiguous(mesh));
        assert_ok(spmd_mesh_local_shape(mesh, local));
        assert_int_equal(local[0], ndev);
    }
    spmd_mesh_destroy(mesh);

    shape[0] = ndev;
    shape[1] = nproc;
    model m2;
    set_shape(&m2, 2, shape);
    memcpy(m2.ids, m.ids, sizeof m.ids);
    check_model(&m2, 0);
    mesh = create_mesh(&m2, 0);
    int local2[2];
    assert_ok(spmd_mesh_check_contiguous(mesh));
    assert_ok(spmd_mesh_local_shape(mesh, local2));
    assert_int_equal(local2[0], ndev);
    assert_int_equal(local2[1], 1);
    spmd_mesh_destroy(mesh);
}

/* Only some processes' devices: the last process's, then the first and last processes'. */
static void test_partial_processes(void **state)
{
    (void)state;
    model m;
    int shape[2] = {ndev, 0};
    set_shape(&m, 1, shape);
    for (int k = 0; k < ndev; k++)
        m.ids[k] = (nproc - 1) * ndev + k;
    check_model(&m, 0);
    spmd_mesh *mesh = create_mesh(&m, 0);
    int local[1];
    assert_ok(spmd_mesh_check_contiguous(mesh));
    if (me == nproc - 1) {
        assert_int_equal(spmd_mesh_num_local_devices(mesh), ndev);
        assert_ok(spmd_mesh_local_shape(mesh, local));
        assert_int_equal(local[0], ndev);
    } else {
        assert_int_equal(spmd_mesh_num_local_devices(mesh), 0);
        assert_int_equal(spmd_mesh_local_device_id(mesh, 0), -1);
        assert_int_equal(spmd_mesh_has_process(mesh, me), 0);
        assert_status(spmd_mesh_local_shape(mesh, local), SPMD_ERR_INVALID_ARGUMENT,
                      "spmd_mesh_local_shape", "no device");
    }
    spmd_mesh_destroy(mesh);

    /* (2, d): the first and the last process (the same one when P = 1, then (1, d)). */
    shape[0] = nproc >= 2 ? 2 : 1;
    shape[1] = ndev;
    set_shape(&m, 2, shape);
    for (int k = 0; k < ndev; k++) {
        m.ids[k] = k;
        if (nproc >= 2)
            m.ids[ndev + k] = (nproc - 1) * ndev + k;
    }
    check_model(&m, 0);

    /* A single device of process 1 (or 0), as a 1-D mesh and as a 0-axis mesh. */
    int owner = nproc >= 2 ? 1 : 0;
    shape[0] = 1;
    set_shape(&m, 1, shape);
    m.ids[0] = owner * ndev + ndev - 1;
    check_model(&m, 0);
}

/* Subsets of the devices in shuffled order, the same on every rank (one seed). */
static void test_shuffled_subsets(void **state)
{
    (void)state;
    spmd_test_rng rng = {0x5eed0000u + (unsigned)ntotal};
    int non_contiguous = 0, contiguous = 0;
    for (int trial = 0; trial < 200; trial++) {
        int perm[MAX_DEVICES];
        for (int i = 0; i < ntotal; i++)
            perm[i] = i;
        for (int i = ntotal - 1; i > 0; i--) {
            int j = spmd_test_rng_below(&rng, i + 1);
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        int count = 1 + spmd_test_rng_below(&rng, ntotal);
        /* a random factorisation of count into 1..3 axes */
        int shape[3], ndim = 1 + spmd_test_rng_below(&rng, 3), rest = count;
        for (int a = 0; a < ndim - 1; a++) {
            int divisors[MAX_DEVICES], nd = 0;
            for (int x = 1; x <= rest; x++)
                if (rest % x == 0)
                    divisors[nd++] = x;
            shape[a] = divisors[spmd_test_rng_below(&rng, nd)];
            rest /= shape[a];
        }
        shape[ndim - 1] = rest;
        model m;
        set_shape(&m, ndim, shape);
        assert_int_equal(m.size, count);
        memcpy(m.ids, perm, (size_t)count * sizeof(int));
        int dummy[SPMD_MAX_MESH_AXES], dummy_count;
        if (first_offender(&m, dummy, &dummy_count) >= 0)
            non_contiguous++;
        else
            contiguous++;
        check_model(&m, 0);
    }
    assert_true(contiguous > 0);
    if (nproc >= 2 && ndev >= 2)
        assert_true(non_contiguous > 0);
}

/* A 0-axis mesh holds exactly one device; make one of every device. */
static void test_zero_axes(void **state)
{
    (void)state;
    for (int id = 0; id < ntotal; id++) {
        spmd_mesh *mesh = SENTINEL_MESH;
        assert_ok(spmd_mesh_create(0, NULL, NULL, &id, 1, &mesh));
        assert_int_equal(spmd_mesh_ndim(mesh), 0);
        assert_int_equal(spmd_mesh_size(mesh), 1);
        assert_int_equal(spmd_mesh_axis_size(mesh, 0), -1);
        assert_null(spmd_mesh_axis_name(mesh, 0));
        assert_int_equal(spmd_mesh_axis_index(mesh, "a"), -1);
        assert_int_equal(spmd_mesh_device_id(mesh, 0), id);
        assert_int_equal(spmd_mesh_device_id(mesh, 1), -1);
        assert_int_equal(spmd_mesh_device_position(mesh, id), 0);
        assert_ok(spmd_mesh_device_coords(mesh, id, NULL));
        int mine = process_of(id) == me;
        assert_int_equal(spmd_mesh_num_local_devices(mesh), mine);
        assert_int_equal(spmd_mesh_local_device_id(mesh, 0), mine ? id : -1);
        for (int p = 0; p < nproc; p++)
            assert_int_equal(spmd_mesh_has_process(mesh, p), p == process_of(id));
        assert_true(spmd_mesh_is_contiguous(mesh));
        assert_ok(spmd_mesh_check_contiguous(mesh));
        if (mine)
            assert_ok(spmd_mesh_local_shape(mesh, NULL));
        else
            assert_status(spmd_mesh_local_shape(mesh, NULL), SPMD_ERR_INVALID_ARGUMENT,
                          "no device");
        char buf[32];
        assert_ok(spmd_mesh_format(mesh, buf, sizeof buf));
        assert_string_equal(buf, "Mesh()");
        model m = {.ndim = 0, .size = 1};
        m.ids[0] = id;
        check_mesh(mesh, &m);
        spmd_mesh_destroy(mesh);
    }
}

static void test_format(void **state)
{
    (void)state;
    int shape[2] = {nproc, ndev};
    const char *names[2] = {"a", "b"};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    char want[128], buf[128];
    snprintf(want, sizeof want, "Mesh('a': %d, 'b': %d, axis_types=(Auto, Auto))", nproc, ndev);
    assert_ok(spmd_mesh_format(mesh, buf, sizeof buf));
    assert_string_equal(buf, want);
    size_t len = strlen(want);
    assert_ok(spmd_mesh_format(mesh, buf, len + 1));
    assert_string_equal(buf, want);
    memset(buf, 'z', sizeof buf);
    assert_status(spmd_mesh_format(mesh, buf, len), SPMD_ERR_INVALID_ARGUMENT, "too small");
    assert_int_equal(buf[len - 1], '\0');
    assert_int_equal(strncmp(buf, want, len - 1), 0);
    spmd_mesh_destroy(mesh);

    const char *long_names[2] = {"data", "model_parallel"};
    int shape1[1] = {ntotal};
    assert_ok(spmd_mesh_create(1, shape1, long_names, NULL, 0, &mesh));
    snprintf(want, sizeof want, "Mesh('data': %d, axis_types=(Auto,))", ntotal);
    assert_ok(spmd_mesh_format(mesh, buf, sizeof buf));
    assert_string_equal(buf, want);
    spmd_mesh_destroy(mesh);

    int shape4[4] = {1, ntotal, 1, 1};
    const char *four[4] = {"w", "x", "y", "z"};
    assert_ok(spmd_mesh_create(4, shape4, four, NULL, 0, &mesh));
    snprintf(want, sizeof want,
             "Mesh('w': 1, 'x': %d, 'y': 1, 'z': 1, axis_types=(Auto, Auto, Auto, Auto))", ntotal);
    assert_ok(spmd_mesh_format(mesh, buf, sizeof buf));
    assert_string_equal(buf, want);
    spmd_mesh_destroy(mesh);
}

static void test_equal(void **state)
{
    (void)state;
    int shape[2] = {nproc, ndev}, flat[1] = {ntotal};
    const char *ab[2] = {"a", "b"}, *ba[2] = {"b", "a"};
    int ids[MAX_DEVICES], reversed[MAX_DEVICES];
    for (int i = 0; i < ntotal; i++) {
        ids[i] = i;
        reversed[i] = ntotal - 1 - i;
    }
    spmd_mesh *m1 = NULL, *m2 = NULL, *names_differ = NULL, *shape_differs = NULL,
              *order_differs = NULL;
    assert_ok(spmd_mesh_create(2, shape, ab, NULL, 0, &m1));
    assert_ok(spmd_mesh_create(2, shape, ab, ids, ntotal, &m2)); /* same, spelled out */
    assert_ok(spmd_mesh_create(2, shape, ba, NULL, 0, &names_differ));
    assert_ok(spmd_mesh_create(1, flat, ab, NULL, 0, &shape_differs));
    assert_ok(spmd_mesh_create(2, shape, ab, reversed, ntotal, &order_differs));
    assert_ptr_not_equal(m1, m2);
    assert_true(spmd_mesh_equal(m1, m1));
    assert_true(spmd_mesh_equal(m1, m2));
    assert_true(spmd_mesh_equal(m2, m1));
    assert_false(spmd_mesh_equal(m1, names_differ));
    assert_false(spmd_mesh_equal(m1, shape_differs));
    assert_false(spmd_mesh_equal(shape_differs, m1));
    assert_int_equal(spmd_mesh_equal(m1, order_differs), ntotal == 1);
    assert_false(spmd_mesh_equal(m1, NULL));
    assert_false(spmd_mesh_equal(NULL, m1));
    assert_false(spmd_mesh_equal(NULL, NULL));
    if (ntotal > 1) {
        int shape_t[2] = {ndev, nproc};
        spmd_mesh *transposed = NULL;
        assert_ok(spmd_mesh_create(2, shape_t, ab, NULL, 0, &transposed));
        assert_int_equal(spmd_mesh_equal(m1, transposed), nproc == ndev);
        spmd_mesh_destroy(transposed);
    }
    spmd_mesh_destroy(m1);
    spmd_mesh_destroy(m2);
    spmd_mesh_destroy(names_differ);
    spmd_mesh_destroy(shape_differs);
    spmd_mesh_destroy(order_differs);
}

static void test_reference_counting(void **state)
{
    (void)state;
    int shape[2] = {nproc, ndev};
    const char *names[2] = {"a", "b"};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    assert_ptr_equal(spmd_mesh_retain(mesh), mesh);
    assert_ptr_equal(spmd_mesh_retain(mesh), mesh);
    spmd_mesh_destroy(mesh);
    spmd_mesh_destroy(mesh);
    assert_int_equal(spmd_mesh_ndim(mesh), 2); /* one reference left */
    assert_int_equal(spmd_mesh_size(mesh), ntotal);

    /* A sharding keeps its mesh alive after the caller's last reference goes. */
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(mesh, "'a', 'b'", &sh));
    spmd_mesh_destroy(mesh);
    const spmd_mesh *kept = spmd_sharding_mesh(sh);
    assert_ptr_equal(kept, mesh);
    assert_int_equal(spmd_mesh_ndim(kept), 2);
    assert_int_equal(spmd_mesh_size(kept), ntotal);
    assert_string_equal(spmd_mesh_axis_name(kept, 1), "b");
    assert_int_equal(spmd_mesh_device_id(kept, ntotal - 1), ntotal - 1);
    char buf[64], want[64];
    snprintf(want, sizeof want, "Mesh('a': %d, 'b': %d, axis_types=(Auto, Auto))", nproc, ndev);
    assert_ok(spmd_mesh_format(kept, buf, sizeof buf));
    assert_string_equal(buf, want);
    /* A retained mesh from the sharding outlives the sharding. */
    spmd_mesh *again = spmd_mesh_retain(spmd_sharding_mesh(sh));
    spmd_sharding_destroy(sh);
    assert_int_equal(spmd_mesh_num_local_devices(again), ndev);
    spmd_mesh_destroy(again);

    assert_null(spmd_mesh_retain(NULL));
    spmd_mesh_destroy(NULL);
}

/* ---- bad input --------------------------------------------------------------------------- */

/* spmd_mesh_create must fail with `status` and the fragment, leaving *out NULL. */
#define BAD_MESH(ndim_, shape_, names_, ids_, nids_, status, ...)                                  \
    do {                                                                                           \
        spmd_mesh *out_ = SENTINEL_MESH;                                                           \
        assert_status(spmd_mesh_create((ndim_), (shape_), (names_), (ids_), (nids_), &out_),       \
                      (status), __VA_ARGS__);                                                      \
        assert_null(out_);                                                                         \
    } while (0)

static void test_bad_input(void **state)
{
    (void)state;
    const int n = ntotal;
    const char *ab[2] = {"a", "b"};
    int ids[MAX_DEVICES + 1];
    for (int i = 0; i <= MAX_DEVICES; i++)
        ids[i] = i;

    /* mesh size differs from the number of device ids given */
    int s_n1[1] = {n + 1}, s_n[1] = {n}, s_2n[1] = {2 * n};
    BAD_MESH(1, s_n1, ab, ids, n, SPMD_ERR_INVALID_ARGUMENT, "device ids");
    BAD_MESH(1, s_n, ab, ids, n + 1, SPMD_ERR_INVALID_ARGUMENT, "device ids");
    BAD_MESH(1, s_n, ab, ids, 0, SPMD_ERR_INVALID_ARGUMENT, "device ids");
    BAD_MESH(1, s_n, ab, ids, -1, SPMD_ERR_INVALID_ARGUMENT, "device ids");
    int s_1x2[2] = {1, 2};
    BAD_MESH(0, NULL, NULL, ids, 2, SPMD_ERR_INVALID_ARGUMENT, "device ids");
    if (n >= 2)
        BAD_MESH(2, s_1x2, ab, ids, 1, SPMD_ERR_INVALID_ARGUMENT, "device ids");
    /* device_ids NULL, but the shape does not hold every device */
    BAD_MESH(1, s_n1, ab, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "device_ids");
    BAD_MESH(1, s_2n, ab, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "device_ids");
    if (n >= 2) {
        int s_half[1] = {1};
        BAD_MESH(1, s_half, ab, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "device_ids");
    }
    BAD_MESH(0, NULL, NULL, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "device_ids");
    /* a device twice */
    int twice[2] = {0, 0};
    int s2[1] = {2};
    BAD_MESH(1, s2, ab, twice, 2, SPMD_ERR_INVALID_ARGUMENT, "twice");
    if (n >= 3) {
        int twice_late[3] = {n - 1, 1, n - 1};
        int s3[1] = {3};
        BAD_MESH(1, s3, ab, twice_late, 3, SPMD_ERR_INVALID_ARGUMENT, "twice");
    }
    /* device ids out of range */
    int minus_one[1] = {-1}, too_big[1] = {spmd_device_count()}, huge[1] = {1 << 30};
    int s1[1] = {1};
    BAD_MESH(1, s1, ab, minus_one, 1, SPMD_ERR_INVALID_ARGUMENT, "-1", "not a device");
    BAD_MESH(1, s1, ab, too_big, 1, SPMD_ERR_INVALID_ARGUMENT, "not a device");
    BAD_MESH(1, s1, ab, huge, 1, SPMD_ERR_INVALID_ARGUMENT, "not a device");
    BAD_MESH(0, NULL, NULL, minus_one, 1, SPMD_ERR_INVALID_ARGUMENT, "not a device");
    BAD_MESH(0, NULL, NULL, too_big, 1, SPMD_ERR_INVALID_ARGUMENT, "not a device");
    /* zero and negative axis sizes */
    int s0[1] = {0}, sneg[1] = {-2}, s_n0[2] = {n, 0}, s_neg2[2] = {1, -1};
    BAD_MESH(1, s0, ab, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "size");
    BAD_MESH(1, s0, ab, ids, 0, SPMD_ERR_INVALID_ARGUMENT, "size");
    BAD_MESH(1, sneg, ab, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "size");
    BAD_MESH(2, s_n0, ab, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "size");
    BAD_MESH(2, s_neg2, ab, ids, 1, SPMD_ERR_INVALID_ARGUMENT, "size");
    int s_overflow[2] = {1 << 16, 1 << 16};
    BAD_MESH(2, s_overflow, ab, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "devices");
    /* axis names */
    int s_n_1[2] = {n, 1};
    const char *dup[2] = {"a", "a"}, *null_name[2] = {"a", NULL}, *empty[2] = {"", "b"},
               *none[2] = {"None", "b"}, *space[2] = {"a b", "c"}, *quote[2] = {"a'", "b"};
    char long_name[SPMD_MAX_AXIS_NAME + 2];
    memset(long_name, 'q', SPMD_MAX_AXIS_NAME + 1);
    long_name[SPMD_MAX_AXIS_NAME + 1] = '\0';
    const char *too_long[2] = {"a", long_name};
    BAD_MESH(2, s_n_1, dup, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "'a'", "distinct");
    BAD_MESH(2, s_n_1, null_name, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "NULL");
    BAD_MESH(2, s_n_1, empty, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "empty");
    BAD_MESH(2, s_n_1, none, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "None");
    BAD_MESH(2, s_n_1, space, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "contains");
    BAD_MESH(2, s_n_1, quote, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "contains");
    BAD_MESH(2, s_n_1, too_long, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "63");
    /* the longest legal name works */
    long_name[SPMD_MAX_AXIS_NAME] = '\0';
    {
        spmd_mesh *ok = NULL;
        assert_ok(spmd_mesh_create(2, s_n_1, too_long, NULL, 0, &ok));
        assert_int_equal(spmd_mesh_axis_index(ok, long_name), 1);
        spmd_mesh_destroy(ok);
    }
    /* ndim out of range, NULL arrays */
    int s9[9] = {n, 1, 1, 1, 1, 1, 1, 1, 1};
    const char *nine[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    BAD_MESH(-1, s9, nine, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "ndim is -1");
    BAD_MESH(9, s9, nine, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "ndim is 9");
    BAD_MESH(1, NULL, ab, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "shape", "NULL");
    BAD_MESH(1, s_n, NULL, NULL, 0, SPMD_ERR_INVALID_ARGUMENT, "axis_names", "NULL");
    assert_status(spmd_mesh_create(1, s_n, ab, NULL, 0, NULL), SPMD_ERR_INVALID_ARGUMENT, "out",
                  "NULL");

    /* queries that fail on a good mesh */
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, s_n, ab, NULL, 0, &mesh));
    assert_status(spmd_mesh_device_coords(mesh, 0, NULL), SPMD_ERR_INVALID_ARGUMENT, "coords");
    int c[1];
    assert_status(spmd_mesh_device_coords(mesh, n, c), SPMD_ERR_INVALID_ARGUMENT,
                  "not in this mesh");
    assert_status(spmd_mesh_device_coords(mesh, -1, c), SPMD_ERR_INVALID_ARGUMENT,
                  "not in this mesh");
    assert_status(spmd_mesh_local_shape(mesh, NULL), SPMD_ERR_INVALID_ARGUMENT, "shape");
    char buf[8];
    assert_status(spmd_mesh_format(mesh, NULL, 8), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    assert_status(spmd_mesh_format(mesh, buf, 0), SPMD_ERR_INVALID_ARGUMENT, "size is 0");
    assert_status(spmd_mesh_format(mesh, buf, 4), SPMD_ERR_INVALID_ARGUMENT, "too small");
    spmd_mesh_destroy(mesh);
    assert_status(spmd_mesh_device_coords(NULL, 0, c), SPMD_ERR_INVALID_ARGUMENT, "mesh", "NULL");
    assert_status(spmd_mesh_check_contiguous(NULL), SPMD_ERR_INVALID_ARGUMENT, "mesh", "NULL");
    assert_status(spmd_mesh_local_shape(NULL, c), SPMD_ERR_INVALID_ARGUMENT, "mesh", "NULL");
    assert_status(spmd_mesh_format(NULL, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT, "mesh",
                  "NULL");
    assert_int_equal(spmd_mesh_ndim(NULL), -1);
    assert_int_equal(spmd_mesh_size(NULL), 0);
    assert_int_equal(spmd_mesh_axis_size(NULL, 0), -1);
    assert_null(spmd_mesh_axis_name(NULL, 0));
    assert_int_equal(spmd_mesh_axis_index(NULL, "a"), -1);
    assert_int_equal(spmd_mesh_device_id(NULL, 0), -1);
    assert_int_equal(spmd_mesh_device_position(NULL, 0), -1);
    assert_int_equal(spmd_mesh_num_local_devices(NULL), 0);
    assert_int_equal(spmd_mesh_local_device_id(NULL, 0), -1);
    assert_int_equal(spmd_mesh_has_process(NULL, 0), 0);
    assert_int_equal(spmd_mesh_is_contiguous(NULL), 0);
}

int main(void)
{
    spmd_test_init();
    nproc = spmd_process_count();
    ndev = spmd_local_device_count();
    ntotal = spmd_device_count();
    me = spmd_process_index();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runtime_layout),
        cmocka_unit_test(test_all_devices),
        cmocka_unit_test(test_interleaved),
        cmocka_unit_test(test_partial_processes),
        cmocka_unit_test(test_shuffled_subsets),
        cmocka_unit_test(test_zero_axes),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_equal),
        cmocka_unit_test(test_reference_counting),
        cmocka_unit_test(test_bad_input),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures);
}
