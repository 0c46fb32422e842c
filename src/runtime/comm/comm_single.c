/* Communicators in a build without MPI: there is one process, so every communicator has one
 * rank and every collective is a local copy. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/check.h"
#include "runtime/comm/comm.h"

struct spmd__comm {
    int unused;
};

spmd_status spmd__comm_create(const int *processes, int n, int tag, spmd__comm **out)
{
    (void)processes;
    (void)tag;
    *out = NULL;
    SPMD_REQUIRE(n == 1, SPMD_ERR_INTERNAL, "a %d-process communicator in a build without MPI", n);
    *out = calloc(1, sizeof **out);
    SPMD_REQUIRE(*out != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory for a communicator");
    return SPMD_OK;
}

spmd_status spmd__comm_view(const int *processes, int n, spmd__comm **out)
{
    return spmd__comm_create(processes, n, 0, out);
}

spmd_status spmd__comm_subset(spmd__comm *parent, const int *ranks, int n, int lane, int lanes,
                              unsigned long first_exchange, spmd__comm **out)
{
    (void)parent, (void)ranks, (void)lane, (void)lanes, (void)first_exchange;
    return spmd__comm_create(NULL, n, 0, out);
}

long spmd__comm_subset_lanes(void) { return LONG_MAX; }
int spmd__comm_tag_ub(void) { return 0; }

spmd_status spmd__comm_make_whole(spmd__comm *c)
{
    (void)c;
    return SPMD_OK;
}

void spmd__comm_destroy(spmd__comm *c) { free(c); }
void spmd__comm_abandon(spmd__comm *c) { free(c); }
void spmd__comm_restart_wires(void) {}
int spmd__comm_rank(const spmd__comm *c)
{
    (void)c;
    return 0;
}
int spmd__comm_size(const spmd__comm *c)
{
    (void)c;
    return 1;
}

spmd_status spmd__comm_agree(spmd__comm *c, uint64_t fingerprint, const char *description,
                             spmd__wait *w)
{
    (void)c, (void)fingerprint, (void)description, (void)w;
    return SPMD_OK;
}

spmd_status spmd__comm_check(spmd__comm *c, const spmd__agreement *a, spmd__wait *w)
{
    (void)c, (void)a, (void)w;
    return SPMD_OK;
}

spmd_status spmd__comm_reduce_record(spmd__comm *c, const spmd__agreement *a, void *record,
                                     size_t *bytes, size_t capacity, spmd__combine_fn combine,
                                     void *combine_arg, spmd__wait *w)
{
    (void)c, (void)a, (void)record, (void)bytes, (void)capacity, (void)combine;
    (void)combine_arg, (void)w;
    return SPMD_OK;
}

static int64_t timeout = (int64_t)300 * 1000000000;

void spmd__comm_set_timeout(int64_t timeout_ns) { timeout = timeout_ns; }

int64_t spmd__comm_grace_ns(void) { return timeout / 10 > 500000000 ? timeout / 10 : 500000000; }

void spmd__comm_keep(void *block) { free(block); } /* nothing is ever abandoned here */

spmd_status spmd__comm_checked_tree_allreduce(spmd__comm *c, const spmd__agreement *a,
                                              const spmd__tree_inputs *in, void *acc, size_t count,
                                              spmd_dtype dtype, spmd__combine_fn combine,
                                              void *combine_arg, spmd__wait *w)
{
    (void)c, (void)a, (void)combine, (void)combine_arg, (void)w;
    /* one process holds every position: its block is the whole tree */
    SPMD_REQUIRE(in->block > 0, SPMD_ERR_INTERNAL,
                 "a reduction between processes in a build without MPI");
    spmd__tree_load_acc(in, acc, count * spmd_dtype_size(dtype));
    return SPMD_OK;
}

spmd_status spmd__comm_checked_allgatherv(spmd__comm *c, const spmd__agreement *a, const void *send,
                                          void *recv, const size_t *counts, spmd__wait *w)
{
    (void)a, (void)w;
    return spmd__comm_allgatherv(c, send, recv, counts);
}

