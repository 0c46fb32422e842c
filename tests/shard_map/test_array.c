/* Global arrays against a host reference, in 1, 2 and 4 processes × 1 to 4 devices: every
 * constructor (device_put, from_callback, from_process_local_data, from_single_device_arrays) on
 * meshes over all devices, over the (process, local) grid and over shuffled device subsets.
 * For every addressable shard the device, replica id, index box and data are compared with
 * values computed here by plain loops from the global index, never read back from the library;
 * fetching to host must succeed exactly when this process's devices cover every block. */
#include "testutil.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEV 64 /* most global devices a run may have */
#define MAX_MESH_AXES 3
#define MAX_TUPLE 3
#define MAX_CASES 40

/* The run's geometry; global device ids are process-major. */
static int nproc, nlocal, me, ndev;

/* ---- reference model ------------------------------------------------------------------- */

typedef spmd_test_mesh ref_mesh;

/* A spec as mesh axis indices, the major axis of each entry first. */
typedef struct ref_spec {
    int len;
    int naxes[SPMD_MAX_RANK];
    int axes[SPMD_MAX_RANK][MAX_TUPLE];
} ref_spec;

typedef struct arr_case {
    const ref_mesh *mesh;
    ref_spec spec;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    spmd_dtype dtype;
    int seed;
    char what[200]; /* description for failure messages */
} arr_case;

/* What the sharding rule of SEMANTICS.md (c) gives for a case. */
typedef struct ref_layout {
    int64_t blocks[SPMD_MAX_RANK];
    int64_t shard_shape[SPMD_MAX_RANK];
    spmd_box box[MAX_DEV]; /* per mesh flat position */
    int64_t key[MAX_DEV];  /* flat index of the block in the grid of blocks */
    int replica[MAX_DEV];
    int num_local;
    int local_flat[MAX_DEV]; /* this process's devices, mesh flat order */
    int fully_addressable;
    int covers; /* this process's devices hold every distinct block */
} ref_layout;

typedef struct mesh_set {
    ref_mesh all;   /* 1-D 'x' over every device in id order */
    ref_mesh grid;  /* (process_count, local_count) named ('p', 'l') */
    ref_mesh sub;   /* every other device in shuffled order, 2-D ('a', 'b') */
    ref_mesh proc0; /* process 0's devices in reverse order, 1-D 'x' */
} mesh_set;

static int owner(int device_id) { return device_id / nlocal; }

static void shuffle(int *v, int n, spmd_test_rng *rng)
{
    for (int i = n - 1; i > 0; i--) {
        int k = spmd_test_rng_below(rng, i + 1);
        int t = v[i];
        v[i] = v[k];
        v[k] = t;
    }
}

/* Same seed on every rank, so every process builds the same meshes. */
static void meshes_create(mesh_set *s)
{
    spmd_test_rng rng = {0x5eedull};
    const char *x[] = {"x"}, *pl[] = {"p", "l"}, *ab[] = {"a", "b"};
    spmd_test_mesh_build(&s->all, NULL, 1, (int[]){ndev}, x, NULL);
    spmd_test_mesh_build(&s->grid, NULL, 2, (int[]){nproc, nlocal}, pl, NULL);

    int ids[MAX_DEV], n = 0;
    for (int d = 0; d < ndev; d += 2)
        ids[n++] = d;
    shuffle(ids, n, &rng);
    int rows = n >= 2 ? 2 : 1;
    spmd_test_mesh_build(&s->sub, NULL, 2, (int[]){rows, n / rows}, ab, ids);

    for (int k = 0; k < nlocal; k++)
        ids[k] = nlocal - 1 - k;
    spmd_test_mesh_build(&s->proc0, NULL, 1, (int[]){nlocal}, x, ids);
}

static void meshes_destroy(mesh_set *s)
{
    spmd_mesh_destroy(s->all.mesh);
    spmd_mesh_destroy(s->grid.mesh);
    spmd_mesh_destroy(s->sub.mesh);
    spmd_mesh_destroy(s->proc0.mesh);
}

/* spec_of(2, "0", "") is P(axis 0, None); "10" is the tuple (axis 1, axis 0). */
static ref_spec spec_of(int len, ...)
{
    ref_spec s;
    memset(&s, 0, sizeof s);
    s.len = len;
    va_list ap;
    va_start(ap, len);
    for (int j = 0; j < len; j++) {
        const char *e = va_arg(ap, const char *);
        for (int k = 0; e[k]; k++)
            s.axes[j][s.naxes[j]++] = e[k] - '0';
    }
    va_end(ap);
    return s;
}

static spmd_sharding *sharding_make(const ref_mesh *m, const ref_spec *s)
{
    spmd_spec *spec = NULL;
    spmd_sharding *sh = NULL;
    assert_ok(spmd_spec_create(&spec));
    for (int j = 0; j < s->len; j++) {
        const char *names[MAX_TUPLE];
        for (int k = 0; k < s->naxes[j]; k++)
            names[k] = m->names[s->axes[j][k]];
        assert_ok(spmd_spec_append(spec, s->naxes[j], names));
    }
    assert_ok(spmd_sharding_create(m->mesh, spec, &sh));
    spmd_spec_destroy(spec);
    return sh;
}

static int64_t num_elems(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int j = 0; j < ndim; j++)
        n *= shape[j];
    return n;
}

static arr_case case_make(const ref_mesh *m, ref_spec s, spmd_dtype dt, int ndim,
                          const int64_t *shape)
{
    arr_case c;
    memset(&c, 0, sizeof c);
    c.mesh = m;
    c.spec = s;
    c.ndim = ndim;
    c.dtype = dt;
    for (int j = 0; j < ndim; j++)
        c.shape[j] = shape[j];
    int n = snprintf(c.what, sizeof c.what, "mesh(");
    for (int k = 0; k < m->ndim; k++)
        n += snprintf(c.what + n, sizeof c.what - (size_t)n, "%s%s=%d", k ? ", " : "", m->names[k],
                      m->shape[k]);
    n += snprintf(c.what + n, sizeof c.what - (size_t)n, ") P(");
    for (int j = 0; j < s.len; j++) {
        n += snprintf(c.what + n, sizeof c.what - (size_t)n, "%s%s", j ? ", " : "",
                      s.naxes[j] == 0  ? "None"
                      : s.naxes[j] > 1 ? "("
                                       : "");
        for (int k = 0; k < s.naxes[j]; k++)
            n += snprintf(c.what + n, sizeof c.what - (size_t)n, "%s'%s'", k ? ", " : "",
                          m->names[s.axes[j][k]]);
        if (s.naxes[j] > 1)
            n += snprintf(c.what + n, sizeof c.what - (size_t)n, ")");
    }
    n += snprintf(c.what + n, sizeof c.what - (size_t)n, ") shape (");
    for (int j = 0; j < ndim; j++)
        n += snprintf(c.what + n, sizeof c.what - (size_t)n, "%s%lld", j ? ", " : "",
                      (long long)shape[j]);
    snprintf(c.what + n, sizeof c.what - (size_t)n, ") %s", spmd_dtype_name(dt));
    return c;
}

