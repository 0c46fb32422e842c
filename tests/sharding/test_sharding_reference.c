/* NamedSharding index math against an independent reference: JAX's HLO iota-tile construction
 * (transpose + reshape, not the closed-form mixed-radix rule the library uses), brute-force
 * replica ids, and the worked tables of SEMANTICS.md (c), which are values read from JAX.
 * Built twice: on 16 CPU devices, and as test_sharding_math, linked with src/sharding and the
 * basics alone (abstract meshes, no runtime), which shows the index math needs nothing else. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NUM_DEVICES 16
#define MAX_AXES 4       /* mesh axes in the random meshes */
#define MAX_ARRAY_RANK 4 /* array rank in the random combinations */
#define MAX_TUPLE 3      /* most mesh axes in one spec entry */
#define NUM_COMBOS 600
#define MIN_COMBOS 200
#define MAX_REPORTS 20 /* failure reports printed in full; the rest are only counted */

typedef struct ref_box {
    int64_t start[SPMD_MAX_RANK];
    int64_t stop[SPMD_MAX_RANK];
} ref_box;

/* A spec as mesh axis indices, first (major) axis of each entry first. */
typedef struct ref_spec {
    int len;
    int naxes[SPMD_MAX_RANK];
    int axes[SPMD_MAX_RANK][MAX_TUPLE];
} ref_spec;

typedef struct combo {
    int index;
    int mesh_ndim;
    int mesh_shape[MAX_AXES];
    const char *names[MAX_AXES];
    int mesh_size;
    int ids[NUM_DEVICES]; /* global id of the device at each mesh flat position */
    int ids_null;         /* mesh created with device_ids NULL (all 16 in id order) */
    ref_spec spec;
    char text[256]; /* Python spelling handed to spmd_spec_parse */
    int rank;
    int64_t dims[SPMD_MAX_RANK];
} combo;

typedef struct coverage {
    int combos;
    int tuples;     /* entries over 2 or more axes */
    int triples;    /* entries over 3 axes */
    int replicated; /* combos with an unused mesh axis of size > 1 */
    int fully_repl; /* combos whose spec uses no axis of size > 1 */
    int mixed;      /* sharded over some axes and replicated over others */
    int non_pow2;   /* meshes with an axis of size 3 */
    int null_ids;   /* meshes over all devices with device_ids NULL */
    int subset_ids; /* meshes over fewer than 16 devices */
    int rank0;      /* scalar arrays */
    int short_spec; /* spec shorter than the rank (implicit trailing Nones) */
    int alt_equal;  /* other spec with the same layout */
    int alt_differ; /* other spec with a different layout */
} coverage;

static int reports_printed;

/* ---- reference ------------------------------------------------------------------------- */

static int64_t entry_blocks(const ref_spec *s, const int *mesh_shape, int j)
{
    int64_t n = 1;
    if (j < s->len)
        for (int k = 0; k < s->naxes[j]; k++)
            n *= mesh_shape[s->axes[j][k]];
    return n;
}

/*
 * Boxes by the HLO iota-tile construction: transpose the device array so that the sharded axes
 * come first (array-dimension order, then tuple order) and the unused axes last (mesh order),
 * reshape it to the tile grid (N_0, ..., N_{rank-1}, R) and read each device's tile coordinate.
 * boxes[] and tile_rep[] (the coordinate on the trailing replication dimension) are indexed by
 * mesh flat position.
 */
static void ref_boxes(const int *mesh_shape, int mesh_ndim, const ref_spec *s, int rank,
                      const int64_t *dims, ref_box *boxes, int *tile_rep)
{
    int perm[SPMD_MAX_MESH_AXES], np = 0, used[SPMD_MAX_MESH_AXES] = {0};
    int64_t nblocks[SPMD_MAX_RANK];
    for (int j = 0; j < rank; j++) {
        nblocks[j] = 1;
        if (j >= s->len)
            continue;
        for (int k = 0; k < s->naxes[j]; k++) {
            int a = s->axes[j][k];
            perm[np++] = a;
            used[a] = 1;
            nblocks[j] *= mesh_shape[a];
        }
    }
    int nrep = 1, size = 1;
    for (int a = 0; a < mesh_ndim; a++) {
        size *= mesh_shape[a];
        if (!used[a]) {
            perm[np++] = a;
            nrep *= mesh_shape[a];
        }
    }
    /* Element t of the transposed array, row-major: find which mesh device it is, then where
     * the same t falls in the tile grid (the reshape keeps the row-major element order). */
    for (int t = 0; t < size; t++) {
        int coord[SPMD_MAX_MESH_AXES], rem = t;
        for (int i = np - 1; i >= 0; i--) {
            coord[perm[i]] = rem % mesh_shape[perm[i]];
            rem /= mesh_shape[perm[i]];
        }
        int flat = 0;
        for (int a = 0; a < mesh_ndim; a++)
            flat = flat * mesh_shape[a] + coord[a];

        int64_t tile = t;
        tile_rep[flat] = (int)(tile % nrep);
        tile /= nrep;
        for (int j = rank - 1; j >= 0; j--) {
            int64_t b = tile % nblocks[j], step = dims[j] / nblocks[j];
            tile /= nblocks[j];
            boxes[flat].start[j] = b * step;
            boxes[flat].stop[j] = (b + 1) * step;
        }
    }
}

static int box_equal(const ref_box *a, const ref_box *b, int rank)
{
    for (int j = 0; j < rank; j++)
        if (a->start[j] != b->start[j] || a->stop[j] != b->stop[j])
            return 0;
    return 1;
}

