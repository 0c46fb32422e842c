/* Private: the partition spec structure. Names are stored once; entries index them. */
#ifndef SPMD_SPEC_IMPL_H
#define SPMD_SPEC_IMPL_H

#include <stdint.h>

#include <spmd/mesh.h>
#include <spmd/spec.h>

struct spmd_spec {
    uint32_t magic;
    int length;                                        /* entries as written */
    int entry_size[SPMD_MAX_RANK];                     /* 0: None */
    int entry_axis[SPMD_MAX_RANK][SPMD_MAX_MESH_AXES]; /* indices into names, major first */
    int num_names;                                     /* distinct axes used (each once) */
    char names[SPMD_MAX_MESH_AXES][SPMD_MAX_AXIS_NAME + 1];
    int num_unreduced; /* axes the value is an unreduced sum over (JAX's unreduced={...}) */
    char unreduced[SPMD_MAX_MESH_AXES][SPMD_MAX_AXIS_NAME + 1];
};

/** Validates a spec handle coming from the caller (`arg` names it in the message). */
spmd_status spmd__spec_check(const spmd_spec *spec, const char *fn, const char *arg);

/**
 * Checks an axis name: 1..SPMD_MAX_AXIS_NAME printable characters without quotes, parentheses,
 * commas, '=' or spaces, and not "None". `what` describes where it came from.
 */
spmd_status spmd__check_axis_name(const char *name, const char *what);

#endif /* SPMD_SPEC_IMPL_H */
