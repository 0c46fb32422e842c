/* Collectives over the processes of a run: gathers to the host, broadcast, barrier, equality
 * check. Each call first agrees, with a deadline, on what every process is doing (so that a
 * mismatch or a missing process is an error, not a hang), then moves the data with MPI. */
#include <spmd/multihost.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/process_sets.h"
#include "runtime/runtime_impl.h"
#include "runtime/calls/trace.h"
#include "runtime/devices/worker.h" /* refusing calls from inside fn */
#include "array/array_impl.h"
#include "array/copy.h"
#include "sharding/sharding_impl.h" /* refusing unreduced arrays */
#include "runtime/base/stream_copy.h"

/* Communicator tag of the process communicator (mesh communicators use 1..30001). */
enum { PROCESSES_TAG = 30002 };

/* The communicator over every process, created by the first multihost collective. Calls are
 * serialized: they must come in the same order on every process anyway. */
static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static spmd__comm *processes_comm;
static unsigned processes_session;
static int *everyone; /* 0..count-1, what the notes say takes part */
static int everyone_count;

static uint64_t fingerprint_of(const char *description)
{
    return spmd__fnv1a(SPMD__FNV1A_SEED, description, strlen(description));
}

/* Agreement over a view of every process, when no communicator may be used (creating one would
 * wait for every process): the first call, which then makes processes_comm (`make_comm`), and
 * the roll call after a failure. */
static spmd_status agree_on_view(int count, const char *description, uint64_t fingerprint,
                                 spmd__wait *w, int make_comm)
{
    int *all = malloc((size_t)count * sizeof *all);
    SPMD_REQUIRE(all != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int p = 0; p < count; p++)
        all[p] = p;
    pthread_mutex_lock(&spmd__setup_lock);
    spmd_status st = make_comm ? spmd__agree_to_create(all, count, fingerprint, description, w)
                               : spmd__agree_on_view(all, count, fingerprint, description, w);
    pthread_mutex_unlock(&spmd__setup_lock);
    /* every process agreed, and no other call of this process comes between (calls.h) */
    if (st == SPMD_OK && make_comm)
        st = spmd__comm_create(all, count, PROCESSES_TAG, &processes_comm);
    free(all);
    return st;
}

static void drop_processes_comm(void)
{
    spmd__comm_abandon(processes_comm);
    processes_comm = NULL;
}

static void describe_text(const void *arg, char *text, size_t size)
{
    spmd__copy_text(text, size, arg);
}

/* What this call is, for the other processes' notes (calls.h); fails when another process
 * gave it up (the processes issued their calls in different orders). */
static spmd_status say_what(const char *fn, const char *description, int count,
                            unsigned long *number)
{
    if (everyone_count != count) {
        int *all = realloc(everyone, (size_t)count * sizeof *all);
        SPMD_REQUIRE(all != NULL, SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        everyone = all;
        everyone_count = count;
        for (int p = 0; p < count; p++)
            everyone[p] = p;
    }
    /* numbered across the communicators over every process: each makes every call */
    uint64_t id = PROCESSES_TAG;
    unsigned long call = spmd__calls_next_call(id);
    *number = call;
    spmd__call_about about = {id, call, everyone, count, describe_text, description};
    char reason[SPMD__NOTE_TEXT];
    if (!spmd__calls_start(&about, reason, sizeof reason))
        return SPMD_OK;
    if (processes_comm) /* as the others drop theirs */
        drop_processes_comm();
    spmd__calls_about(NULL);
    return SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH, "%s: %s", fn, reason);
}

/* How a gather takes x (JAX's is_fully_addressable), in its description: the processes must
 * agree, and a message quoting two that do not says why. */
static const char host_local_text[] =
    " (host-local: its mesh is on this process's devices only, each process's value is one part)";
static const char global_text[] =
    " (global: its mesh is not on this process's devices alone, the result is its global value)";

/* The trace's text of the call: alike in every layout (one process is all host-local), so that
 * traces of 1 x 8 and 4 x 2 runs compare. */
