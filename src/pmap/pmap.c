/* spmd_pmap on the public shard_map and multihost API: a mesh over the devices named by the
 * axis names, P(None, ..., names) at each mapped position, and a body that presents fn the
 * blocks without their size-1 mapped axes (the same memory: no copy). */
#include <spmd.h>

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h" /* error messages */
#include "runtime/base/log.h"
#include "runtime/devices/worker.h" /* refusing nested calls */
#include "array/array_impl.h"       /* donation marks inputs deleted */
#include "shard_map/executor.h"     /* pmap's check by value */

enum { MAX_ARGS = 64, MAX_DEVICES = 4096, HALF_SLOTS = 16, CACHE_SLOTS = 2 * HALF_SLOTS };

/* One cached signature: its plan and what the body needs to reduce the blocks. */
typedef struct entry {
    unsigned char *key; /* the call's arguments, serialized (call_key) */
    size_t key_bytes;
    spmd_mesh *mesh;
    spmd_plan *plan;
    spmd_sharding **in_shardings; /* [nin] what each input must be laid out as */
    spmd_spec **in_specs, **out_specs;
    int nin, nout, naxes;
    int in_axis[MAX_ARGS], out_axis[MAX_ARGS]; /* normalized; SPMD_NONE */
    spmd_out_desc out_descs[MAX_ARGS];         /* per device */
    /* per call */
    spmd_fn fn;
    void *user;
} entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
/* Slots 0..HALF_SLOTS-1 hold pmaps that span processes, the others pmaps of this process alone:
 * every process makes the same spanning calls, so their entries come and go alike everywhere
 * (an entry made again makes its mesh again, collectively), whatever local pmaps each runs. */
static entry *cache[CACHE_SLOTS];
/* Kept apart from the entries: the device threads read an entry on every call, and a write
 * to its cache line would make each of them fetch it again. */
static unsigned long last_use[CACHE_SLOTS];
static unsigned long use_clock;

static void entry_free(entry *e)
{
    if (!e)
        return;
    spmd_plan_destroy(e->plan);
    for (int i = 0; i < e->nin && e->in_shardings; i++) {
        spmd_sharding_destroy(e->in_shardings[i]);
        spmd_spec_destroy(e->in_specs[i]);
    }
    for (int j = 0; j < e->nout && e->out_specs; j++)
        spmd_spec_destroy(e->out_specs[j]);
    free(e->in_shardings);
    free(e->in_specs);
    free(e->out_specs);
    spmd_mesh_destroy(e->mesh);
    free(e->key);
    free(e);
}

