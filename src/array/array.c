/* Global arrays: construction from host data, shard access, fetching to host. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/comm/comm.h"
#include "runtime/base/digest.h"
#include "runtime/base/env.h"
#include "runtime/comm/process_sets.h"
#include "runtime/runtime_impl.h"
#include "runtime/devices/worker.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"
#include "array/array_impl.h"
#include "array/copy.h"

spmd_status spmd__array_check(const spmd_array *a, const char *fn, const char *arg)
{
    SPMD_REQUIRE(a != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, arg);
    SPMD_REQUIRE(a->magic == SPMD__MAGIC_ARRAY, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument '%s' is not a live spmd_array (destroyed, or another type)", fn,
                 arg);
    SPMD_REQUIRE(!a->deleted, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument '%s' has been deleted: it was donated to %s, which reused its "
                 "memory; use that call's output instead",
                 fn, arg, a->deleted_by ? a->deleted_by : "an earlier call");
    if (!spmd__runtime_get_session(fn, a->sharding->mesh->session))
        return SPMD_ERR_INVALID_ARGUMENT;
    return SPMD_OK;
}

static int valid(const spmd_array *a) { return a && a->magic == SPMD__MAGIC_ARRAY; }

static spmd_status check_dtype(spmd_dtype dtype, const char *fn)
{
    SPMD_REQUIRE(spmd_dtype_size(dtype) != 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: dtype %d is not a dtype; use one of the SPMD_DTYPE_* values (float32, "
                 "float64, int32, int64, uint8, bool, float16, bfloat16)",
                 fn, (int)dtype);
    return SPMD_OK;
}

void spmd_array_destroy(spmd_array *array)
{
    if (!valid(array))
        return;
    array->magic = SPMD__MAGIC_DEAD;
    for (int i = 0; i < array->num_shards; i++)
        spmd__buffer_release(array->shards[i].buffer);
    spmd_sharding_destroy(array->sharding);
    free(array);
}

spmd_status spmd__array_create_empty(const spmd_sharding *sharding, int ndim, const int64_t *shape,
                                     spmd_dtype dtype, const char *fn, spmd_array **out)
{
    *out = NULL;
    SPMD_CHECK(spmd__sharding_check(sharding, fn, "sharding"));
    const spmd_mesh *mesh = sharding->mesh;
    SPMD_CHECK(spmd__mesh_refuse_abstract(mesh, fn, "sharding"));
    const spmd__runtime *rt = spmd__runtime_get_session(fn, mesh->session);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    SPMD_CHECK(check_dtype(dtype, fn));
    SPMD_CHECK(spmd__sharding_check_shape(sharding, ndim, shape, fn, "the array"));
    size_t total_bytes = 0;
    SPMD_REQUIRE(!spmd__mul_overflows((size_t)spmd__shape_elements(ndim, shape),
                                      spmd_dtype_size(dtype), &total_bytes),
                 SPMD_ERR_SHAPE, "%s: the array's %s bytes do not fit in size_t", fn,
                 spmd_dtype_name(dtype));

    /* one block for the array and its shard table, from malloc's fast path (calloc has none) */
    size_t table = (size_t)(mesh->num_local ? mesh->num_local : 1) * sizeof(spmd__shard_slot);
    size_t head = (sizeof(spmd_array) + _Alignof(spmd__shard_slot) - 1) /
                  _Alignof(spmd__shard_slot) * _Alignof(spmd__shard_slot);
    spmd_array *a = malloc(head + table);
    SPMD_REQUIRE(a != NULL, SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    *a = (spmd_array){0}; /* not one memset of the whole: GCC would make that a calloc */
    a->shards = (spmd__shard_slot *)((char *)a + head);
    memset(a->shards, 0, table);
    a->magic = SPMD__MAGIC_ARRAY;
    a->ndim = ndim;
    a->dtype = dtype;
    a->sharding = spmd_sharding_retain((spmd_sharding *)sharding);
    size_t bytes = spmd_dtype_size(dtype);
    for (int j = 0; j < ndim; j++) {
        a->shape[j] = shape[j];
        a->shard_shape[j] = shape[j] / spmd__sharding_blocks(sharding, j);
        bytes *= (size_t)a->shard_shape[j]; /* at most the global byte count, checked above */
    }
    a->shard_bytes = bytes;
    a->num_shards = mesh->num_local;
    for (int i = 0; i < mesh->num_local; i++) {
        spmd__shard_slot *s = &a->shards[i];
        s->device_id = mesh->local_ids[i];
        s->flat = mesh->position_of[s->device_id];
        s->ordinal = s->device_id - rt->first_local;
        s->replica_id = sharding->replica[s->flat];
        spmd__sharding_box(sharding, ndim, shape, s->flat, &s->index);
    }
    *out = a;
    return SPMD_OK;
}

int spmd__array_shard_of_device(const spmd_array *a, int device_id)
{
    for (int i = 0; i < a->num_shards; i++)
        if (a->shards[i].device_id == device_id)
            return i;
    return -1;
}

void spmd__array_keep_buffers(const spmd_array *a)
{
    for (int s = 0; a && s < a->num_shards; s++)
        if (a->shards[s].buffer)
            spmd__comm_keep(spmd__buffer_retain(a->shards[s].buffer));
}

void spmd__array_mark_deleted(spmd_array *a, const char *by)
{
    a->deleted_by = by;
    for (int i = 0; i < a->num_shards; i++) {
        spmd__buffer_release(a->shards[i].buffer);
        a->shards[i].buffer = NULL;
    }
    a->deleted = 1;
}

/* ---- per-shard work on the devices' workers ---- */