/* Replica id by definition: earlier devices in flat order that hold the same box. */
static void brute_replica_ids(const ref_box *boxes, int size, int rank, int *rep)
{
    for (int p = 0; p < size; p++) {
        rep[p] = 0;
        for (int q = 0; q < p; q++)
            rep[p] += box_equal(&boxes[q], &boxes[p], rank);
    }
}

/* ---- generation ------------------------------------------------------------------------ */

static void shuffle(int *v, int n, spmd_test_rng *rng)
{
    for (int i = n - 1; i > 0; i--) {
        int k = spmd_test_rng_below(rng, i + 1), tmp = v[i];
        v[i] = v[k];
        v[k] = tmp;
    }
}

/* Each mesh axis is unused (replication) or goes to one entry, in random tuple order. */
static void random_spec(int mesh_ndim, int rank, spmd_test_rng *rng, ref_spec *s)
{
    memset(s, 0, sizeof *s);
    /* Mostly as long as the rank: an empty spec is fully replicated and says little. */
    s->len = spmd_test_rng_below(rng, 2) ? rank : spmd_test_rng_below(rng, rank + 1);
    int order[SPMD_MAX_MESH_AXES];
    for (int a = 0; a < mesh_ndim; a++)
        order[a] = a;
    shuffle(order, mesh_ndim, rng);
    for (int i = 0; i < mesh_ndim; i++) {
        if (s->len == 0 || spmd_test_rng_below(rng, 4) == 0)
            continue;
        int j = spmd_test_rng_below(rng, s->len);
        if (s->naxes[j] < MAX_TUPLE)
            s->axes[j][s->naxes[j]++] = order[i];
    }
}

/* Another spec on the same mesh: small edits (which may or may not change the layout) or a
 * fresh one. */
static void mutate_spec(const ref_spec *s, int mesh_ndim, int rank, spmd_test_rng *rng,
                        ref_spec *out)
{
    *out = *s;
    int pick[SPMD_MAX_RANK], n = 0;
    switch (spmd_test_rng_below(rng, 4)) {
    case 1: /* reverse a tuple: changes which axis is major */
        for (int j = 0; j < s->len; j++)
            if (s->naxes[j] >= 2)
                pick[n++] = j;
        if (n) {
            int j = pick[spmd_test_rng_below(rng, n)], m = out->naxes[j];
            for (int k = 0; k < m; k++)
                out->axes[j][k] = s->axes[j][m - 1 - k];
            return;
        }
        break;
    case 2: /* swap two entries */
        if (s->len >= 2) {
            int j = spmd_test_rng_below(rng, s->len);
            int k = (j + 1 + spmd_test_rng_below(rng, s->len - 1)) % s->len;
            out->naxes[j] = s->naxes[k];
            out->naxes[k] = s->naxes[j];
            memcpy(out->axes[j], s->axes[k], sizeof out->axes[j]);
            memcpy(out->axes[k], s->axes[j], sizeof out->axes[k]);
            return;
        }
        break;
    case 3: /* drop an entry's minor axis: it becomes replicated */
        for (int j = 0; j < s->len; j++)
            if (s->naxes[j] >= 1)
                pick[n++] = j;
        if (n) {
            out->naxes[pick[spmd_test_rng_below(rng, n)]]--;
            return;
        }
        break;
    default:
        break;
    }
    random_spec(mesh_ndim, rank, rng, out);
}

static void appendf(char *buf, size_t size, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *n, size - *n, fmt, ap);
    va_end(ap);
    if (w > 0)
        *n = *n + (size_t)w < size ? *n + (size_t)w : size - 1;
}

/* Python spelling of the spec. With `style`, vary it the ways spmd_spec_parse documents:
 * P(...) wrapper, double quotes, () for None, ('a',) for 'a', a trailing comma. */
static void spec_text(const ref_spec *s, const char *const *names, spmd_test_rng *style, char *buf,
                      size_t size)
{
    char q = '\'';
    int wrap = 0, trailing = 0;
    size_t n = 0;
    buf[0] = '\0';
    if (style) {
        q = spmd_test_rng_below(style, 5) == 0 ? '"' : '\'';
        wrap = spmd_test_rng_below(style, 3) == 0;
        trailing = s->len > 0 && spmd_test_rng_below(style, 4) == 0;
    }
    if (wrap)
        appendf(buf, size, &n, "P(");
    for (int j = 0; j < s->len; j++) {
        int odd = style && spmd_test_rng_below(style, 6) == 0;
        if (j)
            appendf(buf, size, &n, ", ");
        if (s->naxes[j] == 0) {
            appendf(buf, size, &n, odd ? "()" : "None");
        } else if (s->naxes[j] == 1 && !odd) {
            appendf(buf, size, &n, "%c%s%c", q, names[s->axes[j][0]], q);
        } else {
            appendf(buf, size, &n, "(");
            for (int k = 0; k < s->naxes[j]; k++)
                appendf(buf, size, &n, "%s%c%s%c", k ? ", " : "", q, names[s->axes[j][k]], q);
            appendf(buf, size, &n, s->naxes[j] == 1 ? ",)" : ")");
        }
    }
    if (trailing)
        appendf(buf, size, &n, ",");
    if (wrap)
        appendf(buf, size, &n, ")");
}

/* What spmd_spec_format must print: JAX's repr, P(...) with a trailing comma for one entry. */
static void spec_repr(const ref_spec *s, const char *const *names, char *buf, size_t size)
{
    size_t n = 0;
    char inner[256];
    spec_text(s, names, NULL, inner, sizeof inner);
    buf[0] = '\0';
    appendf(buf, size, &n, "P(%s%s)", inner, s->len == 1 ? "," : "");
}