static void layout_compute(const arr_case *c, ref_layout *lay)
{
    const ref_mesh *m = c->mesh;
    const ref_spec *s = &c->spec;
    int used[MAX_MESH_AXES] = {0};
    memset(lay, 0, sizeof *lay);
    for (int j = 0; j < c->ndim; j++) {
        lay->blocks[j] = 1;
        for (int k = 0; j < s->len && k < s->naxes[j]; k++) {
            lay->blocks[j] *= m->shape[s->axes[j][k]];
            used[s->axes[j][k]] = 1;
        }
        if (c->shape[j] % lay->blocks[j] != 0)
            fail_msg("bad test case %s: dimension %d does not divide", c->what, j);
        lay->shard_shape[j] = c->shape[j] / lay->blocks[j];
    }
    for (int f = 0; f < m->size; f++) {
        int coord[MAX_MESH_AXES];
        for (int k = m->ndim - 1, rest = f; k >= 0; k--) {
            coord[k] = rest % m->shape[k];
            rest /= m->shape[k];
        }
        spmd_box *b = &lay->box[f];
        b->ndim = c->ndim;
        int64_t key = 0;
        for (int j = 0; j < c->ndim; j++) {
            int64_t blk = 0; /* mixed radix, the first axis of the tuple major */
            for (int k = 0; j < s->len && k < s->naxes[j]; k++)
                blk = blk * m->shape[s->axes[j][k]] + coord[s->axes[j][k]];
            b->start[j] = blk * lay->shard_shape[j];
            b->stop[j] = b->start[j] + lay->shard_shape[j];
            key = key * lay->blocks[j] + blk;
        }
        lay->key[f] = key;
        int rep = 0; /* row-major rank over the axes the spec leaves unused */
        for (int k = 0; k < m->ndim; k++)
            if (!used[k])
                rep = rep * m->shape[k] + coord[k];
        lay->replica[f] = rep;
        if (owner(m->ids[f]) == me)
            lay->local_flat[lay->num_local++] = f;
    }
    lay->fully_addressable = lay->num_local == m->size;
    lay->covers = 1;
    for (int f = 0; f < m->size; f++) {
        int found = 0;
        for (int i = 0; i < lay->num_local; i++)
            found |= lay->key[lay->local_flat[i]] == lay->key[f];
        lay->covers &= found;
    }
}

/* The reference value of the element at global row-major position g. */
static void fill_value(spmd_dtype dt, int64_t g, int seed, void *dst)
{
    switch (dt) {
    case SPMD_DTYPE_F32: {
        float v = (float)g * 0.5f + 0.25f + (float)seed * 1000.0f;
        memcpy(dst, &v, sizeof v);
        break;
    }
    case SPMD_DTYPE_F64: {
        double v = (double)g * 0.125 - 3.0 - (double)seed * 100000.0;
        memcpy(dst, &v, sizeof v);
        break;
    }
    case SPMD_DTYPE_I32: {
        int32_t v = (int32_t)(g * 7 - 500 + seed * 100000);
        memcpy(dst, &v, sizeof v);
        break;
    }
    case SPMD_DTYPE_I64: {
        int64_t v = g * 1000000007LL + ((int64_t)seed << 40) - 1;
        memcpy(dst, &v, sizeof v);
        break;
    }
    case SPMD_DTYPE_U8:
    case SPMD_DTYPE_BOOL: {
        uint8_t v = dt == SPMD_DTYPE_BOOL ? (uint8_t)((g + seed) % 3 == 0)
                                          : (uint8_t)(g * 37 + seed * 11 + 1);
        memcpy(dst, &v, sizeof v);
        break;
    }
    case SPMD_DTYPE_F16: {
        uint16_t v = spmd_f32_to_f16((float)((g + seed) % 1000) - 500.0f);
        memcpy(dst, &v, sizeof v);
        break;
    }
    case SPMD_DTYPE_BF16: {
        uint16_t v = spmd_f32_to_bf16((float)((g + seed) % 256) - 128.0f);
        memcpy(dst, &v, sizeof v);
        break;
    }
    default:
        fail_msg("no reference values for dtype %d", (int)dt);
    }
}

static void *values_make(const arr_case *c)
{
    size_t elem = spmd_dtype_size(c->dtype);
    int64_t n = num_elems(c->ndim, c->shape);
    unsigned char *v = malloc((size_t)n * elem);
    assert_non_null(v);
    for (int64_t g = 0; g < n; g++)
        fill_value(c->dtype, g, c->seed, v + (size_t)g * elem);
    return v;
}

/* Global row-major position of element n (row-major) of a box. */
static int64_t box_elem_global(const spmd_box *b, const int64_t *shape, int64_t n)
{
    int64_t rel[SPMD_MAX_RANK];
    for (int j = b->ndim - 1; j >= 0; j--) {
        int64_t ext = b->stop[j] - b->start[j];
        rel[j] = n % ext;
        n /= ext;
    }
    int64_t g = 0;
    for (int j = 0; j < b->ndim; j++)
        g = g * shape[j] + b->start[j] + rel[j];
    return g;
}

static int64_t box_elems(const spmd_box *b)
{
    int64_t n = 1;
    for (int j = 0; j < b->ndim; j++)
        n *= b->stop[j] - b->start[j];
    return n;
}

static void extract_box(const void *global, const int64_t *shape, size_t elem, const spmd_box *b,
                        void *dst)
{
    int64_t n = box_elems(b);
    for (int64_t i = 0; i < n; i++)
        memcpy((unsigned char *)dst + (size_t)i * elem,
               (const unsigned char *)global + (size_t)box_elem_global(b, shape, i) * elem, elem);
}

static void format_elem(spmd_dtype dt, const void *p, char *buf, size_t size)
{
    switch (dt) {
    case SPMD_DTYPE_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        snprintf(buf, size, "%.9g", (double)v);
        break;
    }
    case SPMD_DTYPE_F64: {
        double v;
        memcpy(&v, p, sizeof v);
        snprintf(buf, size, "%.17g", v);
        break;
    }
    case SPMD_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        snprintf(buf, size, "%d", (int)v);
        break;
    }
    case SPMD_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p, sizeof v);
        snprintf(buf, size, "%lld", (long long)v);
        break;
    }
    case SPMD_DTYPE_F16:
    case SPMD_DTYPE_BF16: {
        uint16_t v;
        memcpy(&v, p, sizeof v);
        snprintf(buf, size, "0x%04x", (unsigned)v);
        break;
    }
    default:
        snprintf(buf, size, "%u", (unsigned)*(const unsigned char *)p);
    }
}