typedef struct shard_job {
    spmd_array *a;
    spmd__shard_fn fn;
    void *arg;
    int *slot_of_ordinal; /* local ordinal -> shard index */
} shard_job;

static spmd_status shard_task(int ordinal, void *p)
{
    shard_job *job = p;
    spmd__shard_slot *s = &job->a->shards[job->slot_of_ordinal[ordinal]];
    return job->fn(job->a, s, job->arg);
}

spmd_status spmd__array_for_shards(const char *what, spmd_array *a, const int *which, int count,
                                   spmd__shard_fn fn, void *arg)
{
    if (count == 0)
        return SPMD_OK;
    int local = spmd_local_device_count();
    int *slot_of_ordinal = malloc((size_t)local * sizeof(int));
    int *ordinals = malloc((size_t)count * sizeof(int));
    if (!slot_of_ordinal || !ordinals) {
        free(slot_of_ordinal);
        free(ordinals);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of host memory dispatching to devices");
    }
    for (int k = 0; k < count; k++) {
        int i = which ? which[k] : k;
        slot_of_ordinal[a->shards[i].ordinal] = i;
        ordinals[k] = a->shards[i].ordinal;
    }
    shard_job job = {a, fn, arg, slot_of_ordinal};
    spmd_status st = spmd__run_on_devices(what, count, ordinals, shard_task, &job);
    free(slot_of_ordinal);
    free(ordinals);
    return st;
}

static spmd_status alloc_shard(spmd_array *a, spmd__shard_slot *s, void *arg)
{
    (void)arg;
    return spmd__buffer_create(s->device_id, a->shard_bytes, &s->buffer);
}

spmd_status spmd__array_alloc_buffers(const char *what, spmd_array *a)
{
    return spmd__array_for_shards(what, a, NULL, a->num_shards, alloc_shard, NULL);
}

/* Writes a shard from host memory: packs straight into host-addressable device memory, or
 * through a staging buffer otherwise. */
typedef void (*pack_fn)(const spmd_array *a, const spmd__shard_slot *s, void *dst, void *arg);

static spmd_status write_shard(spmd_array *a, spmd__shard_slot *s, pack_fn pack, void *arg)
{
    spmd__buffer *b = s->buffer;
    if (b->backend->host_addressable) {
        pack(a, s, b->data, arg);
        return SPMD_OK;
    }
    void *staging = malloc(a->shard_bytes);
    SPMD_REQUIRE(staging != NULL, SPMD_ERR_OUT_OF_MEMORY,
                 "out of host memory for a %zu-byte staging buffer", a->shard_bytes);
    pack(a, s, staging, arg);
    spmd_status st = b->backend->copy_to_device(b->hw, b->data, staging, a->shard_bytes);
    free(staging);
    return st;
}

static spmd_status destroy_on_error(spmd_array *a, spmd_status st, spmd_array **out)
{
    if (st != SPMD_OK) {
        spmd_array_destroy(a);
        return st;
    }
    *out = a;
    return SPMD_OK;
}

/* ---- device_put ---- */

static void pack_from_global(const spmd_array *a, const spmd__shard_slot *s, void *dst, void *arg)
{
    const void *host = arg;
    int64_t zero[SPMD_MAX_RANK] = {0};
    spmd__copy_region(spmd_dtype_size(a->dtype), a->ndim, a->shard_shape, dst, a->shard_shape, zero,
                      host, a->shape, s->index.start);
}

static spmd_status put_shard(spmd_array *a, spmd__shard_slot *s, void *host)
{
    SPMD_CHECK(spmd__buffer_create(s->device_id, a->shard_bytes, &s->buffer));
    return write_shard(a, s, pack_from_global, host);
}

/*
 * The check that every process of the mesh passed the same host data (JAX runs assert_equal,
 * a gather of the whole value): one agreement over the mesh's processes that carries the least
 * and the greatest digest of the data, O(log P) messages of constant size; they are equal
 * exactly when every process's digest is. Only when they differ are the digests gathered, to
 * name the processes. The communicator of each set of processes is made by its first check.
 */

/* Communicator tag of these checks (meshes use 1..30001, processes 30002, reshard 30003). */
enum { DEVICE_PUT_TAG = 30004 };

/* Checks are collective over their processes and issued in the same order everywhere: one at a
 * time in a process. */
static pthread_mutex_t put_lock = PTHREAD_MUTEX_INITIALIZER;
static spmd__set_comm *put_comms; /* under put_lock */

typedef struct digest_range {
    uint64_t lo, hi;
} digest_range;

static void merge_range(void *mine, const void *theirs, size_t theirs_bytes, void *arg)
{
    (void)theirs_bytes, (void)arg;
    digest_range *m = mine, t;
    memcpy(&t, theirs, sizeof t);
    m->lo = t.lo < m->lo ? t.lo : m->lo;
    m->hi = t.hi > m->hi ? t.hi : m->hi;
}

/* "spmd_device_put of float32(8, 2) onto NamedSharding(...)", for the messages. */
static void describe_put(const void *arg, char *text, size_t size)
{
    const spmd_array *a = arg;
    char sharding[SPMD__SHARDING_TEXT];
    spmd__ignore(spmd_sharding_format(a->sharding, sharding, sizeof sharding));
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    spmd__strbuf_printf(&sb, "spmd_device_put of %s", spmd_dtype_name(a->dtype));
    spmd__strbuf_shape(&sb, a->shape, a->ndim);
    /* the mesh's devices too: meshes in another device order format alike */
    spmd__strbuf_printf(&sb, " onto %s on devices ", sharding);
    spmd__strbuf_int_list(&sb, a->sharding->mesh->device_ids, a->sharding->mesh->size);
    char thread[64];
    spmd__thread_text(thread, sizeof thread);
    spmd__strbuf_printf(&sb, " (its call #%lu, %s)", spmd__calls_number(), thread);
}

