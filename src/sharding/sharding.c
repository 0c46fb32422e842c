/* NamedSharding: the index box and replica id of every mesh device (SEMANTICS.md (c)). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/check.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"
#include "sharding/spec_impl.h"

spmd_status spmd__sharding_check(const spmd_sharding *sh, const char *fn, const char *arg)
{
    SPMD_REQUIRE(sh != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, arg);
    SPMD_REQUIRE(sh->magic == SPMD__MAGIC_SHARDING, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument '%s' is not a live spmd_sharding (destroyed, or another type)", fn,
                 arg);
    return SPMD_OK;
}

static int valid(const spmd_sharding *sh) { return sh && sh->magic == SPMD__MAGIC_SHARDING; }

spmd_status spmd__sharding_refuse_unreduced(const spmd_sharding *sh, const char *fn,
                                            const char *what, int creating)
{
    if (!sh->unreduced_mask)
        return SPMD_OK;
    char text[SPMD__SPEC_TEXT];
    spmd__ignore(spmd_spec_format(sh->spec, text, sizeof text));
    if (creating)
        return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                          "%s: %s is %s, whose devices hold partial sums that host data does not "
                          "give; make the array without unreduced axes (or produce it in "
                          "spmd_shard_map with an unreduced out_spec)",
                          fn, what, text);
    return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                      "%s: %s is %s: its devices hold partial sums, not the value; spmd_reshard "
                      "it to a spec without unreduced axes first (that adds them up)",
                      fn, what, text);
}

/* ---- layouts: one per distinct placement of blocks, shared by its shardings ---- */

static pthread_mutex_t layouts_lock = PTHREAD_MUTEX_INITIALIZER;
static spmd__layout **layouts; /* hash table of chains, under layouts_lock */
static size_t layouts_buckets, layouts_count;
static uint64_t layouts_made; /* the last uid given */

/* The key of sh's layout in `key` (no devices copied: key->device_ids points at the mesh's). */
static void layout_key(const spmd_sharding *sh, spmd__layout *key)
{
    const spmd_mesh *m = sh->mesh;
    memset(key, 0, sizeof *key);
    key->session = m->session;
    key->mesh_ndim = m->ndim;
    memcpy(key->mesh_shape, m->shape, (size_t)m->ndim * sizeof(int));
    key->size = m->size;
    key->device_ids = m->device_ids;
    key->length = sh->length;
    while (key->length > 0 && sh->spec->entry_size[key->length - 1] == 0)
        key->length--;
    for (int j = 0; j < key->length; j++) {
        key->entry_size[j] = sh->spec->entry_size[j];
        memcpy(key->entry_axis[j], sh->entry_mesh_axis[j],
               (size_t)key->entry_size[j] * sizeof(int));
    }
    key->unreduced_mask = sh->unreduced_mask;
    /* the fixed part is hashed whole: memset above zeroed what is unused */
    uint64_t h = spmd__fnv1a(SPMD__FNV1A_SEED, &key->session, sizeof key->session);
    h = spmd__fnv1a(h, &key->unreduced_mask, sizeof key->unreduced_mask);
    h = spmd__fnv1a(h, key->mesh_shape, sizeof key->mesh_shape);
    h = spmd__fnv1a(h, key->device_ids, (size_t)key->size * sizeof(int));
    h = spmd__fnv1a(h, &key->length, sizeof key->length);
    h = spmd__fnv1a(h, key->entry_size, sizeof key->entry_size);
    key->hash = spmd__fnv1a(h, key->entry_axis, sizeof key->entry_axis);
}

static int layout_equal(const spmd__layout *a, const spmd__layout *b)
{
    return a->hash == b->hash && a->session == b->session && a->mesh_ndim == b->mesh_ndim &&
           a->size == b->size && a->length == b->length && a->unreduced_mask == b->unreduced_mask &&
           memcmp(a->mesh_shape, b->mesh_shape, sizeof a->mesh_shape) == 0 &&
           memcmp(a->entry_size, b->entry_size, sizeof a->entry_size) == 0 &&
           memcmp(a->entry_axis, b->entry_axis, sizeof a->entry_axis) == 0 &&
           memcmp(a->device_ids, b->device_ids, (size_t)a->size * sizeof(int)) == 0;
}