static void random_combo(int index, spmd_test_rng *rng, combo *c)
{
    static const char *const pool[] = {"x", "y", "z", "w", "data", "model", "pipe", "expert_2"};
    int npool = (int)(sizeof pool / sizeof pool[0]);
    memset(c, 0, sizeof *c);
    c->index = index;

    /* Every fifth mesh covers all 16 devices, so device_ids NULL gets exercised. */
    int want_all = spmd_test_rng_below(rng, 5) == 0;
    do {
        c->mesh_ndim = 1 + spmd_test_rng_below(rng, MAX_AXES);
        c->mesh_size = 1;
        for (int a = 0; a < c->mesh_ndim; a++) {
            c->mesh_shape[a] = 1 + spmd_test_rng_below(rng, 4);
            c->mesh_size *= c->mesh_shape[a];
        }
    } while (c->mesh_size > NUM_DEVICES || (want_all && c->mesh_size != NUM_DEVICES));

    int name_idx[8];
    for (int i = 0; i < npool; i++)
        name_idx[i] = i;
    shuffle(name_idx, npool, rng);
    for (int a = 0; a < c->mesh_ndim; a++)
        c->names[a] = pool[name_idx[a]];

    int all[NUM_DEVICES];
    for (int i = 0; i < NUM_DEVICES; i++)
        all[i] = i;
    if (c->mesh_size == NUM_DEVICES && spmd_test_rng_below(rng, 2) == 0)
        c->ids_null = 1;
    else
        shuffle(all, NUM_DEVICES, rng);
    memcpy(c->ids, all, sizeof(int) * (size_t)c->mesh_size);

    /* Scalars one time in eight; they can only be replicated. */
    c->rank = spmd_test_rng_below(rng, 8) ? 1 + spmd_test_rng_below(rng, MAX_ARRAY_RANK) : 0;
    random_spec(c->mesh_ndim, c->rank, rng, &c->spec);
    for (int j = 0; j < c->rank; j++)
        c->dims[j] = entry_blocks(&c->spec, c->mesh_shape, j) * (1 + spmd_test_rng_below(rng, 3));
    spec_text(&c->spec, c->names, rng, c->text, sizeof c->text);
}

/* ---- diagnostics ----------------------------------------------------------------------- */

static void describe(const combo *c)
{
    fprintf(stderr, "  combination %d: mesh shape (", c->index);
    for (int a = 0; a < c->mesh_ndim; a++)
        fprintf(stderr, "%s%d", a ? ", " : "", c->mesh_shape[a]);
    fprintf(stderr, ") names (");
    for (int a = 0; a < c->mesh_ndim; a++)
        fprintf(stderr, "%s'%s'", a ? ", " : "", c->names[a]);
    fprintf(stderr, ") device_ids %s[", c->ids_null ? "NULL = " : "");
    for (int p = 0; p < c->mesh_size; p++)
        fprintf(stderr, "%s%d", p ? ", " : "", c->ids[p]);
    fprintf(stderr, "]\n  spec text \"%s\", array shape (", c->text);
    for (int j = 0; j < c->rank; j++)
        fprintf(stderr, "%s%lld", j ? ", " : "", (long long)c->dims[j]);
    fprintf(stderr, ")\n");
}

static void report(const combo *c, int line, const char *fmt, ...)
{
    if (++reports_printed > MAX_REPORTS)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "MISMATCH (%s:%d): ", __FILE__, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (c)
        describe(c);
}

static void format_box(char *buf, size_t size, const int64_t *start, const int64_t *stop, int rank)
{
    size_t n = 0;
    buf[0] = '\0';
    appendf(buf, size, &n, "(");
    for (int j = 0; j < rank; j++)
        appendf(buf, size, &n, "%s%lld:%lld", j ? ", " : "", (long long)start[j],
                (long long)stop[j]);
    appendf(buf, size, &n, ")");
}

/* Record a failure and go on, so one run shows every mismatch and frees what it made. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            report(c, __LINE__, __VA_ARGS__);                                                      \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        spmd_status st_ = (expr);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            report(c, __LINE__, "%s returned %s: %s", #expr, spmd_status_name(st_),                \
                   spmd_last_error());                                                             \
            failures++;                                                                            \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

/* ---- library-side helpers -------------------------------------------------------------- */

static spmd_status build_spec(const ref_spec *s, const char *const *names, spmd_test_rng *rng,
                              spmd_spec **out)
{
    spmd_spec *spec = NULL;
    spmd_status st = spmd_spec_create(&spec);
    if (st != SPMD_OK)
        return st;
    for (int j = 0; j < s->len && st == SPMD_OK; j++) {
        const char *entry[MAX_TUPLE];
        for (int k = 0; k < s->naxes[j]; k++)
            entry[k] = names[s->axes[j][k]];
        int alt = spmd_test_rng_below(rng, 2);
        if (s->naxes[j] == 0)
            st = alt ? spmd_spec_append(spec, 0, NULL) : spmd_spec_append_axis(spec, NULL);
        else if (s->naxes[j] == 1 && alt)
            st = spmd_spec_append_axis(spec, entry[0]);
        else
            st = spmd_spec_append(spec, s->naxes[j], entry);
    }
    if (st != SPMD_OK) {
        spmd_spec_destroy(spec);
        return st;
    }
    *out = spec;
    return SPMD_OK;
}

static int spec_matches(const spmd_spec *got, const ref_spec *want, const char *const *names)
{
    if (spmd_spec_length(got) != want->len)
        return 0;
    for (int j = 0; j < want->len; j++) {
        if (spmd_spec_entry_size(got, j) != want->naxes[j])
            return 0;
        for (int k = 0; k < want->naxes[j]; k++) {
            const char *name = spmd_spec_entry_axis(got, j, k);
            if (!name || strcmp(name, names[want->axes[j][k]]) != 0)
                return 0;
        }
    }
    return 1;
}

