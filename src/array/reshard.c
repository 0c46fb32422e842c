/* Resharding (jax.device_put of a committed array): the public entry points and the moving of
 * data. A plan (reshard_plan.c) says which piece goes where; this file carries it out, with local
 * copies, shared buffers and MPI messages over a communicator per set of processes, one
 * collective call at a time. */
#include <spmd/reshard.h>
#include <spmd/runtime.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/pieces.h"
#include "runtime/comm/process_sets.h"
#include "runtime/runtime_impl.h"
#include "runtime/devices/worker.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"
#include "array/array_impl.h"
#include "array/copy.h"
#include "array/reshard_plan.h"
#include "runtime/base/stream_copy.h"

/* Communicator tag of reshard communicators (meshes use 1..30001, processes 30002). */
enum { RESHARD_TAG = 30003, MAX_BATCH = 1024 };

/* Calls are collective and issued in the same order everywhere: one at a time. */
static pthread_mutex_t reshard_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- communicators: one per set of processes, created by its first reshard ---- */

static spmd__set_comm *comms; /* under reshard_lock */

/*
 * Agrees with every process of `processes` on the call (fingerprint, description), within the
 * collective timeout, then returns their communicator. The first call over a set agrees over a
 * view (creating a communicator blocks until every member arrives, so it comes after).
 */
static spmd_status comm_agree(const spmd__runtime *rt, const int *processes, int n,
                              uint64_t fingerprint, const char *description, spmd__comm **out)
{
    spmd__wait w = {.deadline_ns = spmd__now_ns() + rt->collective_timeout_ns,
                    .what = "spmd_reshard"};
    spmd__set_comm *e = spmd__set_comm_find(&comms, processes, n, rt->session);
    *out = NULL;
    unsigned long call = 0;
    SPMD_CHECK(spmd__set_comm_call(&comms, &e, processes, n, RESHARD_TAG, "spmd_reshard",
                                   description, &call));
    if (e) {
        spmd_status st = spmd__comm_agree(e->comm, fingerprint, description, &w);
        if (st != SPMD_OK)
            spmd__set_comm_forget(&comms, e);
        *out = st == SPMD_OK ? e->comm : NULL;
        return st;
    }
    spmd_status st = spmd__set_comm_create(&comms, processes, n, rt->session, RESHARD_TAG, call,
                                           fingerprint, description, &w, &e);
    *out = st == SPMD_OK ? e->comm : NULL;
    return st;
}

/* ---- execution ---- */

typedef struct job {
    spmd_array *x, *out;
    reshard_plan *plan;
    size_t elem;
} job;

static void *shard_data(const spmd_array *a, int i) { return a->shards[i].buffer->data; }

/* Copies region r of shard i of `from` into shard j of `to`. */
static void copy_region(const job *jb, const spmd_array *from, int i, int j, const region *r)
{
    const spmd_array *to = jb->out;
    int64_t dst_start[SPMD_MAX_RANK], src_start[SPMD_MAX_RANK];
    for (int d = 0; d < to->ndim; d++) {
        dst_start[d] = r->start[d] - to->shards[j].index.start[d];
        src_start[d] = r->start[d] - from->shards[i].index.start[d];
    }
    spmd__copy_region(jb->elem, to->ndim, r->extent, shard_data(to, j), to->shard_shape, dst_start,
                      shard_data(from, i), from->shard_shape, src_start);
}

/* Elements [from, from + count) of run r into destination shard j. */
static void copy_run_part(const job *jb, int j, const copy_run *r, int64_t from, int64_t count)
{
    size_t elem = jb->elem;
    spmd__copy_cached((char *)shard_data(jb->out, j) + (size_t)(r->dst_at + from) * elem,
                      (const char *)shard_data(jb->x, r->shard) + (size_t)(r->src_at + from) * elem,
                      (size_t)count * elem);
}

/* The jobs of one call, as the device workers see them. */
typedef struct batch_work {
    job *jobs;
    int n;
} batch_work;

/* Every destination buffer, a view of a source shard or new. On the calling thread: a new
 * buffer's pages are first touched by whoever fills it (its device, or this thread for a few
 * copies: CALLER_COPIES_BYTES). */