/* The parts of put_fingerprint, for a message whose descriptions read alike. */
static void details_put(const void *arg, spmd__details *d)
{
    const spmd_array *a = arg;
    const spmd_mesh *m = a->sharding->mesh;
    char spec[SPMD__SPEC_TEXT];
    spmd__ignore(spmd_spec_format(a->sharding->spec, spec, sizeof spec));
    uint64_t h = spmd__fnv1a(SPMD__FNV1A_SEED, &a->dtype, sizeof a->dtype);
    h = spmd__fnv1a(h, &a->ndim, sizeof a->ndim);
    d->names[0] = "the array's dtype and shape";
    d->hashes[0] = spmd__fnv1a(h, a->shape, (size_t)a->ndim * sizeof *a->shape);
    d->names[1] = "the partition spec";
    d->hashes[1] = spmd__fnv1a(SPMD__FNV1A_SEED, spec, strlen(spec));
    d->names[2] = "the mesh's shape and axis names";
    d->hashes[2] =
        spmd__fnv1a(spmd__fnv1a(SPMD__FNV1A_SEED, m->shape, (size_t)m->ndim * sizeof(int)),
                    m->names, sizeof m->names);
    d->names[3] = "the mesh's device ids";
    d->hashes[3] = spmd__fnv1a(SPMD__FNV1A_SEED, m->device_ids, (size_t)m->size * sizeof(int));
    d->names[4] = "the calling thread's name";
    d->hashes[4] = spmd__thread_tag();
    d->num_fields = 5;
    d->list_name = "mesh's device ids";
    d->list_length = m->size;
    for (int k = 0; k < m->size && k < SPMD__DETAIL_LIST; k++)
        d->list[k] = m->device_ids[k];
}

/* What the processes must agree on besides the data: the call, its shape, dtype and layout. */
static uint64_t put_fingerprint(const spmd_array *a)
{
    const spmd_mesh *m = a->sharding->mesh;
    char spec[SPMD__SPEC_TEXT];
    spmd__ignore(spmd_spec_format(a->sharding->spec, spec, sizeof spec));
    uint64_t h = spmd__fnv1a(SPMD__FNV1A_SEED ^ spmd__thread_tag(), "spmd_device_put", 15);
    h = spmd__fnv1a(h, &a->dtype, sizeof a->dtype);
    h = spmd__fnv1a(h, &a->ndim, sizeof a->ndim);
    h = spmd__fnv1a(h, a->shape, (size_t)a->ndim * sizeof *a->shape);
    h = spmd__fnv1a(h, spec, strlen(spec));
    h = spmd__fnv1a(h, m->shape, (size_t)m->ndim * sizeof *m->shape);
    h = spmd__fnv1a(h, m->names, sizeof m->names);
    return spmd__fnv1a(h, m->device_ids, (size_t)m->size * sizeof *m->device_ids);
}

/* The failure path: every process's digest, to name those that differ from the most common.
 * *comm_failed is set when the gather itself failed (the communicator must then go). */
static spmd_status report_differing(spmd__comm *comm, const spmd_array *a, const int *processes,
                                    int n, uint64_t mine, int *comm_failed)
{
    const char *fn = "spmd_device_put";
    uint64_t *all = malloc((size_t)n * sizeof *all);
    size_t *counts = malloc((size_t)n * sizeof *counts);
    int *odd = malloc((size_t)n * sizeof *odd), *same = malloc((size_t)n * sizeof *same);
    spmd_status st = all && counts && odd && same
                         ? SPMD_OK
                         : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    if (st == SPMD_OK) {
        for (int r = 0; r < n; r++)
            counts[r] = sizeof *all;
        all[spmd__comm_rank(comm)] = mine;
        st = spmd__comm_allgatherv(comm, NULL, all, counts);
        *comm_failed = st != SPMD_OK;
    }
    if (st == SPMD_OK) {
        int best = 0, best_votes = 0; /* the most common digest; the lowest process breaks ties */
        for (int r = 0; r < n; r++) {
            int votes = 0;
            for (int q = 0; q < n; q++)
                votes += all[q] == all[r];
            if (votes > best_votes) {
                best = r;
                best_votes = votes;
            }
        }
        int nodd = 0, nsame = 0;
        for (int r = 0; r < n; r++) {
            if (all[r] == all[best])
                same[nsame++] = processes[r];
            else
                odd[nodd++] = processes[r];
        }
        char call[SPMD__SHARDING_TEXT + 128], text[SPMD__MESSAGE_CAPACITY];
        describe_put(a, call, sizeof call);
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, text, sizeof text);
        spmd__strbuf_printf(&sb, "process(es) ");
        spmd__strbuf_int_list(&sb, odd, nodd);
        spmd__strbuf_printf(&sb, " passed other values than process(es) ");
        spmd__strbuf_int_list(&sb, same, nsame);
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "%s: the host data passed to device_put is not the same on each process: "
                        "%s (%s); make sure you are passing the same value on each process, or "
                        "give each process's own part to spmd_array_from_process_local_data "
                        "(SPMD_CHECK_DEVICE_PUT=0 skips this check)",
                        fn, text, call);
    }
    if (*comm_failed) /* MPI may still write into it */
        spmd__comm_keep(all);
    else
        free(all);
    free(counts);
    free(odd);
    free(same);
    return st;
}

/*
 * Collective over the processes that own devices of a's mesh, when there are several and
 * SPMD_CHECK_DEVICE_PUT is not 0: all of them must pass the same `host` bytes.
 */
