/* The lanes of tags of a mesh's groups spanning processes (src/shard_map/tag_lanes.c): on
 * meshes of many shapes, over processes laid out in blocks and in strides, every group spanning
 * processes, of every set of axes and of groupings in every slot, numbered in its table in group
 * order as groups.c numbers it, gets a lane inside its table's range that no other group has;
 * and the layout of 1024 processes x 8 devices fits the tag spaces of Intel MPI. */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

#include "shard_map/tag_lanes.h"

#define SLOTS 32

typedef struct mesh_case {
    int ndim;
    int shape[8];
} mesh_case;

static const mesh_case cases[] = {
    {1, {2}},
    {1, {8}},
    {2, {4, 2}},
    {2, {2, 4}},
    {2, {1, 6}},
    {3, {3, 5, 2}},
    {3, {2, 1, 4}},
    {4, {2, 2, 2, 2}},
    {2, {16, 8}},
    {3, {4, 4, 4}},
    {8, {2, 2, 2, 2, 2, 2, 2, 2}},
};

static int mesh_size(const mesh_case *c)
{
    int size = 1;
    for (int a = 0; a < c->ndim; a++)
        size *= c->shape[a];
    return size;
}

/* The group of position f in the table of `mask`: its coordinates off the mask's axes. */
static int group_of(const mesh_case *c, unsigned mask, int f)
{
    int coord[8], id = 0;
    for (int a = c->ndim - 1; a >= 0; a--) {
        coord[a] = f % c->shape[a];
        f /= c->shape[a];
    }
    for (int a = 0; a < c->ndim; a++)
        if (!(mask & (1u << a)))
            id = id * c->shape[a] + coord[a];
    return id;
}

/* Gives each group spanning processes (group[f] of position f, `groups` of them) the lane
 * base + its index among them, checking it against [base, end) and the lanes taken so far. */
static void take_lanes(const int *group, int size, int groups, const int *process, long base,
                       long end, unsigned char *taken, const char *what)
{
    int *first = malloc((size_t)groups * sizeof *first),
        *spans = calloc((size_t)groups, sizeof(int));
    assert_non_null(first);
    assert_non_null(spans);
    for (int g = 0; g < groups; g++)
        first[g] = -1;
    for (int f = 0; f < size; f++) {
        if (first[group[f]] < 0)
            first[group[f]] = process[f];
        else if (first[group[f]] != process[f])
            spans[group[f]] = 1;
    }
    long lane = base;
    for (int g = 0; g < groups; g++) {
        if (!spans[g])
            continue;
        if (lane >= end)
            fail_msg("%s: group %d takes lane %ld, past its table's range [%ld, %ld)", what, g,
                     lane, base, end);
        if (taken[lane])
            fail_msg("%s: group %d takes lane %ld, which another group has", what, g, lane);
        taken[lane] = 1;
        lane++;
    }
    free(first);
    free(spans);
}