static spmd_status make_buffers(const batch_work *bw)
{
    for (int k = 0; k < bw->n; k++) {
        const job *jb = &bw->jobs[k];
        for (int j = 0; j < jb->out->num_shards; j++) {
            spmd__shard_slot *s = &jb->out->shards[j];
            const dst_work *w = &jb->plan->dst[j];
            spmd__buffer *src = w->share_src >= 0 ? jb->x->shards[w->share_src].buffer : NULL;
            if (src && w->share_offset == 0 && src->nbytes == jb->out->shard_bytes)
                s->buffer = spmd__buffer_retain(src);
            else if (src)
                SPMD_CHECK(spmd__buffer_view(src, (size_t)w->share_offset * jb->elem,
                                             jb->out->shard_bytes, &s->buffer));
            else
                SPMD_CHECK(spmd__buffer_create(s->device_id, jb->out->shard_bytes, &s->buffer));
        }
    }
    return SPMD_OK;
}

/* The pieces each destination shard takes from this process's source shards. */
static spmd_status device_copies(int ordinal, void *arg)
{
    const batch_work *bw = arg;
    for (int k = 0; k < bw->n; k++) {
        const job *jb = &bw->jobs[k];
        for (int j = 0; j < jb->out->num_shards; j++) {
            const dst_work *w = &jb->plan->dst[j];
            if (jb->out->shards[j].ordinal != ordinal)
                continue;
            for (int c = 0; c < w->runs.n; c++)
                copy_run_part(jb, j, &w->runs.run[c], 0, w->runs.run[c].count);
            for (int c = 0; c < w->copies.n; c++) {
                region r;
                int i = spmd__reshard_pieces_get(&w->copies, jb->out->ndim, c, &r);
                copy_region(jb, jb->x, i, j, &r);
            }
        }
    }
    return SPMD_OK;
}

/* After the exchange: what another shard of this process received for this one too. */
static spmd_status device_replicas(int ordinal, void *arg);

/* The local ordinals of the devices with copies (or, with replicas set, replica fills) to do:
 * waking idle workers costs more than a small copy. `ordinals` has num_local entries. */
static int devices_with_work(const batch_work *bw, int replicas, int num_local, int *ordinals)
{
    memset(ordinals, 0, (size_t)num_local * sizeof *ordinals);
    for (int k = 0; k < bw->n; k++) {
        const job *jb = &bw->jobs[k];
        for (int j = 0; j < jb->out->num_shards; j++) {
            const dst_work *w = &jb->plan->dst[j];
            if ((replicas ? w->replicas.n : w->runs.n + w->copies.n) > 0)
                ordinals[jb->out->shards[j].ordinal] = 1;
        }
    }
    int count = 0;
    for (int d = 0; d < num_local; d++)
        if (ordinals[d])
            ordinals[count++] = d;
    return count;
}

static spmd_status device_replicas(int ordinal, void *arg)
{
    const batch_work *bw = arg;
    for (int k = 0; k < bw->n; k++) {
        const job *jb = &bw->jobs[k];
        for (int j = 0; j < jb->out->num_shards; j++) {
            const dst_work *w = &jb->plan->dst[j];
            if (jb->out->shards[j].ordinal != ordinal)
                continue;
            for (int c = 0; c < w->replicas.n; c++) {
                region r;
                int i = spmd__reshard_pieces_get(&w->replicas, jb->out->ndim, c, &r);
                copy_region(jb, jb->out, i, j, &r);
            }
        }
    }
    return SPMD_OK;
}

/* Which of a part's wires serves elements of `elem` bytes. */
static int elem_index(size_t elem) { return elem <= 1 ? 0 : elem == 2 ? 1 : elem == 4 ? 2 : 3; }

/* The MPI datatypes of every message of the batch's plans for its element sizes, made once
 * per plan and element size (a box of a shard relative to the shard). */