static void trace_describe(const char *description)
{
    char text[SPMD__MESSAGE_CAPACITY / 4];
    spmd__copy_text(text, sizeof text, description);
    static const char *const layout_words[] = {host_local_text, global_text};
    for (size_t k = 0; k < sizeof layout_words / sizeof layout_words[0]; k++) {
        char *at = strstr(text, layout_words[k]);
        if (at)
            memmove(at, at + strlen(layout_words[k]), strlen(at + strlen(layout_words[k])) + 1);
    }
    spmd__trace_call_describe(0, fingerprint_of(text) ^ spmd__thread_tag(), text);
}

/*
 * Starts a collective described by `description` (which must differ between calls that must
 * not match): the call lock (calls.h) is held until finish(). In one process *comm is NULL;
 * otherwise *comm is the process communicator and engine_lock is held until finish().
 */
static spmd_status begin(const char *fn, const char *description, spmd__comm **comm,
                         spmd__call_entry *lock)
{
    *comm = NULL;
    SPMD_CHECK(spmd__calls_enter(fn, lock));
    if (spmd__tracing())
        trace_describe(description);
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (!rt || rt->process_count == 1) {
        spmd_status st = rt ? SPMD_OK : SPMD_ERR_INVALID_ARGUMENT;
        spmd__calls_exit(lock, st);
        return st;
    }
    pthread_mutex_lock(&engine_lock);
    if (processes_comm && processes_session != rt->session)
        drop_processes_comm(); /* made before the last spmd_finalize */
    /* the thread's name is part of what must match */
    char text[SPMD__MESSAGE_CAPACITY / 4 + 128], thread[64];
    spmd__thread_text(thread, sizeof thread);
    snprintf(text, sizeof text, "%s (its call #%lu, %s)", description, spmd__calls_number(),
             thread);
    uint64_t fingerprint = fingerprint_of(description) ^ spmd__thread_tag();
    spmd__wait w = {.deadline_ns = spmd__now_ns() + rt->collective_timeout_ns, .what = fn};
    unsigned long call = 0;
    spmd_status st = say_what(fn, text, rt->process_count, &call);
    if (st == SPMD_OK && !processes_comm) {
        /* the agreement that makes the communicator has tags of its call's own */
        w.key = spmd__fnv1a(fingerprint_of("processes"), &call, sizeof call) | 1;
        st = agree_on_view(rt->process_count, text, fingerprint, &w, 1);
        processes_session = rt->session;
    } else if (st == SPMD_OK) {
        st = spmd__comm_agree(processes_comm, fingerprint, text, &w);
        if (st != SPMD_OK) /* it may hold unfinished messages: the next call starts afresh */
            drop_processes_comm();
    }
    spmd__calls_about(NULL); /* its description is gone */
    if (st != SPMD_OK) {
        pthread_mutex_unlock(&engine_lock);
        spmd__calls_exit(lock, st);
        return st;
    }
    *comm = processes_comm;
    return SPMD_OK;
}

static void finish(spmd__comm *comm, const spmd__call_entry *lock, spmd_status st)
{
    if (comm) {
        pthread_mutex_unlock(&engine_lock);
        spmd__calls_exit(lock, st);
    }
}

/* ---- what each process contributes ---- */

static size_t array_bytes(const spmd_array *x)
{
    return (size_t)spmd__shape_elements(x->ndim, x->shape) * spmd_dtype_size(x->dtype);
}

static size_t box_bytes(const spmd_box *b, size_t elem)
{
    size_t n = elem;
    for (int d = 0; d < b->ndim; d++)
        n *= (size_t)(b->stop[d] - b->start[d]);
    return n;
}

/*
 * The distinct blocks of a global array, each taken from its first holder in mesh flat order
 * (replica 0): bytes[p] is what process p contributes, in that order. The same on every process.
 */
static spmd_status contributions(const spmd_array *x, size_t *bytes, int processes)
{
    const spmd_mesh *mesh = spmd_sharding_mesh(x->sharding);
    memset(bytes, 0, (size_t)processes * sizeof *bytes);
    for (int f = 0; f < spmd_mesh_size(mesh); f++) {
        int id = spmd_mesh_device_id(mesh, f);
        if (spmd_sharding_replica_id(x->sharding, id) != 0)
            continue;
        spmd_box box;
        spmd_device_info info;
        SPMD_CHECK(spmd_sharding_device_box(x->sharding, x->ndim, x->shape, id, &box));
        SPMD_CHECK(spmd_device_get_info(id, &info));
        bytes[info.process_index] += box_bytes(&box, spmd_dtype_size(x->dtype));
    }
    return SPMD_OK;
}