/* The n values of a in an order drawn from seed. */
static void shuffle(int *a, int n, unsigned seed)
{
    for (int i = n - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 8) % (unsigned)(i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Subgroups over the axes of `mask` (positions along them in axis order), of sizes 1, 2, 3, ...
 * in turn over a shuffled order, each repeated at every coordinate off the mask: the table's
 * group of each position, as groups.c numbers them; returns their count. */
static int uneven_groups(const mesh_case *c, unsigned mask, unsigned seed, int *group)
{
    int size = mesh_size(c), total = 1;
    for (int a = 0; a < c->ndim; a++)
        if (mask & (1u << a))
            total *= c->shape[a];
    int *sub_of = malloc((size_t)total * sizeof *sub_of);
    assert_non_null(sub_of);
    int subs = 0;
    for (int at = 0, len = 1; at < total; at += len, len++, subs++)
        for (int i = at; i < at + len && i < total; i++)
            sub_of[i] = subs;
    shuffle(sub_of, total, seed); /* which positions */
    unsigned off_mask = ((1u << c->ndim) - 1u) & ~mask;
    for (int f = 0; f < size; f++) /* a position along the mask's axes: off the others' */
        group[f] = group_of(c, mask, f) * subs + sub_of[group_of(c, off_mask, f)];
    free(sub_of);
    return (size / total) * subs;
}

/* Groups of pairs over all axes (the most groups spanning processes a grouping can have). */
static void pair_groups(int size, unsigned seed, int *group)
{
    int *order = malloc((size_t)size * sizeof *order);
    assert_non_null(order);
    for (int i = 0; i < size; i++)
        order[i] = i;
    shuffle(order, size, seed);
    for (int i = 0; i < size; i++)
        group[order[i]] = i / 2; /* an odd size leaves a group of one */
    free(order);
}

static void check_layout(const mesh_case *c, const int *process)
{
    int size = mesh_size(c);
    long total = spmd__lanes_total(c->ndim, c->shape, SLOTS);
    unsigned char *taken = calloc((size_t)total + 1, 1);
    int *group = malloc((size_t)size * sizeof *group);
    assert_non_null(taken);
    assert_non_null(group);
    char what[96];
    for (unsigned mask = 0; mask < 1u << c->ndim; mask++) {
        int members = 1;
        for (int a = 0; a < c->ndim; a++)
            if (mask & (1u << a))
                members *= c->shape[a];
        for (int f = 0; f < size; f++)
            group[f] = group_of(c, mask, f);
        long base = spmd__lanes_axes_base(c->ndim, c->shape, mask);
        long end = mask + 1 < 1u << c->ndim ? spmd__lanes_axes_base(c->ndim, c->shape, mask + 1)
                                            : spmd__lanes_grouping_base(c->ndim, c->shape, 0);
        snprintf(what, sizeof what, "%d axes, %d devices, axes mask %#x", c->ndim, size, mask);
        take_lanes(group, size, size / members, process, base, end, taken, what);
    }
    /* even slots: pairs over all axes; odd ones: uneven subgroups over some of them */
    for (int k = 0; k < SLOTS; k++) {
        unsigned mask = 1u + (unsigned)k % ((1u << c->ndim) - 1u), seed = 17u * (unsigned)k + 1u;
        int groups = (size + 1) / 2;
        if (k % 2)
            groups = uneven_groups(c, mask, seed, group);
        else
            pair_groups(size, seed, group);
        long base = spmd__lanes_grouping_base(c->ndim, c->shape, k);
        long end = k + 1 < SLOTS ? spmd__lanes_grouping_base(c->ndim, c->shape, k + 1) : total;
        snprintf(what, sizeof what, "%d axes, %d devices, grouping slot %d", c->ndim, size, k);
        take_lanes(group, size, groups, process, base, end, taken, what);
    }
    free(taken);
    free(group);
}

/* Every shape, over one process per device, blocks of devices per process, and processes taking
 * every n-th device (which makes every group of a leading axis span processes). */
static void test_spanning_groups_get_lanes_of_their_own(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int size = mesh_size(&cases[i]);
        int *process = malloc((size_t)size * sizeof *process);
        assert_non_null(process);
        for (int per = 1; per <= size; per *= 2) {
            if (size % per)
                continue;
            for (int f = 0; f < size; f++)
                process[f] = f / per;
            check_layout(&cases[i], process);
            for (int f = 0; f < size; f++)
                process[f] = f % (size / per);
            check_layout(&cases[i], process);
        }
        free(process);
    }
}

/* The lanes an MPI_TAG_UB leaves: blocks of 4 tags below 4 fixed blocks, less 4096 keyed ones. */
static long room_of(long tag_ub) { return (tag_ub - 16) / 4 - 4096; }

/* 1024 processes x 8 devices. Intel MPI's tags stop at 1048575 with its mlx provider: the whole
 * layout fits (one lane per device and table, as before, needed 36 x 8192 = 294912). At 524287
 * (its 20 tag bits by default) the axis sets and 28 of the 32 grouping slots fit (30 on 2 axes);
 * a table past the room is refused when first used (groups.c). */
static void test_target_scale_fits_twenty_bit_tags(void **state)
{
    (void)state;
    static const mesh_case big[] = {
        {2, {1024, 8}}, {2, {8, 1024}}, {3, {128, 8, 8}}, {4, {32, 32, 4, 2}}, {1, {8192}}};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        long total = spmd__lanes_total(big[i].ndim, big[i].shape, SLOTS);
        long most = spmd__lanes_grouping_base(big[i].ndim, big[i].shape, 28);
        if (total > room_of(1048575) || most > room_of(524287))
            fail_msg("a mesh of %d axes over 8192 devices needs %ld lanes (%ld for its axis sets "
                     "and 28 groupings), more than %ld (%ld)",
                     big[i].ndim, total, most, room_of(1048575), room_of(524287));
    }
}

/* The standard's minimum tag space (32767) serves the axis sets of meshes of 512 devices. */
static void test_minimum_tag_space_serves_axis_sets(void **state)
{
    (void)state;
    static const mesh_case meshes[] = {{2, {64, 8}}, {2, {8, 64}}, {3, {8, 8, 8}}, {1, {512}}};
    for (size_t i = 0; i < sizeof meshes / sizeof meshes[0]; i++) {
        const mesh_case *c = &meshes[i];
        long axes = spmd__lanes_axes_base(c->ndim, c->shape, 1u << c->ndim);
        if (axes > room_of(32767))
            fail_msg("the axis sets of a %d-axis mesh of 512 devices need %ld lanes, more than %ld",
                     c->ndim, axes, room_of(32767));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spanning_groups_get_lanes_of_their_own),
        cmocka_unit_test(test_target_scale_fits_twenty_bit_tags),
        cmocka_unit_test(test_minimum_tag_space_serves_axis_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