static spmd_status make_wires(const batch_work *bw)
{
    for (int k = 0; k < bw->n; k++) {
        const job *jb = &bw->jobs[k];
        reshard_plan *p = jb->plan;
        int ndim = p->ndim, e = elem_index(jb->elem);
        SPMD_REQUIRE(jb->elem == (size_t)1 << e, SPMD_ERR_INTERNAL,
                     "spmd_reshard: no message layout for elements of %zu bytes", jb->elem);
        for (int i = 0; i < p->nsend + p->nrecv; i++) {
            peer_part *pp = i < p->nsend ? &p->sends[i] : &p->recvs[i - p->nsend];
            const spmd_array *a = i < p->nsend ? jb->x : jb->out;
            if (pp->wire[e])
                continue;
            size_t cells = (size_t)pp->list.n * (size_t)ndim;
            int64_t *start = malloc((cells ? cells : 1) * sizeof *start);
            int64_t *extent = malloc((cells ? cells : 1) * sizeof *extent);
            spmd_status st = start && extent ? SPMD_OK : NO_MEMORY;
            for (int c = 0; st == SPMD_OK && c < pp->list.n; c++) {
                region r;
                int shard = spmd__reshard_pieces_get(&pp->list, ndim, c, &r);
                for (int d = 0; d < ndim; d++) {
                    start[(size_t)c * (size_t)ndim + (size_t)d] =
                        r.start[d] - a->shards[shard].index.start[d];
                    extent[(size_t)c * (size_t)ndim + (size_t)d] = r.extent[d];
                }
            }
            if (st == SPMD_OK)
                st = spmd__wire_create(jb->elem, ndim, a->shard_shape, pp->list.n, pp->list.shard,
                                       start, extent, &pp->wire[e]);
            free(start);
            free(extent);
            SPMD_CHECK(st);
        }
    }
    return SPMD_OK;
}

/* One message per peer process and direction, made of every job's part for it in job order
 * (the parts of a plan and `processes` are both ascending). */
static spmd_status build_messages(const job *jobs, int n, int sending, const int *processes,
                                  int nproc, spmd__wire_message **out, int *count,
                                  spmd__wire_part **parts_out, void ***bases_out, uint64_t *bytes)
{
    int total = 0, nbases = 0;
    for (int k = 0; k < n; k++) {
        total += sending ? jobs[k].plan->nsend : jobs[k].plan->nrecv;
        nbases += (sending ? jobs[k].x : jobs[k].out)->num_shards;
    }
    spmd__wire_message *m = calloc((size_t)(nproc ? nproc : 1), sizeof *m);
    spmd__wire_part *parts = malloc((size_t)(total ? total : 1) * sizeof *parts);
    void **bases = malloc((size_t)(nbases ? nbases : 1) * sizeof *bases);
    int *next = calloc((size_t)n, sizeof *next);
    *out = m;
    *parts_out = parts;
    *bases_out = bases;
    if (!m || !parts || !bases || !next) {
        free(next);
        return NO_MEMORY;
    }
    void **job_bases = bases;
    for (int k = 0; k < n; k++) { /* where every shard lies in this call */
        const spmd_array *a = sending ? jobs[k].x : jobs[k].out;
        for (int i = 0; i < a->num_shards; i++)
            job_bases[i] = shard_data(a, i);
        job_bases += a->num_shards;
    }
    *count = 0;
    int used = 0;
    for (int r = 0; r < nproc; r++) {
        spmd__wire_message *msg = &m[*count];
        msg->peer = r;
        msg->parts = &parts[used];
        job_bases = bases;
        for (int k = 0; k < n; k++) {
            const reshard_plan *p = jobs[k].plan;
            const spmd_array *a = sending ? jobs[k].x : jobs[k].out;
            const peer_part *list = sending ? p->sends : p->recvs;
            int nparts = sending ? p->nsend : p->nrecv;
            while (next[k] < nparts && list[next[k]].process < processes[r])
                next[k]++;
            if (next[k] < nparts && list[next[k]].process == processes[r]) {
                const peer_part *pp = &list[next[k]++];
                *bytes += (uint64_t)pp->elements * jobs[k].elem;
                parts[used++] = (spmd__wire_part){pp->wire[elem_index(jobs[k].elem)], job_bases};
                msg->nparts++;
            }
            job_bases += a->num_shards;
        }
        *count += msg->nparts > 0;
    }
    free(next);
    return SPMD_OK;
}

