/*
 * Private: the lanes of MPI tags that the collective groups spanning processes use on a mesh's
 * communicator. Each table of groups (a set of mesh axes, or a grouping slot) owns a fixed range
 * of lanes, and its groups that span processes take lanes in group order. The layout depends on
 * the mesh's shape only, so every process computes the same lanes without talking.
 */
#ifndef SPMD_SHARD_MAP_TAG_LANES_H
#define SPMD_SHARD_MAP_TAG_LANES_H

/** The first lane of the table of the axis set `mask` on a mesh of `ndim` axes of `shape`. */
long spmd__lanes_axes_base(int ndim, const int *shape, unsigned mask);
/** The first lane of grouping slot `slot` (0 .. max_groupings-1). */
long spmd__lanes_grouping_base(int ndim, const int *shape, int slot);
/** The lanes of the whole layout, with `max_groupings` grouping slots. */
long spmd__lanes_total(int ndim, const int *shape, int max_groupings);

#endif /* SPMD_SHARD_MAP_TAG_LANES_H */