/* Same axes per dimension once both are padded with None. */
static int ref_spec_equal_padded(const ref_spec *a, const ref_spec *b)
{
    int len = a->len > b->len ? a->len : b->len;
    for (int j = 0; j < len; j++) {
        int na = j < a->len ? a->naxes[j] : 0, nb = j < b->len ? b->naxes[j] : 0;
        if (na != nb)
            return 0;
        for (int k = 0; k < na; k++)
            if (a->axes[j][k] != b->axes[j][k])
                return 0;
    }
    return 1;
}

/* Everything the sharding says about an array of c's shape, against the reference. */
static int check_layout(const combo *c, const spmd_sharding *sh, const char *which,
                        const ref_box *ref, const int *ref_rep)
{
    int failures = 0;
    char got_text[256] = "", want_text[256] = "";

    spmd_status st = spmd_sharding_check_shape(sh, c->rank, c->dims);
    CHECK(st == SPMD_OK, "%s: spmd_sharding_check_shape returned %s: %s", which,
          spmd_status_name(st), spmd_last_error());

    int64_t shard[SPMD_MAX_RANK];
    st = spmd_sharding_shard_shape(sh, c->rank, c->dims, shard);
    CHECK(st == SPMD_OK, "%s: spmd_sharding_shard_shape returned %s: %s", which,
          spmd_status_name(st), spmd_last_error());
    for (int j = 0; st == SPMD_OK && j < c->rank; j++)
        CHECK(shard[j] == ref[0].stop[j] - ref[0].start[j],
              "%s: shard_shape[%d] is %lld, reference %lld", which, j, (long long)shard[j],
              (long long)(ref[0].stop[j] - ref[0].start[j]));

    for (int j = 0; j < c->rank; j++) {
        int64_t want = c->dims[j] / (ref[0].stop[j] - ref[0].start[j]);
        int got = spmd_sharding_num_blocks(sh, j);
        CHECK(got == want, "%s: num_blocks(%d) is %d, reference %lld", which, j, got,
              (long long)want);
    }

    int repl = 1;
    for (int j = 0; j < c->spec.len; j++)
        for (int k = 0; k < c->spec.naxes[j]; k++)
            repl = repl && c->mesh_shape[c->spec.axes[j][k]] == 1;
    CHECK(spmd_sharding_is_fully_replicated(sh) == repl, "%s: is_fully_replicated is %d, want %d",
          which, spmd_sharding_is_fully_replicated(sh), repl);
    CHECK(spmd_sharding_num_devices(sh) == c->mesh_size, "%s: num_devices is %d, want %d", which,
          spmd_sharding_num_devices(sh), c->mesh_size);
#ifdef SPMD_TEST_SHARDING_ONLY
    /* An abstract mesh: no device is this process's. */
    const int addressable = 0;
#else
    /* One process: every mesh device is addressable, in mesh flat order. */
    const int addressable = c->mesh_size;
#endif
    CHECK(spmd_sharding_num_addressable_devices(sh) == addressable,
          "%s: num_addressable_devices is %d, want %d", which,
          spmd_sharding_num_addressable_devices(sh), addressable);
    CHECK(spmd_sharding_is_fully_addressable(sh) == (addressable == c->mesh_size),
          "%s: is_fully_addressable is %d with %d of %d devices addressable", which,
          spmd_sharding_is_fully_addressable(sh), addressable, c->mesh_size);
    for (int p = 0; p < addressable; p++)
        CHECK(spmd_sharding_addressable_device_id(sh, p) == c->ids[p],
              "%s: addressable_device_id(%d) is %d, want %d", which, p,
              spmd_sharding_addressable_device_id(sh, p), c->ids[p]);
    CHECK(spmd_sharding_addressable_device_id(sh, addressable) == -1,
          "%s: addressable_device_id past the end is not -1", which);

    for (int p = 0; p < c->mesh_size; p++) {
        int dev = c->ids[p];
        spmd_box box;
        memset(&box, 0, sizeof box);
        st = spmd_sharding_device_box(sh, c->rank, c->dims, dev, &box);
        if (st != SPMD_OK) {
            CHECK(0, "%s: device_box(device %d) returned %s: %s", which, dev, spmd_status_name(st),
                  spmd_last_error());
            continue;
        }
        int same = box.ndim == c->rank;
        for (int j = 0; same && j < c->rank; j++)
            same = box.start[j] == ref[p].start[j] && box.stop[j] == ref[p].stop[j];
        if (!same) {
            format_box(got_text, sizeof got_text, box.start, box.stop,
                       box.ndim >= 0 && box.ndim <= SPMD_MAX_RANK ? box.ndim : 0);
            format_box(want_text, sizeof want_text, ref[p].start, ref[p].stop, c->rank);
        }
        CHECK(same, "%s: device %d (mesh flat %d): library box ndim %d %s, reference %s", which,
              dev, p, box.ndim, got_text, want_text);
        int rid = spmd_sharding_replica_id(sh, dev);
        CHECK(rid == ref_rep[p], "%s: device %d (mesh flat %d): replica id %d, reference %d", which,
              dev, p, rid, ref_rep[p]);
    }

    if (c->mesh_size < NUM_DEVICES) {
        int outsider = -1;
        for (int d = 0; d < NUM_DEVICES; d++) {
            int in = 0;
            for (int p = 0; p < c->mesh_size; p++)
                in |= c->ids[p] == d;
            if (!in) {
                outsider = d;
                break;
            }
        }
        spmd_box box;
        st = spmd_sharding_device_box(sh, c->rank, c->dims, outsider, &box);
        CHECK(st == SPMD_ERR_INVALID_ARGUMENT,
              "%s: device_box of device %d, not in the mesh, returned %s", which, outsider,
              spmd_status_name(st));
        CHECK(spmd_sharding_replica_id(sh, outsider) == -1,
              "%s: replica_id of device %d, not in the mesh, is not -1", which, outsider);
    }
    return failures;
}