/* Packs this process's contribution (see contributions) into `dst`. */
static spmd_status pack_blocks(const spmd_array *x, char *dst)
{
    const spmd_mesh *mesh = spmd_sharding_mesh(x->sharding);
    size_t offset = 0, elem = spmd_dtype_size(x->dtype);
    for (int f = 0; f < spmd_mesh_size(mesh); f++) {
        int id = spmd_mesh_device_id(mesh, f);
        int s = spmd__array_shard_of_device(x, id);
        if (s < 0 || spmd_sharding_replica_id(x->sharding, id) != 0)
            continue;
        size_t n = box_bytes(&x->shards[s].index, elem);
        SPMD_CHECK(spmd_array_shard_to_host(x, s, dst + offset, n));
        offset += n;
    }
    return SPMD_OK;
}

/* Places every process's packed blocks (rank order, as contributions) into the dense `out`. */
static spmd_status unpack_blocks(const spmd_array *x, const char *packed, const size_t *bytes,
                                 int processes, void *out)
{
    const spmd_mesh *mesh = spmd_sharding_mesh(x->sharding);
    size_t *offset = calloc((size_t)processes, sizeof *offset);
    SPMD_REQUIRE(offset != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int p = 1; p < processes; p++)
        offset[p] = offset[p - 1] + bytes[p - 1];
    size_t elem = spmd_dtype_size(x->dtype);
    spmd_status st = SPMD_OK;
    for (int f = 0; f < spmd_mesh_size(mesh) && st == SPMD_OK; f++) {
        int id = spmd_mesh_device_id(mesh, f);
        if (spmd_sharding_replica_id(x->sharding, id) != 0)
            continue;
        spmd_box box;
        spmd_device_info info;
        st = spmd_sharding_device_box(x->sharding, x->ndim, x->shape, id, &box);
        if (st == SPMD_OK)
            st = spmd_device_get_info(id, &info);
        if (st != SPMD_OK)
            break;
        int64_t extent[SPMD_MAX_RANK], zero[SPMD_MAX_RANK] = {0};
        for (int d = 0; d < x->ndim; d++)
            extent[d] = box.stop[d] - box.start[d];
        spmd__copy_region(elem, x->ndim, extent, out, x->shape, box.start,
                          packed + offset[info.process_index], extent, zero);
        offset[info.process_index] += box_bytes(&box, elem);
    }
    free(offset);
    return st;
}

/* ---- process_allgather / process_gather ---- */

spmd_status spmd_process_allgather_shape(const spmd_array *x, int tiled, int *ndim, int64_t *shape)
{
    const char *fn = "spmd_process_allgather_shape";
    SPMD_CHECK(spmd__array_check(x, fn, "x"));
    SPMD_REQUIRE_NOT_NULL(ndim, fn);
    SPMD_REQUIRE_NOT_NULL(shape, fn);
    int processes = spmd_process_count();
    if (!spmd_array_is_fully_addressable(x)) {
        SPMD_REQUIRE(tiled, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: x spans processes, and gathering such a global array gives its global "
                     "value, which only tiled=1 describes; pass tiled=1",
                     fn);
        *ndim = x->ndim;
        memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
        return SPMD_OK;
    }
    if (!tiled || x->ndim == 0) { /* stacked; a scalar stacks even when tiled */
        SPMD_REQUIRE(x->ndim < SPMD_MAX_RANK, SPMD_ERR_SHAPE,
                     "%s: stacking adds an axis, and x already has the most (%d)", fn,
                     SPMD_MAX_RANK);
        *ndim = x->ndim + 1;
        shape[0] = processes;
        memcpy(shape + 1, x->shape, (size_t)x->ndim * sizeof *shape);
        return SPMD_OK;
    }
    *ndim = x->ndim;
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
    shape[0] *= processes;
    return SPMD_OK;
}

