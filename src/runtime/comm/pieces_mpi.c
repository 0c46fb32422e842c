/* Messages of boxes over MPI with datatypes made once (runtime/comm/pieces.h): a subarray type per
 * box relative to its buffer; the message's type over them, relative to its one buffer, or at
 * the buffers' addresses (MPI_BOTTOM), made again only when an address changed. */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/check.h"
#include "runtime/comm/comm_mpi_impl.h"
#include "runtime/comm/pieces.h"

#define lock spmd__mpi_lock
#define unlock spmd__mpi_unlock

struct spmd__wire {
    int n;
    int *buffer;       /* [n] buffer index of each box */
    MPI_Datatype *box; /* [n] each box, relative to its buffer */
    MPI_Aint *disp;    /* [n] scratch: where each box's buffer is, at a use */
    int *ones;         /* [n] */
    int nused;         /* distinct buffers */
    int *used;         /* [nused] their indices */
    void **at;         /* [nused] their addresses when `whole` was made */
    int relative;      /* one buffer: `whole` is relative to it, made once */
    MPI_Datatype whole;
};

static int mpi_down(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    return finalized;
}

void spmd__wire_free(spmd__wire *w)
{
    if (!w)
        return;
    lock();
    if (!mpi_down()) { /* types outlive the requests that use them: freeing them is safe */
        for (int i = 0; i < w->n; i++)
            MPI_Type_free(&w->box[i]);
        if (w->whole != MPI_DATATYPE_NULL)
            MPI_Type_free(&w->whole);
    }
    unlock();
    free(w->buffer);
    free(w->box);
    free(w->disp);
    free(w->ones);
    free(w->used);
    free(w->at);
    free(w);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The box types (called locked); SPMD_ERR_UNSUPPORTED for dimensions past MPI's ints. */
static spmd_status make_boxes(spmd__wire *w, int n, size_t elem, int ndim, const int64_t *shape,
                              const int64_t *start, const int64_t *extent)
{
    int nd = ndim ? ndim : 1, sizes[SPMD_MAX_RANK], sub[SPMD_MAX_RANK], starts[SPMD_MAX_RANK];
    for (int d = 0; d < nd; d++) {
        int64_t size = ndim ? shape[d] : 1;
        SPMD_REQUIRE(size <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                     "resharding: a shard dimension of %lld elements exceeds MPI's int counts "
                     "(2^31 - 1)",
                     (long long)size);
        sizes[d] = (int)size;
    }
    MPI_Datatype unit;
    MPI_Type_contiguous((int)elem, MPI_BYTE, &unit);
    for (int i = 0; i < n; i++) {
        for (int d = 0; d < nd; d++) {
            sub[d] = ndim ? (int)extent[(size_t)i * (size_t)ndim + (size_t)d] : 1;
            starts[d] = ndim ? (int)start[(size_t)i * (size_t)ndim + (size_t)d] : 0;
        }
        MPI_Type_create_subarray(nd, sizes, sub, starts, MPI_ORDER_C, unit, &w->box[i]);
        w->ones[i] = 1;
    }
    MPI_Type_free(&unit);
    return SPMD_OK;
}

spmd_status spmd__wire_create(size_t elem, int ndim, const int64_t *shape, int n, const int *buffer,
                              const int64_t *start, const int64_t *extent, spmd__wire **out)
{
    *out = NULL;
    spmd__wire *w = calloc(1, sizeof *w);
    size_t m = (size_t)(n > 0 ? n : 1);
    if (w) {
        w->n = 0;
        w->whole = MPI_DATATYPE_NULL;
        w->buffer = malloc(m * sizeof *w->buffer);
        w->box = malloc(m * sizeof *w->box);
        w->disp = malloc(m * sizeof *w->disp);
        w->ones = malloc(m * sizeof *w->ones);
        w->used = malloc(m * sizeof *w->used);
        w->at = calloc(m, sizeof *w->at);
    }
    if (!w || !w->buffer || !w->box || !w->disp || !w->ones || !w->used || !w->at) {
        spmd__wire_free(w);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "resharding: out of memory");
    }
    memcpy(w->buffer, buffer, (size_t)n * sizeof *buffer);
    memcpy(w->used, buffer, (size_t)n * sizeof *buffer);
    qsort(w->used, (size_t)n, sizeof *w->used, cmp_int);
    for (int i = 0; i < n; i++)
        if (i == 0 || w->used[i] != w->used[w->nused - 1])
            w->used[w->nused++] = w->used[i];
    lock();
    spmd_status st = make_boxes(w, n, elem, ndim, shape, start, extent);
    if (st == SPMD_OK)
        w->n = n; /* made: freed with the wire */
    w->relative = w->nused == 1;
    unlock();
    if (st != SPMD_OK) {
        spmd__wire_free(w);
        return st;
    }
    *out = w;
    return SPMD_OK;
}

/* A new type of w's boxes at the absolute addresses of `bases` (called locked). */
static void absolute_type(spmd__wire *w, void *const *bases, MPI_Datatype *type)
{
    for (int i = 0; i < w->n; i++)
        MPI_Get_address(bases[w->buffer[i]], &w->disp[i]);
    MPI_Type_create_struct(w->n, w->ones, w->disp, w->box, type);
}

/* The type of a wire within one buffer, relative to it: made at the first use (as the data
 * moves, like every message type), then kept (called locked). */
