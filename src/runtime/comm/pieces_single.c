/* Messages of boxes without MPI (runtime/comm/pieces.h): one process sends nothing, so a wire holds
 * nothing and an exchange only does the caller's work. */
#include <stdlib.h>

#include "runtime/base/check.h"
#include "runtime/comm/pieces.h"

struct spmd__wire {
    int n;
};

spmd_status spmd__wire_create(size_t elem, int ndim, const int64_t *shape, int n, const int *buffer,
                              const int64_t *start, const int64_t *extent, spmd__wire **out)
{
    (void)elem, (void)ndim, (void)shape, (void)buffer, (void)start, (void)extent;
    *out = calloc(1, sizeof **out);
    SPMD_REQUIRE(*out != NULL, SPMD_ERR_OUT_OF_MEMORY, "resharding: out of memory");
    (*out)->n = n;
    return SPMD_OK;
}

void spmd__wire_free(spmd__wire *w) { free(w); }

spmd_status spmd__comm_exchange_wires(spmd__comm *c, int nsend, const spmd__wire_message *sends,
                                      int nrecv, const spmd__wire_message *recvs,
                                      int (*work)(void *), void *work_arg)
{
    (void)c, (void)sends, (void)recvs;
    while (work && work(work_arg))
        ;
    SPMD_REQUIRE(nsend == 0 && nrecv == 0, SPMD_ERR_INTERNAL,
                 "point-to-point messages in a build without MPI");
    return SPMD_OK;
}