static void describe(char *buf, size_t size, const char *op, const spmd_array *x, int tiled,
                     int root)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, buf, size);
    spmd__strbuf_printf(&sb, "%s of %s", op, spmd_dtype_name(x->dtype));
    spmd__strbuf_shape(&sb, x->shape, x->ndim);
    spmd__strbuf_printf(&sb, "%s", tiled ? " tiled" : " stacked");
    if (root >= 0)
        spmd__strbuf_printf(&sb, " to process %d", root);
    spmd__strbuf_printf(&sb, "%s",
                        spmd_array_is_fully_addressable(x) ? host_local_text : global_text);
}

/*
 * After an allgather's data stopped coming with no sender to name: every process needs every
 * other's data, so every one still running is stuck in it too and gives up at about the same
 * moment. They meet once more over a view, within a grace period, and those that do not answer
 * are named first.
 */
static spmd_status name_the_missing(const char *fn, spmd_status st)
{
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (st != SPMD_ERR_TIMEOUT || !rt || !strstr(spmd_last_error(), "had all begun it"))
        return st;
    char first[SPMD__MESSAGE_CAPACITY];
    spmd__copy_text(first, sizeof first, spmd_last_error());
    char description[128];
    snprintf(description, sizeof description, "the roll call after a failed %s", fn);
    spmd__wait w = {.deadline_ns = spmd__now_ns() + spmd__comm_grace_ns(), .what = description};
    spmd_status roll =
        agree_on_view(rt->process_count, description, fingerprint_of(description), &w, 0);
    if (roll == SPMD_OK || !w.peer_missing)
        return SPMD_ERROR(st, "%s", first);
    char missing[SPMD__MESSAGE_CAPACITY];
    spmd__copy_text(missing, sizeof missing, spmd_last_error());
    return SPMD_ERROR(st,
                      "%s: the data stopped coming; then, in a roll call within the grace period: "
                      "%s; before that: %s",
                      fn, missing, first);
}