static spmd_status exchange(spmd__comm *comm, const job *jobs, int n, const int *processes,
                            int nproc, int (*work)(void *), void *work_arg,
                            spmd_reshard_stats *stats)
{
    spmd__wire_message *sends = NULL, *recvs = NULL;
    spmd__wire_part *send_parts = NULL, *recv_parts = NULL;
    void **send_bases = NULL, **recv_bases = NULL;
    int nsend = 0, nrecv = 0;
    spmd_status st = build_messages(jobs, n, 1, processes, nproc, &sends, &nsend, &send_parts,
                                    &send_bases, &stats->bytes_sent);
    if (st == SPMD_OK)
        st = build_messages(jobs, n, 0, processes, nproc, &recvs, &nrecv, &recv_parts, &recv_bases,
                            &stats->bytes_received);
    if (st == SPMD_OK && (nsend || nrecv))
        st = spmd__comm_exchange_wires(comm, nsend, sends, nrecv, recvs, work, work_arg);
    else
        while (st == SPMD_OK && work && work(work_arg))
            ;
    stats->messages_sent = nsend;
    stats->messages_received = nrecv;
    free(sends);
    free(recvs);
    free(send_parts);
    free(recv_parts);
    free(send_bases);
    free(recv_bases);
    return st;
}

typedef struct exchange_args {
    spmd__comm *comm;
    const job *jobs;
    int n;
    const int *processes;
    int nproc;
    spmd_reshard_stats *stats;
} exchange_args;

static spmd_status exchange_beside(void *arg)
{
    const exchange_args *a = arg;
    return exchange(a->comm, a->jobs, a->n, a->processes, a->nproc, NULL, NULL, a->stats);
}

/* Where the calling thread is in the local copies when it does them itself, between steps of
 * the exchange. */
typedef struct copy_cursor {
    const batch_work *bw;
    int k, j, c;  /* job, destination shard, copy: its runs, then its other pieces */
    int64_t done; /* elements of that run, or rows of that piece's first dimension */
} copy_cursor;

enum { COPY_STEP_BYTES = 256 << 10 };

/* Copies about COPY_STEP_BYTES of the runs of destination shard cur->j, from run cur->c on. */
static void copy_runs_step(copy_cursor *cur, const job *jb, const copy_runs *l)
{
    int64_t budget = COPY_STEP_BYTES / (int64_t)jb->elem;
    const copy_run *r = &l->run[cur->c];
    if (r->count - cur->done > budget) { /* a long run: its next slab */
        copy_run_part(jb, cur->j, r, cur->done, budget);
        cur->done += budget;
        return;
    }
    copy_run_part(jb, cur->j, r, cur->done, r->count - cur->done);
    budget -= r->count - cur->done;
    cur->done = 0;
    for (cur->c++; cur->c < l->n && l->run[cur->c].count <= budget; cur->c++) {
        copy_run_part(jb, cur->j, &l->run[cur->c], 0, l->run[cur->c].count);
        budget -= l->run[cur->c].count;
    }
}

/* Copies the next slab (about COPY_STEP_BYTES) of the local pieces; 0 once none is left. */
static int copy_step(void *arg)
{
    copy_cursor *cur = arg;
    const batch_work *bw = cur->bw;
    for (; cur->k < bw->n; cur->k++, cur->j = 0) {
        const job *jb = &bw->jobs[cur->k];
        for (; cur->j < jb->out->num_shards; cur->j++, cur->c = 0) {
            const dst_work *w = &jb->plan->dst[cur->j];
            if (cur->c < w->runs.n) {
                copy_runs_step(cur, jb, &w->runs);
                return 1;
            }
            if (cur->c >= w->runs.n + w->copies.n)
                continue;
            int ndim = jb->out->ndim;
            region r;
            int shard = spmd__reshard_pieces_get(&w->copies, ndim, cur->c - w->runs.n, &r);
            int64_t rows = ndim ? r.extent[0] : 1, row_bytes = (int64_t)jb->elem;
            for (int d = 1; d < ndim; d++)
                row_bytes *= r.extent[d];
            int64_t step = COPY_STEP_BYTES / row_bytes > 1 ? COPY_STEP_BYTES / row_bytes : 1;
            if (step > rows - cur->done)
                step = rows - cur->done;
            if (ndim) {
                r.start[0] += cur->done;
                r.extent[0] = step;
            }
            copy_region(jb, jb->x, shard, cur->j, &r);
            cur->done += step;
            if (cur->done == rows) {
                cur->done = 0;
                cur->c++;
            }
            return 1;
        }
    }
    return 0;
}