void spmd_pmap_clear_cache(void)
{
    pthread_mutex_lock(&cache_lock);
    for (int s = 0; s < CACHE_SLOTS; s++) {
        entry_free(cache[s]);
        cache[s] = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
}

/* ---- the body ---- */

/* `b` without its axes [k, k + n): they have size 1, so the memory is the same. */
static void drop_axes(spmd_block *b, int k, int n)
{
    for (int d = k; d + n < b->ndim; d++)
        b->shape[d] = b->shape[d + n];
    b->ndim -= n;
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *arg)
{
    entry *e = arg;
    /* Few arguments (the common case) fit a small frame; a frame of 2 × MAX_ARGS blocks (18 KiB)
     * measurably slowed every call (stack probes on pages touched by nothing else). */
    enum { SMALL = 8 };
    spmd_block small[2 * SMALL], *reduced = small;
    if (nin > SMALL || nout > SMALL) {
        reduced = malloc((size_t)(nin + nout) * sizeof *reduced);
        if (!reduced)
            return SPMD_ERR_OUT_OF_MEMORY;
    }
    spmd_block *reduced_in = reduced, *reduced_out = reduced + nin;
    for (int i = 0; i < nin; i++) {
        reduced_in[i] = in[i];
        if (e->in_axis[i] != SPMD_NONE)
            drop_axes(&reduced_in[i], e->in_axis[i], e->naxes);
    }
    for (int j = 0; j < nout; j++) {
        reduced_out[j] = out[j];
        if (e->out_axis[j] != SPMD_NONE)
            drop_axes(&reduced_out[j], e->out_axis[j], e->naxes);
    }
    spmd_status st = e->fn(ctx, nin, reduced_in, nout, reduced_out, e->user);
    if (reduced != small)
        free(reduced);
    return st;
}

/* ---- the call and its key ---- */

typedef struct call {
    const char *fn_name;
    int nin, nout, naxes, processes, host_local;
    const char *names[SPMD_MAX_MESH_AXES];
    char name_storage[SPMD_MAX_MESH_AXES][SPMD_MAX_AXIS_NAME + 1];
    int sizes[SPMD_MAX_MESH_AXES]; /* global mesh shape */
    int in_axis[MAX_ARGS], out_axis[MAX_ARGS];
    int64_t global_in[MAX_ARGS][SPMD_MAX_RANK];
    spmd_out_desc global_out[MAX_ARGS];
    int num_devices;
    int devices[MAX_DEVICES];
} call;

/* "i" or "i, j" (quotes and parentheses allowed, as a spec entry would be written). */
static spmd_status parse_names(const char *text, call *c)
{
    const char *fn = c->fn_name;
    SPMD_REQUIRE(text != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument 'axis_name' is NULL", fn);
    c->naxes = 0;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '(' || *p == '\'' || *p == '"')
            p++;
        const char *start = p;
        while (*p && *p != ',' && *p != ' ' && *p != ')' && *p != '\'' && *p != '"')
            p++;
        size_t len = (size_t)(p - start);
        if (len > 0) {
            SPMD_REQUIRE(c->naxes < SPMD_MAX_MESH_AXES, SPMD_ERR_INVALID_ARGUMENT,
                         "%s: axis_name '%s' names more than %d axes", fn, text,
                         SPMD_MAX_MESH_AXES);
            SPMD_REQUIRE(len <= SPMD_MAX_AXIS_NAME, SPMD_ERR_INVALID_ARGUMENT,
                         "%s: an axis name in '%s' is longer than %d bytes", fn, text,
                         SPMD_MAX_AXIS_NAME);
            memcpy(c->name_storage[c->naxes], start, len);
            c->name_storage[c->naxes][len] = '\0';
            c->names[c->naxes] = c->name_storage[c->naxes];
            c->naxes++;
        }
        while (*p == ' ' || *p == ')' || *p == '\'' || *p == '"')
            p++;
        if (*p != ',')
            break;
        p++;
    }
    SPMD_REQUIRE(*p == '\0' && c->naxes > 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: axis_name '%s' is not a name or a comma-separated list of names", fn, text);
    return SPMD_OK;
}

/* Normalizes a possibly negative axis against `rank` positions. */
static spmd_status normalize(int *axis, int rank, const char *what, int index, const char *fn)
{
    if (*axis == SPMD_NONE)
        return SPMD_OK;
    int k = *axis < 0 ? *axis + rank : *axis;
    SPMD_REQUIRE(k >= 0 && k < rank, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: %s[%d] = %d is beyond the rank: it must be in %d..%d, or SPMD_NONE", fn, what,
                 index, *axis, -rank, rank - 1);
    *axis = k;
    return SPMD_OK;
}

static spmd_status describe_call(call *c, spmd_array *const *inputs, const int *in_axes,
                                 const spmd_out_desc *out_descs, const int *out_axes,
                                 const int *devices, int num_devices)
{
    const char *fn = c->fn_name;
    int first = -1, local_count = spmd_local_device_count();
    int64_t mapped[SPMD_MAX_MESH_AXES];
    for (int i = 0; i < c->nin; i++) {
        SPMD_REQUIRE(inputs[i] != NULL && spmd_array_ndim(inputs[i]) >= 0,
                     SPMD_ERR_INVALID_ARGUMENT, "%s: inputs[%d] is NULL or not a live array", fn,
                     i);
        int ndim = spmd_array_ndim(inputs[i]);
        const int64_t *shape = spmd_array_shape(inputs[i]);
        c->in_axis[i] = in_axes ? in_axes[i] : 0;
        SPMD_REQUIRE(c->in_axis[i] == SPMD_NONE || ndim >= c->naxes, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: inputs[%d] has rank %d, too small to map %d axis(es); pass SPMD_NONE "
                     "in in_axes[%d] to broadcast it",
                     fn, i, ndim, c->naxes, i);
        SPMD_CHECK(normalize(&c->in_axis[i], ndim - c->naxes + 1, "in_axes", i, fn));
        memcpy(c->global_in[i], shape, (size_t)ndim * sizeof(int64_t));
        if (c->in_axis[i] == SPMD_NONE)
            continue;
        int k = c->in_axis[i];
        if (first < 0) {
            first = i;
            for (int a = 0; a < c->naxes; a++)
                mapped[a] = shape[k + a];
        }
        for (int a = 0; a < c->naxes; a++)
            SPMD_REQUIRE(shape[k + a] == mapped[a], SPMD_ERR_INVALID_ARGUMENT,
                         "%s: inputs[%d] has size %lld on its mapped axis %d but inputs[%d] has "
                         "%lld: every mapped input must have the same mapped size",
                         fn, i, (long long)shape[k + a], k + a, first, (long long)mapped[a]);
    }
    SPMD_REQUIRE(first >= 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: no input is mapped (every in_axes entry is SPMD_NONE); pmap needs at least "
                 "one argument with a mapped axis",
                 fn);
    int64_t local_n = 1;
    for (int a = 0; a < c->naxes; a++) {
        SPMD_REQUIRE(mapped[a] >= 1 && mapped[a] <= 4096, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: the mapped size %lld of axis '%s' must be in 1..4096", fn,
                     (long long)mapped[a], c->names[a]);
        c->sizes[a] = (int)mapped[a];
        local_n *= mapped[a];
    }
    if (c->host_local) { /* each process maps its own devices; the outer axis spans processes */
        SPMD_REQUIRE(devices != NULL || local_n == local_count, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: on several processes the inputs are host-local: their mapped size "
                     "(%lld) must equal this process's device count (%d) when no devices are "
                     "given",
                     fn, (long long)local_n, local_count);
        c->sizes[0] *= c->processes;
        for (int i = 0; i < c->nin; i++)
            if (c->in_axis[i] != SPMD_NONE)
                c->global_in[i][c->in_axis[i]] *= c->processes;
    }
    int64_t total = 1;
    for (int a = 0; a < c->naxes; a++)
        total *= c->sizes[a];
    SPMD_REQUIRE(total <= MAX_DEVICES, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: the mapped sizes make %lld devices; a pmap spans at most %d", fn,
                 (long long)total, MAX_DEVICES);
    int n = (int)total;
    if (devices) {
        SPMD_REQUIRE(num_devices == n, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: %d devices were given but the mapped size is %d; pass exactly one "
                     "device per mapped index%s",
                     fn, num_devices, n,
                     c->host_local ? " (the mapped size counts every process's devices; to run "
                                     "the pmap on this process alone, pass only its devices)"
                                   : "");
        memcpy(c->devices, devices, (size_t)n * sizeof(int));
    } else {
        SPMD_REQUIRE(n <= spmd_device_count(), SPMD_ERR_INVALID_ARGUMENT,
                     "%s: the mapped size %d needs %d devices, but this run has %d", fn, n, n,
                     spmd_device_count());
        for (int d = 0; d < n; d++)
            c->devices[d] = d; /* process-major ids: grouped by process */
    }
    c->num_devices = n;
    for (int j = 0; j < c->nout; j++) {
        const spmd_out_desc *d = &out_descs[j];
        SPMD_REQUIRE(d->ndim >= 0 && d->ndim <= SPMD_MAX_RANK - c->naxes, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: out_descs[%d].ndim = %d is out of range", fn, j, d->ndim);
        c->out_axis[j] = out_axes ? out_axes[j] : 0;
        SPMD_CHECK(normalize(&c->out_axis[j], d->ndim + 1, "out_axes", j, fn));
        spmd_out_desc *g = &c->global_out[j];
        g->dtype = d->dtype;
        if (c->out_axis[j] == SPMD_NONE) {
            *g = *d;
            continue;
        }
        int k = c->out_axis[j];
        g->ndim = d->ndim + c->naxes;
        for (int x = 0, y = 0; x < g->ndim; x++)
            g->shape[x] = x >= k && x < k + c->naxes ? c->sizes[x - k] : d->shape[y++];
    }
    return SPMD_OK;
}

/* Appends `bytes` at *n when they fit (the total is counted either way, to size a retry). */
static void put(unsigned char *buf, size_t size, size_t *n, const void *data, size_t bytes)
{
    if (bytes <= size && *n <= size - bytes)
        memcpy(buf + *n, data, bytes);
    *n += bytes;
}

/*
 * The arguments that determine a pmap, serialized: a repeated call with the same ones finds its
 * entry without parsing and checking again. 0 when an argument is unusable (parsing and
 * checking report it).
 */
static size_t call_key(spmd_fn fn, int nin, spmd_array *const *inputs, const int *in_axes, int nout,
                       const spmd_out_desc *out_descs, const int *out_axes, const char *axis_name,
                       const int *devices, int num_devices, const spmd_pmap_options *o,
                       unsigned char *buf, size_t size)
{
    size_t n = 0;
#define PUT(ptr, bytes) put(buf, size, &n, (ptr), (bytes))
    int listed = devices ? num_devices : 0;
    if (!axis_name || listed < 0 || listed > MAX_DEVICES)
        return 0;
    int processes = spmd_process_count();
    PUT(&fn, sizeof fn);
    PUT(&nin, sizeof nin);
    PUT(&nout, sizeof nout);
    PUT(&processes, sizeof processes);
    PUT(axis_name, strlen(axis_name) + 1);
    PUT(&listed, sizeof listed);
    if (listed)
        PUT(devices, (size_t)listed * sizeof *devices);
    for (int i = 0; i < nin; i++) {
        int ndim = spmd_array_ndim(inputs[i]);
        if (ndim < 0 || ndim > SPMD_MAX_RANK)
            return 0;
        spmd_dtype t = spmd_array_dtype(inputs[i]);
        int axis = in_axes ? in_axes[i] : 0, donate = o->donate ? o->donate[i] : 0;
        PUT(&ndim, sizeof ndim);
        PUT(&t, sizeof t);
        PUT(spmd_array_shape(inputs[i]), (size_t)ndim * sizeof(int64_t));
        PUT(&axis, sizeof axis);
        PUT(&donate, sizeof donate);
    }
    for (int j = 0; j < nout; j++) {
        int axis = out_axes ? out_axes[j] : 0;
        PUT(&out_descs[j].ndim, sizeof out_descs[j].ndim);
        PUT(&out_descs[j].dtype, sizeof out_descs[j].dtype);
        if (out_descs[j].ndim < 0 || out_descs[j].ndim > SPMD_MAX_RANK)
            return 0;
        PUT(out_descs[j].shape, (size_t)out_descs[j].ndim * sizeof(int64_t));
        PUT(&axis, sizeof axis);
    }
    PUT(&o->check_replication, sizeof o->check_replication);
#undef PUT
    return n;
}

static spmd_status mapped_spec(int axis, const call *c, spmd_spec **out)
{
    SPMD_CHECK(spmd_spec_create(out));
    if (axis == SPMD_NONE)
        return SPMD_OK;
    for (int d = 0; d < axis; d++)
        SPMD_CHECK(spmd_spec_append(*out, 0, NULL));
    for (int a = 0; a < c->naxes; a++)
        SPMD_CHECK(spmd_spec_append_axis(*out, c->names[a]));
    return SPMD_OK;
}

static spmd_status build_entry(const call *c, spmd_array *const *inputs,
                               const spmd_out_desc *per_device, const spmd_pmap_options *o,
                               entry *e)
{
    e->nin = c->nin;
    e->nout = c->nout;
    e->naxes = c->naxes;
    memcpy(e->in_axis, c->in_axis, sizeof e->in_axis);
    memcpy(e->out_axis, c->out_axis, sizeof e->out_axis);
    for (int j = 0; j < c->nout; j++)
        e->out_descs[j] = per_device[j];
    e->in_shardings = calloc((size_t)(c->nin ? c->nin : 1), sizeof *e->in_shardings);
    e->in_specs = calloc((size_t)(c->nin ? c->nin : 1), sizeof *e->in_specs);
    e->out_specs = calloc((size_t)(c->nout ? c->nout : 1), sizeof *e->out_specs);
    SPMD_REQUIRE(e->in_shardings && e->in_specs && e->out_specs, SPMD_ERR_OUT_OF_MEMORY,
                 "%s: out of memory", c->fn_name);
    SPMD_CHECK(
        spmd_mesh_create(c->naxes, c->sizes, c->names, c->devices, c->num_devices, &e->mesh));
    spmd_in_desc in_descs[MAX_ARGS];
    for (int i = 0; i < c->nin; i++) {
        SPMD_CHECK(mapped_spec(c->in_axis[i], c, &e->in_specs[i]));
        SPMD_CHECK(spmd_sharding_create(e->mesh, e->in_specs[i], &e->in_shardings[i]));
        in_descs[i].ndim = spmd_array_ndim(inputs[i]);
        in_descs[i].dtype = spmd_array_dtype(inputs[i]);
        memcpy(in_descs[i].shape, c->global_in[i], sizeof in_descs[i].shape);
    }
    for (int j = 0; j < c->nout; j++)
        SPMD_CHECK(mapped_spec(c->out_axis[j], c, &e->out_specs[j]));
    spmd_shard_map_options smo = SPMD_SHARD_MAP_OPTIONS_INIT;
    smo.check_replication = o->check_replication;
    smo.donate = o->donate;
    SPMD_CHECK(spmd_plan_create(e->mesh, body, e, c->nin, in_descs,
                                (const spmd_spec *const *)e->in_specs, c->nout, c->global_out,
                                (const spmd_spec *const *)e->out_specs, &smo, &e->plan));
    spmd__plan_check_by_value(e->plan); /* legacy pmap has no varying types */
    return SPMD_OK;
}

/* The cached entry of `key`, or NULL; one made before an spmd_finalize is dropped. Called
 * under cache_lock. */
static entry *lookup(const unsigned char *key, size_t bytes)
{
    for (int s = 0; bytes && s < CACHE_SLOTS; s++) {
        entry *e = cache[s];
        if (!e || e->key_bytes != bytes || memcmp(e->key, key, bytes) != 0)
            continue;
        if (!spmd_mesh_is_current(e->mesh)) {
            entry_free(e);
            cache[s] = NULL;
            return NULL;
        }
        last_use[s] = ++use_clock;
        return e;
    }
    return NULL;
}

/* Builds the entry of a checked call and caches it in place of the least recently used one.
 * Called under cache_lock. */
static spmd_status add_entry(const call *c, const unsigned char *key, size_t bytes,
                             spmd_array *const *inputs, const spmd_out_desc *per_device,
                             const spmd_pmap_options *o, entry **out)
{
    int first = c->host_local ? 0 : HALF_SLOTS, victim = first;
    for (int s = first; s < first + HALF_SLOTS; s++)
        if (!cache[s] || (cache[victim] && last_use[s] < last_use[victim]))
            victim = s;
    /* on line pairs of its own, away from the per-call allocations of the executor */
    size_t entry_bytes = (sizeof(entry) + 127) / 128 * 128;
    entry *e = aligned_alloc(128, entry_bytes);
    if (e)
        memset(e, 0, entry_bytes);
    spmd_status st = e ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == SPMD_OK) {
        e->key = malloc(bytes);
        e->key_bytes = bytes;
        st = e->key ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (st == SPMD_OK) {
        memcpy(e->key, key, bytes);
        st = build_entry(c, inputs, per_device, o, e);
    }
    if (st != SPMD_OK) {
        entry_free(e);
        return st;
    }
    entry_free(cache[victim]);
    cache[victim] = e;
    last_use[victim] = ++use_clock;
    *out = e;
    return SPMD_OK;
}

/* ---- inputs and outputs ---- */

/* The array to hand shard_map for input i: as is, converted from host-local, or copied into the
 * layout the pmap needs (with a warning), or refused when strict. *made is 1 when it is new. */
static spmd_status place_input(const call *c, entry *e, int i, spmd_array *x,
                               const spmd_pmap_options *o, spmd_array **placed, int *made)
{
    const char *fn = c->fn_name;
    *made = 0;
    *placed = x;
    if (c->host_local && spmd_array_is_fully_addressable(x)) {
        *made = 1;
        return spmd_host_local_to_global(x, e->mesh, e->in_specs[i], placed);
    }
    int ndim = spmd_array_ndim(x);
    if (spmd_sharding_is_equivalent(spmd_array_sharding(x), e->in_shardings[i], ndim))
        return SPMD_OK;
    /* moving it here would be a reshard with the other processes, which run their own pmaps */
    SPMD_REQUIRE(c->host_local || spmd_array_is_fully_addressable(x), SPMD_ERR_INCOMPATIBLE_DEVICES,
                 "%s: inputs[%d] spans other processes, but this pmap runs on this process's "
                 "devices alone (a local pmap); pass an array of this process's devices (e.g. "
                 "its part, spmd_global_to_host_local)",
                 fn, i);
    char have[256], want[256];
    spmd__ignore(spmd_sharding_format(spmd_array_sharding(x), have, sizeof have));
    spmd__ignore(spmd_sharding_format(e->in_shardings[i], want, sizeof want));
    SPMD_REQUIRE(!o->strict, SPMD_ERR_INCOMPATIBLE_DEVICES,
                 "%s: inputs[%d] is laid out as %s, but the pmap needs %s; put it there first "
                 "(spmd_reshard to that sharding), or leave options.strict at 0 to have it "
                 "resharded on each call",
                 fn, i, have, want);
    SPMD_WARN("%s: inputs[%d] is laid out as %s, but the pmap needs %s: resharding it%s", fn, i,
              have, want, o->donate && o->donate[i] ? " (donated: the original is deleted)" : "");
    spmd_status st = spmd_reshard(x, e->in_shardings[i], NULL, placed);
    *made = st == SPMD_OK;
    return st;
}

/* 1 when `devices` lists devices of this process only (a local pmap). */
static int only_local_devices(const int *devices, int num_devices)
{
    if (!devices || num_devices < 1 || num_devices > MAX_DEVICES)
        return 0;
    int me = spmd_process_index();
    for (int d = 0; d < num_devices; d++) {
        spmd_device_info info;
        if (spmd_device_get_info(devices[d], &info) != SPMD_OK || info.process_index != me)
            return 0;
    }
    return 1;
}

static spmd_status pmap_call(spmd_fn fn, void *user, int nin, spmd_array *const *inputs,
                             const int *in_axes, int nout, const spmd_out_desc *out_descs,
                             const int *out_axes, const char *axis_name, const int *devices,
                             int num_devices, const spmd_pmap_options *options,
                             spmd_array **outputs)
{
    /* before the cache's lock, which the enclosing call may hold */
    SPMD_CHECK(spmd__worker_refuse_nested("spmd_pmap"));
    static _Thread_local call c; /* large: kept off the stack; every field read is set below */
    c.fn_name = "spmd_pmap";
    const char *f = c.fn_name;
    SPMD_REQUIRE(spmd_is_initialized(), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: libspmd is not initialized; call spmd_init first", f);
    SPMD_REQUIRE_NOT_NULL(fn, f);
    SPMD_REQUIRE(nin >= 1 && nin <= MAX_ARGS, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: nin=%d must be in 1..%d (pmap maps at least one input)", f, nin, MAX_ARGS);
    SPMD_REQUIRE(nout >= 0 && nout <= MAX_ARGS, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: nout=%d must be in 0..%d", f, nout, MAX_ARGS);
    SPMD_REQUIRE_NOT_NULL(inputs, f);
    SPMD_REQUIRE(nout == 0 || (out_descs && outputs), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: out_descs or outputs is NULL but nout is %d", f, nout);
    spmd_pmap_options o = SPMD_PMAP_OPTIONS_INIT;
    if (options) {
        SPMD_REQUIRE(options->version == SPMD_PMAP_OPTIONS_VERSION, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: options.version is %u; initialize options with SPMD_PMAP_OPTIONS_INIT", f,
                     options->version);
        o = *options;
    }
    for (int j = 0; j < nout; j++) /* after validation: outputs may alias inputs */
        outputs[j] = NULL;
    c.nin = nin;
    c.nout = nout;
    c.processes = spmd_process_count();
    /* JAX's pmap(devices=jax.local_devices()): a pmap over this process's devices only runs
     * here alone, on plain arrays; any other under several processes spans them all. */
    c.host_local = c.processes > 1 && !only_local_devices(devices, num_devices);
    unsigned char stack_key[1024], *key = stack_key;
    size_t key_bytes = call_key(fn, nin, inputs, in_axes, nout, out_descs, out_axes, axis_name,
                                devices, num_devices, &o, stack_key, sizeof stack_key);
    if (key_bytes > sizeof stack_key) {
        key = malloc(key_bytes);
        SPMD_REQUIRE(key != NULL, SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", f);
        call_key(fn, nin, inputs, in_axes, nout, out_descs, out_axes, axis_name, devices,
                 num_devices, &o, key, key_bytes);
    }

    pthread_mutex_lock(&cache_lock); /* the entry holds this call's fn and user */
    entry *e = lookup(key, key_bytes);
    spmd_status st = SPMD_OK;
    if (!e) { /* a new signature: parse and check it, then build its plan */
        st = parse_names(axis_name, &c);
        if (st == SPMD_OK)
            st = describe_call(&c, inputs, in_axes, out_descs, out_axes, devices, num_devices);
        if (st == SPMD_OK)
            st = key_bytes ? add_entry(&c, key, key_bytes, inputs, out_descs, &o, &e)
                           : SPMD_ERROR(SPMD_ERR_INTERNAL, "%s: a checked call has no key", f);
    }
    if (key != stack_key)
        free(key);
    spmd_array *placed[MAX_ARGS], *global_out[MAX_ARGS];
    int made[MAX_ARGS];
    for (int i = 0; i < nin; i++) {
        placed[i] = NULL;
        made[i] = 0;
    }
    for (int j = 0; j < nout; j++)
        global_out[j] = NULL;
    /* written only when they change: see last_use */
    if (st == SPMD_OK && (e->fn != fn || e->user != user)) {
        e->fn = fn;
        e->user = user;
    }
    /* Fast path: global inputs go straight to the plan, whose own (local, cached) layout check
     * refuses a wrong one before any communication; only then are they copied into place. */
    int need_placing = st == SPMD_OK && c.host_local;
    if (st == SPMD_OK && !c.host_local) {
        st = spmd_plan_execute(e->plan, inputs, global_out);
        need_placing = st == SPMD_ERR_INCOMPATIBLE_DEVICES && !o.strict;
    }
    if (need_placing) {
        st = SPMD_OK;
        for (int i = 0; i < nin && st == SPMD_OK; i++) {
            st = place_input(&c, e, i, inputs[i], &o, &placed[i], &made[i]);
            /* legacy pmap deletes a donated input it had to convert; dropping it first leaves
             * the converted array (which may share its buffers) free to be reused */
            if (st == SPMD_OK && made[i] && o.donate && o.donate[i])
                spmd__array_mark_deleted(inputs[i], f);
        }
        if (st == SPMD_OK)
            st = spmd_plan_execute(e->plan, placed, global_out);
    }
    for (int i = 0; i < nin && o.donate; i++)
        if (o.donate[i] && inputs[i]->deleted)
            inputs[i]->deleted_by = f; /* the plan's executor named itself */
    for (int j = 0; j < nout && st == SPMD_OK; j++) {
        if (c.host_local && !spmd_array_is_fully_addressable(global_out[j])) {
            st = spmd_global_to_host_local(global_out[j], e->mesh, e->out_specs[j], &outputs[j]);
            spmd_array_destroy(global_out[j]);
            global_out[j] = NULL;
        } else {
            outputs[j] = global_out[j];
            global_out[j] = NULL;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    for (int i = 0; i < nin; i++)
        if (made[i])
            spmd_array_destroy(placed[i]);
    for (int j = 0; j < nout; j++)
        spmd_array_destroy(global_out[j]);
    if (st != SPMD_OK)
        for (int j = 0; j < nout; j++) {
            spmd_array_destroy(outputs[j]);
            outputs[j] = NULL;
        }
    return st;
}

spmd_status spmd_pmap(spmd_fn fn, void *user, int nin, spmd_array *const *inputs,
                      const int *in_axes, int nout, const spmd_out_desc *out_descs,
                      const int *out_axes, const char *axis_name, const int *devices,
                      int num_devices, const spmd_pmap_options *options, spmd_array **outputs)
{
    /* one call in its process (calls.h): its conversions and its shard_map come together */
    spmd__call_entry lock;
    spmd_status st = spmd__calls_enter("spmd_pmap", &lock);
    if (st == SPMD_OK) {
        const char *outer = spmd__worker_entry("spmd_pmap"); /* names it to calls nested in fn */
        st = pmap_call(fn, user, nin, inputs, in_axes, nout, out_descs, out_axes, axis_name,
                       devices, num_devices, options, outputs);
        spmd__worker_entry(outer);
        spmd__calls_exit(&lock, st);
    }
    /* after the call: outputs may alias inputs, which validation still reads */
    for (int j = 0; st != SPMD_OK && outputs && nout <= MAX_ARGS && j < nout; j++)
        outputs[j] = NULL;
    return spmd__error_in(st, "spmd_pmap"); /* a callee's failure under the caller's name */
}