/* Shared by the gathers: root < 0 gathers to every process. */
static spmd_status gather(const char *fn, const spmd_array *x, int tiled, int root, void *out,
                          size_t out_bytes)
{
    SPMD_CHECK(spmd__worker_refuse_nested(fn));
    SPMD_CHECK(spmd__array_check(x, fn, "x"));
    SPMD_CHECK(spmd__sharding_refuse_unreduced(x->sharding, fn, "x", 0));
    int ndim = 0, processes = spmd_process_count(), me = spmd_process_index();
    int64_t shape[SPMD_MAX_RANK];
    SPMD_CHECK(spmd_process_allgather_shape(x, tiled, &ndim, shape));
    size_t need = (size_t)spmd__shape_elements(ndim, shape) * spmd_dtype_size(x->dtype);
    int receives = root < 0 || root == me;
    if (receives) {
        SPMD_REQUIRE(out != NULL || need == 0, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: argument 'host_out' is NULL", fn);
        SPMD_REQUIRE(out_bytes >= need, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: host_out holds %zu bytes but the result needs %zu (see "
                     "spmd_process_allgather_shape)",
                     fn, out_bytes, need);
    }
    char description[512]; /* room for a rank-8 shape and the layout sentence */
    describe(description, sizeof description, root < 0 ? "process_allgather" : "process_gather", x,
             tiled, root);
    spmd__comm *comm = NULL;
    spmd__call_entry lock;
    SPMD_CHECK(begin(fn, description, &comm, &lock));
    spmd_status st = SPMD_OK;
    size_t *counts = calloc((size_t)processes, sizeof *counts);
    char *packed = NULL, *mine = NULL;
    if (!counts) {
        st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    } else if (spmd_array_is_fully_addressable(x)) {
        /* each process's value lands in its slot: in place where this process receives */
        size_t local = array_bytes(x);
        for (int p = 0; p < processes; p++)
            counts[p] = local;
        mine = receives ? (char *)out + (size_t)me * local : malloc(local ? local : 1);
        if (!mine)
            st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        if (st == SPMD_OK)
            st = spmd_array_to_host(x, mine, local);
        if (st == SPMD_OK && comm)
            st = root < 0 ? name_the_missing(fn, spmd__comm_allgatherv(comm, NULL, out, counts))
                          : spmd__comm_gatherv(comm, root, receives ? NULL : mine, out, counts);
        if (!receives)
            free(mine);
    } else {
        st = contributions(x, counts, processes);
        size_t total = 0;
        for (int p = 0; p < processes; p++)
            total += counts[p];
        if (st == SPMD_OK) {
            packed = malloc(total ? total : 1);
            mine = malloc(counts[me] ? counts[me] : 1);
            if (!packed || !mine)
                st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes", fn,
                                total);
        }
        if (st == SPMD_OK)
            st = pack_blocks(x, mine);
        if (st == SPMD_OK && comm)
            st = root < 0 ? name_the_missing(fn, spmd__comm_allgatherv(comm, mine, packed, counts))
                          : spmd__comm_gatherv(comm, root, mine, packed, counts);
        else if (st == SPMD_OK)
            spmd__copy_cached(packed, mine, counts[me]);
        if (st == SPMD_OK && receives)
            st = unpack_blocks(x, packed, counts, processes, out);
        free(mine);
        free(packed);
    }
    free(counts);
    finish(comm, &lock, st);
    return st;
}

static spmd_status spmd_process_allgather_checked(const spmd_array *x, int tiled, void *host_out,
                                                  size_t host_bytes)
{
    return gather("spmd_process_allgather", x, tiled, -1, host_out, host_bytes);
}

static spmd_status spmd_process_gather_checked(const spmd_array *x, int root, int tiled,
                                               void *host_out, size_t host_bytes)
{
    const char *fn = "spmd_process_gather";
    SPMD_REQUIRE(root >= 0 && root < spmd_process_count(), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: root=%d is not a process; this run has processes 0..%d", fn, root,
                 spmd_process_count() - 1);
    return gather(fn, x, tiled, root, host_out, host_bytes);
}

/* ---- broadcast, barrier, equality ---- */

spmd_status spmd_broadcast_one_to_all(void *buffer, size_t bytes, int source)
{
    const char *fn = "spmd_broadcast_one_to_all";
    SPMD_REQUIRE(spmd_is_initialized(), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: libspmd is not initialized; call spmd_init first", fn);
    SPMD_REQUIRE(buffer != NULL || bytes == 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument 'buffer' is NULL", fn);
    SPMD_REQUIRE(source >= 0 && source < spmd_process_count(), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: source=%d is not a process; this run has processes 0..%d", fn, source,
                 spmd_process_count() - 1);
    char description[128];
    snprintf(description, sizeof description, "broadcast_one_to_all of %zu bytes from process %d",
             bytes, source);
    spmd__comm *comm = NULL;
    spmd__call_entry lock;
    SPMD_CHECK(begin(fn, description, &comm, &lock));
    spmd_status st = comm ? spmd__comm_bcast(comm, source, buffer, bytes) : SPMD_OK;
    finish(comm, &lock, st);
    return st;
}

static spmd_status spmd_broadcast_array_one_to_all_checked(const spmd_array *x, int source,
                                                           void *host_out, size_t host_bytes)
{
    const char *fn = "spmd_broadcast_array_one_to_all";
    SPMD_CHECK(spmd__worker_refuse_nested(fn));
    SPMD_CHECK(spmd__array_check(x, fn, "x"));
    SPMD_CHECK(spmd__sharding_refuse_unreduced(x->sharding, fn, "x", 0));
    SPMD_REQUIRE_NOT_NULL(host_out, fn);
    size_t bytes = array_bytes(x);
    SPMD_REQUIRE(host_bytes >= bytes, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: host_out holds %zu bytes but x has %zu", fn, host_bytes, bytes);
    /* the source reads its value; the others only receive */
    if (spmd_is_initialized() && spmd_process_index() == source)
        SPMD_CHECK(spmd_array_to_host(x, host_out, bytes));
    return spmd_broadcast_one_to_all(host_out, bytes, source);
}

spmd_status spmd_sync_global_devices(const char *name)
{
    const char *fn = "spmd_sync_global_devices";
    SPMD_REQUIRE_NOT_NULL(name, fn);
    char description[SPMD__MESSAGE_CAPACITY / 4];
    snprintf(description, sizeof description, "sync_global_devices('%s')", name);
    /* the agreement is the barrier: it ends only once every process has arrived */
    spmd__comm *comm = NULL;
    spmd__call_entry lock;
    SPMD_CHECK(begin(fn, description, &comm, &lock));
    finish(comm, &lock, SPMD_OK);
    return SPMD_OK;
}

static void format_element(spmd__strbuf *sb, spmd_dtype dtype, const char *p)
{
    switch (dtype) {
    case SPMD_DTYPE_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        spmd__strbuf_printf(sb, "%.9g", v);
        return;
    }
    case SPMD_DTYPE_F64: {
        double v;
        memcpy(&v, p, sizeof v);
        spmd__strbuf_printf(sb, "%.17g", v);
        return;
    }
    case SPMD_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        spmd__strbuf_printf(sb, "%d", (int)v);
        return;
    }
    case SPMD_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p, sizeof v);
        spmd__strbuf_printf(sb, "%lld", (long long)v);
        return;
    }
    default:
        spmd__strbuf_printf(sb, "0x");
        for (size_t i = 0; i < spmd_dtype_size(dtype); i++)
            spmd__strbuf_printf(sb, "%02x", (unsigned char)p[i]);
    }
}