/* Doubles the table (under layouts_lock); 0 when out of memory (the old one stays). */
static int layouts_grow(void)
{
    size_t n = layouts_buckets ? 2 * layouts_buckets : 64;
    spmd__layout **t = calloc(n, sizeof *t);
    if (!t)
        return 0;
    for (size_t b = 0; b < layouts_buckets; b++)
        for (spmd__layout *e = layouts[b], *next; e; e = next) {
            next = e->next;
            e->next = t[e->hash & (n - 1)];
            t[e->hash & (n - 1)] = e;
        }
    free(layouts);
    layouts = t;
    layouts_buckets = n;
    return 1;
}

/* Finds or makes sh's layout and takes a reference to it. */
static spmd_status layout_acquire(spmd_sharding *sh)
{
    spmd__layout key;
    layout_key(sh, &key);
    pthread_mutex_lock(&layouts_lock);
    spmd__layout *e = NULL;
    if (layouts_count >= layouts_buckets && !layouts_grow() && !layouts_buckets) {
        pthread_mutex_unlock(&layouts_lock);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_sharding_create: out of memory");
    }
    for (e = layouts[key.hash & (layouts_buckets - 1)]; e && !layout_equal(e, &key); e = e->next)
        ;
    if (!e) {
        e = malloc(sizeof *e);
        int *ids = e ? malloc((size_t)key.size * sizeof(int)) : NULL;
        if (!ids) {
            free(e);
            pthread_mutex_unlock(&layouts_lock);
            return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_sharding_create: out of memory");
        }
        *e = key;
        memcpy(ids, key.device_ids, (size_t)key.size * sizeof(int));
        e->device_ids = ids;
        e->uid = ++layouts_made;
        e->next = layouts[key.hash & (layouts_buckets - 1)];
        layouts[key.hash & (layouts_buckets - 1)] = e;
        layouts_count++;
    }
    e->refs++;
    sh->layout = e;
    pthread_mutex_unlock(&layouts_lock);
    return SPMD_OK;
}

/* Drops sh's reference; the last one frees the layout and the plans cached on it. */
static void layout_release(spmd_sharding *sh)
{
    spmd__layout *e = sh->layout;
    if (!e)
        return;
    pthread_mutex_lock(&layouts_lock);
    int last = --e->refs == 0;
    if (last) {
        spmd__layout **at = &layouts[e->hash & (layouts_buckets - 1)];
        while (*at != e)
            at = &(*at)->next;
        *at = e->next;
        layouts_count--;
    }
    pthread_mutex_unlock(&layouts_lock);
    if (last) {
        if (e->reshard_plans)
            e->reshard_plans->destroy(e->reshard_plans);
        free(e->device_ids);
        free(e);
    }
}

static void sharding_free(spmd_sharding *sh)
{
    sh->magic = SPMD__MAGIC_DEAD;
    layout_release(sh);
    spmd_mesh_destroy(sh->mesh);
    spmd_spec_destroy(sh->spec);
    free(sh->block);
    free(sh->replica);
    free(sh);
}

/* The mesh axis of a spec's name (`kind`: "resource", "unreduced"); the message lists the
 * mesh's axes. */
static spmd_status axis_of(const spmd_sharding *sh, const char *name, const char *kind, int *axis)
{
    *axis = spmd_mesh_axis_index(sh->mesh, name);
    if (*axis >= 0)
        return SPMD_OK;
    char spec_text[SPMD__SPEC_TEXT], mesh_text[SPMD__MESH_TEXT];
    spmd__ignore(spmd_spec_format(sh->spec, spec_text, sizeof spec_text));
    spmd__ignore(spmd_mesh_format(sh->mesh, mesh_text, sizeof mesh_text));
    return SPMD_ERROR(SPMD_ERR_SPEC,
                      "%s axis '%s' of %s is not found in mesh %s; use one of the mesh's axis "
                      "names",
                      kind, name, spec_text, mesh_text);
}

/* Maps every spec name, and every unreduced one, to its mesh axis. */
static spmd_status resolve_axes(spmd_sharding *sh)
{
    const spmd_spec *spec = sh->spec;
    for (int j = 0; j < spec->length; j++) {
        long long blocks = 1;
        for (int k = 0; k < spec->entry_size[j]; k++) {
            int a = 0;
            SPMD_CHECK(axis_of(sh, spec->names[spec->entry_axis[j][k]], "resource", &a));
            sh->entry_mesh_axis[j][k] = a;
            blocks *= sh->mesh->shape[a];
        }
        sh->nblocks[j] = (int)blocks;
    }
    for (int k = 0; k < spec->num_unreduced; k++) {
        int a = 0;
        SPMD_CHECK(axis_of(sh, spec->unreduced[k], "unreduced", &a));
        sh->unreduced_mask |= 1u << a;
    }
    return SPMD_OK;
}