static void compare_elems(const void *want, const void *got, int64_t n, spmd_dtype dt,
                          const char *what, const char *where)
{
    size_t elem = spmd_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *w = (const unsigned char *)want + (size_t)i * elem;
        const unsigned char *g = (const unsigned char *)got + (size_t)i * elem;
        if (memcmp(w, g, elem) != 0) {
            char ws[64], gs[64];
            format_elem(dt, w, ws, sizeof ws);
            format_elem(dt, g, gs, sizeof gs);
            fail_msg("%s: %s: element %lld is %s, expected %s", what, where, (long long)i, gs, ws);
        }
    }
}

static int box_equal(const spmd_box *a, const spmd_box *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int j = 0; j < a->ndim; j++)
        if (a->start[j] != b->start[j] || a->stop[j] != b->stop[j])
            return 0;
    return 1;
}

static void format_box(const spmd_box *b, char *buf, size_t size)
{
    int n = snprintf(buf, size, "[");
    for (int j = 0; j < b->ndim && (size_t)n < size; j++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld:%lld", j ? ", " : "",
                      (long long)b->start[j], (long long)b->stop[j]);
    if ((size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

/* ---- the array checker ------------------------------------------------------------------ */

/* Checks the queries, every addressable shard and the host fetch of `a` against case `c`
 * (built on sharding `sh`) whose global value is `expected`. */
static void check_array(const spmd_array *a, const arr_case *c, const spmd_sharding *sh,
                        const void *expected)
{
    ref_layout lay;
    layout_compute(c, &lay);
    const char *what = c->what;
    if (!a)
        fail_msg("%s: no array", what);

    if (spmd_array_ndim(a) != c->ndim)
        fail_msg("%s: ndim %d, expected %d", what, spmd_array_ndim(a), c->ndim);
    const int64_t *shape = spmd_array_shape(a);
    assert_non_null(shape);
    for (int j = 0; j < c->ndim; j++)
        if (shape[j] != c->shape[j])
            fail_msg("%s: shape[%d] is %lld, expected %lld", what, j, (long long)shape[j],
                     (long long)c->shape[j]);
    if (spmd_array_dtype(a) != c->dtype)
        fail_msg("%s: dtype %s", what, spmd_dtype_name(spmd_array_dtype(a)));
    int64_t total = num_elems(c->ndim, c->shape);
    if (spmd_array_size(a) != total)
        fail_msg("%s: size %lld, expected %lld", what, (long long)spmd_array_size(a),
                 (long long)total);
    const spmd_sharding *got_sh = spmd_array_sharding(a);
    assert_non_null(got_sh);
    if (!spmd_mesh_equal(spmd_sharding_mesh(got_sh), c->mesh->mesh) ||
        !spmd_spec_is_equivalent(spmd_sharding_spec(got_sh), spmd_sharding_spec(sh)))
        fail_msg("%s: the array's sharding is not the one it was built on", what);
    if (spmd_array_is_fully_addressable(a) != lay.fully_addressable)
        fail_msg("%s: is_fully_addressable %d, expected %d", what,
                 spmd_array_is_fully_addressable(a), lay.fully_addressable);
    if (spmd_array_num_shards(a) != lay.num_local)
        fail_msg("%s: %d shards on process %d, expected %d", what, spmd_array_num_shards(a), me,
                 lay.num_local);

    size_t elem = spmd_dtype_size(c->dtype);
    int64_t shard_elems = num_elems(c->ndim, lay.shard_shape);
    size_t shard_bytes = (size_t)shard_elems * elem;
    unsigned char *want = malloc(shard_bytes);
    unsigned char *got = malloc(shard_bytes);
    assert_non_null(want);
    assert_non_null(got);
    for (int i = 0; i < lay.num_local; i++) {
        int f = lay.local_flat[i];
        spmd_shard sd;
        memset(&sd, 0, sizeof sd);
        assert_ok(spmd_array_shard(a, i, &sd));
        char where[160], wb[96], gb[96];
        snprintf(where, sizeof where, "shard %d (device %d)", i, c->mesh->ids[f]);
        if (sd.device_id != c->mesh->ids[f])
            fail_msg("%s: shard %d is on device %d, expected %d", what, i, sd.device_id,
                     c->mesh->ids[f]);
        if (sd.replica_id != lay.replica[f])
            fail_msg("%s: %s has replica id %d, expected %d", what, where, sd.replica_id,
                     lay.replica[f]);
        if (!box_equal(&sd.index, &lay.box[f])) {
            format_box(&sd.index, gb, sizeof gb);
            format_box(&lay.box[f], wb, sizeof wb);
            fail_msg("%s: %s holds %s, expected %s", what, where, gb, wb);
        }
        if (sd.nbytes != shard_bytes)
            fail_msg("%s: %s has %zu bytes, expected %zu", what, where, sd.nbytes, shard_bytes);
        extract_box(expected, c->shape, elem, &lay.box[f], want);
        memset(got, 0xA5, shard_bytes);
        assert_ok(spmd_array_shard_to_host(a, i, got, shard_bytes));
        char tag[200];
        snprintf(tag, sizeof tag, "%s via spmd_array_shard_to_host", where);
        compare_elems(want, got, shard_elems, c->dtype, what, tag);
        if (spmd_runtime_platform() == SPMD_PLATFORM_CPU) { /* CPU devices hold host memory */
            assert_non_null(sd.data);
            snprintf(tag, sizeof tag, "%s via spmd_shard.data", where);
            compare_elems(want, sd.data, shard_elems, c->dtype, what, tag);
        }
    }
    free(want);
    free(got);

    size_t bytes = (size_t)total * elem;
    unsigned char *host = malloc(bytes);
    assert_non_null(host);
    memset(host, 0x5A, bytes);
    if (lay.covers) {
        assert_ok(spmd_array_to_host(a, host, bytes));
        compare_elems(expected, host, total, c->dtype, what, "spmd_array_to_host");
    } else {
        assert_status(spmd_array_to_host(a, host, bytes), SPMD_ERR_NOT_ADDRESSABLE,
                      "spmd_process_allgather", "spmd_array_shard");
        for (size_t b = 0; b < bytes; b++)
            if (host[b] != 0x5A)
                fail_msg("%s: failed spmd_array_to_host wrote byte %zu of dst", what, b);
    }
    free(host);
}

/* ---- the shared case table ---------------------------------------------------------------- */

static void add_case(arr_case *cases, int *n, const ref_mesh *m, ref_spec s, spmd_dtype dt,
                     int ndim, const int64_t *shape)
{
    assert_true(*n < MAX_CASES);
    cases[*n] = case_make(m, s, dt, ndim, shape);
    cases[*n].seed = *n;
    (*n)++;
}

static int cases_build(const mesh_set *ms, arr_case *cases)
{
    int n = 0;
    const int64_t P = nproc, L = nlocal, N = ndev;
    const int64_t sa = ms->sub.shape[0], sb = ms->sub.shape[1];
    add_case(cases, &n, &ms->all, spec_of(1, "0"), SPMD_DTYPE_F32, 2, (int64_t[]){2 * N, 3});
    add_case(cases, &n, &ms->all, spec_of(2, "", "0"), SPMD_DTYPE_I64, 2, (int64_t[]){3, N});
    add_case(cases, &n, &ms->all, spec_of(0), SPMD_DTYPE_F64, 0, NULL); /* a scalar */
    add_case(cases, &n, &ms->grid, spec_of(2, "0", "1"), SPMD_DTYPE_F32, 2,
             (int64_t[]){2 * P, 3 * L});
    add_case(cases, &n, &ms->grid, spec_of(2, "1", "0"), SPMD_DTYPE_F64, 2,
             (int64_t[]){2 * L, 3 * P});
    add_case(cases, &n, &ms->grid, spec_of(1, "01"), SPMD_DTYPE_I32, 2, (int64_t[]){2 * N, 3});
    add_case(cases, &n, &ms->grid, spec_of(2, "", "10"), SPMD_DTYPE_U8, 2, (int64_t[]){2, N});
    add_case(cases, &n, &ms->grid, spec_of(2, "", "1"), SPMD_DTYPE_BF16, 2, (int64_t[]){3, 2 * L});
    add_case(cases, &n, &ms->grid, spec_of(0), SPMD_DTYPE_I64, 2, (int64_t[]){3, 5});
    add_case(cases, &n, &ms->grid, spec_of(1, "0"), SPMD_DTYPE_F32, 3, (int64_t[]){2 * P, 3, 2});
    add_case(cases, &n, &ms->grid, spec_of(1, "1"), SPMD_DTYPE_F16, 2, (int64_t[]){2 * L, 3});
    add_case(cases, &n, &ms->grid, spec_of(3, "", "1", "0"), SPMD_DTYPE_BOOL, 3,
             (int64_t[]){2, 2 * L, P});
    add_case(cases, &n, &ms->sub, spec_of(2, "0", "1"), SPMD_DTYPE_F64, 2,
             (int64_t[]){2 * sa, 3 * sb});
    add_case(cases, &n, &ms->sub, spec_of(1, "10"), SPMD_DTYPE_I32, 1, (int64_t[]){2 * sa * sb});
    add_case(cases, &n, &ms->sub, spec_of(1, "1"), SPMD_DTYPE_U8, 2, (int64_t[]){3 * sb, 2});
    add_case(cases, &n, &ms->sub, spec_of(0), SPMD_DTYPE_F32, 1, (int64_t[]){4});
    add_case(cases, &n, &ms->proc0, spec_of(1, "0"), SPMD_DTYPE_I32, 2, (int64_t[]){2 * L, 3});
    add_case(cases, &n, &ms->proc0, spec_of(0), SPMD_DTYPE_BF16, 2, (int64_t[]){2, 2});
    /* Every dtype on the fully sharded (process, local) layout. */
    static const spmd_dtype dtypes[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_I32,
                                        SPMD_DTYPE_I64, SPMD_DTYPE_U8,  SPMD_DTYPE_BOOL,
                                        SPMD_DTYPE_F16, SPMD_DTYPE_BF16};
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++)
        add_case(cases, &n, &ms->grid, spec_of(2, "0", "1"), dtypes[k], 2,
                 (int64_t[]){4 * P, 2 * L});
    return n;
}

/* ---- 1. device_put ------------------------------------------------------------------------ */

static void test_device_put(void **state)
{
    (void)state;
    mesh_set ms;
    meshes_create(&ms);
    arr_case cases[MAX_CASES];
    int n = cases_build(&ms, cases);
    for (int i = 0; i < n; i++) {
        spmd_sharding *sh = sharding_make(cases[i].mesh, &cases[i].spec);
        void *host = values_make(&cases[i]);
        void *expected = values_make(&cases[i]);
        spmd_array *a = NULL;
        assert_ok(spmd_device_put(host, cases[i].ndim, cases[i].shape, cases[i].dtype, sh, &a));
        memset(host, 0, (size_t)spmd_array_size(a) * spmd_dtype_size(cases[i].dtype));
        check_array(a, &cases[i], sh, expected); /* the shards are copies of host */
        spmd_array_destroy(a);
        free(host);
        free(expected);
        spmd_sharding_destroy(sh);
    }

    /* An indivisible dimension is refused. */
    if (ndev > 1) {
        ref_spec s = spec_of(1, "0");
        spmd_sharding *sh = sharding_make(&ms.all, &s);
        float host[64] = {0};
        spmd_array *a = (spmd_array *)host; /* must be reset to NULL */
        assert_status(spmd_device_put(host, 1, (int64_t[]){ndev + 1}, SPMD_DTYPE_F32, sh, &a),
                      SPMD_ERR_SHAPE, "");
        assert_null(a);
        spmd_sharding_destroy(sh);
    }
    meshes_destroy(&ms);
}

/* ---- 2. from_callback --------------------------------------------------------------------- */

typedef struct cb_ctx {
    const arr_case *c;
    atomic_int calls;
    int fail_at; /* call number that fails; -1: none */
    spmd_status fail_status;
    spmd_box seen[MAX_DEV];
} cb_ctx;

/* May run on several threads at once: records the box and fills dst from the formula. */
static spmd_status fill_box(const spmd_box *index, void *dst, void *user)
{
    cb_ctx *ctx = user;
    int k = atomic_fetch_add(&ctx->calls, 1);
    if (k < MAX_DEV)
        ctx->seen[k] = *index;
    if (k == ctx->fail_at)
        return ctx->fail_status;
    if (index->ndim != ctx->c->ndim)
        return SPMD_OK; /* reported by the box comparison */
    size_t elem = spmd_dtype_size(ctx->c->dtype);
    int64_t n = box_elems(index);
    for (int64_t i = 0; i < n; i++)
        fill_value(ctx->c->dtype, box_elem_global(index, ctx->c->shape, i), ctx->c->seed,
                   (unsigned char *)dst + (size_t)i * elem);
    return SPMD_OK;
}

static void test_from_callback(void **state)
{
    (void)state;
    mesh_set ms;
    meshes_create(&ms);
    arr_case cases[MAX_CASES];
    int n = cases_build(&ms, cases);
    for (int i = 0; i < n; i++) {
        const arr_case *c = &cases[i];
        ref_layout lay;
        layout_compute(c, &lay);
        spmd_sharding *sh = sharding_make(c->mesh, &c->spec);
        void *expected = values_make(c);
        cb_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.c = c;
        ctx.fail_at = -1;
        atomic_init(&ctx.calls, 0);
        spmd_array *a = NULL;
        assert_ok(spmd_array_from_callback(c->ndim, c->shape, c->dtype, sh, fill_box, &ctx, &a));
        int calls = atomic_load(&ctx.calls);
        if (calls != lay.num_local)
            fail_msg("%s: callback called %d times, expected once per addressable device (%d)",
                     c->what, calls, lay.num_local);
        /* The boxes asked for are exactly this process's devices' boxes (replicas repeat). */
        int taken[MAX_DEV] = {0};
        for (int k = 0; k < lay.num_local; k++) {
            const spmd_box *b = &lay.box[lay.local_flat[k]];
            int found = 0;
            for (int q = 0; q < calls && !found; q++)
                if (!taken[q] && box_equal(&ctx.seen[q], b))
                    found = taken[q] = 1;
            if (!found) {
                char bb[96];
                format_box(b, bb, sizeof bb);
                fail_msg("%s: the callback was never asked for device %d's box %s", c->what,
                         c->mesh->ids[lay.local_flat[k]], bb);
            }
        }
        check_array(a, c, sh, expected);
        spmd_array_destroy(a);
        free(expected);
        spmd_sharding_destroy(sh);
    }
    meshes_destroy(&ms);
}

static void test_callback_errors(void **state)
{
    (void)state;
    mesh_set ms;
    meshes_create(&ms);
    arr_case c = case_make(&ms.all, spec_of(1, "0"), SPMD_DTYPE_F32, 2, (int64_t[]){2 * ndev, 3});
    spmd_sharding *sh = sharding_make(c.mesh, &c.spec);
    /* Failing on the first call, then on the last (after earlier shards were filled). */
    int fail_at[2] = {0, nlocal - 1};
    spmd_status codes[2] = {SPMD_ERR_UNSUPPORTED, SPMD_ERR_OUT_OF_MEMORY};
    for (int t = 0; t < 2; t++) {
        cb_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.c = &c;
        ctx.fail_at = fail_at[t];
        ctx.fail_status = codes[t];
        atomic_init(&ctx.calls, 0);
        spmd_array *a = (spmd_array *)&ctx; /* must be reset to NULL */
        assert_status(spmd_array_from_callback(c.ndim, c.shape, c.dtype, sh, fill_box, &ctx, &a),
                      codes[t], "callback");
        assert_null(a);
        int calls = atomic_load(&ctx.calls);
        assert_true(calls > fail_at[t] && calls <= nlocal);
    }
    spmd_array *a = NULL;
    assert_status(spmd_array_from_callback(c.ndim, c.shape, c.dtype, sh, NULL, NULL, &a),
                  SPMD_ERR_INVALID_ARGUMENT, "");
    assert_null(a);
    spmd_sharding_destroy(sh);
    meshes_destroy(&ms);
}

/* ---- 3. from_process_local_data ---------------------------------------------------------- */

/* Builds from `local` and checks against `expected`; global_shape may be NULL (inferred). */
static void local_data_check(const arr_case *c, const spmd_sharding *sh, const void *local,
                             int ndim, const int64_t *local_shape, const int64_t *global_shape,
                             const void *expected)
{
    spmd_array *a = NULL;
    assert_ok(spmd_array_from_process_local_data(sh, local, ndim, local_shape, global_shape,
                                                 c->dtype, &a));
    check_array(a, c, sh, expected);
    spmd_array_destroy(a);
}

/* SEMANTICS.md (i): P('x') over all devices, local_p = arange(2L)·p → the concatenation. */
static void test_local_data_1d(void **state)
{
    (void)state;
    mesh_set ms;
    meshes_create(&ms);
    arr_case c = case_make(&ms.all, spec_of(1, "0"), SPMD_DTYPE_I32, 1, (int64_t[]){2 * ndev});
    spmd_sharding *sh = sharding_make(c.mesh, &c.spec);
    int64_t lshape[1] = {2 * nlocal};
    int32_t *local = malloc((size_t)lshape[0] * sizeof *local);
    int32_t *expected = malloc((size_t)c.shape[0] * sizeof *expected);
    assert_non_null(local);
    assert_non_null(expected);
    for (int k = 0; k < lshape[0]; k++)
        local[k] = k * me;
    for (int p = 0; p < nproc; p++) /* every process's local data, in process order */
        for (int k = 0; k < 2 * nlocal; k++)
            expected[p * 2 * nlocal + k] = k * p;
    if (nproc == 4 && nlocal == 2) { /* the worked example, verbatim */
        static const int32_t jax[16] = {0, 0, 0, 0, 0, 1, 2, 3, 0, 2, 4, 6, 0, 3, 6, 9};
        assert_memory_equal(expected, jax, sizeof jax);
    }
    spmd_array *a = NULL;
    assert_ok(spmd_array_from_process_local_data(sh, local, 1, lshape, NULL, SPMD_DTYPE_I32, &a));
    check_array(a, &c, sh, expected);
    if (nproc == 4 && nlocal == 2 && me == 1) { /* device 2 holds [0,1], device 3 [2,3] */
        int32_t got[2];
        spmd_shard sd;
        assert_ok(spmd_array_shard(a, 0, &sd));
        assert_int_equal(sd.device_id, 2);
        assert_ok(spmd_array_shard_to_host(a, 0, got, sizeof got));
        assert_int_equal(got[0], 0);
        assert_int_equal(got[1], 1);
        assert_ok(spmd_array_shard(a, 1, &sd));
        assert_int_equal(sd.device_id, 3);
        assert_ok(spmd_array_shard_to_host(a, 1, got, sizeof got));
        assert_int_equal(got[0], 2);
        assert_int_equal(got[1], 3);
    }
    spmd_array_destroy(a);
    /* Values that differ between every process (k·p is all zero in process 0). */
    for (int k = 0; k < lshape[0]; k++)
        local[k] = 1000 * (me + 1) + k;
    for (int p = 0; p < nproc; p++)
        for (int k = 0; k < 2 * nlocal; k++)
            expected[p * 2 * nlocal + k] = 1000 * (p + 1) + k;
    local_data_check(&c, sh, local, 1, lshape, NULL, expected);
    local_data_check(&c, sh, local, 1, lshape, c.shape, expected);
    free(local);
    free(expected);
    spmd_sharding_destroy(sh);
    meshes_destroy(&ms);
}

/* (process, local) mesh, P('p', 'l'), local (2, L) = arange(2L) + 2Lp → arange(2PL). */
static void test_local_data_grid(void **state)
{
    (void)state;
    mesh_set ms;
    meshes_create(&ms);
    arr_case c = case_make(&ms.grid, spec_of(2, "0", "1"), SPMD_DTYPE_I64, 2,
                           (int64_t[]){2 * nproc, nlocal});
    spmd_sharding *sh = sharding_make(c.mesh, &c.spec);
    int64_t lshape[2] = {2, nlocal};
    int64_t *local = malloc((size_t)(2 * nlocal) * sizeof *local);
    int64_t *expected = malloc((size_t)(2 * ndev) * sizeof *expected);
    assert_non_null(local);
    assert_non_null(expected);
    for (int k = 0; k < 2 * nlocal; k++)
        local[k] = k + 2 * nlocal * me;
    for (int p = 0; p < nproc; p++) /* process p's rows 2p, 2p+1 */
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < nlocal; k++)
                expected[(2 * p + r) * nlocal + k] = 2 * nlocal * p + r * nlocal + k;
    local_data_check(&c, sh, local, 2, lshape, NULL, expected);
    free(local);
    free(expected);
    spmd_sharding_destroy(sh);

    /* P(): every process passes the whole (identical) array, global shape = local shape. */
    arr_case r = case_make(&ms.grid, spec_of(0), SPMD_DTYPE_F32, 2, (int64_t[]){3, 4});
    r.seed = 7;
    sh = sharding_make(r.mesh, &r.spec);
    void *rl = values_make(&r), *re = values_make(&r);
    local_data_check(&r, sh, rl, 2, r.shape, NULL, re);
    spmd_sharding_destroy(sh);
    arr_case r1 = case_make(&ms.all, spec_of(0), SPMD_DTYPE_F32, 2, r.shape);
    r1.seed = r.seed;
    sh = sharding_make(r1.mesh, &r1.spec);
    local_data_check(&r1, sh, rl, 2, r1.shape, NULL, re);
    spmd_sharding_destroy(sh);
    free(rl);
    free(re);
    meshes_destroy(&ms);
}

/* P(None, 'p', 'l') on (3, 2P, 2L): dimension 0 is always full, dimension 1 either packed (this
 * process's rows only) or full (the whole extent, with global_shape given). */
static void test_local_data_explicit_shape(void **state)
{
    (void)state;
    mesh_set ms;
    meshes_create(&ms);
    arr_case c = case_make(&ms.grid, spec_of(3, "", "0", "1"), SPMD_DTYPE_F64, 3,
                           (int64_t[]){3, 2 * nproc, 2 * nlocal});
    c.seed = 3;
    spmd_sharding *sh = sharding_make(c.mesh, &c.spec);
    double *expected = values_make(&c);
    int64_t packed_shape[3] = {3, 2, 2 * nlocal};
    double *packed = malloc((size_t)(3 * 2 * 2 * nlocal) * sizeof *packed);
    assert_non_null(packed);
    for (int i = 0; i < 3; i++)
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 2 * nlocal; k++) {
                int64_t g = ((int64_t)i * 2 * nproc + 2 * me + r) * 2 * nlocal + k;
                fill_value(c.dtype, g, c.seed, &packed[(i * 2 + r) * 2 * nlocal + k]);
            }
    local_data_check(&c, sh, packed, 3, packed_shape, c.shape, expected);
    local_data_check(&c, sh, packed, 3, packed_shape, NULL, expected);
    /* The whole global array as local data: only the explicit shape says it is full. */
    local_data_check(&c, sh, expected, 3, c.shape, c.shape, expected);
    free(packed);
    free(expected);
    spmd_sharding_destroy(sh);
    meshes_destroy(&ms);
}

