/* The lanes of tags of a mesh's tables (tag_lanes.h). A table's range holds as many lanes as it
 * can have groups spanning processes: a group spanning processes has at least two members and
 * the groups of a table are disjoint, so a grouping needs at most size / 2, and the table of a
 * set of axes holding n >= 2 positions has size / n groups (none spanning when n is 1). */
#include "shard_map/tag_lanes.h"

static long mesh_size(int ndim, const int *shape)
{
    long size = 1;
    for (int a = 0; a < ndim; a++)
        size *= shape[a];
    return size;
}

static long axes_lanes(int ndim, const int *shape, unsigned mask)
{
    long members = 1;
    for (int a = 0; a < ndim; a++)
        if (mask & (1u << a))
            members *= shape[a];
    return members >= 2 ? mesh_size(ndim, shape) / members : 0;
}

long spmd__lanes_axes_base(int ndim, const int *shape, unsigned mask)
{
    long base = 0;
    for (unsigned m = 0; m < mask; m++)
        base += axes_lanes(ndim, shape, m);
    return base;
}

long spmd__lanes_grouping_base(int ndim, const int *shape, int slot)
{
    return spmd__lanes_axes_base(ndim, shape, 1u << ndim) + slot * (mesh_size(ndim, shape) / 2);
}

long spmd__lanes_total(int ndim, const int *shape, int max_groupings)
{
    return spmd__lanes_grouping_base(ndim, shape, max_groupings);
}
