/*
 * A tag space too small for a mesh's lanes (src/shard_map/tag_lanes.c), end to end: this program
 * reports a small MPI_TAG_UB to libspmd through MPI's profiling interface (its own
 * MPI_Comm_get_attr), so the library has no test hook. Within that room a table whose lanes fit
 * (or whose groups all stay within processes: they need none) gives the sums a host loop gives;
 * one whose lanes end past it is refused on every process with the numbers (its lanes,
 * MPI_TAG_UB, the room) and, for a grouping, the axis_index_groups advice; the refusal leaves
 * the mesh working. Every layout meets both refusals (each test counts them).
 *
 * Expected outcomes are found here from the layout's rule: a set of axes with n >= 2 positions
 * per group owns size / n lanes, a grouping slot size / 2, in the order (axis sets by mask, then
 * the slots in the order first used); a table is refused when its first lane plus its groups
 * that span processes exceed the room (N / 2 + 1 lanes here, N devices: the first grouping's
 * lanes end there). Run with 4 to 16 devices, an even number in each of 2 or more processes (the
 * pairs of neighbours then stay within processes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "testutil.h"

#define ELEMS 3
#define MAX_DEVICES 16

/* The devices of the run, as the launcher set them: the room is read before spmd_init ends
 * (main checks that libspmd counts as many). */
static int devices(void)
{
    int processes = 1;
    PMPI_Comm_size(MPI_COMM_WORLD, &processes);
    const char *per = getenv("SPMD_NUM_CPU_DEVICES");
    return processes * (per ? atoi(per) : 1);
}

static int room(void) { return devices() / 2 + 1; }

/* Lanes left past the keyed blocks (comm_mpi.c): (MPI_TAG_UB - 16) / 4 - 4096. */
static int fake_tag_ub(void) { return 16 + 4 * (4096 + room()); }

int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void *value, int *flag)
{
    static int ub;
    int rc = PMPI_Comm_get_attr(comm, keyval, value, flag);
    if (rc == MPI_SUCCESS && keyval == MPI_TAG_UB && *flag) {
        ub = fake_tag_ub(); /* below the standard's least MPI_TAG_UB (32767): always smaller */
        *(int **)value = &ub;
    }
    return rc;
}

static int N;        /* devices */
static int refusals; /* seen by the current test */
static int process_of[MAX_DEVICES];

static float value(int d, int k) { return (float)(d * 16 + k * 3 - 5); }

/* One table: its collective, each flat position's group number, and its first lane. */
typedef struct table {
    const char *axes;
    const spmd_axis_groups *grouping; /* NULL: the whole group over axes */
    int group_of[MAX_DEVICES];
    long base; /* its first lane */
} table;

static long spanning_groups(const table *t)
{
    long count = 0;
    for (int g = 0; g < N; g++) {
        int first = -1, spans = 0;
        for (int d = 0; d < N; d++)
            if (t->group_of[d] == g) {
                if (first < 0)
                    first = process_of[d];
                else if (process_of[d] != first)
                    spans = 1;
            }
        count += spans;
    }
    return count;
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    const table *t = user;
    int d = spmd_mesh_device_position(spmd_ctx_mesh(ctx), spmd_ctx_device(ctx));
    int64_t count = ELEMS;
    spmd_block x;
    spmd_status st = spmd_ctx_alloc(ctx, 1, &count, SPMD_DTYPE_F32, &x);
    if (st != SPMD_OK)
        return st;
    for (int k = 0; k < ELEMS; k++)
        ((float *)x.data)[k] = value(d, k);
    spmd_block o = out[0];
    return spmd_psum_groups(ctx, &x, &o, t->axes, t->grouping);
}

/* Runs a psum over t on `mesh` (its spec `spec` shards the output's flat blocks over every axis)
 * and checks the sums, or the refusal where its lanes end past the room. */
static void run_table(spmd_mesh *mesh, const spmd_spec *spec, const table *t)
{
    long spanning = spanning_groups(t), needs = t->base + spanning;
    int refused = spanning > 0 && needs > room();
    const spmd_spec *specs[1] = {spec};
    spmd_out_desc desc = {1, {(int64_t)N * ELEMS}, SPMD_DTYPE_F32};
    spmd_array *o = NULL;
    spmd_status st =
        spmd_shard_map(mesh, body, (void *)t, 0, NULL, NULL, 1, &desc, specs, NULL, &o);
    if (refused) {
        char lanes[64], space[96];
        snprintf(lanes, sizeof lanes, "needs lanes of MPI tags up to %ld,", needs);
        snprintf(space, sizeof space, "(MPI_TAG_UB %d) has room for %d:", fake_tag_ub(), room());
        const char *e = spmd_last_error();
        if (st != SPMD_ERR_UNSUPPORTED || !strstr(e, lanes) || !strstr(e, space) ||
            !strstr(e, "Intel MPI") || !strstr(e, "fewer devices") ||
            !strstr(e, "axis_index_groups") != !t->grouping)
            fail_msg("psum over %s%s (lanes from %ld, room %d): got %s (%s), want the refusal",
                     t->axes, t->grouping ? " in groups" : "", t->base, room(),
                     spmd_status_name(st), e);
        refusals++;
        return;
    }
    if (st != SPMD_OK)
        fail_msg("psum over %s%s (lanes from %ld to %ld, room %d): %s", t->axes,
                 t->grouping ? " in groups" : "", t->base, needs, room(), spmd_last_error());
    float got[MAX_DEVICES * ELEMS];
    assert_ok(spmd_process_allgather(o, 1, got, (size_t)N * ELEMS * sizeof *got));
    for (int d = 0; d < N; d++)
        for (int k = 0; k < ELEMS; k++) {
            float want = 0;
            for (int m = 0; m < N; m++)
                if (t->group_of[m] == t->group_of[d])
                    want += value(m, k);
            if (got[d * ELEMS + k] != want)
                fail_msg("psum over %s%s: device %d element %d is %g, want %g", t->axes,
                         t->grouping ? " in groups" : "", d, k, (double)got[d * ELEMS + k],
                         (double)want);
        }
    spmd_array_destroy(o);
}