/* ---- one random combination ------------------------------------------------------------ */

static int run_combo(const combo *c, spmd_test_rng *rng, coverage *cov)
{
    int failures = 0;
    spmd_mesh *mesh = NULL;
    spmd_spec *built = NULL, *parsed = NULL, *reparsed = NULL, *padded = NULL, *alt_spec = NULL;
    spmd_sharding *sh_built = NULL, *sh_parsed = NULL, *sh_padded = NULL, *sh_alt = NULL;
    ref_box ref[NUM_DEVICES];
    int ref_rep[NUM_DEVICES], tile_rep[NUM_DEVICES];
    char buf[512], buf2[512], want[512];

    ref_boxes(c->mesh_shape, c->mesh_ndim, &c->spec, c->rank, c->dims, ref, tile_rep);
    brute_replica_ids(ref, c->mesh_size, c->rank, ref_rep);
    /* The two reference routes must agree before the library is judged against them. */
    for (int p = 0; p < c->mesh_size; p++)
        CHECK(ref_rep[p] == tile_rep[p], "test bug: brute-force replica id %d != tile %d at %d",
              ref_rep[p], tile_rep[p], p);

    CHECK_OK(spmd_test_mesh_create(c->mesh_ndim, c->mesh_shape, c->names,
                                   c->ids_null ? NULL : c->ids, c->ids_null ? 0 : c->mesh_size,
                                   &mesh));
    CHECK_OK(build_spec(&c->spec, c->names, rng, &built));
    CHECK_OK(spmd_spec_parse(c->text, &parsed));
    CHECK(spec_matches(built, &c->spec, c->names), "built spec has the wrong entries");
    CHECK(spec_matches(parsed, &c->spec, c->names), "spmd_spec_parse(\"%s\") has the wrong entries",
          c->text);
    CHECK(spmd_spec_is_equivalent(built, parsed) == 1, "built and parsed specs not equivalent");

    CHECK_OK(spmd_sharding_create(mesh, built, &sh_built));
    if (spmd_test_rng_below(rng, 2))
        CHECK_OK(spmd_sharding_create_parse(mesh, c->text, &sh_parsed));
    else
        CHECK_OK(spmd_sharding_create(mesh, parsed, &sh_parsed));
    CHECK(spmd_sharding_mesh(sh_built) == mesh, "spmd_sharding_mesh is not the mesh given");

    failures += check_layout(c, sh_built, "built spec", ref, ref_rep);
    failures += check_layout(c, sh_parsed, "parsed spec", ref, ref_rep);
    CHECK(spmd_sharding_is_equivalent(sh_built, sh_parsed, c->rank) == 1,
          "built and parsed shardings not equivalent at rank %d", c->rank);

    /* Trailing Nones change the spelling, not the layout; append at least one. */
    int ndim_eq = c->rank > c->spec.len ? c->rank : c->spec.len + 1;
    CHECK_OK(spmd_spec_copy(built, &padded));
    for (int j = c->spec.len; j < ndim_eq; j++)
        CHECK_OK(spmd_spec_append_axis(padded, NULL));
    CHECK_OK(spmd_sharding_create(mesh, padded, &sh_padded));
    CHECK(spmd_spec_is_equivalent(built, padded) == 1 &&
              spmd_spec_is_equivalent(padded, built) == 1,
          "spec and spec + %d trailing None not equivalent", ndim_eq - c->spec.len);
    CHECK(spmd_sharding_is_equivalent(sh_built, sh_padded, ndim_eq) == 1 &&
              spmd_sharding_is_equivalent(sh_padded, sh_built, ndim_eq) == 1,
          "sharding and sharding with %d trailing None not equivalent at rank %d",
          ndim_eq - c->spec.len, ndim_eq);

    /* Another spec: equivalent exactly when every device gets the same box. Probe with every
     * extent = mesh size, which any block count divides. */
    if (c->rank > 0) {
        ref_spec alt;
        ref_box probe[NUM_DEVICES], alt_probe[NUM_DEVICES];
        int64_t probe_dims[SPMD_MAX_RANK];
        int scratch[NUM_DEVICES];
        mutate_spec(&c->spec, c->mesh_ndim, c->rank, rng, &alt);
        for (int j = 0; j < c->rank; j++)
            probe_dims[j] = c->mesh_size;
        ref_boxes(c->mesh_shape, c->mesh_ndim, &c->spec, c->rank, probe_dims, probe, scratch);
        ref_boxes(c->mesh_shape, c->mesh_ndim, &alt, c->rank, probe_dims, alt_probe, scratch);
        int expected = 1;
        for (int p = 0; p < c->mesh_size; p++)
            expected = expected && box_equal(&probe[p], &alt_probe[p], c->rank);
        if (expected)
            cov->alt_equal++;
        else
            cov->alt_differ++;

        spec_text(&alt, c->names, NULL, buf, sizeof buf);
        CHECK_OK(build_spec(&alt, c->names, rng, &alt_spec));
        CHECK_OK(spmd_sharding_create(mesh, alt_spec, &sh_alt));
        int got = spmd_sharding_is_equivalent(sh_built, sh_alt, c->rank);
        int back = spmd_sharding_is_equivalent(sh_alt, sh_built, c->rank);
        CHECK(got == expected && back == expected,
              "is_equivalent with other spec \"%s\" at rank %d is %d/%d (both directions), "
              "reference %d",
              buf, c->rank, got, back, expected);
        int spec_eq = ref_spec_equal_padded(&c->spec, &alt);
        CHECK(spmd_spec_is_equivalent(built, alt_spec) == spec_eq,
              "spmd_spec_is_equivalent with \"%s\" is %d, want %d", buf,
              spmd_spec_is_equivalent(built, alt_spec), spec_eq);
    }

    /* Format: JAX's repr, identical for both spellings, and it parses back to the same spec. */
    spec_repr(&c->spec, c->names, want, sizeof want);
    CHECK_OK(spmd_spec_format(parsed, buf, sizeof buf));
    CHECK(strcmp(buf, want) == 0, "spmd_spec_format gives \"%s\", want \"%s\"", buf, want);
    CHECK_OK(spmd_spec_format(built, buf2, sizeof buf2));
    CHECK(strcmp(buf, buf2) == 0, "built spec formats as \"%s\", parsed as \"%s\"", buf2, buf);
    CHECK_OK(spmd_spec_parse(buf, &reparsed));
    CHECK(spmd_spec_is_equivalent(parsed, reparsed) == 1 &&
              spec_matches(reparsed, &c->spec, c->names),
          "\"%s\" does not parse back to the spec it was formatted from", buf);

    /* Coverage bookkeeping. */
    int used[SPMD_MAX_MESH_AXES] = {0};
    for (int j = 0; j < c->spec.len; j++) {
        cov->tuples += c->spec.naxes[j] >= 2;
        cov->triples += c->spec.naxes[j] == 3;
        for (int k = 0; k < c->spec.naxes[j]; k++)
            used[c->spec.axes[j][k]] = 1;
    }
    int replicated = 0, pow3 = 0, repl = 1;
    for (int a = 0; a < c->mesh_ndim; a++) {
        replicated |= !used[a] && c->mesh_shape[a] > 1;
        pow3 |= c->mesh_shape[a] == 3;
        repl = repl && (!used[a] || c->mesh_shape[a] == 1);
    }
    cov->replicated += replicated;
    cov->non_pow2 += pow3;
    cov->fully_repl += repl;
    cov->mixed += replicated && !repl;
    cov->null_ids += c->ids_null;
    cov->subset_ids += c->mesh_size < NUM_DEVICES;
    cov->rank0 += c->rank == 0;
    cov->short_spec += c->spec.len < c->rank;
    cov->combos++;

done:
    spmd_sharding_destroy(sh_alt);
    spmd_sharding_destroy(sh_padded);
    spmd_sharding_destroy(sh_parsed);
    spmd_sharding_destroy(sh_built);
    spmd_spec_destroy(alt_spec);
    spmd_spec_destroy(padded);
    spmd_spec_destroy(reparsed);
    spmd_spec_destroy(parsed);
    spmd_spec_destroy(built);
    spmd_mesh_destroy(mesh);
    return failures;
}