/* Fingerprint and a short description of the batch, for the agreement between processes. */
static uint64_t describe(const job *jobs, int n, char *text, size_t size)
{
    uint64_t h = spmd__thread_tag() ^ SPMD__FNV1A_SEED;
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    char thread[64];
    spmd__thread_text(thread, sizeof thread);
    spmd__strbuf_printf(&sb, "spmd_reshard of %d array%s (its call #%lu, %s):", n,
                        n == 1 ? "" : "s", spmd__calls_number(), thread);
    for (int k = 0; k < n; k++) {
        const spmd_array *x = jobs[k].x, *out = jobs[k].out;
        char from[SPMD__SPEC_TEXT], to[SPMD__SPEC_TEXT];
        spmd__ignore(spmd_spec_format(x->sharding->spec, from, sizeof from));
        spmd__ignore(spmd_spec_format(out->sharding->spec, to, sizeof to));
        spmd__strbuf_printf(&sb, " %s", spmd_dtype_name(x->dtype));
        spmd__strbuf_shape(&sb, x->shape, x->ndim);
        /* the device sets too: reshards of one shape between other devices read alike */
        spmd__strbuf_printf(&sb, " %s on devices ", from);
        spmd__strbuf_int_list(&sb, x->sharding->mesh->device_ids, x->sharding->mesh->size);
        spmd__strbuf_printf(&sb, " -> %s on devices ", to);
        spmd__strbuf_int_list(&sb, out->sharding->mesh->device_ids, out->sharding->mesh->size);
        h = spmd__fnv1a(h, &x->dtype, sizeof x->dtype);
        h = spmd__fnv1a(h, x->shape, (size_t)x->ndim * sizeof *x->shape);
        h = spmd__fnv1a(h, from, strlen(from));
        h = spmd__fnv1a(h, to, strlen(to));
        const spmd_mesh *meshes[2] = {x->sharding->mesh, out->sharding->mesh};
        for (int m = 0; m < 2; m++) {
            h = spmd__fnv1a(h, meshes[m]->shape, (size_t)meshes[m]->ndim * sizeof(int));
            h = spmd__fnv1a(h, meshes[m]->names, sizeof meshes[m]->names);
            h = spmd__fnv1a(h, meshes[m]->device_ids, (size_t)meshes[m]->size * sizeof(int));
        }
    }
    return h;
}

static spmd_status check_one(const spmd_array *x, const spmd_sharding *to, const char *fn, int k,
                             int batch)
{
    char what[64];
    snprintf(what, sizeof what, batch ? "xs[%d]" : "x", k);
    SPMD_CHECK(spmd__array_check(x, fn, what));
    snprintf(what, sizeof what, batch ? "new_shardings[%d]" : "new_sharding", k);
    SPMD_CHECK(spmd__sharding_check(to, fn, what));
    SPMD_CHECK(spmd__mesh_refuse_abstract(to->mesh, fn, what));
    if (!spmd__runtime_get_session(fn, to->mesh->session))
        return SPMD_ERR_INVALID_ARGUMENT;
    snprintf(what, sizeof what, batch ? "xs[%d]" : "x", k);
    SPMD_CHECK(spmd__sharding_check_shape(to, x->ndim, x->shape, fn, what));
    /* partial sums move only where they stay (spmd_reshard adds them up first) */
    const spmd_sharding *from = x->sharding;
    if ((from->unreduced_mask || to->unreduced_mask) && from->layout != to->layout) {
        char a[SPMD__SPEC_TEXT], b[SPMD__SPEC_TEXT];
        spmd__ignore(spmd_spec_format(from->spec, a, sizeof a));
        spmd__ignore(spmd_spec_format(to->spec, b, sizeof b));
        if (to->unreduced_mask)
            return SPMD_ERROR(SPMD_ERR_UNSUPPORTED,
                              "%s: resharding %s (%s) into unreduced axes (%s) is not offered; "
                              "produce the array in spmd_shard_map with that out_spec",
                              fn, what, a, b);
        return SPMD_ERROR(SPMD_ERR_UNSUPPORTED,
                          "%s: %s is %s, partial sums; reshard it alone with spmd_reshard, which "
                          "adds them up",
                          fn, what, a);
    }
    return SPMD_OK;
}