static spmd_spec *flat_spec(int ndim, const char *const *names)
{
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_create(&spec));
    assert_ok(spmd_spec_append(spec, ndim, names));
    return spec;
}

/* Mesh x=2, y=N/2: {x} owns lanes 0 .. N/2-1 (N/2 groups of 2), {y} the next 2 (2 groups of
 * N/2), {x,y} the one after. */
static void test_axis_sets(void **state)
{
    (void)state;
    const int shape[2] = {2, N / 2};
    const char *names[2] = {"x", "y"};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    spmd_spec *spec = flat_spec(2, names);
    refusals = 0;
    table tx = {"x", NULL, {0}, 0}, ty = {"y", NULL, {0}, N / 2},
          txy = {"x,y", NULL, {0}, N / 2 + 2};
    for (int d = 0; d < N; d++) {
        tx.group_of[d] = d % (N / 2); /* the devices of one y */
        ty.group_of[d] = d / (N / 2); /* of one x */
        txy.group_of[d] = 0;
    }
    run_table(mesh, spec, &tx);
    run_table(mesh, spec, &ty);  /* 2 processes: within them; more: its 2 groups span, refused */
    run_table(mesh, spec, &txy); /* its one group takes lane N/2 + 2, past the room: refused */
    run_table(mesh, spec, &txy); /* again, alike */
    run_table(mesh, spec, &tx);  /* the mesh still works */
    if (refusals < 2)
        fail_msg("only %d of the psums were refused: the room tests nothing", refusals);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
}

/* Line i=N: {i} owns lane 0, grouping slot s lanes 1 + s N/2 .. (s + 1) N/2, in the order first
 * used. */
static void test_grouping_slots(void **state)
{
    (void)state;
    const char *names[1] = {"i"};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &N, names, NULL, 0, &mesh));
    spmd_spec *spec = flat_spec(1, names);
    refusals = 0;
    int far_pairs[MAX_DEVICES], near_pairs[MAX_DEVICES], mirrored[MAX_DEVICES];
    for (int k = 0; k < N / 2; k++) {
        far_pairs[2 * k] = k, far_pairs[2 * k + 1] = k + N / 2;       /* across the processes */
        near_pairs[2 * k] = 2 * k, near_pairs[2 * k + 1] = 2 * k + 1; /* within one */
        mirrored[2 * k] = k, mirrored[2 * k + 1] = N - 1 - k;
    }
    const spmd_axis_groups g_far = {N / 2, NULL, far_pairs}, g_near = {N / 2, NULL, near_pairs},
                           g_mirrored = {N / 2, NULL, mirrored};
    table whole = {"i", NULL, {0}, 0}, far = {"i", &g_far, {0}, 1},
          near = {"i", &g_near, {0}, 1 + N / 2}, mir = {"i", &g_mirrored, {0}, 1 + N};
    table *grouped[3] = {&far, &near, &mir};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < N; i++)
            grouped[k]->group_of[grouped[k]->grouping->positions[i]] = i / 2;
    run_table(mesh, spec, &whole);
    run_table(mesh, spec, &far);  /* slot 0: its N/2 lanes end at the room */
    run_table(mesh, spec, &near); /* slot 1, past the room: runs where no pair spans processes */
    run_table(mesh, spec, &mir);  /* slot 2: refused, with the axis_index_groups advice */
    run_table(mesh, spec, &far);  /* slot 0 again: a failed call drops the mesh's tables */
    run_table(mesh, spec, &whole);
    if (refusals != 1)
        fail_msg("%d of the grouped psums were refused, want the mirrored pairs' alone", refusals);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
}

int main(void)
{
    spmd_test_init();
    N = spmd_device_count();
    if (N < 4 || N > MAX_DEVICES || spmd_local_device_count() % 2 || spmd_process_count() < 2) {
        if (spmd_process_index() == 0)
            printf("test_tag_space: needs 4 to 16 devices, an even number in each of 2 or more "
                   "processes; skipped\n");
        return spmd_test_finish(0) ? 1 : SPMD_TEST_SKIP;
    }
    if (N != devices()) {
        fprintf(stderr,
                "test_tag_space: libspmd counts %d devices, the room was sized for %d "
                "(SPMD_NUM_CPU_DEVICES per process)\n",
                N, devices());
        return spmd_test_finish(1);
    }
    for (int d = 0; d < N; d++) {
        spmd_device_info info;
        assert_ok(spmd_device_get_info(d, &info));
        process_of[d] = info.process_index;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_axis_sets),
        cmocka_unit_test(test_grouping_slots),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