static void test_local_data_errors(void **state)
{
    (void)state;
    mesh_set ms;
    meshes_create(&ms);
    ref_spec s = spec_of(1, "0");
    spmd_sharding *sh = sharding_make(&ms.all, &s);
    /* Big enough for any local shape below. */
    float *local = calloc((size_t)(2 * ndev + 2) * 4, sizeof *local);
    assert_non_null(local);
    int64_t global[2] = {2 * ndev, 3};
    spmd_array *a = (spmd_array *)local; /* must be reset to NULL */
    /* 2L+1 rows: neither the global 2N nor this process's L blocks of 2. */
    assert_status(spmd_array_from_process_local_data(sh, local, 2, (int64_t[]){2 * nlocal + 1, 3},
                                                     global, SPMD_DTYPE_F32, &a),
                  SPMD_ERR_SHAPE, "dimension 0");
    assert_null(a);
    /* The unsharded dimension must be the global extent. */
    a = (spmd_array *)local;
    assert_status(spmd_array_from_process_local_data(sh, local, 2, (int64_t[]){2 * nlocal, 4},
                                                     global, SPMD_DTYPE_F32, &a),
                  SPMD_ERR_SHAPE, "dimension 1");
    assert_null(a);
    if (nlocal >= 2) { /* 2L+1 rows do not split into L blocks */
        a = (spmd_array *)local;
        assert_status(spmd_array_from_process_local_data(
                          sh, local, 2, (int64_t[]){2 * nlocal + 1, 3}, NULL, SPMD_DTYPE_F32, &a),
                      SPMD_ERR_SHAPE, "dimension 0");
        assert_null(a);
    }
    if (ndev >= 2) { /* a global shape the mesh cannot split */
        a = (spmd_array *)local;
        assert_status(spmd_array_from_process_local_data(sh, local, 2, (int64_t[]){2 * ndev + 1, 3},
                                                         (int64_t[]){2 * ndev + 1, 3},
                                                         SPMD_DTYPE_F32, &a),
                      SPMD_ERR_SHAPE, "");
        assert_null(a);
    }
    free(local);
    spmd_sharding_destroy(sh);
    meshes_destroy(&ms);
}

