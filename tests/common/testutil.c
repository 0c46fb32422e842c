/* The helpers that start and stop libspmd and build meshes on its devices. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

#include <spmd/config.h>
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

void spmd_test_init(void)
{
    spmd_status st = spmd_init(NULL);
    if (st != SPMD_OK) {
        fprintf(stderr, "spmd_init failed: %s: %s\n", spmd_status_name(st), spmd_last_error());
        exit(1);
    }
}

int spmd_test_finish(int failures)
{
    int any = failures != 0;
#ifdef SPMD_HAVE_MPI
    if (spmd_process_count() > 1) {
        int mine = any;
        MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, spmd_mpi_comm());
    }
#endif
    spmd_status st = spmd_finalize();
    if (st != SPMD_OK) {
        fprintf(stderr, "spmd_finalize failed: %s\n", spmd_last_error());
        any = 1;
    }
    return any ? 1 : 0;
}

void spmd_test_mesh_build(spmd_test_mesh *m, const char *label, int ndim, const int *shape,
                          const char *const *names, const int *ids)
{
    memset(m, 0, sizeof *m);
    m->ndim = ndim;
    m->size = 1;
    for (int k = 0; k < ndim; k++) {
        m->shape[k] = shape[k];
        m->names[k] = names[k];
        m->size *= shape[k];
    }
    assert_true(m->size <= SPMD_TEST_MAX_DEVICES);
    if (label) {
        int n = snprintf(m->label, sizeof m->label, "%s(", label);
        for (int k = 0; k < ndim; k++)
            n += snprintf(m->label + n, sizeof m->label - (size_t)n, "%s%s=%d", k ? "," : "",
                          names[k], shape[k]);
        snprintf(m->label + n, sizeof m->label - (size_t)n, ")");
    }
    int per_process = spmd_local_device_count(), me = spmd_process_index();
    for (int f = 0; f < m->size; f++) {
        m->ids[f] = ids ? ids[f] : f;
        if (m->ids[f] / per_process == me)
            m->local_flat[m->num_local++] = f;
    }
    assert_ok(spmd_mesh_create(ndim, shape, names, ids, ids ? m->size : 0, &m->mesh));
}