static spmd_status check_same_data(const spmd_array *a, const void *host)
{
    const char *fn = "spmd_device_put";
    long check = 1;
    int is_set = 0;
    SPMD_CHECK(spmd__env_int("SPMD_CHECK_DEVICE_PUT", 0, 1, &check, &is_set));
    const spmd_mesh *m = a->sharding->mesh;
    if (!check || a->num_shards == 0 || spmd_sharding_is_fully_addressable(a->sharding))
        return SPMD_OK;
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    const int *processes = m->processes, n = m->num_processes;
    size_t bytes = (size_t)spmd__shape_elements(a->ndim, a->shape) * spmd_dtype_size(a->dtype);
    uint64_t mine = spmd__digest(host, bytes);
    digest_range range = {mine, mine};
    size_t range_bytes = sizeof range;
    spmd__agreement agreement = {put_fingerprint(a), describe_put, a, details_put};

    pthread_mutex_lock(&put_lock);
    /* counted from here: waiting for another thread's device_put is not the others' delay */
    spmd__wait w = {.deadline_ns = spmd__now_ns() + rt->collective_timeout_ns, .what = fn};
    spmd_status st = SPMD_OK;
    spmd__set_comm *e = spmd__set_comm_find(&put_comms, processes, n, rt->session);
    char text[SPMD__SHARDING_TEXT + 256];
    describe_put(a, text, sizeof text);
    unsigned long call = 0;
    st = spmd__set_comm_call(&put_comms, &e, processes, n, DEVICE_PUT_TAG, fn, text, &call);
    if (st == SPMD_OK && !e) /* the first check over these processes: agree over a view, then
                                make theirs */
        st = spmd__set_comm_create(&put_comms, processes, n, rt->session, DEVICE_PUT_TAG, call,
                                   agreement.fingerprint, text, &w, &e);
    int comm_failed = 0;
    if (st == SPMD_OK) {
        st = spmd__comm_reduce_record(e->comm, &agreement, &range, &range_bytes, sizeof range,
                                      merge_range, NULL, &w);
        comm_failed = st != SPMD_OK;
    }
    if (st == SPMD_OK && range.lo != range.hi)
        st = report_differing(e->comm, a, processes, n, mine, &comm_failed);
    if (comm_failed) /* it may hold unfinished messages: the next check starts afresh */
        spmd__set_comm_forget(&put_comms, e);
    spmd__calls_about(NULL); /* its description is gone */
    pthread_mutex_unlock(&put_lock);
    return st;
}

spmd_status spmd_device_put(const void *host, int ndim, const int64_t *shape, spmd_dtype dtype,
                            const spmd_sharding *sharding, spmd_array **out)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_device_put");
    *out = NULL;
    spmd__call_entry lock; /* one call at a time in a process (calls.h), before communicating */
    SPMD_CHECK(spmd__calls_enter("spmd_device_put", &lock));
    spmd_status st =
        host ? SPMD_OK
             : SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT, "spmd_device_put: argument 'host' is NULL");
    spmd_array *a = NULL;
    if (st == SPMD_OK)
        st = spmd__array_create_empty(sharding, ndim, shape, dtype, "spmd_device_put", &a);
    if (st == SPMD_OK)
        st = spmd__sharding_refuse_unreduced(sharding, "spmd_device_put", "the sharding", 1);
    if (st == SPMD_OK)
        st = check_same_data(a, host);
    if (st == SPMD_OK)
        st = spmd__array_for_shards("spmd_device_put", a, NULL, a->num_shards, put_shard,
                                    (void *)host);
    spmd__calls_exit(&lock, st);
    if (!a)
        return st;
    return destroy_on_error(a, st, out);
}

/* ---- make_array_from_callback ---- */

spmd_status spmd__array_from_callback(const char *fn, int ndim, const int64_t *shape,
                                      spmd_dtype dtype, const spmd_sharding *sharding,
                                      spmd_shard_callback callback, void *user, spmd_array **out)
{
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    SPMD_REQUIRE_NOT_NULL(callback, fn);
    spmd_array *a = NULL;
    SPMD_CHECK(spmd__array_create_empty(sharding, ndim, shape, dtype, fn, &a));
    spmd_status st = spmd__sharding_refuse_unreduced(sharding, fn, "the sharding", 1);
    if (st == SPMD_OK)
        st = spmd__array_alloc_buffers(fn, a);
    void *staging = NULL;
    /* The callback runs on the calling thread, one shard after another in mesh order, as in
     * JAX: user callbacks need not be thread-safe. */
    for (int i = 0; st == SPMD_OK && i < a->num_shards; i++) {
        spmd__buffer *b = a->shards[i].buffer;
        if (!b->backend->host_addressable && !staging) {
            staging = malloc(a->shard_bytes);
            if (!staging)
                st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of host memory for staging", fn);
        }
        void *dst = b->backend->host_addressable ? b->data : staging;
        if (st == SPMD_OK) {
            spmd_clear_error();
            st = callback(&a->shards[i].index, dst, user);
            if (st != SPMD_OK && spmd_last_error()[0] == '\0')
                SPMD_ERROR(st, "%s: the callback failed for device %d", fn, a->shards[i].device_id);
        }
        if (st == SPMD_OK && dst == staging)
            st = b->backend->copy_to_device(b->hw, b->data, staging, a->shard_bytes);
    }
    free(staging);
    return destroy_on_error(a, st, out);
}

spmd_status spmd_array_from_callback(int ndim, const int64_t *shape, spmd_dtype dtype,
                                     const spmd_sharding *sharding, spmd_shard_callback callback,
                                     void *user, spmd_array **out)
{
    return spmd__array_from_callback("spmd_array_from_callback", ndim, shape, dtype, sharding,
                                     callback, user, out);
}