/* ---- 4. from_single_device_arrays -------------------------------------------------------- */

/* One single-device array per addressable device (mesh order) holding that device's block. */
static spmd_array **inputs_make(const arr_case *c, const ref_layout *lay, const void *expected)
{
    size_t elem = spmd_dtype_size(c->dtype);
    spmd_array **in = calloc((size_t)(lay->num_local + 1), sizeof *in);
    void *block = malloc((size_t)num_elems(c->ndim, lay->shard_shape) * elem);
    assert_non_null(in);
    assert_non_null(block);
    for (int k = 0; k < lay->num_local; k++) {
        int f = lay->local_flat[k];
        extract_box(expected, c->shape, elem, &lay->box[f], block);
        assert_ok(spmd_array_create_on_device(c->mesh->ids[f], block, c->ndim, lay->shard_shape,
                                              c->dtype, &in[k]));
        spmd_shard sd;
        assert_int_equal(spmd_array_num_shards(in[k]), 1);
        assert_int_equal(spmd_array_is_fully_addressable(in[k]), 1);
        assert_ok(spmd_array_shard(in[k], 0, &sd));
        assert_int_equal(sd.device_id, c->mesh->ids[f]);
    }
    free(block);
    return in;
}

static void inputs_destroy(spmd_array **in, int n)
{
    for (int k = 0; k < n; k++)
        spmd_array_destroy(in[k]);
    free(in);
}