static void test_random_combinations(void **state)
{
    (void)state;
#ifndef SPMD_TEST_SHARDING_ONLY
    assert_int_equal(spmd_device_count(), NUM_DEVICES);
#endif
    spmd_test_rng rng = {0x5eed5bad1dea5ull};
    coverage cov;
    memset(&cov, 0, sizeof cov);
    int failures = 0, failed_combos = 0;
    reports_printed = 0;
    for (int i = 0; i < NUM_COMBOS; i++) {
        combo c;
        random_combo(i, &rng, &c);
        int f = run_combo(&c, &rng, &cov);
        failures += f;
        failed_combos += f != 0;
    }
    printf("sharding reference: %d combinations checked; %d tuple entries (%d of 3 axes), "
           "%d with replicated axes (%d also sharded), %d fully replicated, "
           "%d meshes with a size-3 axis, "
           "%d over all devices with device_ids NULL, %d over a device subset, %d scalars, "
           "%d specs shorter than the rank, other spec equivalent %d / not %d\n",
           cov.combos, cov.tuples, cov.triples, cov.replicated, cov.mixed, cov.fully_repl,
           cov.non_pow2, cov.null_ids, cov.subset_ids, cov.rank0, cov.short_spec, cov.alt_equal,
           cov.alt_differ);
    if (failures)
        fail_msg("%d mismatches in %d of %d combinations (first %d shown above)", failures,
                 failed_combos, NUM_COMBOS, MAX_REPORTS);
    assert_true(cov.combos >= MIN_COMBOS);
    /* The generator must reach every case the acceptance criterion names. */
    assert_true(cov.tuples > 0 && cov.triples > 0 && cov.mixed > 0 && cov.fully_repl > 0);
    assert_true(cov.non_pow2 > 0 && cov.null_ids > 0 && cov.subset_ids > 0 && cov.rank0 > 0);
    assert_true(cov.short_spec > 0 && cov.alt_equal > 0 && cov.alt_differ > 0);
}

/* ---- SEMANTICS.md (c) worked examples: literal values from JAX ------------------------- */

typedef struct table_row {
    const char *spec;
    int64_t dims[2];
    int64_t shard[2];
    int64_t box[8][4]; /* row start, row stop, column start, column stop of devices 0..7 */
    int replica[8];
} table_row;