/* Closed form of JAX's iota-tile construction: the first axis of a tuple is the major digit;
 * the replica id is the row-major rank of the coordinates on the unused axes (mesh order). */
static void compute_tables(spmd_sharding *sh)
{
    const spmd_mesh *m = sh->mesh;
    int used[SPMD_MAX_MESH_AXES] = {0};
    long long used_size = 1;
    for (int j = 0; j < sh->length; j++)
        for (int k = 0; k < sh->spec->entry_size[j]; k++) {
            used[sh->entry_mesh_axis[j][k]] = 1;
            used_size *= m->shape[sh->entry_mesh_axis[j][k]];
        }
    sh->fully_replicated = used_size == 1 && !sh->unreduced_mask;
    int c[SPMD_MAX_MESH_AXES];
    for (int f = 0; f < m->size; f++) {
        spmd__mesh_coords(m, f, c);
        for (int j = 0; j < sh->length; j++) {
            int b = 0;
            for (int k = 0; k < sh->spec->entry_size[j]; k++) {
                int a = sh->entry_mesh_axis[j][k];
                b = b * m->shape[a] + c[a];
            }
            sh->block[f * sh->length + j] = b;
        }
        int r = 0;
        for (int a = 0; a < m->ndim; a++)
            if (!used[a])
                r = r * m->shape[a] + c[a];
        sh->replica[f] = r;
    }
}

static spmd_status spmd_sharding_create_checked(spmd_mesh *mesh, const spmd_spec *spec,
                                                spmd_sharding **out)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_sharding_create");
    *out = NULL;
    SPMD_CHECK(spmd__mesh_check_math(mesh, "spmd_sharding_create", "mesh"));
    SPMD_CHECK(spmd__spec_check(spec, "spmd_sharding_create", "spec"));
    spmd_sharding *sh = calloc(1, sizeof *sh);
    SPMD_REQUIRE(sh != NULL, SPMD_ERR_OUT_OF_MEMORY, "spmd_sharding_create: out of memory");
    sh->magic = SPMD__MAGIC_SHARDING;
    atomic_init(&sh->refs, 1);
    sh->mesh = spmd_mesh_retain(mesh);
    sh->length = spec->length;
    spmd_status st = spmd_spec_copy(spec, &sh->spec);
    if (st == SPMD_OK)
        st = resolve_axes(sh);
    if (st == SPMD_OK) {
        size_t cells = (size_t)mesh->size * (size_t)(sh->length ? sh->length : 1);
        sh->block = malloc(cells * sizeof(int));
        sh->replica = malloc((size_t)mesh->size * sizeof(int));
        if (!sh->block || !sh->replica)
            st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_sharding_create: out of memory");
    }
    if (st == SPMD_OK)
        compute_tables(sh);
    if (st == SPMD_OK)
        st = layout_acquire(sh);
    if (st != SPMD_OK) {
        sharding_free(sh);
        return st;
    }
    *out = sh;
    return SPMD_OK;
}

static spmd_status spmd_sharding_create_parse_checked(spmd_mesh *mesh, const char *spec_text,
                                                      spmd_sharding **out)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_sharding_create_parse");
    *out = NULL;
    spmd_spec *spec = NULL;
    SPMD_CHECK(spmd_spec_parse(spec_text, &spec));
    spmd_status st = spmd_sharding_create_checked(mesh, spec, out);
    spmd_spec_destroy(spec);
    return st;
}

spmd_sharding *spmd_sharding_retain(spmd_sharding *sharding)
{
    if (valid(sharding))
        atomic_fetch_add(&sharding->refs, 1);
    return sharding;
}

void spmd_sharding_destroy(spmd_sharding *sharding)
{
    if (valid(sharding) && atomic_fetch_sub(&sharding->refs, 1) == 1)
        sharding_free(sharding);
}

spmd_mesh *spmd_sharding_mesh(const spmd_sharding *sharding)
{
    return valid(sharding) ? sharding->mesh : NULL;
}

const spmd_spec *spmd_sharding_spec(const spmd_sharding *sharding)
{
    return valid(sharding) ? sharding->spec : NULL;
}

