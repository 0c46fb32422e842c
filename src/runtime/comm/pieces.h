/* Private: messages made of boxes of dense buffers, whose MPI datatypes are made once and kept
 * with the plan that owns them (resharding). MPI in pieces_mpi.c, without it pieces_single.c. */
#ifndef SPMD_RUNTIME_PIECES_H
#define SPMD_RUNTIME_PIECES_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/comm/comm.h"

/**
 * The fixed layout of one message: boxes of row-major buffers that all have one shape, in
 * message order. The buffers may move between uses: each box's datatype is made once, relative
 * to its buffer; the datatype of the whole message is made again only when the address of one
 * of its buffers changed since the last use (a message within one buffer never is).
 */
typedef struct spmd__wire spmd__wire;

/**
 * A wire of `n` boxes: box i lies in buffer `buffer[i]` (an index into the addresses each use
 * gives), from `start[i * ndim ...]` with `extent[i * ndim ...]` elements of `elem` bytes along
 * each dimension of buffers of `shape`. SPMD_ERR_UNSUPPORTED when a buffer dimension reaches
 * 2^31 elements (MPI's int counts).
 */
spmd_status spmd__wire_create(size_t elem, int ndim, const int64_t *shape, int n, const int *buffer,
                              const int64_t *start, const int64_t *extent, spmd__wire **out);
/** Frees a wire (NULL-safe); once MPI is finalized, only its memory. */
void spmd__wire_free(spmd__wire *w);

/** One wire at one use: `bases[b]` is the address of its buffer b. */
typedef struct spmd__wire_part {
    spmd__wire *wire;
    void *const *bases;
} spmd__wire_part;

/** A message to or from rank `peer`: its parts one after another. */
typedef struct spmd__wire_message {
    int peer;
    int nparts;
    const spmd__wire_part *parts;
} spmd__wire_message;

/**
 * Posts every send and receive (in place, no staging), then calls work(work_arg) (when not
 * NULL) until it returns 0, letting MPI progress between calls, then waits for every message,
 * at most the collective timeout (SPMD_ERR_TIMEOUT, never a hang). A message may exceed 2 GiB.
 */
spmd_status spmd__comm_exchange_wires(spmd__comm *c, int nsend, const spmd__wire_message *sends,
                                      int nrecv, const spmd__wire_message *recvs,
                                      int (*work)(void *), void *work_arg);

#endif /* SPMD_RUNTIME_PIECES_H */