static const table_row jax_tables[] = {
    /* Worked example 1: array (4, 8). */
    {"'x', 'y'",
     {4, 8},
     {1, 4},
     {{0, 1, 0, 4},
      {0, 1, 4, 8},
      {1, 2, 0, 4},
      {1, 2, 4, 8},
      {2, 3, 0, 4},
      {2, 3, 4, 8},
      {3, 4, 0, 4},
      {3, 4, 4, 8}},
     {0, 0, 0, 0, 0, 0, 0, 0}},
    {"'y', 'x'",
     {4, 8},
     {2, 2},
     {{0, 2, 0, 2},
      {2, 4, 0, 2},
      {0, 2, 2, 4},
      {2, 4, 2, 4},
      {0, 2, 4, 6},
      {2, 4, 4, 6},
      {0, 2, 6, 8},
      {2, 4, 6, 8}},
     {0, 0, 0, 0, 0, 0, 0, 0}},
    {"'x'",
     {4, 8},
     {1, 8},
     {{0, 1, 0, 8},
      {0, 1, 0, 8},
      {1, 2, 0, 8},
      {1, 2, 0, 8},
      {2, 3, 0, 8},
      {2, 3, 0, 8},
      {3, 4, 0, 8},
      {3, 4, 0, 8}},
     {0, 1, 0, 1, 0, 1, 0, 1}},
    {"'y'",
     {4, 8},
     {2, 8},
     {{0, 2, 0, 8},
      {2, 4, 0, 8},
      {0, 2, 0, 8},
      {2, 4, 0, 8},
      {0, 2, 0, 8},
      {2, 4, 0, 8},
      {0, 2, 0, 8},
      {2, 4, 0, 8}},
     {0, 0, 1, 1, 2, 2, 3, 3}},
    {"None, 'y'",
     {4, 8},
     {4, 4},
     {{0, 4, 0, 4},
      {0, 4, 4, 8},
      {0, 4, 0, 4},
      {0, 4, 4, 8},
      {0, 4, 0, 4},
      {0, 4, 4, 8},
      {0, 4, 0, 4},
      {0, 4, 4, 8}},
     {0, 0, 1, 1, 2, 2, 3, 3}},
    {"None, ('x', 'y')",
     {4, 8},
     {4, 1},
     {{0, 4, 0, 1},
      {0, 4, 1, 2},
      {0, 4, 2, 3},
      {0, 4, 3, 4},
      {0, 4, 4, 5},
      {0, 4, 5, 6},
      {0, 4, 6, 7},
      {0, 4, 7, 8}},
     {0, 0, 0, 0, 0, 0, 0, 0}},
    {"None, ('y', 'x')",
     {4, 8},
     {4, 1},
     {{0, 4, 0, 1},
      {0, 4, 4, 5},
      {0, 4, 1, 2},
      {0, 4, 5, 6},
      {0, 4, 2, 3},
      {0, 4, 6, 7},
      {0, 4, 3, 4},
      {0, 4, 7, 8}},
     {0, 0, 0, 0, 0, 0, 0, 0}},
    {"",
     {4, 8},
     {4, 8},
     {{0, 4, 0, 8},
      {0, 4, 0, 8},
      {0, 4, 0, 8},
      {0, 4, 0, 8},
      {0, 4, 0, 8},
      {0, 4, 0, 8},
      {0, 4, 0, 8},
      {0, 4, 0, 8}},
     {0, 1, 2, 3, 4, 5, 6, 7}},
    /* Worked example 2: array (8, 128). */
    {"'x'",
     {8, 128},
     {2, 128},
     {{0, 2, 0, 128},
      {0, 2, 0, 128},
      {2, 4, 0, 128},
      {2, 4, 0, 128},
      {4, 6, 0, 128},
      {4, 6, 0, 128},
      {6, 8, 0, 128},
      {6, 8, 0, 128}},
     {0, 1, 0, 1, 0, 1, 0, 1}},
    {"('x', 'y')",
     {8, 128},
     {1, 128},
     {{0, 1, 0, 128},
      {1, 2, 0, 128},
      {2, 3, 0, 128},
      {3, 4, 0, 128},
      {4, 5, 0, 128},
      {5, 6, 0, 128},
      {6, 7, 0, 128},
      {7, 8, 0, 128}},
     {0, 0, 0, 0, 0, 0, 0, 0}},
    {"('y', 'x')",
     {8, 128},
     {1, 128},
     {{0, 1, 0, 128},
      {4, 5, 0, 128},
      {1, 2, 0, 128},
      {5, 6, 0, 128},
      {2, 3, 0, 128},
      {6, 7, 0, 128},
      {3, 4, 0, 128},
      {7, 8, 0, 128}},
     {0, 0, 0, 0, 0, 0, 0, 0}},
    {"'y', 'x'",
     {8, 128},
     {4, 32},
     {{0, 4, 0, 32},
      {4, 8, 0, 32},
      {0, 4, 32, 64},
      {4, 8, 32, 64},
      {0, 4, 64, 96},
      {4, 8, 64, 96},
      {0, 4, 96, 128},
      {4, 8, 96, 128}},
     {0, 0, 0, 0, 0, 0, 0, 0}},
    {"None, 'y'",
     {8, 128},
     {8, 64},
     {{0, 8, 0, 64},
      {0, 8, 64, 128},
      {0, 8, 0, 64},
      {0, 8, 64, 128},
      {0, 8, 0, 64},
      {0, 8, 64, 128},
      {0, 8, 0, 64},
      {0, 8, 64, 128}},
     {0, 0, 1, 1, 2, 2, 3, 3}},
};

static spmd_mesh *make_example_mesh(void)
{
    static const int shape[2] = {4, 2};
    static const char *const names[2] = {"x", "y"};
    static const int ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_test_mesh_create(2, shape, names, ids, 8, &mesh));
    return mesh;
}