/*
 * assert_equal's record, reduced over the processes (recursive doubling: O(log P) messages and
 * O(bytes log P) bytes per process, never every process's value on every process): the value of
 * the lowest process seen, `lo`, and the lowest process seen whose value differs from it, with
 * its first differing element. Both depend only on the set merged, so the merge is commutative
 * and associative; over every process, lo is 0 and `diff` the first process that differs.
 */
typedef struct equality_record {
    int32_t lo, diff; /* diff: INT32_MAX when none */
    uint64_t index;   /* diff's first element that differs from lo's value */
    unsigned char elem[16];
    uint32_t elem_bytes;
    /* then lo's value */
} equality_record;

static unsigned char *record_value(void *record)
{
    return (unsigned char *)record + sizeof(equality_record);
}

/* `ref`, the record of the lower processes, takes in `other`'s (of `bytes` of value). */
static void absorb(equality_record *ref, const unsigned char *ref_value,
                   const equality_record *other, const unsigned char *other_value, size_t bytes)
{
    if (memcmp(other_value, ref_value, bytes) != 0) { /* other's lowest process differs */
        if (other->lo < ref->diff) {
            size_t elem = ref->elem_bytes, i = 0;
            while (memcmp(other_value + i * elem, ref_value + i * elem, elem) == 0)
                i++;
            ref->diff = other->lo;
            ref->index = i;
            memcpy(ref->elem, other_value + i * elem, elem);
        }
    } else if (other->diff < ref->diff) { /* alike: other's differ from ref's value too */
        ref->diff = other->diff;
        ref->index = other->index;
        memcpy(ref->elem, other->elem, sizeof ref->elem);
    }
}

static void merge_equality(void *mine, const void *theirs, size_t theirs_bytes, void *arg)
{
    size_t bytes = *(const size_t *)arg;
    if (theirs_bytes != sizeof(equality_record) + bytes)
        return; /* cannot happen: the agreement fixed the shape */
    equality_record *a = mine, b;
    memcpy(&b, theirs, sizeof b);
    const unsigned char *their_value = (const unsigned char *)theirs + sizeof b;
    if (a->lo < b.lo) {
        absorb(a, record_value(a), &b, their_value, bytes);
        return;
    }
    /* theirs becomes the reference, taking in mine (its value read before it is replaced) */
    equality_record my_head = *a;
    absorb(&b, their_value, &my_head, record_value(a), bytes);
    memcpy(record_value(a), their_value, bytes);
    *a = b;
}