/* Local copies of this many bytes per core in all are done by the calling thread: waking a
 * worker per device costs more (microseconds each; with more devices than cores their
 * wake-ups take turns, and at 256 devices in one process on 2 cores those of a reshard that
 * copies 512 KiB took milliseconds, more than this thread's copy of it). */
enum { CALLER_COPIES_BYTES = 256 << 10 };

/* Whether the devices do their copies: enough bytes that each core's share of the workers pays
 * for their wake-ups. */
static int devices_copy(uint64_t bytes, int busy, int cores)
{
    int per_core = cores > 0 && busy > cores ? (busy + cores - 1) / cores : 1;
    return busy > 1 && bytes > (uint64_t)CALLER_COPIES_BYTES * (uint64_t)per_core;
}

/* The bytes this process copies between its own shards before the exchange. */
static uint64_t local_copy_bytes(const batch_work *bw)
{
    uint64_t bytes = 0;
    for (int k = 0; k < bw->n; k++)
        for (int j = 0; j < bw->jobs[k].out->num_shards; j++)
            bytes += (uint64_t)bw->jobs[k].plan->dst[j].copy_elements * bw->jobs[k].elem;
    return bytes;
}

static spmd_status reshard_locked(const char *fn, int n, spmd_array *const *xs,
                                  const spmd_sharding *const *to, const spmd_reshard_options *o,
                                  job *jobs, spmd_reshard_stats *stats)
{
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    int P = rt->process_count;
    char *member = calloc((size_t)P, 1);
    int *processes = malloc((size_t)P * sizeof(int)), nproc = 0;
    spmd_status st =
        member && processes ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    for (int k = 0; st == SPMD_OK && k < n; k++) {
        jobs[k].x = xs[k];
        jobs[k].elem = spmd_dtype_size(xs[k]->dtype);
        int built = 0;
        int64_t t0 = spmd__now_ns();
        st = spmd__reshard_plan_get(xs[k]->sharding, to[k], xs[k]->ndim, xs[k]->shape, rt,
                                    &jobs[k].plan, &built);
        stats->plan_seconds += (double)(spmd__now_ns() - t0) * 1e-9;
        if (st == SPMD_OK) {
            stats->plans_built += built;
            stats->plan_pieces += jobs[k].plan->npieces;
            stats->plan_steps += built ? jobs[k].plan->steps : 0;
        }
        if (st == SPMD_OK)
            st = spmd__array_create_empty(to[k], xs[k]->ndim, xs[k]->shape, xs[k]->dtype, fn,
                                          &jobs[k].out);
        if (st != SPMD_OK)
            break;
        for (int i = 0; i < jobs[k].plan->num_processes; i++)
            member[jobs[k].plan->processes[i]] = 1;
    }
    for (int q = 0; st == SPMD_OK && q < P; q++)
        if (member[q])
            processes[nproc++] = q;
    /* Buffers before the agreement (messages land in them): a process that cannot allocate
     * still takes part in it, so that the others fail at once instead of waiting for it. */
    batch_work bw = {jobs, n};
    int prepared = st == SPMD_OK, *ordinals = malloc((size_t)rt->num_local * sizeof(int));
    if (st == SPMD_OK)
        st = ordinals ? make_buffers(&bw)
                      : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    if (st == SPMD_OK)
        st = make_wires(&bw);
    spmd__comm *comm = NULL;
    /* Every process of the operation agrees, even one whose own part moves nothing: otherwise
     * processes in different reshards could exchange data meant for another. */
    char text[240] = "";
    if (prepared && nproc > 1 && member[rt->process_index]) {
        uint64_t fingerprint = describe(jobs, n, text, sizeof text);
        if (st != SPMD_OK) {
            char reason[1024];
            snprintf(reason, sizeof reason, "%s", spmd_last_error());
            snprintf(text, sizeof text, "spmd_reshard, which failed here: %.80s", reason);
            spmd__ignore(comm_agree(rt, processes, nproc, ~fingerprint, text, &comm));
            comm = NULL;
            st = SPMD_ERROR(st, "%s", reason);
        } else {
            st = comm_agree(rt, processes, nproc, fingerprint, text, &comm);
        }
    }
    exchange_args ex = {comm, jobs, n, processes, nproc, stats};
    if (st == SPMD_OK) { /* the local copies beside the exchange */
        int busy = devices_with_work(&bw, 0, rt->num_local, ordinals);
        copy_cursor cur = {&bw, 0, 0, 0, 0};
        if (devices_copy(local_copy_bytes(&bw), busy, rt->usable_cores))
            /* the devices copy while this thread exchanges */
            st = spmd__run_on_devices_beside(fn, busy, ordinals, device_copies, &bw,
                                             comm ? exchange_beside : NULL, &ex);
        else if (comm) /* few copies: this thread interleaves them with the exchange */
            st = exchange(comm, jobs, n, processes, nproc, copy_step, &cur, stats);
        else
            while (copy_step(&cur))
                ;
    }
    if (st != SPMD_OK && comm) { /* MPI failed after the agreement: start afresh next time */
        spmd__set_comm *e = spmd__set_comm_find(&comms, processes, nproc, rt->session);
        if (e)
            spmd__set_comm_forget(&comms, e);
        /* MPI may still read the sources and write the destinations: they outlive the process */
        for (int k = 0; k < n; k++) {
            spmd__array_keep_buffers(jobs[k].x);
            spmd__array_keep_buffers(jobs[k].out);
        }
        st = spmd__error_in(st, fn);
    }
    if (st == SPMD_OK && o->donate)
        for (int k = 0; k < n; k++)
            spmd__array_mark_deleted(xs[k], fn); /* its sent data is out; shared buffers live on */
    if (st == SPMD_OK && comm) {
        int busy = devices_with_work(&bw, 1, rt->num_local, ordinals);
        st = spmd__run_on_devices(fn, busy, ordinals, device_replicas, &bw);
    }
    for (int k = 0; st == SPMD_OK && k < n; k++)
        for (int j = 0; j < jobs[k].out->num_shards; j++)
            if (jobs[k].plan->dst[j].share_src >= 0)
                stats->bytes_shared += jobs[k].out->shard_bytes;
            else
                stats->bytes_copied += (uint64_t)(jobs[k].plan->dst[j].copy_elements +
                                                  jobs[k].plan->dst[j].replica_elements) *
                                       jobs[k].elem;
    free(ordinals);
    free(member);
    free(processes);
    return st;
}