spmd_status spmd__sharding_check_shape(const spmd_sharding *sh, int ndim, const int64_t *shape,
                                       const char *fn, const char *what)
{
    SPMD_REQUIRE(ndim >= 0 && ndim <= SPMD_MAX_RANK, SPMD_ERR_SHAPE,
                 "%s: %s has rank %d; libspmd arrays have rank 0 to %d (SPMD_MAX_RANK)", fn, what,
                 ndim, SPMD_MAX_RANK);
    SPMD_REQUIRE(ndim == 0 || shape != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: the shape of %s is NULL but its rank is %d", fn, what, ndim);
    char sh_text[SPMD__SHARDING_TEXT];
    if (sh->length > ndim) {
        spmd__ignore(spmd_sharding_format(sh, sh_text, sizeof sh_text));
        return SPMD_ERROR(SPMD_ERR_SHAPE,
                          "%s: %s is only valid for values of rank at least %d, but %s has rank "
                          "%d%s",
                          fn, sh_text, sh->length, what, ndim,
                          ndim == 0 ? "; for scalars the PartitionSpec should be P()"
                                    : "; shorten the spec or add dimensions");
    }
    for (int j = 0; j < ndim; j++)
        SPMD_REQUIRE(shape[j] >= 1, SPMD_ERR_SHAPE,
                     "%s: dimension %d of %s has extent %lld; every extent must be >= 1", fn, j,
                     what, (long long)shape[j]);
    for (int j = 0; j < sh->length; j++) {
        if (shape[j] % sh->nblocks[j] == 0)
            continue;
        char shape_text[256], tiling[256];
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, shape_text, sizeof shape_text);
        spmd__strbuf_shape(&sb, shape, ndim);
        spmd__strbuf_init(&sb, tiling, sizeof tiling);
        spmd__strbuf_printf(&sb, "(");
        for (int i = 0; i < ndim; i++)
            spmd__strbuf_printf(&sb, i ? ", %d" : "%d", spmd__sharding_blocks(sh, i));
        spmd__strbuf_printf(&sb, ndim == 1 ? ",)" : ")");
        spmd__ignore(spmd_sharding_format(sh, sh_text, sizeof sh_text));
        return SPMD_ERROR(SPMD_ERR_SHAPE,
                          "%s: %s implies that array axis %d of %s is partitioned %d times, but "
                          "the dimension size is %lld (full shape: %s, per-dimension tiling "
                          "factors: %s should evenly divide the shape)",
                          fn, sh_text, j, what, sh->nblocks[j], (long long)shape[j], shape_text,
                          tiling);
    }
    size_t elements = 1;
    for (int j = 0; j < ndim; j++)
        SPMD_REQUIRE(!spmd__mul_overflows(elements, (size_t)shape[j], &elements), SPMD_ERR_SHAPE,
                     "%s: %s has more elements than fit in size_t", fn, what);
    return SPMD_OK;
}

spmd_status spmd_sharding_check_shape(const spmd_sharding *sharding, int ndim, const int64_t *shape)
{
    SPMD_CHECK(spmd__sharding_check(sharding, "spmd_sharding_check_shape", "sharding"));
    return spmd__sharding_check_shape(sharding, ndim, shape, "spmd_sharding_check_shape",
                                      "the array");
}