/* ---- make_array_from_process_local_data ---- */

/* Where each dimension of a shard's box lies inside the process-local data. */
typedef struct local_layout {
    const void *data;
    int64_t shape[SPMD_MAX_RANK];
    int full[SPMD_MAX_RANK];        /* local extent == global extent */
    int num_starts[SPMD_MAX_RANK];  /* distinct block starts this process holds */
    int64_t *starts[SPMD_MAX_RANK]; /* sorted, [num_starts] */
} local_layout;

static int compare_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Collects, per dimension, the sorted distinct block indices this process's devices hold. */
static spmd_status collect_local_blocks(const spmd_sharding *sh, int ndim, local_layout *lay)
{
    const spmd_mesh *m = sh->mesh;
    for (int j = 0; j < ndim; j++) {
        lay->starts[j] = malloc((size_t)(m->num_local ? m->num_local : 1) * sizeof(int64_t));
        SPMD_REQUIRE(lay->starts[j] != NULL, SPMD_ERR_OUT_OF_MEMORY,
                     "spmd_array_from_process_local_data: out of memory");
        int n = 0;
        for (int i = 0; i < m->num_local; i++)
            lay->starts[j][n++] = spmd__sharding_block(sh, m->position_of[m->local_ids[i]], j);
        qsort(lay->starts[j], (size_t)n, sizeof(int64_t), compare_i64);
        int distinct = 0;
        for (int i = 0; i < n; i++)
            if (i == 0 || lay->starts[j][i] != lay->starts[j][distinct - 1])
                lay->starts[j][distinct++] = lay->starts[j][i];
        lay->num_starts[j] = distinct;
    }
    return SPMD_OK;
}

static spmd_status resolve_global_shape(const spmd_sharding *sh, int ndim, const int64_t *local,
                                        const int64_t *given, local_layout *lay, int64_t *global)
{
    const char *fn = "spmd_array_from_process_local_data";
    for (int j = 0; j < ndim; j++) {
        SPMD_REQUIRE(local[j] >= 1, SPMD_ERR_SHAPE,
                     "%s: dimension %d of the local data has extent %lld; extents must be >= 1", fn,
                     j, (long long)local[j]);
        int blocks = spmd__sharding_blocks(sh, j);
        int held = lay->num_starts[j];
        if (given) {
            global[j] = given[j];
            continue;
        }
        SPMD_REQUIRE(held > 0, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: this process holds no device of the sharding's mesh, so the global "
                     "shape cannot be inferred; pass global_shape",
                     fn);
        SPMD_REQUIRE(local[j] % held == 0, SPMD_ERR_SHAPE,
                     "%s: dimension %d of the local data has extent %lld, which does not split "
                     "into the %d blocks this process holds; pass global_shape explicitly",
                     fn, j, (long long)local[j], held);
        global[j] = local[j] / held * blocks;
    }
    return SPMD_OK;
}

/* Each dimension of the local data is either the whole global extent or exactly this
 * process's blocks packed together. */
static spmd_status check_local_extents(const spmd_sharding *sh, int ndim, const int64_t *global,
                                       local_layout *lay)
{
    for (int j = 0; j < ndim; j++) {
        int64_t shard = global[j] / spmd__sharding_blocks(sh, j);
        int64_t packed = shard * lay->num_starts[j];
        lay->full[j] = lay->shape[j] == global[j];
        SPMD_REQUIRE(lay->full[j] || lay->shape[j] == packed, SPMD_ERR_SHAPE,
                     "spmd_array_from_process_local_data: dimension %d of the local data has "
                     "extent %lld, but it must be either the global extent %lld or this "
                     "process's %d block(s) of %lld (= %lld)",
                     j, (long long)lay->shape[j], (long long)global[j], lay->num_starts[j],
                     (long long)shard, (long long)packed);
    }
    return SPMD_OK;
}

static void pack_from_local(const spmd_array *a, const spmd__shard_slot *s, void *dst, void *arg)
{
    const local_layout *lay = arg;
    int64_t src_start[SPMD_MAX_RANK], zero[SPMD_MAX_RANK] = {0};
    for (int j = 0; j < a->ndim; j++) {
        if (lay->full[j]) {
            src_start[j] = s->index.start[j];
            continue;
        }
        int64_t block = s->index.start[j] / a->shard_shape[j];
        int rank = 0;
        while (lay->starts[j][rank] != block)
            rank++;
        src_start[j] = rank * a->shard_shape[j];
    }
    spmd__copy_region(spmd_dtype_size(a->dtype), a->ndim, a->shard_shape, dst, a->shard_shape, zero,
                      lay->data, lay->shape, src_start);
}

static spmd_status put_local_shard(spmd_array *a, spmd__shard_slot *s, void *lay)
{
    SPMD_CHECK(spmd__buffer_create(s->device_id, a->shard_bytes, &s->buffer));
    return write_shard(a, s, pack_from_local, lay);
}