spmd_status spmd__comm_checked_alltoallv(spmd__comm *c, const spmd__agreement *a, const void *send,
                                         const size_t *send_counts, void *recv,
                                         const size_t *recv_counts, int large, spmd__wait *w)
{
    (void)c, (void)a, (void)recv_counts, (void)large, (void)w;
    memmove(recv, send, send_counts[0]);
    return SPMD_OK;
}

spmd_status spmd__comm_paired_exchange(spmd__comm *c, const spmd__agreement *a, int nsend,
                                       const spmd__message *sends, int nrecv,
                                       const spmd__message *recvs, spmd__wait *w)
{
    return spmd__comm_checked_exchange(c, a, nsend, sends, nrecv, recvs, w);
}

spmd_status spmd__comm_checked_exchange_host(spmd__comm *c, const spmd__agreement *a, int nsend,
                                             const spmd__message *sends, int nrecv,
                                             const spmd__message *recvs, spmd__wait *w)
{
    return spmd__comm_checked_exchange(c, a, nsend, sends, nrecv, recvs, w);
}

spmd_status spmd__comm_checked_exchange(spmd__comm *c, const spmd__agreement *a, int nsend,
                                        const spmd__message *sends, int nrecv,
                                        const spmd__message *recvs, spmd__wait *w)
{
    (void)c, (void)a, (void)sends, (void)recvs, (void)w;
    SPMD_REQUIRE(nsend == 0 && nrecv == 0, SPMD_ERR_INTERNAL,
                 "point-to-point messages in a build without MPI");
    return SPMD_OK;
}

spmd_status spmd__comm_allgatherv(spmd__comm *c, const void *send, void *recv, const size_t *counts)
{
    (void)c;
    if (send)
        memmove(recv, send, counts[0]);
    return SPMD_OK;
}

spmd_status spmd__comm_gatherv(spmd__comm *c, int root, const void *send, void *recv,
                               const size_t *counts)
{
    (void)root;
    return spmd__comm_allgatherv(c, send, recv, counts);
}

spmd_status spmd__comm_bcast(spmd__comm *c, int root, void *data, size_t bytes)
{
    (void)c;
    (void)root;
    (void)data;
    (void)bytes;
    return SPMD_OK;
}

void spmd__comm_drain(spmd__comm *c, unsigned long epoch)
{
    (void)c;
    (void)epoch;
}

void spmd__comm_post_abort(spmd__comm *c, const void *record, size_t bytes)
{
    (void)c;
    (void)record;
    (void)bytes;
}

void spmd__comm_pass_on_aborts(spmd__comm *c) { (void)c; }

int spmd__comm_poll_abort(spmd__comm *c, unsigned long epoch, void *record, size_t bytes)
{
    (void)c;
    (void)epoch;
    (void)record;
    (void)bytes;
    return 0;
}

int spmd__comm_on_linked_machine(const spmd__comm *c)
{
    (void)c;
    return 0; /* no rings without MPI */
}

size_t spmd__comm_paired_max_bytes(const spmd__comm *c)
{
    (void)c;
    return SPMD__COMM_COMBINED_BYTES;
}

spmd_status spmd__comm_checked_allgather_placed(spmd__comm *c, const spmd__agreement *a, void *recv,
                                                const spmd__block_layout *layout,
                                                const size_t *counts, const size_t *displs,
                                                spmd__wait *w)
{
    (void)c, (void)a, (void)recv, (void)layout, (void)counts, (void)displs, (void)w;
    return SPMD_OK; /* one rank: its blocks are in place */
}

spmd_status spmd__comm_checked_exchange_pieces(spmd__comm *c, const spmd__agreement *a, int nsend,
                                               const spmd__piece_message *sends, int nrecv,
                                               const spmd__piece_message *recvs, spmd__wait *w)
{
    (void)c, (void)a, (void)sends, (void)recvs, (void)w;
    SPMD_REQUIRE(nsend == 0 && nrecv == 0, SPMD_ERR_INTERNAL,
                 "point-to-point messages in a build without MPI");
    return SPMD_OK;
}