static spmd_status reshard_batch_entered(const char *fn, int n, spmd_array *const *xs,
                                         const spmd_sharding *const *to,
                                         const spmd_reshard_options *options, spmd_array **outs);

/* One call at a time in a process (calls.h). */
static spmd_status reshard_batch(const char *fn, int n, spmd_array *const *xs,
                                 const spmd_sharding *const *to,
                                 const spmd_reshard_options *options, spmd_array **outs)
{
    spmd__call_entry lock;
    SPMD_CHECK(spmd__calls_enter(fn, &lock));
    spmd_status st = reshard_batch_entered(fn, n, xs, to, options, outs);
    spmd__calls_exit(&lock, st);
    return st;
}

static spmd_status reshard_batch_entered(const char *fn, int n, spmd_array *const *xs,
                                         const spmd_sharding *const *to,
                                         const spmd_reshard_options *options, spmd_array **outs)
{
    spmd_reshard_options o = SPMD_RESHARD_OPTIONS_INIT;
    if (options) {
        SPMD_REQUIRE(options->version == SPMD_RESHARD_OPTIONS_VERSION, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: options.version is %u; initialize options with "
                     "SPMD_RESHARD_OPTIONS_INIT",
                     fn, options->version);
        o = *options;
    }
    int batch = strcmp(fn, "spmd_reshard") != 0;
    for (int k = 0; k < n; k++) {
        SPMD_CHECK(check_one(xs[k], to[k], fn, k, batch));
        for (int i = 0; o.donate && i < k; i++)
            SPMD_REQUIRE(xs[i] != xs[k], SPMD_ERR_INVALID_ARGUMENT,
                         "%s: xs[%d] and xs[%d] are the same array, which cannot be donated twice; "
                         "pass it once or leave options.donate at 0",
                         fn, i, k);
    }
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    job *jobs = calloc((size_t)(n > 0 ? n : 1), sizeof *jobs);
    SPMD_REQUIRE(jobs != NULL, SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    spmd_reshard_stats stats;
    memset(&stats, 0, sizeof stats);
    pthread_mutex_lock(&reshard_lock);
    spmd_status st = reshard_locked(fn, n, xs, to, &o, jobs, &stats);
    pthread_mutex_unlock(&reshard_lock);
    spmd__calls_about(NULL); /* its description is gone */
    for (int k = 0; k < n; k++) {
        if (st == SPMD_OK)
            outs[k] = jobs[k].out;
        else
            spmd_array_destroy(jobs[k].out);
    }
    free(jobs);
    if (st == SPMD_OK && o.stats)
        *o.stats = stats;
    return st;
}

spmd_status spmd__reshard(spmd_array *x, const spmd_sharding *new_sharding,
                          const spmd_reshard_options *options, spmd_array **out)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_reshard");
    *out = NULL;
    SPMD_REQUIRE_NOT_NULL(x, "spmd_reshard");
    SPMD_REQUIRE_NOT_NULL(new_sharding, "spmd_reshard");
    return reshard_batch("spmd_reshard", 1, &x, &new_sharding, options, out);
}