/* 1 when every process owns a device of the mesh. */
static int mesh_spans_all_processes(const ref_mesh *m)
{
    for (int p = 0; p < nproc; p++) {
        int found = 0;
        for (int f = 0; f < m->size; f++)
            found |= owner(m->ids[f]) == p;
        if (!found)
            return 0;
    }
    return 1;
}

/* Meshes that leave some process without devices are run separately (want_partial): there
 * those processes pass no input array at all, so nothing tells them the dtype. */
static void single_device_cases(int want_partial)
{
    mesh_set ms;
    meshes_create(&ms);
    arr_case cases[MAX_CASES];
    int n = cases_build(&ms, cases);
    spmd_test_rng rng = {42};
    for (int i = 0; i < n; i++) {
        const arr_case *c = &cases[i];
        if (mesh_spans_all_processes(c->mesh) == want_partial)
            continue; /* same decision on every rank */
        ref_layout lay;
        layout_compute(c, &lay);
        spmd_sharding *sh = sharding_make(c->mesh, &c->spec);
        void *expected = values_make(c);
        spmd_array **in = inputs_make(c, &lay, expected);
        int order[MAX_DEV];
        spmd_array *shuffled[MAX_DEV + 1];
        for (int k = 0; k < lay.num_local; k++)
            order[k] = k;
        shuffle(order, lay.num_local, &rng);
        for (int k = 0; k < lay.num_local; k++)
            shuffled[k] = in[order[k]];
        spmd_array *a = NULL;
        assert_ok(spmd_array_from_single_device_arrays(c->ndim, c->shape, c->dtype, sh,
                                                       lay.num_local, shuffled, &a));
        check_array(a, c, sh, expected);
        /* Zero-copy: each shard is the input's buffer for the same device. */
        for (int s = 0; s < spmd_array_num_shards(a); s++) {
            spmd_shard got, src;
            assert_ok(spmd_array_shard(a, s, &got));
            assert_ok(spmd_array_shard(in[s], 0, &src)); /* in[] is in mesh order */
            assert_int_equal(got.device_id, src.device_id);
            if (got.data != src.data)
                fail_msg("%s: shard %d (device %d) was copied, not shared", c->what, s,
                         got.device_id);
        }
        inputs_destroy(in, lay.num_local);
        check_array(a, c, sh, expected); /* the buffers outlive the inputs */
        spmd_array_destroy(a);
        free(expected);
        spmd_sharding_destroy(sh);
    }
    meshes_destroy(&ms);
}