spmd_status spmd_assert_equal(const spmd_array *x, const char *message)
{
    const char *fn = "spmd_assert_equal";
    SPMD_CHECK(spmd__worker_refuse_nested(fn));
    SPMD_CHECK(spmd__array_check(x, fn, "x"));
    SPMD_CHECK(spmd__sharding_refuse_unreduced(x->sharding, fn, "x", 0));
    /* JAX compares a global array through its first addressable shard */
    int whole = spmd_array_is_fully_addressable(x);
    SPMD_REQUIRE(whole || x->num_shards > 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: this process holds no shard of x; call it with a value every process has",
                 fn);
    size_t bytes = whole ? array_bytes(x) : x->shard_bytes;
    char description[256];
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, description, sizeof description);
    spmd__strbuf_printf(&sb, "assert_equal of %s", spmd_dtype_name(x->dtype));
    spmd__strbuf_shape(&sb, whole ? x->shape : x->shard_shape, x->ndim);
    /* the record goes as one message, whose size MPI counts in an int */
    SPMD_REQUIRE(bytes <= (size_t)INT_MAX - sizeof(equality_record) - 4096, SPMD_ERR_UNSUPPORTED,
                 "%s: x's %zu bytes exceed what one message between processes carries (2 GiB); "
                 "compare it in parts",
                 fn, bytes);
    size_t record_bytes = sizeof(equality_record) + bytes;
    equality_record *record = malloc(record_bytes);
    SPMD_REQUIRE(record != NULL, SPMD_ERR_OUT_OF_MEMORY,
                 "%s: out of memory for a copy of x (%zu bytes)", fn, bytes);
    memset(record, 0, sizeof *record);
    record->lo = spmd_process_index();
    record->diff = INT32_MAX;
    record->elem_bytes = (uint32_t)spmd_dtype_size(x->dtype);
    spmd_status st = whole ? spmd_array_to_host(x, record_value(record), bytes)
                           : spmd_array_shard_to_host(x, 0, record_value(record), bytes);
    spmd__comm *comm = NULL;
    spmd__call_entry lock;
    if (st == SPMD_OK)
        st = begin(fn, description, &comm, &lock);
    if (st == SPMD_OK && comm) {
        const spmd__runtime *rt = spmd__runtime_get(fn);
        spmd__agreement a = {fingerprint_of(description), describe_text, description, NULL};
        spmd__wait w = {.deadline_ns = spmd__now_ns() + (rt ? rt->collective_timeout_ns : 0),
                        .what = fn};
        size_t got = record_bytes;
        st = spmd__comm_reduce_record(comm, &a, record, &got, record_bytes, merge_equality, &bytes,
                                      &w);
    }
    if (comm)
        finish(comm, &lock, st);
    if (st == SPMD_OK && record->diff != INT32_MAX) {
        char text[SPMD__MESSAGE_CAPACITY];
        spmd__strbuf_init(&sb, text, sizeof text);
        spmd__strbuf_printf(&sb,
                            "%s%sprocess %d's value differs from process 0's: element %llu is ",
                            message ? message : "", message && *message ? ": " : "",
                            (int)record->diff, (unsigned long long)record->index);
        format_element(&sb, x->dtype, (const char *)record->elem);
        spmd__strbuf_printf(&sb, " instead of ");
        format_element(&sb, x->dtype,
                       (const char *)record_value(record) + record->index * record->elem_bytes);
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT, "%s: %s", fn, text);
    }
    free(record);
    return st;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_process_allgather(const spmd_array *x, int tiled, void *host_out,
                                   size_t host_bytes)
{
    return spmd__error_in(spmd_process_allgather_checked(x, tiled, host_out, host_bytes),
                          "spmd_process_allgather");
}

spmd_status spmd_process_gather(const spmd_array *x, int root, int tiled, void *host_out,
                                size_t host_bytes)
{
    return spmd__error_in(spmd_process_gather_checked(x, root, tiled, host_out, host_bytes),
                          "spmd_process_gather");
}

spmd_status spmd_broadcast_array_one_to_all(const spmd_array *x, int source, void *host_out,
                                            size_t host_bytes)
{
    return spmd__error_in(spmd_broadcast_array_one_to_all_checked(x, source, host_out, host_bytes),
                          "spmd_broadcast_array_one_to_all");
}
