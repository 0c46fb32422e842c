/* Partition specs: for each array dimension, unsharded or split over one or more mesh axes. */
#ifndef SPMD_SPEC_H
#define SPMD_SPEC_H

#include <stddef.h>

#include "spmd/export.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/** Most entries (array dimensions) a spec may have; also the highest supported array rank. */
#define SPMD_MAX_RANK 16

typedef struct spmd_spec spmd_spec;

/**
 * Parses the Python spelling of a PartitionSpec:
 *   "'a', None"   "('a', 'b'), None"   "None, 'b'"   ""  (fully replicated)
 * An optional P(...) or PartitionSpec(...) wrapper, double quotes, bare names and a trailing
 * comma are accepted; () and None are unsharded entries and ('a',) is 'a'. Trailing Nones are
 * kept as written (P('a') and P('a', None) differ in spelling, not in layout).
 * @return SPMD_OK, SPMD_ERR_SPEC (unbalanced parentheses, empty name, nested tuple, an axis used
 *         twice, more than SPMD_MAX_RANK entries; the message shows the position),
 *         SPMD_ERR_INVALID_ARGUMENT (NULL).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_spec_parse(const char *text, spmd_spec **out);

/**
 * Unreduced axes (JAX's P('x', unreduced={'y'}), DTensor's Partial): the array's value is the
 * sum over the listed mesh axes of what their devices hold; each device keeps its own partial
 * sum. Replaces the spec's unreduced set (naxes 0 clears it). The parser reads the same from
 * "'x', unreduced={'y'}" (a set, tuple or list of names), and spmd_spec_format writes it back.
 * spmd_reshard to a spec without them adds the partial sums up (a psum over them, or a
 * psum_scatter where the new spec shards a dimension over them); reading such an array on the
 * host (spmd_array_to_host, spmd_process_allgather ...) is refused until it is resharded.
 * @return SPMD_ERR_SPEC for a bad or repeated name, or one that the spec's entries use
 *         (partitions cannot overlap with unreduced axes); the spec is unchanged on failure.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_spec_set_unreduced(spmd_spec *spec, int naxes,
                                                            const char *const *axis_names);
/** Number of unreduced axes; -1 if spec is NULL. */
SPMD_API int spmd_spec_unreduced_size(const spmd_spec *spec);
/** k-th unreduced axis name (a set: sorted by name); NULL if out of range. Borrowed. */
SPMD_API const char *spmd_spec_unreduced_axis(const spmd_spec *spec, int k);

/** Creates an empty spec, P(), to be extended with spmd_spec_append*. */
SPMD_API SPMD_NODISCARD spmd_status spmd_spec_create(spmd_spec **out);

/**
 * Appends one entry: `naxes` 0 is None (unsharded); otherwise the dimension is split over the
 * listed mesh axes, the first one major.
 * @return SPMD_ERR_SPEC for an empty or too long name, an axis already used in this spec, or
 *         too many entries; the spec is unchanged on failure.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_spec_append(spmd_spec *spec, int naxes,
                                                     const char *const *axis_names);
/** spmd_spec_append with a single axis name, or None when `axis_name` is NULL. */
SPMD_API SPMD_NODISCARD spmd_status spmd_spec_append_axis(spmd_spec *spec, const char *axis_name);

/** Creates an independent copy. */
SPMD_API SPMD_NODISCARD spmd_status spmd_spec_copy(const spmd_spec *spec, spmd_spec **out);
/** NULL-safe. */
SPMD_API void spmd_spec_destroy(spmd_spec *spec);

/** Number of entries as written; -1 if spec is NULL. */
SPMD_API int spmd_spec_length(const spmd_spec *spec);
/** Number of mesh axes of entry `i` (0 for None); -1 if out of range. */
SPMD_API int spmd_spec_entry_size(const spmd_spec *spec, int i);
/** k-th axis name of entry `i`; NULL if out of range. Borrowed, valid while spec lives. */
SPMD_API const char *spmd_spec_entry_axis(const spmd_spec *spec, int i, int k);
/** 1 when both specs give every dimension the same axes once padded with None and have the
 * same unreduced axes (in any order), else 0. */
SPMD_API int spmd_spec_is_equivalent(const spmd_spec *a, const spmd_spec *b);

/** Writes the spec as JAX prints it: "P('a', None)", "P(('a', 'b'),)", "P()" (one entry keeps
 * Python's trailing comma), "P('a', unreduced={'b'})". SPMD_ERR_INVALID_ARGUMENT when buf is
 * too small. */
SPMD_API SPMD_NODISCARD spmd_status spmd_spec_format(const spmd_spec *spec, char *buf, size_t size);

SPMD_END_DECLS

#endif /* SPMD_SPEC_H */