spmd_status spmd_reshard_batch(int n, spmd_array *const *xs,
                               const spmd_sharding *const *new_shardings,
                               const spmd_reshard_options *options, spmd_array **outs)
{
    const char *fn = "spmd_reshard_batch";
    SPMD_REQUIRE(n >= 0 && n <= MAX_BATCH, SPMD_ERR_INVALID_ARGUMENT, "%s: n=%d must be in 0..%d",
                 fn, n, MAX_BATCH);
    if (n == 0)
        return SPMD_OK;
    SPMD_REQUIRE_NOT_NULL(outs, fn);
    for (int k = 0; k < n; k++)
        outs[k] = NULL;
    SPMD_REQUIRE_NOT_NULL(xs, fn);
    SPMD_REQUIRE_NOT_NULL(new_shardings, fn);
    for (int k = 0; k < n; k++)
        SPMD_REQUIRE(xs[k] && new_shardings[k], SPMD_ERR_INVALID_ARGUMENT, "%s: %s[%d] is NULL", fn,
                     xs[k] ? "new_shardings" : "xs", k);
    return reshard_batch(fn, n, xs, new_shardings, options, outs);
}

static spmd_status copy_shard(spmd_array *out, spmd__shard_slot *s, void *arg)
{
    const spmd_array *x = arg;
    SPMD_CHECK(spmd__buffer_create(s->device_id, out->shard_bytes, &s->buffer));
    spmd__copy_cached(s->buffer->data, shard_data(x, (int)(s - out->shards)), out->shard_bytes);
    return SPMD_OK;
}

spmd_status spmd_array_copy(const spmd_array *x, spmd_array **out)
{
    const char *fn = "spmd_array_copy";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    SPMD_CHECK(spmd__array_check(x, fn, "x"));
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    spmd_array *a = NULL;
    SPMD_CHECK(spmd__array_create_empty(x->sharding, x->ndim, x->shape, x->dtype, fn, &a));
    spmd_status st = spmd__array_for_shards(fn, a, NULL, a->num_shards, copy_shard, (void *)x);
    if (st != SPMD_OK) {
        spmd_array_destroy(a);
        return st;
    }
    a->stacked_replicas = x->stacked_replicas;
    *out = a;
    return SPMD_OK;
}