static void test_from_single_device_arrays(void **state)
{
    (void)state;
    single_device_cases(0);
}

static void test_from_single_device_arrays_partial(void **state)
{
    (void)state;
    single_device_cases(1);
}

static void test_single_device_errors(void **state)
{
    (void)state;
    mesh_set ms;
    meshes_create(&ms);
    arr_case c = case_make(&ms.all, spec_of(1, "0"), SPMD_DTYPE_F32, 2, (int64_t[]){2 * ndev, 3});
    ref_layout lay;
    layout_compute(&c, &lay);
    spmd_sharding *sh = sharding_make(c.mesh, &c.spec);
    float *expected = values_make(&c);
    spmd_array **in = inputs_make(&c, &lay, expected);
    spmd_array *arr[MAX_DEV + 1];
    const int L = lay.num_local;
    spmd_array *a = NULL;
    float zeros[64] = {0};

    /* Wrong counts. */
    assert_status(spmd_array_from_single_device_arrays(2, c.shape, c.dtype, sh, L - 1, in, &a),
                  SPMD_ERR_INVALID_ARGUMENT, "per-device arrays");
    assert_null(a);
    for (int k = 0; k < L; k++)
        arr[k] = in[k];
    arr[L] = in[0];
    assert_status(spmd_array_from_single_device_arrays(2, c.shape, c.dtype, sh, L + 1, arr, &a),
                  SPMD_ERR_INVALID_ARGUMENT, "per-device arrays");
    assert_null(a);

    /* The same device twice. */
    if (L >= 2) {
        for (int k = 0; k < L; k++)
            arr[k] = in[k];
        arr[L - 1] = in[0];
        assert_status(spmd_array_from_single_device_arrays(2, c.shape, c.dtype, sh, L, arr, &a),
                      SPMD_ERR_INVALID_ARGUMENT, "distinct devices");
        assert_null(a);
    }

    /* A shard of the wrong shape, then of the wrong rank. */
    const int64_t bad_shapes[2][2] = {{3, 3}, {6, 1}};
    const int bad_ranks[2] = {2, 1};
    for (int t = 0; t < 2; t++) {
        spmd_array *bad = NULL;
        assert_ok(spmd_array_create_on_device(c.mesh->ids[lay.local_flat[0]], zeros, bad_ranks[t],
                                              bad_shapes[t], SPMD_DTYPE_F32, &bad));
        for (int k = 0; k < L; k++)
            arr[k] = in[k];
        arr[0] = bad;
        assert_status(spmd_array_from_single_device_arrays(2, c.shape, c.dtype, sh, L, arr, &a),
                      SPMD_ERR_SHAPE, "doesn't match");
        assert_null(a);
        spmd_array_destroy(bad);
    }

    /* Mismatched dtypes. */
    if (L >= 2) {
        spmd_array *bad = NULL;
        assert_ok(spmd_array_create_on_device(c.mesh->ids[lay.local_flat[L - 1]], zeros, 2,
                                              lay.shard_shape, SPMD_DTYPE_I32, &bad));
        for (int k = 0; k < L; k++)
            arr[k] = in[k];
        arr[L - 1] = bad;
        assert_status(spmd_array_from_single_device_arrays(2, c.shape, c.dtype, sh, L, arr, &a),
                      SPMD_ERR_INVALID_ARGUMENT, "matching dtypes");
        assert_null(a);
        spmd_array_destroy(bad);
    }

    /* An input with several shards: a whole array over the mesh. */
    if (ndev >= 2) {
        spmd_array *multi = NULL;
        assert_ok(spmd_device_put(expected, 2, c.shape, SPMD_DTYPE_F32, sh, &multi));
        for (int k = 0; k < L; k++)
            arr[k] = in[k];
        arr[0] = multi;
        assert_status(spmd_array_from_single_device_arrays(2, c.shape, c.dtype, sh, L, arr, &a),
                      SPMD_ERR_INVALID_ARGUMENT, "one shard each");
        assert_null(a);
        spmd_array_destroy(multi);
    }

    /* Another process's device cannot hold a single-device array made here. */
    if (nproc >= 2) {
        spmd_array *bad = (spmd_array *)zeros;
        int other = ((me + 1) % nproc) * nlocal;
        assert_status(
            spmd_array_create_on_device(other, zeros, 2, lay.shard_shape, SPMD_DTYPE_F32, &bad),
            SPMD_ERR_NOT_ADDRESSABLE, "");
        assert_null(bad);
    }

    /* The failed attempts left the inputs intact. */
    assert_ok(spmd_array_from_single_device_arrays(2, c.shape, c.dtype, sh, L, in, &a));
    check_array(a, &c, sh, expected);
    spmd_array_destroy(a);
    inputs_destroy(in, L);
    free(expected);
    spmd_sharding_destroy(sh);
    meshes_destroy(&ms);
}