spmd_status spmd_sharding_shard_shape(const spmd_sharding *sharding, int ndim, const int64_t *shape,
                                      int64_t *shard_shape)
{
    SPMD_CHECK(spmd__sharding_check(sharding, "spmd_sharding_shard_shape", "sharding"));
    SPMD_CHECK(spmd__sharding_check_shape(sharding, ndim, shape, "spmd_sharding_shard_shape",
                                          "the array"));
    SPMD_REQUIRE(ndim == 0 || shard_shape != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_sharding_shard_shape: argument 'shard_shape' is NULL");
    for (int j = 0; j < ndim; j++)
        shard_shape[j] = shape[j] / spmd__sharding_blocks(sharding, j);
    return SPMD_OK;
}

int spmd_sharding_num_blocks(const spmd_sharding *sharding, int dim)
{
    if (!valid(sharding) || dim < 0 || dim >= SPMD_MAX_RANK)
        return -1;
    return spmd__sharding_blocks(sharding, dim);
}

void spmd__sharding_box(const spmd_sharding *sh, int ndim, const int64_t *shape, int flat,
                        spmd_box *box)
{
    box->ndim = ndim;
    for (int j = 0; j < ndim; j++) {
        int64_t size = shape[j] / spmd__sharding_blocks(sh, j);
        box->start[j] = spmd__sharding_block(sh, flat, j) * size;
        box->stop[j] = box->start[j] + size;
    }
}

spmd_status spmd_sharding_device_box(const spmd_sharding *sharding, int ndim, const int64_t *shape,
                                     int device_id, spmd_box *box)
{
    SPMD_CHECK(spmd__sharding_check(sharding, "spmd_sharding_device_box", "sharding"));
    SPMD_REQUIRE_NOT_NULL(box, "spmd_sharding_device_box");
    SPMD_CHECK(
        spmd__sharding_check_shape(sharding, ndim, shape, "spmd_sharding_device_box", "the array"));
    int flat = spmd_mesh_device_position(sharding->mesh, device_id);
    SPMD_REQUIRE(flat >= 0, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_sharding_device_box: device %d is not in the sharding's mesh", device_id);
    spmd__sharding_box(sharding, ndim, shape, flat, box);
    return SPMD_OK;
}

int spmd_sharding_replica_id(const spmd_sharding *sharding, int device_id)
{
    if (!valid(sharding))
        return -1;
    int flat = spmd_mesh_device_position(sharding->mesh, device_id);
    return flat >= 0 ? sharding->replica[flat] : -1;
}

int spmd_sharding_num_devices(const spmd_sharding *sharding)
{
    return valid(sharding) ? sharding->mesh->size : 0;
}

int spmd_sharding_num_addressable_devices(const spmd_sharding *sharding)
{
    return valid(sharding) ? sharding->mesh->num_local : 0;
}

int spmd_sharding_addressable_device_id(const spmd_sharding *sharding, int i)
{
    return valid(sharding) ? spmd_mesh_local_device_id(sharding->mesh, i) : -1;
}

int spmd_sharding_is_fully_addressable(const spmd_sharding *sharding)
{
    return valid(sharding) && sharding->mesh->num_local == sharding->mesh->size;
}

int spmd_sharding_is_fully_replicated(const spmd_sharding *sharding)
{
    return valid(sharding) && sharding->fully_replicated;
}

int spmd_sharding_is_equivalent(const spmd_sharding *a, const spmd_sharding *b, int ndim)
{
    if (!valid(a) || !valid(b) || ndim < a->length || ndim < b->length || ndim > SPMD_MAX_RANK)
        return 0;
    if (a->unreduced_mask || b->unreduced_mask) /* partial sums: only the same placement */
        return a->layout == b->layout;
    const spmd_mesh *ma = a->mesh, *mb = b->mesh;
    if (ma->size != mb->size)
        return 0;
    for (int j = 0; j < ndim; j++)
        if (spmd__sharding_blocks(a, j) != spmd__sharding_blocks(b, j))
            return 0;
    for (int fa = 0; fa < ma->size; fa++) {
        int fb = spmd_mesh_device_position(mb, ma->device_ids[fa]);
        if (fb < 0)
            return 0;
        for (int j = 0; j < ndim; j++)
            if (spmd__sharding_block(a, fa, j) != spmd__sharding_block(b, fb, j))
                return 0;
    }
    return 1;
}

spmd_status spmd_sharding_format(const spmd_sharding *sharding, char *buf, size_t size)
{
    SPMD_CHECK(spmd__sharding_check(sharding, "spmd_sharding_format", "sharding"));
    spmd__strbuf sb;
    SPMD_CHECK(spmd__strbuf_start(&sb, buf, size, "spmd_sharding_format"));
    char mesh_text[SPMD__MESH_TEXT], spec_text[SPMD__SPEC_TEXT];
    SPMD_CHECK(spmd_mesh_format(sharding->mesh, mesh_text, sizeof mesh_text));
    SPMD_CHECK(spmd_spec_format(sharding->spec, spec_text, sizeof spec_text));
    spmd__strbuf_printf(&sb, "NamedSharding(mesh=%s, spec=%s)", mesh_text, spec_text);
    return spmd__strbuf_finish(&sb, "spmd_sharding_format");
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_sharding_create(spmd_mesh *mesh, const spmd_spec *spec, spmd_sharding **out)
{
    return spmd__error_in(spmd_sharding_create_checked(mesh, spec, out), "spmd_sharding_create");
}

spmd_status spmd_sharding_create_parse(spmd_mesh *mesh, const char *spec_text, spmd_sharding **out)
{
    return spmd__error_in(spmd_sharding_create_parse_checked(mesh, spec_text, out),
                          "spmd_sharding_create_parse");
}