static void test_jax_worked_examples(void **state)
{
    (void)state;
    const combo *c = NULL; /* no random combination: the message names the table row */
    int failures = 0;
    char got_text[128] = "", want_text[128] = "";
    spmd_mesh *mesh = make_example_mesh();
    for (size_t r = 0; r < sizeof jax_tables / sizeof jax_tables[0]; r++) {
        const table_row *row = &jax_tables[r];
        spmd_sharding *sh = NULL;
        spmd_status st = spmd_sharding_create_parse(mesh, row->spec, &sh);
        if (st != SPMD_OK) {
            CHECK(0, "mesh (4,2) ('x','y'): spec \"%s\": create returned %s: %s", row->spec,
                  spmd_status_name(st), spmd_last_error());
            continue;
        }
        int64_t shard[2] = {0, 0};
        st = spmd_sharding_shard_shape(sh, 2, row->dims, shard);
        CHECK(st == SPMD_OK && shard[0] == row->shard[0] && shard[1] == row->shard[1],
              "mesh (4,2) ('x','y'), spec \"%s\", array (%lld, %lld): shard_shape %s (%lld, %lld),"
              " JAX (%lld, %lld)",
              row->spec, (long long)row->dims[0], (long long)row->dims[1], spmd_status_name(st),
              (long long)shard[0], (long long)shard[1], (long long)row->shard[0],
              (long long)row->shard[1]);
        for (int d = 0; d < 8; d++) {
            spmd_box box;
            memset(&box, 0, sizeof box);
            st = spmd_sharding_device_box(sh, 2, row->dims, d, &box);
            const int64_t *w = row->box[d];
            int64_t wstart[2] = {w[0], w[2]}, wstop[2] = {w[1], w[3]};
            int same = st == SPMD_OK && box.ndim == 2 && box.start[0] == w[0] &&
                       box.stop[0] == w[1] && box.start[1] == w[2] && box.stop[1] == w[3];
            if (!same) {
                format_box(got_text, sizeof got_text, box.start, box.stop, 2);
                format_box(want_text, sizeof want_text, wstart, wstop, 2);
            }
            CHECK(same,
                  "mesh (4,2) ('x','y'), device ids 0..7, spec \"%s\", array (%lld, %lld), "
                  "device %d: library %s box %s, JAX %s",
                  row->spec, (long long)row->dims[0], (long long)row->dims[1], d,
                  spmd_status_name(st), got_text, want_text);
            int rid = spmd_sharding_replica_id(sh, d);
            CHECK(rid == row->replica[d],
                  "mesh (4,2) ('x','y'), spec \"%s\", device %d: replica id %d, JAX %d", row->spec,
                  d, rid, row->replica[d]);
        }
        spmd_sharding_destroy(sh);
    }

    /* P(('x','y')) cannot split 4 rows 8 ways: IndivisibleError in JAX. */
    spmd_sharding *bad = NULL;
    assert_ok(spmd_sharding_create_parse(mesh, "('x', 'y')", &bad));
    const int64_t dims[2] = {4, 8};
    int64_t shard[2];
    spmd_box box;
    spmd_status st = spmd_sharding_check_shape(bad, 2, dims);
    CHECK(st == SPMD_ERR_SHAPE,
          "P(('x','y')) on (4, 8): check_shape returned %s, want SPMD_ERR_SHAPE",
          spmd_status_name(st));
    CHECK(st != SPMD_OK && spmd_last_error()[0] != '\0', "check_shape failed without a message");
    st = spmd_sharding_shard_shape(bad, 2, dims, shard);
    CHECK(st == SPMD_ERR_SHAPE,
          "P(('x','y')) on (4, 8): shard_shape returned %s, want SPMD_ERR_SHAPE",
          spmd_status_name(st));
    st = spmd_sharding_device_box(bad, 2, dims, 0, &box);
    CHECK(st == SPMD_ERR_SHAPE,
          "P(('x','y')) on (4, 8): device_box returned %s, want SPMD_ERR_SHAPE",
          spmd_status_name(st));
    spmd_sharding_destroy(bad);
    spmd_mesh_destroy(mesh);
    assert_int_equal(failures, 0);
}

static void test_format(void **state)
{
    (void)state;
    spmd_mesh *mesh = make_example_mesh();
    spmd_sharding *sh = NULL;
    char buf[256];
    assert_ok(spmd_sharding_create_parse(mesh, "'x', None", &sh));
    assert_ok(spmd_sharding_format(sh, buf, sizeof buf));
    assert_string_equal(
        buf,
        "NamedSharding(mesh=Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto)), spec=P('x', None))");
    assert_ok(spmd_mesh_format(mesh, buf, sizeof buf));
    assert_string_equal(buf, "Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto))");

    /* Round trips of the spellings the tables use, including JAX's one-entry comma. */
    static const char *const texts[] = {"'x', None", "('x', 'y')", "None, ('y', 'x')", "",
                                        "P('y',)",   "None",       "(), 'x'"};
    static const char *const reprs[] = {"P('x', None)", "P(('x', 'y'),)", "P(None, ('y', 'x'))",
                                        "P()",          "P('y',)",        "P(None,)",
                                        "P(None, 'x')"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        spmd_spec *a = NULL, *b = NULL;
        assert_ok(spmd_spec_parse(texts[i], &a));
        assert_ok(spmd_spec_format(a, buf, sizeof buf));
        if (strcmp(buf, reprs[i]) != 0) {
            spmd_spec_destroy(a);
            fail_msg("spmd_spec_format(parse(\"%s\")) is \"%s\", want \"%s\"", texts[i], buf,
                     reprs[i]);
        }
        assert_ok(spmd_spec_parse(buf, &b));
        int eq = spmd_spec_is_equivalent(a, b) && spmd_spec_length(a) == spmd_spec_length(b);
        spmd_spec_destroy(a);
        spmd_spec_destroy(b);
        if (!eq)
            fail_msg("\"%s\" formats as \"%s\", which parses to a different spec", texts[i], buf);
    }
    spmd_sharding_destroy(sh);
    spmd_mesh_destroy(mesh);
}

int main(void)
{
    spmd_test_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jax_worked_examples),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_random_combinations),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures);
}