static MPI_Datatype relative_type(spmd__wire *w)
{
    if (w->whole == MPI_DATATYPE_NULL) {
        for (int i = 0; i < w->n; i++)
            w->disp[i] = 0;
        MPI_Type_create_struct(w->n, w->ones, w->disp, w->box, &w->whole);
        MPI_Type_commit(&w->whole);
    }
    return w->whole;
}

/* Where a message of the one part p starts and its type (called locked): one buffer's
 * relative type at that buffer, else the type at the buffers' addresses from MPI_BOTTOM, kept
 * until an address changes. */
static void part_type(const spmd__wire_part *p, void **buf, MPI_Datatype *type)
{
    spmd__wire *w = p->wire;
    if (w->relative) {
        *buf = p->bases[w->used[0]];
        *type = relative_type(w);
        return;
    }
    int moved = w->whole == MPI_DATATYPE_NULL;
    for (int k = 0; k < w->nused && !moved; k++)
        moved = w->at[k] != p->bases[w->used[k]];
    if (moved) {
        if (w->whole != MPI_DATATYPE_NULL)
            MPI_Type_free(&w->whole); /* a request still using it keeps it alive */
        absolute_type(w, p->bases, &w->whole);
        MPI_Type_commit(&w->whole);
        for (int k = 0; k < w->nused; k++)
            w->at[k] = p->bases[w->used[k]];
    }
    *buf = MPI_BOTTOM;
    *type = w->whole;
}

/* The buffer and type of message m (called locked); *made: a type made for this use only. */
static spmd_status message_type(const spmd__wire_message *m, void **buf, MPI_Datatype *type,
                                int *made)
{
    *made = 0;
    if (m->nparts == 1) {
        part_type(&m->parts[0], buf, type);
        return SPMD_OK;
    }
    /* a batch: parts of one plan may share a wire, so none keeps a type made here */
    MPI_Datatype *types = malloc((size_t)m->nparts * sizeof *types);
    MPI_Aint *at = malloc((size_t)m->nparts * sizeof *at);
    int *ones = malloc((size_t)m->nparts * sizeof *ones);
    spmd_status st = types && at && ones
                         ? SPMD_OK
                         : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "resharding: out of memory");
    for (int i = 0; st == SPMD_OK && i < m->nparts; i++) {
        spmd__wire *w = m->parts[i].wire;
        at[i] = 0;
        ones[i] = 1;
        if (w->relative) {
            types[i] = relative_type(w);
            MPI_Get_address(m->parts[i].bases[w->used[0]], &at[i]);
        } else {
            absolute_type(w, m->parts[i].bases, &types[i]);
        }
    }
    if (st == SPMD_OK) {
        MPI_Type_create_struct(m->nparts, ones, at, types, type);
        MPI_Type_commit(type);
        *buf = MPI_BOTTOM;
        *made = 1;
        for (int i = 0; i < m->nparts; i++)
            if (!m->parts[i].wire->relative)
                MPI_Type_free(&types[i]); /* the message's type keeps what it needs */
    }
    free(types);
    free(at);
    free(ones);
    return st;
}

spmd_status spmd__comm_exchange_wires(spmd__comm *c, int nsend, const spmd__wire_message *sends,
                                      int nrecv, const spmd__wire_message *recvs,
                                      int (*work)(void *), void *work_arg)
{
    int n = nsend + nrecv, ready = 0;
    size_t m = (size_t)(n ? n : 1);
    MPI_Request *reqs = malloc(m * sizeof *reqs);
    MPI_Datatype *types = malloc(m * sizeof *types);
    void **bufs = malloc(m * sizeof *bufs);
    int *made = calloc(m, sizeof *made), *from = malloc(m * sizeof *from);
    spmd_status st = reqs && types && bufs && made && from
                         ? SPMD_OK
                         : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "resharding: out of memory");
    lock();
    while (st == SPMD_OK && ready < n) {
        st = message_type(ready < nrecv ? &recvs[ready] : &sends[ready - nrecv], &bufs[ready],
                          &types[ready], &made[ready]);
        ready += st == SPMD_OK;
    }
    if (st == SPMD_OK) {
        for (int i = 0; i < nrecv; i++)
            MPI_Irecv(bufs[i], 1, types[i], c->peer[recvs[i].peer], spmd__comm_pieces_tag(),
                      c->comm, &reqs[i]);
        for (int i = 0; i < nsend; i++)
            MPI_Isend(bufs[nrecv + i], 1, types[nrecv + i], c->peer[sends[i].peer],
                      spmd__comm_pieces_tag(), c->comm, &reqs[nrecv + i]);
        int more = work != NULL, flag = 0;
        while (more) {
            unlock();
            more = work(work_arg);
            lock();
            MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE); /* progress */
        }
        unlock();
        for (int i = 0; i < n; i++)
            from[i] = i < nrecv ? recvs[i].peer : -1;
        st = spmd__comm_wait_data(c, n, reqs, from, "the exchange of resharded data");
        lock(); /* after a failure MPI keeps the operations; the array of handles may go */
    }
    for (int i = 0; i < ready; i++)
        if (made[i])
            MPI_Type_free(&types[i]); /* a type stays alive while a request still uses it */
    unlock();
    free(reqs);
    free(types);
    free(bufs);
    free(made);
    free(from);
    return st;
}