spmd_status spmd_array_from_process_local_data(const spmd_sharding *sharding, const void *local,
                                               int ndim, const int64_t *local_shape,
                                               const int64_t *global_shape, spmd_dtype dtype,
                                               spmd_array **out)
{
    const char *fn = "spmd_array_from_process_local_data";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    SPMD_CHECK(spmd__sharding_check(sharding, fn, "sharding"));
    SPMD_CHECK(spmd__sharding_refuse_unreduced(sharding, fn, "the sharding", 1));
    /* first: an abstract mesh has no process-local data to infer or take (the real reason) */
    SPMD_CHECK(spmd__mesh_refuse_abstract(sharding->mesh, fn, "sharding"));
    SPMD_REQUIRE(ndim >= 0 && ndim <= SPMD_MAX_RANK, SPMD_ERR_SHAPE,
                 "%s: ndim is %d; use 0..%d (SPMD_MAX_RANK)", fn, ndim, SPMD_MAX_RANK);
    SPMD_REQUIRE(ndim == 0 || local_shape != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument 'local_shape' is NULL but ndim is %d", fn, ndim);
    SPMD_REQUIRE(sharding->mesh->num_local == 0 || local != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument 'local' is NULL but this process holds devices of the mesh", fn);

    local_layout lay;
    memset(&lay, 0, sizeof lay);
    lay.data = local;
    int64_t global[SPMD_MAX_RANK];
    spmd_array *a = NULL;
    spmd_status st = collect_local_blocks(sharding, ndim, &lay);
    if (st == SPMD_OK)
        st = resolve_global_shape(sharding, ndim, local_shape, global_shape, &lay, global);
    if (st == SPMD_OK)
        st = spmd__array_create_empty(sharding, ndim, global, dtype, fn, &a);
    if (st == SPMD_OK) {
        for (int j = 0; j < ndim; j++)
            lay.shape[j] = local_shape[j];
        st = check_local_extents(sharding, ndim, global, &lay);
    }
    if (st == SPMD_OK)
        st = spmd__array_for_shards(fn, a, NULL, a->num_shards, put_local_shard, &lay);
    for (int j = 0; j < ndim; j++)
        free(lay.starts[j]);
    if (!a)
        return st;
    return destroy_on_error(a, st, out);
}

/* ---- make_array_from_single_device_arrays ---- */

static spmd_status check_single_device_input(const spmd_array *in, int k, const spmd_array *a,
                                             int *slot)
{
    const char *fn = "spmd_array_from_single_device_arrays";
    char what[32];
    snprintf(what, sizeof what, "arrays[%d]", k);
    SPMD_CHECK(spmd__array_check(in, fn, what));
    SPMD_REQUIRE(in->sharding->mesh->size == 1, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: the input arrays must have one shard each, but arrays[%d] has %d; pass "
                 "single-device arrays (spmd_array_create_on_device)",
                 fn, k, in->sharding->mesh->size);
    SPMD_REQUIRE(in->num_shards == 1, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: arrays[%d] lives on device %d of another process", fn, k,
                 in->sharding->mesh->device_ids[0]);
    SPMD_REQUIRE(in->dtype == a->dtype, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: input buffers must have matching dtypes: arrays[%d] is %s, expected %s", fn,
                 k, spmd_dtype_name(in->dtype), spmd_dtype_name(a->dtype));
    int same = in->ndim == a->ndim;
    for (int j = 0; same && j < a->ndim; j++)
        same = in->shape[j] == a->shard_shape[j];
    if (!same) {
        char want[256], got[256];
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, want, sizeof want);
        spmd__strbuf_shape(&sb, a->shard_shape, a->ndim);
        spmd__strbuf_init(&sb, got, sizeof got);
        spmd__strbuf_shape(&sb, in->shape, in->ndim);
        return SPMD_ERROR(SPMD_ERR_SHAPE,
                          "%s: expected shard shape %s doesn't match the single device array "
                          "shape %s of arrays[%d]",
                          fn, want, got, k);
    }
    int device = in->shards[0].device_id;
    *slot = -1;
    for (int i = 0; i < a->num_shards; i++)
        if (a->shards[i].device_id == device)
            *slot = i;
    SPMD_REQUIRE(*slot >= 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: arrays[%d] is on device %d, which is not an addressable device of the "
                 "sharding; the per-device arrays must be on exactly the sharding's addressable "
                 "devices",
                 fn, k, device);
    SPMD_REQUIRE(a->shards[*slot].buffer == NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: the input arrays must be from distinct devices, but two are on device %d", fn,
                 device);
    return SPMD_OK;
}

spmd_status spmd_array_from_single_device_arrays(int ndim, const int64_t *shape, spmd_dtype dtype,
                                                 const spmd_sharding *sharding, int num_arrays,
                                                 spmd_array *const *arrays, spmd_array **out)
{
    const char *fn = "spmd_array_from_single_device_arrays";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    SPMD_CHECK(spmd__sharding_check(sharding, fn, "sharding"));
    int expected = sharding->mesh->num_local;
    SPMD_REQUIRE(num_arrays == expected, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: expected %d per-device arrays (this is how many devices are addressable by "
                 "the sharding), but got %d",
                 fn, expected, num_arrays);
    SPMD_REQUIRE(num_arrays == 0 || arrays != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument 'arrays' is NULL", fn);
    spmd_array *a = NULL;
    SPMD_CHECK(spmd__array_create_empty(sharding, ndim, shape, dtype, fn, &a));
    spmd_status st = SPMD_OK;
    for (int k = 0; k < num_arrays && st == SPMD_OK; k++) {
        int slot = -1;
        st = check_single_device_input(arrays[k], k, a, &slot);
        if (st == SPMD_OK)
            a->shards[slot].buffer = spmd__buffer_retain(arrays[k]->shards[0].buffer);
    }
    return destroy_on_error(a, st, out);
}

/* JAX's SingleDeviceSharding: P() over a 0-axis mesh of the one device. */
static spmd_status single_device_sharding(int device_id, spmd_sharding **out)
{
    spmd_mesh *mesh = NULL;
    spmd_spec *spec = NULL;
    spmd_status st = spmd_mesh_create(0, NULL, NULL, &device_id, 1, &mesh);
    if (st == SPMD_OK)
        st = spmd_spec_create(&spec);
    if (st == SPMD_OK)
        st = spmd_sharding_create(mesh, spec, out);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
    return st;
}

static spmd_status spmd_array_create_on_device_checked(int device_id, const void *host, int ndim,
                                                       const int64_t *shape, spmd_dtype dtype,
                                                       spmd_array **out)
{
    const char *fn = "spmd_array_create_on_device";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    SPMD_REQUIRE_NOT_NULL(host, fn);
    SPMD_CHECK(check_dtype(dtype, fn));
    SPMD_REQUIRE(device_id >= 0 && device_id < rt->num_devices, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: device %d is not a device; this run has devices 0..%d", fn, device_id,
                 rt->num_devices - 1);
    SPMD_REQUIRE(device_id >= rt->first_local && device_id < rt->first_local + rt->num_local,
                 SPMD_ERR_NOT_ADDRESSABLE,
                 "%s: device %d belongs to process %d, not to this process (%d, devices %d..%d); "
                 "create the array on the process that owns the device",
                 fn, device_id, rt->devices[device_id].process_index, rt->process_index,
                 rt->first_local, rt->first_local + rt->num_local - 1);
    spmd_sharding *sharding = NULL;
    spmd_status st = single_device_sharding(device_id, &sharding);
    if (st == SPMD_OK)
        st = spmd_device_put(host, ndim, shape, dtype, sharding, out);
    spmd_sharding_destroy(sharding);
    return st;
}

/* ---- queries ---- */

int spmd_array_ndim(const spmd_array *array) { return valid(array) ? array->ndim : -1; }
const int64_t *spmd_array_shape(const spmd_array *array)
{
    return valid(array) ? array->shape : NULL;
}
spmd_dtype spmd_array_dtype(const spmd_array *array)
{
    return valid(array) ? array->dtype : SPMD_DTYPE_COUNT;
}

int64_t spmd_array_size(const spmd_array *array)
{
    return valid(array) ? spmd__shape_elements(array->ndim, array->shape) : 0;
}

const spmd_sharding *spmd_array_sharding(const spmd_array *array)
{
    return valid(array) ? array->sharding : NULL;
}

int spmd_array_is_fully_addressable(const spmd_array *array)
{
    return valid(array) && spmd_sharding_is_fully_addressable(array->sharding);
}

int spmd_array_num_shards(const spmd_array *array) { return valid(array) ? array->num_shards : 0; }

static spmd_status check_shard_index(const spmd_array *a, int i, const char *fn)
{
    SPMD_CHECK(spmd__array_check(a, fn, "array"));
    SPMD_REQUIRE(i >= 0 && i < a->num_shards, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: shard index %d is out of range; this process holds %d shard(s) of the array "
                 "(spmd_array_num_shards)",
                 fn, i, a->num_shards);
    return SPMD_OK;
}

spmd_status spmd_array_shard_view(const spmd_array *array, int i, int ndim, const int64_t *shape,
                                  spmd_array **out)
{
    const char *fn = "spmd_array_shard_view";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    SPMD_CHECK(check_shard_index(array, i, fn));
    if (ndim < 0) {
        ndim = array->ndim;
        shape = array->shard_shape;
    }
    SPMD_REQUIRE(ndim <= SPMD_MAX_RANK, SPMD_ERR_INVALID_ARGUMENT, "%s: ndim=%d exceeds %d", fn,
                 ndim, SPMD_MAX_RANK);
    SPMD_REQUIRE(ndim == 0 || shape != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument 'shape' is NULL but ndim is %d", fn, ndim);
    int64_t want = spmd__shape_elements(array->ndim, array->shard_shape);
    int64_t got = 1;
    for (int d = 0; d < ndim; d++) {
        SPMD_REQUIRE(shape[d] >= 0, SPMD_ERR_SHAPE, "%s: shape[%d] = %lld is negative", fn, d,
                     (long long)shape[d]);
        SPMD_REQUIRE(shape[d] == 0 || got <= INT64_MAX / shape[d], SPMD_ERR_SHAPE,
                     "%s: shape has more elements than int64 counts", fn);
        got *= shape[d];
    }
    if (got != want) {
        char have[128], asked[128];
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, have, sizeof have);
        spmd__strbuf_shape(&sb, array->shard_shape, array->ndim);
        spmd__strbuf_init(&sb, asked, sizeof asked);
        spmd__strbuf_shape(&sb, shape, ndim);
        return SPMD_ERROR(SPMD_ERR_SHAPE,
                          "%s: shard %d has shape %s (%lld elements), which cannot be viewed as "
                          "%s (%lld elements)",
                          fn, i, have, (long long)want, asked, (long long)got);
    }
    const spmd__shard_slot *s = &array->shards[i];
    spmd_sharding *sharding = NULL;
    SPMD_CHECK(single_device_sharding(s->device_id, &sharding));
    spmd_array *a = NULL;
    spmd_status st = spmd__array_create_empty(sharding, ndim, shape, array->dtype, fn, &a);
    spmd_sharding_destroy(sharding);
    if (st != SPMD_OK)
        return st;
    a->shards[0].buffer = spmd__buffer_retain(s->buffer);
    *out = a;
    return SPMD_OK;
}

void spmd_array_mark_stacked_replicas(spmd_array *array)
{
    if (valid(array))
        array->stacked_replicas = 1;
}

int spmd_array_has_stacked_replicas(const spmd_array *array)
{
    return valid(array) && array->stacked_replicas;
}

spmd_status spmd_array_shard(const spmd_array *array, int i, spmd_shard *shard)
{
    SPMD_CHECK(check_shard_index(array, i, "spmd_array_shard"));
    SPMD_REQUIRE_NOT_NULL(shard, "spmd_array_shard");
    const spmd__shard_slot *s = &array->shards[i];
    shard->device_id = s->device_id;
    shard->replica_id = s->replica_id;
    shard->index = s->index;
    shard->data = s->buffer->data;
    shard->nbytes = array->shard_bytes;
    return SPMD_OK;
}

static spmd_status shard_to_host(spmd_array *a, spmd__shard_slot *s, void *dst)
{
    spmd__buffer *b = s->buffer;
    return b->backend->copy_to_host(b->hw, dst, b->data, a->shard_bytes);
}

spmd_status spmd_array_shard_to_host(const spmd_array *array, int i, void *dst, size_t dst_bytes)
{
    SPMD_CHECK(check_shard_index(array, i, "spmd_array_shard_to_host"));
    SPMD_REQUIRE_NOT_NULL(dst, "spmd_array_shard_to_host");
    SPMD_REQUIRE(dst_bytes >= array->shard_bytes, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_array_shard_to_host: dst holds %zu bytes but the shard needs %zu", dst_bytes,
                 array->shard_bytes);
    return spmd__array_for_shards("spmd_array_shard_to_host", (spmd_array *)array, &i, 1,
                                  shard_to_host, dst);
}

/* Unpacks one shard into the global host array at its box. */
static spmd_status fetch_shard(spmd_array *a, spmd__shard_slot *s, void *dst)
{
    int64_t zero[SPMD_MAX_RANK] = {0};
    size_t elem = spmd_dtype_size(a->dtype);
    spmd__buffer *b = s->buffer;
    const void *src = b->data;
    void *staging = NULL;
    if (!b->backend->host_addressable) {
        staging = malloc(a->shard_bytes);
        SPMD_REQUIRE(staging != NULL, SPMD_ERR_OUT_OF_MEMORY,
                     "spmd_array_to_host: out of host memory for staging");
        spmd_status st = b->backend->copy_to_host(b->hw, staging, b->data, a->shard_bytes);
        if (st != SPMD_OK) {
            free(staging);
            return st;
        }
        src = staging;
    }
    spmd__copy_region(elem, a->ndim, a->shard_shape, dst, a->shape, s->index.start, src,
                      a->shard_shape, zero);
    free(staging);
    return SPMD_OK;
}

/* Flat index of a mesh position's block in the grid of distinct blocks. */
static int64_t block_key(const spmd_array *a, int flat)
{
    int64_t key = 0;
    for (int j = 0; j < a->ndim; j++)
        key = key * spmd__sharding_blocks(a->sharding, j) +
              spmd__sharding_block(a->sharding, flat, j);
    return key;
}

static spmd_status report_missing_block(const spmd_array *a, const unsigned char *covered)
{
    const spmd_mesh *m = a->sharding->mesh;
    for (int f = 0; f < m->size; f++) {
        if (covered[block_key(a, f)])
            continue;
        spmd_box box;
        spmd__sharding_box(a->sharding, a->ndim, a->shape, f, &box);
        char text[512];
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, text, sizeof text);
        for (int j = 0; j < a->ndim; j++)
            spmd__strbuf_printf(&sb, "%s%lld:%lld", j ? ", " : "[", (long long)box.start[j],
                                (long long)box.stop[j]);
        spmd__strbuf_printf(&sb, "]");
        return SPMD_ERROR(SPMD_ERR_NOT_ADDRESSABLE,
                          "spmd_array_to_host: fetching an array that spans non-addressable (non "
                          "process local) devices is not possible: block %s is held only by other "
                          "processes (e.g. device %d of process %d); use spmd_process_allgather to "
                          "gather it on every process, or read this process's part with "
                          "spmd_array_shard",
                          text, m->device_ids[f], m->process_of[f]);
    }
    return SPMD_OK;
}

spmd_status spmd_array_to_host(const spmd_array *array, void *dst, size_t dst_bytes)
{
    SPMD_CHECK(spmd__worker_refuse_nested("spmd_array_to_host"));
    SPMD_CHECK(spmd__array_check(array, "spmd_array_to_host", "array"));
    SPMD_CHECK(
        spmd__sharding_refuse_unreduced(array->sharding, "spmd_array_to_host", "the array", 0));
    SPMD_REQUIRE_NOT_NULL(dst, "spmd_array_to_host");
    size_t total = (size_t)spmd_array_size(array) * spmd_dtype_size(array->dtype);
    SPMD_REQUIRE(dst_bytes >= total, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_array_to_host: dst holds %zu bytes but the array needs %zu", dst_bytes,
                 total);
    int64_t keys = 1;
    for (int j = 0; j < array->ndim; j++)
        keys *= spmd__sharding_blocks(array->sharding, j);
    unsigned char *covered = calloc((size_t)keys, 1);
    int *chosen = malloc((size_t)(array->num_shards ? array->num_shards : 1) * sizeof(int));
    if (!covered || !chosen) {
        free(covered);
        free(chosen);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_array_to_host: out of memory");
    }
    /* The first local device (mesh order) holding each block supplies it. */
    int n = 0;
    for (int i = 0; i < array->num_shards; i++) {
        int64_t key = block_key(array, array->shards[i].flat);
        if (!covered[key]) {
            covered[key] = 1;
            chosen[n++] = i;
        }
    }
    spmd_status st = n == keys ? SPMD_OK : report_missing_block(array, covered);
    if (st == SPMD_OK)
        st = spmd__array_for_shards("spmd_array_to_host", (spmd_array *)array, chosen, n,
                                    fetch_shard, dst);
    free(covered);
    free(chosen);
    return st;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_array_create_on_device(int device_id, const void *host, int ndim,
                                        const int64_t *shape, spmd_dtype dtype, spmd_array **out)
{
    return spmd__error_in(
        spmd_array_create_on_device_checked(device_id, host, ndim, shape, dtype, out),
        "spmd_array_create_on_device");
}