/* ---- 5. to_host ---------------------------------------------------------------------------- */

static void test_to_host(void **state)
{
    (void)state;
    mesh_set ms;
    meshes_create(&ms);
    struct {
        arr_case c;
        int covers; /* expected: this process can fetch the whole array */
    } t[6];
    t[0].c = case_make(&ms.all, spec_of(1, "0"), SPMD_DTYPE_F32, 2, (int64_t[]){2 * ndev, 3});
    t[0].covers = nproc == 1;
    t[1].c = case_make(&ms.grid, spec_of(0), SPMD_DTYPE_I32, 2, (int64_t[]){3, 4});
    t[1].covers = 1;
    t[2].c =
        case_make(&ms.grid, spec_of(2, "", "1"), SPMD_DTYPE_F64, 2, (int64_t[]){3, 2 * nlocal});
    t[2].covers = 1;
    t[3].c = case_make(&ms.grid, spec_of(1, "1"), SPMD_DTYPE_I64, 1, (int64_t[]){4 * nlocal});
    t[3].covers = 1;
    t[4].c = case_make(&ms.grid, spec_of(2, "0", "1"), SPMD_DTYPE_U8, 2,
                       (int64_t[]){2 * nproc, 2 * nlocal});
    t[4].covers = nproc == 1;
    t[5].c = case_make(&ms.proc0, spec_of(1, "0"), SPMD_DTYPE_BF16, 1, (int64_t[]){2 * nlocal});
    t[5].covers = me == 0;
    for (int i = 0; i < 6; i++) {
        ref_layout lay;
        layout_compute(&t[i].c, &lay);
        if (lay.covers != t[i].covers) /* the reference model itself is wrong */
            fail_msg("%s: reference coverage %d, expected %d", t[i].c.what, lay.covers,
                     t[i].covers);
        spmd_sharding *sh = sharding_make(t[i].c.mesh, &t[i].c.spec);
        void *expected = values_make(&t[i].c);
        spmd_array *a = NULL;
        assert_ok(spmd_device_put(expected, t[i].c.ndim, t[i].c.shape, t[i].c.dtype, sh, &a));
        check_array(a, &t[i].c, sh, expected); /* fetches or expects NOT_ADDRESSABLE */

        size_t bytes = (size_t)spmd_array_size(a) * spmd_dtype_size(t[i].c.dtype);
        unsigned char *dst = malloc(bytes);
        assert_non_null(dst);
        assert_status(spmd_array_to_host(a, dst, bytes - 1), SPMD_ERR_INVALID_ARGUMENT, "dst");
        assert_status(spmd_array_to_host(a, NULL, bytes), SPMD_ERR_INVALID_ARGUMENT, "");
        if (spmd_array_num_shards(a) > 0) {
            assert_status(spmd_array_shard_to_host(a, 0, dst, 1), SPMD_ERR_INVALID_ARGUMENT, "dst");
        }
        spmd_shard sd;
        assert_status(spmd_array_shard(a, spmd_array_num_shards(a), &sd), SPMD_ERR_INVALID_ARGUMENT,
                      "out of range");
        assert_status(spmd_array_shard(a, -1, &sd), SPMD_ERR_INVALID_ARGUMENT, "out of range");
        free(dst);
        spmd_array_destroy(a);
        free(expected);
        spmd_sharding_destroy(sh);
    }
    meshes_destroy(&ms);
}

/* ---- 6. queries ---------------------------------------------------------------------------- */

static void test_queries(void **state)
{
    (void)state;
    assert_int_equal(spmd_array_ndim(NULL), -1);
    assert_null(spmd_array_shape(NULL));
    assert_int_equal(spmd_array_dtype(NULL), SPMD_DTYPE_COUNT);
    assert_int_equal(spmd_array_size(NULL), 0);
    assert_null(spmd_array_sharding(NULL));
    assert_int_equal(spmd_array_is_fully_addressable(NULL), 0);
    assert_int_equal(spmd_array_num_shards(NULL), 0);
    spmd_array_destroy(NULL);

    mesh_set ms;
    meshes_create(&ms);
    /* Fully replicated but spanning every process: addressable only in one process. */
    arr_case c = case_make(&ms.grid, spec_of(0), SPMD_DTYPE_U8, 3, (int64_t[]){2, 3, 4});
    spmd_sharding *sh = sharding_make(c.mesh, &c.spec);
    void *v = values_make(&c);
    spmd_array *a = NULL;
    assert_ok(spmd_device_put(v, c.ndim, c.shape, c.dtype, sh, &a));
    assert_int_equal(spmd_array_ndim(a), 3);
    assert_int_equal(spmd_array_size(a), 24);
    assert_int_equal(spmd_array_dtype(a), SPMD_DTYPE_U8);
    assert_int_equal(spmd_array_is_fully_addressable(a), nproc == 1);
    assert_int_equal(spmd_array_num_shards(a), nlocal);
    assert_true(spmd_sharding_is_equivalent(spmd_array_sharding(a), sh, 3));
    check_array(a, &c, sh, v);
    spmd_array_destroy(a);
    spmd_sharding_destroy(sh);

    /* Process 0's devices only: other processes hold nothing. */
    arr_case p0 = case_make(&ms.proc0, spec_of(1, "0"), SPMD_DTYPE_U8, 1, (int64_t[]){nlocal});
    sh = sharding_make(p0.mesh, &p0.spec);
    assert_ok(spmd_device_put(v, p0.ndim, p0.shape, p0.dtype, sh, &a));
    assert_int_equal(spmd_array_is_fully_addressable(a), me == 0);
    assert_int_equal(spmd_array_num_shards(a), me == 0 ? nlocal : 0);
    spmd_array_destroy(a);
    spmd_sharding_destroy(sh);
    free(v);
    meshes_destroy(&ms);
}

int main(void)
{
    spmd_test_init();
    nproc = spmd_process_count();
    nlocal = spmd_local_device_count();
    me = spmd_process_index();
    ndev = spmd_device_count();
    if (ndev > MAX_DEV || ndev != nproc * nlocal) {
        fprintf(stderr, "test_array: needs at most %d devices, %d per process\n", MAX_DEV, nlocal);
        return spmd_test_finish(1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_put),
        cmocka_unit_test(test_from_callback),
        cmocka_unit_test(test_callback_errors),
        cmocka_unit_test(test_local_data_1d),
        cmocka_unit_test(test_local_data_grid),
        cmocka_unit_test(test_local_data_explicit_shape),
        cmocka_unit_test(test_local_data_errors),
        cmocka_unit_test(test_from_single_device_arrays),
        cmocka_unit_test(test_from_single_device_arrays_partial),
        cmocka_unit_test(test_single_device_errors),
        cmocka_unit_test(test_to_host),
        cmocka_unit_test(test_queries),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures);
}
