/* spmd_reshard, spmd_reshard_batch and spmd_array_copy (include/spmd/reshard.h) in 1, 2 and 4
 * processes x 1, 2 and 4 CPU devices: layout changes on one mesh, between a 1-D and a 2-D mesh
 * (one of them over a transposed device order), between disjoint halves of the devices (the
 * pipeline hand-off), between a mesh over every process and one over a subset of them, for
 * scalars and rank-1/2/3 arrays of every dtype; identical layouts (no traffic, shared buffers),
 * batches, donation, copies, argument errors, one source sharding reused for many reshards,
 * random pairs of layouts (shuffled 2-D and 3-D meshes included) and processes that own no
 * device of either mesh (which may call, or not).
 *
 * Everything expected is computed here from the sharding rule of SEMANTICS.md (c) and the global
 * index, never read back from the library: every element of every addressable shard, each
 * shard's index box (also against spmd_sharding_device_box) and the byte counts of
 * spmd_reshard_stats. For the counts, the minimum that process q must receive is, for each
 * distinct destination block its devices hold (replicas once), the elements of it that none of
 * q's source shards hold; the bytes sent over all processes must add up to the same total, and
 * when no element of the source is held by two processes, each process sends exactly what the
 * others need from it, in one message per receiving process.
 *
 * Checks never jump out of a test while a collective may follow: every process must keep issuing
 * the same calls in the same order, so a failed check is recorded and the test fails at its end
 * (on every process, so that they stay in step). */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd/config.h>
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

#define MAX_DEV 64  /* most global devices a run may have */
#define MAX_PROC 64 /* most processes (holder sets are 64-bit masks) */
#define MAX_AXES 3
#define MAX_TUPLE 3
#define MAX_BATCH 4

/* The run's geometry; global device ids are process-major. */
static int nproc, nlocal, me, ndev;

/* ---- non-fatal checks ------------------------------------------------------------------ */

static int nfail;

static void check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[process %d] %s:%d: check failed: %s: %s\n", me, file, line, cond, msg);
    fflush(stderr);
    nfail++;
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            check_failed(__FILE__, __LINE__, #cond, __VA_ARGS__);                                  \
    } while (0)

/* Status and message fragments, like assert_status, but recorded instead of jumping. A fragment
 * "a|b" accepts a message that contains a or b. */
static int msg_has(const char *msg, const char *frag)
{
    char alt[128];
    snprintf(alt, sizeof alt, "%s", frag);
    for (char *p = alt, *bar;; p = bar + 1) {
        bar = strchr(p, '|');
        if (bar)
            *bar = '\0';
        if (strstr(msg, p))
            return 1;
        if (!bar)
            return 0;
    }
}

static int expect_status_impl(spmd_status got, spmd_status want, const char *expr, const char *file,
                              int line, ...)
{
    const char *msg = spmd_last_error();
    int ok = 1;
    if (got != want) {
        check_failed(file, line, expr, "returned %s, expected %s (message: %s)",
                     spmd_status_name(got), spmd_status_name(want), msg);
        return 0;
    }
    if (want == SPMD_OK)
        return 1;
    if (msg[0] == '\0') {
        check_failed(file, line, expr, "failed with %s but left no message", spmd_status_name(got));
        return 0;
    }
    va_list ap;
    va_start(ap, line);
    for (const char *frag = va_arg(ap, const char *); frag; frag = va_arg(ap, const char *))
        if (!msg_has(msg, frag)) {
            check_failed(file, line, expr, "message lacks \"%s\": %s", frag, msg);
            ok = 0;
        }
    va_end(ap);
    return ok;
}

#define EXPECT_STATUS(expr, want, ...)                                                             \
    expect_status_impl((expr), (want), #expr, __FILE__, __LINE__, __VA_ARGS__, (char *)NULL)
#define EXPECT_OK(expr) EXPECT_STATUS(expr, SPMD_OK, "")

/* ---- collectives of the test itself (MPI_Allreduce on libspmd's communicator) ---------- */

static uint64_t sum_u64(uint64_t v)
{
#ifdef SPMD_HAVE_MPI
    if (nproc > 1) {
        uint64_t s = 0;
        MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, spmd_mpi_comm());
        return s;
    }
#endif
    return v;
}

static int max_int(int v)
{
#ifdef SPMD_HAVE_MPI
    if (nproc > 1) {
        int m = v;
        MPI_Allreduce(&v, &m, 1, MPI_INT, MPI_MAX, spmd_mpi_comm());
        return m;
    }
#endif
    return v;
}

/* Fails the current cmocka test on every process if a check failed on any since `before`. */
static void end_test(int before)
{
    int mine = nfail - before;
    int any = max_int(mine);
    if (mine)
        fail_msg("%d check(s) failed on process %d (see above)", mine, me);
    if (any)
        fail_msg("check(s) failed on another process (see above)");
}

static char sentinel_byte;
#define SENTINEL ((spmd_array *)(void *)&sentinel_byte)

/* ---- reference model: meshes, specs, layouts ------------------------------------------- */

typedef spmd_test_mesh rmesh;

static int owner(int device_id) { return device_id / nlocal; }

static void rmesh_coords(const rmesh *m, int flat, int *coords)
{
    for (int k = m->ndim - 1; k >= 0; k--) {
        coords[k] = flat % m->shape[k];
        flat /= m->shape[k];
    }
}

static int rmesh_flat_of(const rmesh *m, int device_id)
{
    for (int f = 0; f < m->size; f++)
        if (m->ids[f] == device_id)
            return f;
    return -1;
}

/* Position of flat position f among this process's devices of the mesh (its shard index). */
static int rmesh_local_index(const rmesh *m, int f)
{
    for (int i = 0; i < m->num_local; i++)
        if (m->local_flat[i] == f)
            return i;
    return -1;
}

static int rmesh_has_process(const rmesh *m, int p)
{
    for (int f = 0; f < m->size; f++)
        if (owner(m->ids[f]) == p)
            return 1;
    return 0;
}

/* A spec as mesh axis indices, the major axis of each entry first. */
typedef struct rspec {
    int len;
    int naxes[SPMD_MAX_RANK];
    int axes[SPMD_MAX_RANK][MAX_TUPLE];
} rspec;

/* rs(2, "0", "") is P(axis 0, None); "10" is the tuple (axis 1, axis 0). */
static rspec rs(int len, ...)
{
    rspec s;
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

/* The Python spelling without the P(...) wrapper: "'a', None", "('a', 'b')". */
static void spec_text(const rmesh *m, const rspec *s, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int j = 0; j < s->len && n < size; j++) {
        n += (size_t)snprintf(buf + n, size - n, "%s", j ? ", " : "");
        if (s->naxes[j] == 0)
            n += (size_t)snprintf(buf + n, size - n, "None");
        if (s->naxes[j] > 1)
            n += (size_t)snprintf(buf + n, size - n, "(");
        for (int k = 0; k < s->naxes[j]; k++)
            n += (size_t)snprintf(buf + n, size - n, "%s'%s'", k ? ", " : "",
                                  m->names[s->axes[j][k]]);
        if (s->naxes[j] > 1)
            n += (size_t)snprintf(buf + n, size - n, ")");
    }
}

static spmd_sharding *sharding_make(const rmesh *m, const rspec *s)
{
    char text[256];
    spec_text(m, s, text, sizeof text);
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(m->mesh, text, &sh));
    return sh;
}

static int64_t num_elems(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int j = 0; j < ndim; j++)
        n *= shape[j];
    return n;
}

/* Bytes per element, written out here rather than asked of the library. */
static size_t esize(spmd_dtype t)
{
    switch (t) {
    case SPMD_DTYPE_F64:
    case SPMD_DTYPE_I64:
        return 8;
    case SPMD_DTYPE_F32:
    case SPMD_DTYPE_I32:
        return 4;
    case SPMD_DTYPE_F16:
    case SPMD_DTYPE_BF16:
        return 2;
    default:
        return 1;
    }
}

/* Where every device of a sharding's mesh sits for an array of one shape. */
typedef struct rlayout {
    const rmesh *m;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int64_t shard_shape[SPMD_MAX_RANK];
    int64_t shard_elems;
    spmd_box box[MAX_DEV]; /* per mesh flat position */
    int64_t key[MAX_DEV];  /* the block's number in the row-major grid of blocks */
    int replica[MAX_DEV];  /* row-major rank of the coordinates on the unused axes */
} rlayout;

static void layout_make(rlayout *L, const rmesh *m, const rspec *s, int ndim, const int64_t *shape)
{
    memset(L, 0, sizeof *L);
    L->m = m;
    L->ndim = ndim;
    int used[MAX_AXES] = {0};
    int64_t blocks[SPMD_MAX_RANK];
    for (int j = 0; j < ndim; j++) {
        L->shape[j] = shape[j];
        blocks[j] = 1;
        for (int k = 0; j < s->len && k < s->naxes[j]; k++) {
            blocks[j] *= m->shape[s->axes[j][k]];
            used[s->axes[j][k]] = 1;
        }
        if (shape[j] % blocks[j] != 0)
            fail_msg("bad test case: dimension %d (%lld) does not split into %lld", j,
                     (long long)shape[j], (long long)blocks[j]);
        L->shard_shape[j] = shape[j] / blocks[j];
    }
    L->shard_elems = num_elems(ndim, L->shard_shape);
    for (int f = 0; f < m->size; f++) {
        int c[MAX_AXES];
        rmesh_coords(m, f, c);
        spmd_box *b = &L->box[f];
        b->ndim = ndim;
        int64_t key = 0;
        for (int j = 0; j < ndim; j++) {
            int64_t blk = 0; /* mixed radix, the first axis of the tuple major */
            for (int k = 0; j < s->len && k < s->naxes[j]; k++)
                blk = blk * m->shape[s->axes[j][k]] + c[s->axes[j][k]];
            b->start[j] = blk * L->shard_shape[j];
            b->stop[j] = b->start[j] + L->shard_shape[j];
            key = key * blocks[j] + blk;
        }
        L->key[f] = key;
        int rep = 0;
        for (int k = 0; k < m->ndim; k++)
            if (!used[k])
                rep = rep * m->shape[k] + c[k];
        L->replica[f] = rep;
    }
}

/* Global row-major index of element n (row-major) of a box. */
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

static int box_equal(const spmd_box *a, const spmd_box *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int j = 0; j < a->ndim; j++)
        if (a->start[j] != b->start[j] || a->stop[j] != b->stop[j])
            return 0;
    return 1;
}

/*
 * Where `inner` starts inside a dense row-major block `outer`, in elements, when it is one
 * contiguous run of it (so a shard of box `inner` can be a view of a buffer of box `outer`);
 * -1 otherwise. By definition: the row-major offsets of inner's elements are consecutive.
 */
static int64_t run_offset(const spmd_box *outer, const spmd_box *inner)
{
    int64_t first = 0, last = 0, count = 1;
    for (int j = 0; j < outer->ndim; j++) {
        if (inner->start[j] < outer->start[j] || inner->stop[j] > outer->stop[j])
            return -1;
        int64_t extent = outer->stop[j] - outer->start[j];
        first = first * extent + (inner->start[j] - outer->start[j]);
        last = last * extent + (inner->stop[j] - 1 - outer->start[j]);
        count *= inner->stop[j] - inner->start[j];
    }
    return last - first + 1 == count ? first : -1;
}

static void format_box(const spmd_box *b, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int j = 0; j < b->ndim && n < size; j++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld:%lld", j ? ", " : "",
                              (long long)b->start[j], (long long)b->stop[j]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

/* ---- reference values ------------------------------------------------------------------ */

/* The element at global row-major index g, exactly representable in its dtype and different
 * for neighbouring elements. f16/bf16 are written as bit patterns of finite normal numbers. */
static void fill_value(spmd_dtype t, int64_t g, int seed, void *dst)
{
    switch (t) {
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
        uint8_t v = t == SPMD_DTYPE_BOOL ? (uint8_t)((g + seed) % 3 == 0)
                                         : (uint8_t)(g * 37 + seed * 11 + 1);
        memcpy(dst, &v, sizeof v);
        break;
    }
    case SPMD_DTYPE_F16: { /* exponents 0x0F..0x12: 1.0 up to 16 */
        uint16_t v = (uint16_t)(0x3C00 + (g * 5 + seed * 3) % 0x1000);
        memcpy(dst, &v, sizeof v);
        break;
    }
    case SPMD_DTYPE_BF16: { /* 1.0 up to 256, both signs */
        uint16_t v = (uint16_t)(0x3F80 + (g * 3 + seed) % 0x0400);
        if (g % 2)
            v |= 0x8000;
        memcpy(dst, &v, sizeof v);
        break;
    }
    default:
        fail_msg("no reference values for dtype %d", (int)t);
    }
}

static void *values_make(spmd_dtype t, int seed, int ndim, const int64_t *shape)
{
    size_t es = esize(t);
    int64_t n = num_elems(ndim, shape);
    unsigned char *v = malloc((size_t)n * es);
    assert_non_null(v);
    for (int64_t g = 0; g < n; g++)
        fill_value(t, g, seed, v + (size_t)g * es);
    return v;
}

static void extract_box(const void *global, const int64_t *shape, size_t es, const spmd_box *b,
                        void *dst)
{
    int64_t n = 1;
    for (int j = 0; j < b->ndim; j++)
        n *= b->stop[j] - b->start[j];
    for (int64_t i = 0; i < n; i++)
        memcpy((unsigned char *)dst + (size_t)i * es,
               (const unsigned char *)global + (size_t)box_elem_global(b, shape, i) * es, es);
}

static void format_elem(spmd_dtype t, const void *p, char *buf, size_t size)
{
    switch (t) {
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

/* Compares n elements; reports the first difference. Returns 1 when equal. */
static int compare_elems(const void *want, const void *got, int64_t n, spmd_dtype t,
                         const char *what, const char *where)
{
    size_t es = esize(t);
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *w = (const unsigned char *)want + (size_t)i * es;
        const unsigned char *g = (const unsigned char *)got + (size_t)i * es;
        if (memcmp(w, g, es) != 0) {
            char ws[64], gs[64];
            format_elem(t, w, ws, sizeof ws);
            format_elem(t, g, gs, sizeof gs);
            check_failed(__FILE__, __LINE__, "element value",
                         "%s: %s: element %lld is %s, expected %s", what, where, (long long)i, gs,
                         ws);
            return 0;
        }
    }
    return 1;
}

/* ---- the traffic a reshard must cause ---------------------------------------------------- */

typedef struct rtraffic {
    int src_unique;               /* no element of the source is held by two processes */
    uint64_t recv[MAX_PROC];      /* elements each process must receive, at least */
    uint64_t recv_total;          /* their sum */
    uint64_t sends_to[MAX_PROC];  /* src_unique: elements this process sends to each process */
    uint64_t recv_from[MAX_PROC]; /* src_unique: elements this process receives from each */
    uint64_t send_me;             /* src_unique: elements this process sends */
    int msgs_sent, msgs_recv;     /* src_unique: processes this one sends to / receives from */
    /* this process's destination shards: which reuse the source buffer of their device */
    int shared_src[MAX_DEV];        /* per local destination shard: source shard index or -1 */
    int64_t shared_offset[MAX_DEV]; /* elements into that source shard (a view) */
    uint64_t shared_elems;          /* elements of the shards that reuse a source buffer */
    uint64_t local_elems;           /* elements of all this process's destination shards */
    uint64_t copy_min;              /* elements of the other shards that a local source holds */
} rtraffic;

static int popcount64(uint64_t v)
{
    int n = 0;
    for (; v; v &= v - 1)
        n++;
    return n;
}

static int lowest_bit(uint64_t v)
{
    int i = 0;
    while (!(v & 1)) {
        v >>= 1;
        i++;
    }
    return i;
}

static void traffic_compute(rtraffic *T, const rlayout *S, const rlayout *D)
{
    memset(T, 0, sizeof *T);
    int64_t n = num_elems(S->ndim, S->shape);
    uint64_t *holders = calloc((size_t)n, sizeof *holders); /* processes holding each element */
    assert_non_null(holders);
    for (int f = 0; f < S->m->size; f++) {
        uint64_t bit = 1ull << owner(S->m->ids[f]);
        for (int64_t i = 0; i < S->shard_elems; i++)
            holders[box_elem_global(&S->box[f], S->shape, i)] |= bit;
    }
    T->src_unique = 1;
    for (int64_t g = 0; g < n; g++) {
        if (holders[g] == 0)
            fail_msg("reference model: element %lld has no holder", (long long)g);
        if (popcount64(holders[g]) != 1)
            T->src_unique = 0;
    }
    /* What each process lacks of the distinct destination blocks its devices hold. */
    for (int r = 0; r < nproc; r++) {
        int64_t seen[MAX_DEV];
        int nseen = 0;
        for (int f = 0; f < D->m->size; f++) {
            if (owner(D->m->ids[f]) != r)
                continue;
            int dup = 0;
            for (int k = 0; k < nseen; k++)
                dup |= seen[k] == D->key[f];
            if (dup)
                continue;
            seen[nseen++] = D->key[f];
            for (int64_t i = 0; i < D->shard_elems; i++) {
                uint64_t h = holders[box_elem_global(&D->box[f], D->shape, i)];
                if (h & (1ull << r))
                    continue;
                T->recv[r]++;
                if (T->src_unique) {
                    int q = lowest_bit(h);
                    if (q == me)
                        T->sends_to[r]++;
                    if (r == me)
                        T->recv_from[q]++;
                }
            }
        }
        T->recv_total += T->recv[r];
    }
    for (int r = 0; r < nproc; r++) {
        T->send_me += T->sends_to[r];
        T->msgs_sent += T->sends_to[r] > 0;
        T->msgs_recv += T->recv_from[r] > 0;
    }
    /* This process's destination shards. */
    for (int i = 0; i < D->m->num_local; i++) {
        int f = D->m->local_flat[i];
        T->shared_src[i] = -1;
        T->local_elems += (uint64_t)D->shard_elems;
        int fs = rmesh_flat_of(S->m, D->m->ids[f]);
        int64_t at = fs >= 0 ? run_offset(&S->box[fs], &D->box[f]) : -1;
        if (at >= 0) {
            T->shared_src[i] = rmesh_local_index(S->m, fs);
            T->shared_offset[i] = at;
            T->shared_elems += (uint64_t)D->shard_elems;
            continue;
        }
        for (int64_t k = 0; k < D->shard_elems; k++)
            if (holders[box_elem_global(&D->box[f], D->shape, k)] & (1ull << me))
                T->copy_min++;
    }
    free(holders);
}

/* ---- the array checker ------------------------------------------------------------------ */

/* Checks `a` against layout L of sharding `want` whose global value is `host`. */
static void verify_array(const spmd_array *a, const rlayout *L, const spmd_sharding *want,
                         spmd_dtype t, const void *host, const char *what)
{
    CHECK(a != NULL && a != SENTINEL, "%s: no array", what);
    if (!a || a == SENTINEL)
        return;
    const rmesh *m = L->m;
    CHECK(spmd_array_ndim(a) == L->ndim, "%s: rank %d, expected %d", what, spmd_array_ndim(a),
          L->ndim);
    CHECK(spmd_array_dtype(a) == t, "%s: dtype %s, expected %s", what,
          spmd_dtype_name(spmd_array_dtype(a)), spmd_dtype_name(t));
    if (spmd_array_ndim(a) != L->ndim || spmd_array_dtype(a) != t)
        return;
    for (int j = 0; j < L->ndim; j++)
        CHECK(spmd_array_shape(a)[j] == L->shape[j], "%s: dimension %d is %lld, expected %lld",
              what, j, (long long)spmd_array_shape(a)[j], (long long)L->shape[j]);
    const spmd_sharding *sh = spmd_array_sharding(a);
    CHECK(sh && spmd_mesh_equal(spmd_sharding_mesh(sh), m->mesh),
          "%s: the array's mesh is not the new sharding's", what);
    CHECK(sh && spmd_spec_is_equivalent(spmd_sharding_spec(sh), spmd_sharding_spec(want)),
          "%s: the array's spec is not the new sharding's", what);
    int fully = m->num_local == m->size;
    CHECK(spmd_array_is_fully_addressable(a) == fully, "%s: is_fully_addressable %d, expected %d",
          what, spmd_array_is_fully_addressable(a), fully);
    CHECK(spmd_array_num_shards(a) == m->num_local, "%s: %d shards on process %d, expected %d",
          what, spmd_array_num_shards(a), me, m->num_local);

    size_t es = esize(t);
    size_t shard_bytes = (size_t)L->shard_elems * es;
    unsigned char *want_buf = malloc(shard_bytes + 1), *got = malloc(shard_bytes + 1);
    assert_non_null(want_buf);
    assert_non_null(got);
    for (int i = 0; i < m->num_local && i < spmd_array_num_shards(a); i++) {
        int f = m->local_flat[i];
        spmd_shard sd;
        memset(&sd, 0, sizeof sd);
        if (!EXPECT_OK(spmd_array_shard(a, i, &sd)))
            continue;
        char where[96], gb[128], wb[128];
        snprintf(where, sizeof where, "shard %d (device %d)", i, m->ids[f]);
        CHECK(sd.device_id == m->ids[f], "%s: shard %d is on device %d, expected %d", what, i,
              sd.device_id, m->ids[f]);
        CHECK(sd.replica_id == L->replica[f], "%s: %s has replica id %d, expected %d", what, where,
              sd.replica_id, L->replica[f]);
        format_box(&sd.index, gb, sizeof gb);
        format_box(&L->box[f], wb, sizeof wb);
        CHECK(box_equal(&sd.index, &L->box[f]), "%s: %s holds %s, expected %s", what, where, gb,
              wb);
        spmd_box lib;
        memset(&lib, 0, sizeof lib);
        if (EXPECT_OK(spmd_sharding_device_box(want, L->ndim, L->shape, m->ids[f], &lib))) {
            char lb[128];
            format_box(&lib, lb, sizeof lb);
            CHECK(box_equal(&sd.index, &lib), "%s: %s holds %s, spmd_sharding_device_box says %s",
                  what, where, gb, lb);
        }
        CHECK(sd.nbytes == shard_bytes, "%s: %s has %zu bytes, expected %zu", what, where,
              sd.nbytes, shard_bytes);
        if (!box_equal(&sd.index, &L->box[f]) || sd.nbytes != shard_bytes)
            continue;
        extract_box(host, L->shape, es, &L->box[f], want_buf);
        memset(got, 0xA5, shard_bytes);
        if (EXPECT_OK(spmd_array_shard_to_host(a, i, got, shard_bytes))) {
            char tag[160];
            snprintf(tag, sizeof tag, "%s via spmd_array_shard_to_host", where);
            compare_elems(want_buf, got, L->shard_elems, t, what, tag);
        }
        if (spmd_runtime_platform() == SPMD_PLATFORM_CPU) { /* CPU devices hold host memory */
            CHECK(sd.data != NULL, "%s: %s has no data", what, where);
            if (sd.data) {
                char tag[160];
                snprintf(tag, sizeof tag, "%s via spmd_shard.data", where);
                compare_elems(want_buf, sd.data, L->shard_elems, t, what, tag);
            }
        }
    }
    free(want_buf);
    free(got);

    /* Fetching the whole array works exactly when this process holds every block. */
    int covers = 1;
    for (int f = 0; f < m->size; f++) {
        int found = 0;
        for (int i = 0; i < m->num_local; i++)
            found |= L->key[m->local_flat[i]] == L->key[f];
        covers &= found;
    }
    if (covers) {
        size_t bytes = (size_t)num_elems(L->ndim, L->shape) * es;
        unsigned char *all = malloc(bytes);
        assert_non_null(all);
        if (EXPECT_OK(spmd_array_to_host(a, all, bytes)))
            compare_elems(host, all, num_elems(L->ndim, L->shape), t, what, "spmd_array_to_host");
        free(all);
    }
}

/* The data pointers of this process's shards of `a` (NULL where unreadable). */
static void shard_pointers(const spmd_array *a, void **ptrs)
{
    for (int i = 0; i < MAX_DEV; i++)
        ptrs[i] = NULL;
    for (int i = 0; a && i < spmd_array_num_shards(a) && i < MAX_DEV; i++) {
        spmd_shard sd;
        if (EXPECT_OK(spmd_array_shard(a, i, &sd)))
            ptrs[i] = sd.data;
    }
}

/* A donated (deleted) array: every use fails, naming the deletion. */
static void check_deleted(spmd_array *x, size_t bytes, const spmd_sharding *some_sharding,
                          const char *what)
{
    unsigned char *buf = malloc(bytes + 1);
    assert_non_null(buf);
    if (!EXPECT_STATUS(spmd_array_to_host(x, buf, bytes), SPMD_ERR_INVALID_ARGUMENT,
                       "deleted|donated"))
        check_failed(__FILE__, __LINE__, "deleted", "%s: the donated source is still usable", what);
    free(buf);
    spmd_array *out = SENTINEL;
    EXPECT_STATUS(spmd_reshard(x, some_sharding, NULL, &out), SPMD_ERR_INVALID_ARGUMENT,
                  "deleted|donated");
    CHECK(out == NULL, "%s: resharding the donated source left *out = %p", what, (void *)out);
    out = SENTINEL;
    EXPECT_STATUS(spmd_array_copy(x, &out), SPMD_ERR_INVALID_ARGUMENT, "deleted|donated");
    CHECK(out == NULL, "%s: copying the donated source left *out = %p", what, (void *)out);
}

/* ---- one reshard, checked ------------------------------------------------------------------ */

typedef struct xcase {
    const rmesh *sm, *dm; /* source and destination meshes */
    rspec ss, ds;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    spmd_dtype t;
    int seed;
    char what[320];
} xcase;

static xcase xc(const rmesh *sm, rspec ss, const rmesh *dm, rspec ds, spmd_dtype t, int ndim,
                const int64_t *shape)
{
    static int seeds;
    xcase c;
    memset(&c, 0, sizeof c);
    c.sm = sm;
    c.dm = dm;
    c.ss = ss;
    c.ds = ds;
    c.t = t;
    c.ndim = ndim;
    c.seed = ++seeds % 97;
    for (int j = 0; j < ndim; j++)
        c.shape[j] = shape[j];
    char a[128], b[128];
    spec_text(sm, &ss, a, sizeof a);
    spec_text(dm, &ds, b, sizeof b);
    size_t n = (size_t)snprintf(c.what, sizeof c.what, "%s P(%s) -> %s P(%s), shape (", sm->label,
                                a, dm->label, b);
    for (int j = 0; j < ndim && n < sizeof c.what; j++)
        n += (size_t)snprintf(c.what + n, sizeof c.what - n, "%s%lld", j ? ", " : "",
                              (long long)shape[j]);
    if (n < sizeof c.what)
        snprintf(c.what + n, sizeof c.what - n, "%s) %s", ndim == 1 ? "," : "", spmd_dtype_name(t));
    return c;
}

typedef struct run_opts {
    int donate;
    int same_sharding;  /* pass x's own sharding object as the new sharding */
    int identical;      /* the layouts agree: assert no traffic and every buffer shared */
    int outsiders_skip; /* processes owning no device of either mesh do not call */
} run_opts;

/* Everything a reshard produced, for the batch comparison. */
typedef struct xrun {
    rlayout S, D;
    rtraffic T;
    spmd_sharding *ssh, *dsh;
    void *host;
    spmd_array *x, *y;
    void *src_ptr[MAX_DEV];
} xrun;

/* ssh, dsh: shardings to use (retained) instead of new ones built from the case; may be NULL. */
static void xrun_prepare_on(xrun *r, const xcase *c, spmd_sharding *ssh, spmd_sharding *dsh)
{
    memset(r, 0, sizeof *r);
    layout_make(&r->S, c->sm, &c->ss, c->ndim, c->shape);
    layout_make(&r->D, c->dm, &c->ds, c->ndim, c->shape);
    traffic_compute(&r->T, &r->S, &r->D);
    r->ssh = ssh ? spmd_sharding_retain(ssh) : sharding_make(c->sm, &c->ss);
    r->dsh = dsh ? spmd_sharding_retain(dsh) : sharding_make(c->dm, &c->ds);
    r->host = values_make(c->t, c->seed, c->ndim, c->shape);
    void *copy = values_make(c->t, c->seed, c->ndim, c->shape);
    assert_ok(spmd_device_put(copy, c->ndim, c->shape, c->t, r->ssh, &r->x));
    memset(copy, 0, (size_t)num_elems(c->ndim, c->shape) * esize(c->t));
    free(copy); /* the shards are copies */
    shard_pointers(r->x, r->src_ptr);
    r->y = SENTINEL;
}

static void xrun_prepare(xrun *r, const xcase *c) { xrun_prepare_on(r, c, NULL, NULL); }

static void xrun_release(xrun *r)
{
    if (r->y != SENTINEL)
        spmd_array_destroy(r->y);
    spmd_array_destroy(r->x);
    spmd_sharding_destroy(r->ssh);
    spmd_sharding_destroy(r->dsh);
    free(r->host);
}

/* Destination shards that are one run of their device's source shard are views of it (the
 * data pointer lies at the run's offset in the source buffer). */
static void check_sharing(const xrun *r, const char *what)
{
    if (!r->y || r->y == SENTINEL)
        return;
    size_t es = spmd_dtype_size(spmd_array_dtype(r->y));
    for (int i = 0; i < r->D.m->num_local && i < spmd_array_num_shards(r->y); i++) {
        int j = r->T.shared_src[i];
        if (j < 0)
            continue;
        const char *want = (const char *)r->src_ptr[j] + (size_t)r->T.shared_offset[i] * es;
        spmd_shard sd;
        if (EXPECT_OK(spmd_array_shard(r->y, i, &sd)))
            CHECK(sd.data == want,
                  "%s: shard %d (device %d) is one run of its device's source shard but does "
                  "not reuse the source buffer (%p, expected %p)",
                  what, i, sd.device_id, sd.data, (const void *)want);
    }
}

/*
 * Checks the stats of one process against the reference traffic; collective over every process
 * (the sums), so every process calls it even when its reshard failed (ok = 0).
 */
static void check_stats(const spmd_reshard_stats *st, int ok, const rtraffic *T, size_t es,
                        int identical, const char *what)
{
    spmd_reshard_stats z;
    memset(&z, 0, sizeof z);
    if (!ok)
        st = &z;
    uint64_t sent_total = sum_u64(st->bytes_sent);
    uint64_t msgs_sent_total = sum_u64((uint64_t)st->messages_sent);
    uint64_t msgs_recv_total = sum_u64((uint64_t)st->messages_received);
    if (!ok)
        return;
    CHECK(st->bytes_received == T->recv[me] * es,
          "%s: process %d received %llu bytes, expected the %llu elements it lacks x %zu = %llu",
          what, me, (unsigned long long)st->bytes_received, (unsigned long long)T->recv[me], es,
          (unsigned long long)(T->recv[me] * es));
    CHECK(sent_total == T->recv_total * es,
          "%s: the processes sent %llu bytes in all, expected what they lack: %llu", what,
          (unsigned long long)sent_total, (unsigned long long)(T->recv_total * es));
    CHECK(msgs_sent_total == msgs_recv_total, "%s: %llu messages sent in all but %llu received",
          what, (unsigned long long)msgs_sent_total, (unsigned long long)msgs_recv_total);
    if (T->src_unique) {
        CHECK(st->bytes_sent == T->send_me * es,
              "%s: process %d sent %llu bytes, expected what the others need from it: %llu", what,
              me, (unsigned long long)st->bytes_sent, (unsigned long long)(T->send_me * es));
        CHECK(st->messages_sent == T->msgs_sent,
              "%s: process %d sent %d messages, expected one to each of the %d processes that "
              "need its data",
              what, me, st->messages_sent, T->msgs_sent);
        CHECK(st->messages_received == T->msgs_recv,
              "%s: process %d received %d messages, expected one from each of the %d processes "
              "holding what it lacks",
              what, me, st->messages_received, T->msgs_recv);
    } else {
        CHECK(st->messages_sent >= 0 && st->messages_sent <= nproc - 1,
              "%s: process %d sent %d messages (%d other processes)", what, me, st->messages_sent,
              nproc - 1);
        CHECK(st->messages_received >= 0 && st->messages_received <= nproc - 1,
              "%s: process %d received %d messages (%d other processes)", what, me,
              st->messages_received, nproc - 1);
        CHECK((st->messages_sent > 0) == (st->bytes_sent > 0),
              "%s: process %d sent %d messages holding %llu bytes", what, me, st->messages_sent,
              (unsigned long long)st->bytes_sent);
        CHECK((st->messages_received > 0) == (st->bytes_received > 0),
              "%s: process %d received %d messages holding %llu bytes", what, me,
              st->messages_received, (unsigned long long)st->bytes_received);
    }
    CHECK(st->bytes_shared == T->shared_elems * es,
          "%s: process %d shared %llu bytes, expected the %llu bytes of the shards that are "
          "one run of their device's source shard",
          what, me, (unsigned long long)st->bytes_shared,
          (unsigned long long)(T->shared_elems * es));
    CHECK(st->bytes_copied >= T->copy_min * es,
          "%s: process %d copied %llu bytes locally, but its own source shards hold %llu bytes "
          "of its other destination shards",
          what, me, (unsigned long long)st->bytes_copied, (unsigned long long)(T->copy_min * es));
    if (T->shared_elems == T->local_elems)
        CHECK(st->bytes_copied == 0, "%s: process %d copied %llu bytes, but every shard is shared",
              what, me, (unsigned long long)st->bytes_copied);
    if (identical) {
        CHECK(st->bytes_sent == 0 && st->bytes_received == 0 && st->bytes_copied == 0 &&
                  st->messages_sent == 0 && st->messages_received == 0,
              "%s: identical layouts moved data: sent %llu, received %llu, copied %llu, %d/%d "
              "messages",
              what, (unsigned long long)st->bytes_sent, (unsigned long long)st->bytes_received,
              (unsigned long long)st->bytes_copied, st->messages_sent, st->messages_received);
        CHECK(st->bytes_shared == T->local_elems * es,
              "%s: identical layouts: %llu bytes shared, expected all %llu local bytes", what,
              (unsigned long long)st->bytes_shared, (unsigned long long)(T->local_elems * es));
    }
}

static void run_case_on(const xcase *c, const run_opts *o, spmd_sharding *ssh, spmd_sharding *dsh)
{
    run_opts none;
    memset(&none, 0, sizeof none);
    if (!o)
        o = &none;
    xrun r;
    xrun_prepare_on(&r, c, ssh, dsh);
    if (o->identical) /* the reference model agrees that nothing moves */
        CHECK(r.T.recv_total == 0 && r.T.shared_elems == r.T.local_elems,
              "%s: reference model: the layouts are not identical", c->what);
    int outsider = !rmesh_has_process(c->sm, me) && !rmesh_has_process(c->dm, me);
    spmd_reshard_stats st;
    memset(&st, 0xEE, sizeof st); /* filled on success */
    spmd_reshard_options opts = SPMD_RESHARD_OPTIONS_INIT;
    opts.donate = o->donate;
    opts.stats = &st;
    const spmd_sharding *target = o->same_sharding ? spmd_array_sharding(r.x) : r.dsh;
    int ok = 1;
    if (o->outsiders_skip && outsider) {
        memset(&st, 0, sizeof st);
        r.y = SENTINEL;
    } else {
        ok = EXPECT_OK(spmd_reshard(r.x, target, &opts, &r.y));
        if (!ok) {
            fprintf(stderr, "[process %d] case: %s\n", me, c->what);
            CHECK(r.y == NULL, "%s: a failed reshard left *out set", c->what);
            r.y = SENTINEL;
        }
    }
    if (ok && r.y != SENTINEL) {
        verify_array(r.y, &r.D, r.dsh, c->t, r.host, c->what);
        check_sharing(&r, c->what);
        if (outsider)
            CHECK(spmd_array_num_shards(r.y) == 0,
                  "%s: process %d owns no device but got %d shards", c->what, me,
                  spmd_array_num_shards(r.y));
    }
    check_stats(&st, ok, &r.T, esize(c->t), o->identical, c->what);
    if (ok && outsider && !o->outsiders_skip)
        CHECK(st.bytes_sent == 0 && st.bytes_received == 0 && st.bytes_copied == 0 &&
                  st.bytes_shared == 0 && st.messages_sent == 0 && st.messages_received == 0,
              "%s: process %d owns no device but its stats are not all zero", c->what, me);
    if (o->donate && ok) {
        size_t bytes = (size_t)num_elems(c->ndim, c->shape) * esize(c->t);
        check_deleted(r.x, bytes, r.dsh, c->what);
    } else if (!(o->outsiders_skip && outsider)) {
        /* the source is untouched: same buffers, same values */
        char tag[360];
        snprintf(tag, sizeof tag, "%s (source afterwards)", c->what);
        verify_array(r.x, &r.S, r.ssh, c->t, r.host, tag);
        void *now[MAX_DEV];
        shard_pointers(r.x, now);
        for (int i = 0; i < c->sm->num_local; i++)
            CHECK(now[i] == r.src_ptr[i], "%s: source shard %d changed buffer", c->what, i);
    }
    xrun_release(&r);
}

static void run_case(const xcase *c, const run_opts *o) { run_case_on(c, o, NULL, NULL); }

/* ---- the meshes ------------------------------------------------------------------------ */

typedef struct mesh_set {
    rmesh m1; /* 1-D 'a' over every device in id order */
    rmesh m2; /* 2-D ('a', 'b') = (A, B), transposed: position (i, j) holds device j*A + i */
    rmesh g2; /* 2-D ('a', 'b') = (A, B) over every device in id order */
    rmesh h0; /* 1-D 'a' over the first half of the devices (ndev >= 2) */
    rmesh h1; /* 1-D 'a' over the second half of the devices (ndev >= 2) */
    rmesh p0; /* 1-D 'a' over process 0's devices, reversed */
    rmesh ph; /* 1-D 'a' over the devices of the first half of the processes (nproc >= 2) */
    int A, B;
    int halves, procs_half;
} mesh_set;

static void meshes_create(mesh_set *s)
{
    memset(s, 0, sizeof *s);
    const char *a[] = {"a"}, *ab[] = {"a", "b"};
    int ids[MAX_DEV];
    spmd_test_mesh_build(&s->m1, "1d", 1, (int[]){ndev}, a, NULL);
    s->A = ndev % 2 == 0 ? 2 : 1;
    s->B = ndev / s->A;
    for (int i = 0; i < s->A; i++)
        for (int j = 0; j < s->B; j++)
            ids[i * s->B + j] = j * s->A + i;
    spmd_test_mesh_build(&s->m2, "2d_transposed", 2, (int[]){s->A, s->B}, ab, ids);
    spmd_test_mesh_build(&s->g2, "2d", 2, (int[]){s->A, s->B}, ab, NULL);
    s->halves = ndev >= 2;
    if (s->halves) {
        int h = ndev / 2;
        for (int k = 0; k < h; k++)
            ids[k] = k;
        spmd_test_mesh_build(&s->h0, "first_half", 1, (int[]){h}, a, ids);
        for (int k = 0; k < h; k++)
            ids[k] = h + k;
        spmd_test_mesh_build(&s->h1, "second_half", 1, (int[]){h}, a, ids);
    }
    for (int k = 0; k < nlocal; k++)
        ids[k] = nlocal - 1 - k;
    spmd_test_mesh_build(&s->p0, "process0", 1, (int[]){nlocal}, a, ids);
    s->procs_half = nproc >= 2;
    if (s->procs_half) {
        int n = nproc / 2 * nlocal;
        for (int k = 0; k < n; k++)
            ids[k] = k;
        spmd_test_mesh_build(&s->ph, "first_processes", 1, (int[]){n}, a, ids);
    }
}

static void meshes_destroy(mesh_set *s)
{
    spmd_mesh_destroy(s->m1.mesh);
    spmd_mesh_destroy(s->m2.mesh);
    spmd_mesh_destroy(s->g2.mesh);
    spmd_mesh_destroy(s->h0.mesh);
    spmd_mesh_destroy(s->h1.mesh);
    spmd_mesh_destroy(s->p0.mesh);
    spmd_mesh_destroy(s->ph.mesh);
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

/* ---- 1. layout changes ------------------------------------------------------------------- */

static void test_layouts(void **state)
{
    (void)state;
    int before = nfail;
    mesh_set ms;
    meshes_create(&ms);
    const int64_t N = ndev, A = ms.A, B = ms.B, L = nlocal;
    const rmesh *m1 = &ms.m1, *m2 = &ms.m2, *g2 = &ms.g2;
    xcase cases[64];
    int n = 0;
    /* P('a') -> P(None, 'a') on the 1-D mesh */
    cases[n++] = xc(m1, rs(1, "0"), m1, rs(2, "", "0"), SPMD_DTYPE_F32, 2, SHAPE(2 * N, 3 * N));
    cases[n++] = xc(m1, rs(1, "0"), m1, rs(2, "", "0"), SPMD_DTYPE_BF16, 2, SHAPE(N, 2 * N));
    /* P('a', 'b') -> P('b', 'a') on both 2-D meshes */
    cases[n++] = xc(m2, rs(2, "0", "1"), m2, rs(2, "1", "0"), SPMD_DTYPE_F64, 2, SHAPE(2 * N, N));
    cases[n++] = xc(g2, rs(2, "0", "1"), g2, rs(2, "1", "0"), SPMD_DTYPE_I32, 2, SHAPE(N, 3 * N));
    cases[n++] = xc(g2, rs(2, "0", "1"), g2, rs(2, "1", "0"), SPMD_DTYPE_U8, 2, SHAPE(2 * N, N));
    /* P() -> P('a') and P('a') -> P() */
    cases[n++] = xc(m1, rs(0), m1, rs(1, "0"), SPMD_DTYPE_I32, 2, SHAPE(N, 5));
    cases[n++] = xc(m1, rs(0), m1, rs(1, "0"), SPMD_DTYPE_F16, 1, SHAPE(3 * N));
    cases[n++] = xc(m1, rs(1, "0"), m1, rs(0), SPMD_DTYPE_U8, 2, SHAPE(3 * N, 2));
    cases[n++] = xc(m1, rs(1, "0"), m1, rs(0), SPMD_DTYPE_F64, 2, SHAPE(N, 7));
    /* 1-D mesh -> 2-D mesh and back */
    cases[n++] = xc(m1, rs(1, "0"), m2, rs(2, "0", "1"), SPMD_DTYPE_BF16, 2, SHAPE(2 * N, N));
    cases[n++] = xc(m1, rs(1, "0"), m2, rs(2, "0", "1"), SPMD_DTYPE_I64, 2, SHAPE(N, 3 * B));
    cases[n++] = xc(m2, rs(2, "0", "1"), m1, rs(1, "0"), SPMD_DTYPE_F32, 2, SHAPE(N, 3 * N));
    cases[n++] = xc(m1, rs(2, "", "0"), g2, rs(1, "1"), SPMD_DTYPE_BOOL, 2, SHAPE(2 * B, N));
    /* replicated on both sides, over different axes */
    cases[n++] = xc(m2, rs(1, "0"), m2, rs(2, "", "1"), SPMD_DTYPE_F16, 2, SHAPE(2 * A, 3 * B));
    /* rank 1 */
    cases[n++] = xc(m1, rs(1, "0"), g2, rs(1, "10"), SPMD_DTYPE_I32, 1, SHAPE(2 * N));
    cases[n++] = xc(m2, rs(1, "01"), m1, rs(1, "0"), SPMD_DTYPE_F32, 1, SHAPE(3 * N));
    /* rank 3 */
    cases[n++] = xc(m1, rs(3, "0", "", ""), m2, rs(3, "", "1", "0"), SPMD_DTYPE_I64, 3,
                    SHAPE(N, 2 * B, 3 * A));
    cases[n++] =
        xc(m1, rs(3, "0", "", ""), m2, rs(3, "", "1", "0"), SPMD_DTYPE_BF16, 3, SHAPE(N, B, A));
    cases[n++] =
        xc(m2, rs(3, "1", "", "0"), m1, rs(3, "", "", "0"), SPMD_DTYPE_F32, 3, SHAPE(2 * B, 3, N));
    cases[n++] = xc(m2, rs(3, "", "01", ""), &ms.p0, rs(3, "0", "", ""), SPMD_DTYPE_U8, 3,
                    SHAPE(2 * L, N, 3));
    /* rank 0 */
    cases[n++] = xc(m1, rs(0), m2, rs(0), SPMD_DTYPE_F64, 0, NULL);
    cases[n++] = xc(m1, rs(0), &ms.p0, rs(0), SPMD_DTYPE_I32, 0, NULL);
    cases[n++] = xc(&ms.p0, rs(0), m1, rs(0), SPMD_DTYPE_F16, 0, NULL);
    /* a mesh over every process -> process 0's devices, and back */
    cases[n++] = xc(m1, rs(1, "0"), &ms.p0, rs(1, "0"), SPMD_DTYPE_F32, 2, SHAPE(2 * N, 3));
    cases[n++] = xc(m1, rs(1, "0"), &ms.p0, rs(1, "0"), SPMD_DTYPE_F16, 2, SHAPE(N, 5));
    cases[n++] = xc(&ms.p0, rs(1, "0"), m1, rs(1, "0"), SPMD_DTYPE_F32, 2, SHAPE(2 * N, 3));
    cases[n++] = xc(&ms.p0, rs(0), m1, rs(2, "", "0"), SPMD_DTYPE_I32, 2, SHAPE(2, N));
    cases[n++] = xc(&ms.p0, rs(1, "0"), m2, rs(2, "1", "0"), SPMD_DTYPE_BOOL, 2, SHAPE(N, 2 * A));
    if (ms.halves) { /* the pipeline hand-off: first half of the devices -> second half */
        const rmesh *h0 = &ms.h0, *h1 = &ms.h1;
        cases[n++] = xc(h0, rs(1, "0"), h1, rs(1, "0"), SPMD_DTYPE_F32, 2, SHAPE(N, 3));
        cases[n++] = xc(h0, rs(1, "0"), h1, rs(1, "0"), SPMD_DTYPE_I32, 1, SHAPE(N / 2));
        cases[n++] = xc(h0, rs(1, "0"), h1, rs(0), SPMD_DTYPE_U8, 2, SHAPE(N, 2));
        cases[n++] = xc(h0, rs(0), h1, rs(2, "", "0"), SPMD_DTYPE_BOOL, 2, SHAPE(3, N));
        cases[n++] = xc(h1, rs(2, "", "0"), h0, rs(1, "0"), SPMD_DTYPE_F64, 2, SHAPE(N, N / 2));
        cases[n++] = xc(m2, rs(0), h1, rs(0), SPMD_DTYPE_U8, 0, NULL);
    }
    if (ms.procs_half) { /* every process -> the first half of them, and back */
        const rmesh *ph = &ms.ph;
        cases[n++] =
            xc(m2, rs(2, "0", "1"), ph, rs(2, "", "0"), SPMD_DTYPE_F64, 2, SHAPE(2 * N, N));
        cases[n++] =
            xc(ph, rs(1, "0"), m2, rs(2, "1", "0"), SPMD_DTYPE_I32, 2, SHAPE(2 * N, 3 * A));
        cases[n++] = xc(m1, rs(1, "0"), ph, rs(1, "0"), SPMD_DTYPE_BF16, 1, SHAPE(2 * N));
        cases[n++] = xc(ph, rs(0), m1, rs(1, "0"), SPMD_DTYPE_I64, 1, SHAPE(N));
    }
    assert_true(n <= (int)(sizeof cases / sizeof cases[0]));
    for (int i = 0; i < n; i++)
        run_case(&cases[i], NULL);
    meshes_destroy(&ms);
    end_test(before);
}

/* ---- 2. identical layouts: nothing moves, every buffer is shared ---------------------------- */

static void test_identical(void **state)
{
    (void)state;
    int before = nfail;
    mesh_set ms;
    meshes_create(&ms);
    const int64_t N = ndev;
    run_opts same = {0, 1, 1, 0}, ident = {0, 0, 1, 0};
    xcase c;
    /* the very same sharding object */
    c = xc(&ms.m1, rs(1, "0"), &ms.m1, rs(1, "0"), SPMD_DTYPE_F32, 2, SHAPE(2 * N, 3));
    run_case(&c, &same);
    c = xc(&ms.m2, rs(2, "0", "1"), &ms.m2, rs(2, "0", "1"), SPMD_DTYPE_I32, 2, SHAPE(2 * N, N));
    run_case(&c, &same);
    /* an equal sharding built separately */
    c = xc(&ms.m2, rs(2, "0", "1"), &ms.m2, rs(2, "0", "1"), SPMD_DTYPE_F64, 2, SHAPE(N, 3 * N));
    run_case(&c, &ident);
    c = xc(&ms.m1, rs(0), &ms.m1, rs(0), SPMD_DTYPE_F16, 3, SHAPE(2, 3, 4));
    run_case(&c, &ident);
    /* P('a') and P('a', None): the same layout spelled differently */
    c = xc(&ms.m1, rs(1, "0"), &ms.m1, rs(2, "0", ""), SPMD_DTYPE_U8, 2, SHAPE(N, 3));
    run_case(&c, &ident);
    /* P('a') on the 1-D mesh and P(('a', 'b')) on the 2-D mesh in id order: same boxes */
    c = xc(&ms.m1, rs(1, "0"), &ms.g2, rs(1, "01"), SPMD_DTYPE_BF16, 1, SHAPE(2 * N));
    run_case(&c, &ident);
    /* fully replicated over the same devices, as a scalar */
    c = xc(&ms.m1, rs(0), &ms.g2, rs(0), SPMD_DTYPE_F64, 0, NULL);
    run_case(&c, &ident);
    c = xc(&ms.m2, rs(0), &ms.m2, rs(0), SPMD_DTYPE_I64, 0, NULL);
    run_case(&c, &same);
    /* a mesh that leaves the other processes without devices */
    c = xc(&ms.p0, rs(1, "0"), &ms.p0, rs(1, "0"), SPMD_DTYPE_I32, 2, SHAPE(3 * nlocal, 2));
    run_case(&c, &ident);
    meshes_destroy(&ms);
    end_test(before);
}

/* ---- 3. batches ------------------------------------------------------------------------------ */

/* same_source: every array of the batch is the first case's source array (the cases must share
 * its layout, shape, dtype and seed). */
static void run_batch(const xcase *cs, int n, int donate, int same_source)
{
    xrun runs[MAX_BATCH];
    spmd_array *singles[MAX_BATCH];
    for (int i = 0; i < n; i++)
        xrun_prepare(&runs[i], &cs[i]);

    /* one at a time first (kept for the comparison) */
    for (int i = 0; i < n; i++) {
        spmd_array *y = SENTINEL;
        singles[i] = NULL;
        if (EXPECT_OK(spmd_reshard(runs[i].x, runs[i].dsh, NULL, &y)))
            singles[i] = y;
    }

    spmd_array *xs[MAX_BATCH], *outs[MAX_BATCH];
    const spmd_sharding *shs[MAX_BATCH];
    for (int i = 0; i < n; i++) {
        xs[i] = same_source ? runs[0].x : runs[i].x;
        if (same_source) /* the buffers a shared shard must keep */
            memcpy(runs[i].src_ptr, runs[0].src_ptr, sizeof runs[i].src_ptr);
        shs[i] = runs[i].dsh;
        outs[i] = SENTINEL;
    }
    spmd_reshard_stats st;
    memset(&st, 0xEE, sizeof st);
    spmd_reshard_options opts = SPMD_RESHARD_OPTIONS_INIT;
    opts.donate = donate;
    opts.stats = &st;
    int ok = EXPECT_OK(spmd_reshard_batch(n, xs, shs, &opts, outs));
    char what[64];
    snprintf(what, sizeof what, "batch of %d%s%s", n, donate ? " (donated)" : "",
             same_source ? " (one source array)" : "");
    for (int i = 0; i < n; i++) {
        if (!ok) {
            CHECK(outs[i] == NULL, "%s: failed, yet outs[%d] is set", what, i);
            continue;
        }
        char tag[720];
        snprintf(tag, sizeof tag, "%s, array %d: %.300s", what, i, cs[i].what);
        verify_array(outs[i], &runs[i].D, runs[i].dsh, cs[i].t, runs[i].host, tag);
        runs[i].y = outs[i];
        check_sharing(&runs[i], tag);
        /* the same bytes as the one-at-a-time result, shard by shard */
        if (!singles[i] || !outs[i] || outs[i] == SENTINEL ||
            spmd_array_num_shards(singles[i]) != spmd_array_num_shards(outs[i]))
            continue;
        for (int k = 0; k < spmd_array_num_shards(outs[i]); k++) {
            spmd_shard a, b;
            if (!EXPECT_OK(spmd_array_shard(outs[i], k, &a)) ||
                !EXPECT_OK(spmd_array_shard(singles[i], k, &b)))
                continue;
            CHECK(a.device_id == b.device_id && box_equal(&a.index, &b.index) &&
                      a.nbytes == b.nbytes,
                  "%s: shard %d differs from the one-at-a-time reshard", tag, k);
            if (a.nbytes != b.nbytes)
                continue;
            unsigned char *pa = malloc(a.nbytes + 1), *pb = malloc(b.nbytes + 1);
            assert_non_null(pa);
            assert_non_null(pb);
            if (EXPECT_OK(spmd_array_shard_to_host(outs[i], k, pa, a.nbytes)) &&
                EXPECT_OK(spmd_array_shard_to_host(singles[i], k, pb, b.nbytes)))
                compare_elems(pb, pa, (int64_t)(a.nbytes / esize(cs[i].t)), cs[i].t, tag,
                              "batch vs one at a time");
            free(pa);
            free(pb);
        }
    }

    /* stats: the sums of the arrays' own traffic, one message per pair of processes */
    spmd_reshard_stats z;
    memset(&z, 0, sizeof z);
    const spmd_reshard_stats *s = ok ? &st : &z;
    uint64_t sent_total = sum_u64(s->bytes_sent);
    if (ok) {
        uint64_t recv = 0, send = 0, recv_total = 0, shared = 0, copy_min = 0;
        int all_unique = 1, to[MAX_PROC] = {0}, from[MAX_PROC] = {0};
        for (int i = 0; i < n; i++) {
            const rtraffic *T = &runs[i].T;
            size_t es = esize(cs[i].t);
            recv += T->recv[me] * es;
            recv_total += T->recv_total * es;
            send += T->send_me * es;
            shared += T->shared_elems * es;
            copy_min += T->copy_min * es;
            all_unique &= T->src_unique;
            for (int r = 0; r < nproc; r++) {
                to[r] |= T->sends_to[r] > 0;
                from[r] |= T->recv_from[r] > 0;
            }
        }
        int nto = 0, nfrom = 0;
        for (int r = 0; r < nproc; r++) {
            nto += to[r];
            nfrom += from[r];
        }
        CHECK(st.bytes_received == recv, "%s: process %d received %llu bytes, expected %llu", what,
              me, (unsigned long long)st.bytes_received, (unsigned long long)recv);
        CHECK(sent_total == recv_total, "%s: %llu bytes sent in all, expected %llu", what,
              (unsigned long long)sent_total, (unsigned long long)recv_total);
        CHECK(st.messages_sent >= 0 && st.messages_sent <= nproc - 1,
              "%s: process %d sent %d messages for %d other processes", what, me, st.messages_sent,
              nproc - 1);
        CHECK(st.messages_received >= 0 && st.messages_received <= nproc - 1,
              "%s: process %d received %d messages from %d other processes", what, me,
              st.messages_received, nproc - 1);
        if (all_unique) {
            CHECK(st.bytes_sent == send, "%s: process %d sent %llu bytes, expected %llu", what, me,
                  (unsigned long long)st.bytes_sent, (unsigned long long)send);
            CHECK(st.messages_sent == nto,
                  "%s: process %d sent %d messages, expected one to each of %d processes", what, me,
                  st.messages_sent, nto);
            CHECK(st.messages_received == nfrom,
                  "%s: process %d received %d messages, expected one from each of %d processes",
                  what, me, st.messages_received, nfrom);
        }
        CHECK(st.bytes_shared == shared, "%s: process %d shared %llu bytes, expected %llu", what,
              me, (unsigned long long)st.bytes_shared, (unsigned long long)shared);
        CHECK(st.bytes_copied >= copy_min,
              "%s: process %d copied %llu bytes, less than the %llu its own sources hold", what, me,
              (unsigned long long)st.bytes_copied, (unsigned long long)copy_min);
    }

    for (int i = 0; i < n; i++) {
        if (donate && ok) {
            char tag[720];
            snprintf(tag, sizeof tag, "%s, array %d: %.300s", what, i, cs[i].what);
            check_deleted(runs[i].x, (size_t)num_elems(cs[i].ndim, cs[i].shape) * esize(cs[i].t),
                          runs[i].dsh, tag);
        }
        spmd_array_destroy(singles[i]);
        xrun_release(&runs[i]);
    }
}

static void test_batch(void **state)
{
    (void)state;
    int before = nfail;
    mesh_set ms;
    meshes_create(&ms);
    const int64_t N = ndev, A = ms.A, B = ms.B;
    xcase cs[3];
    cs[0] = xc(&ms.m1, rs(1, "0"), &ms.m1, rs(2, "", "0"), SPMD_DTYPE_F32, 2, SHAPE(2 * N, 3 * N));
    cs[1] =
        xc(&ms.m2, rs(2, "0", "1"), &ms.m2, rs(2, "1", "0"), SPMD_DTYPE_I32, 2, SHAPE(2 * N, N));
    cs[2] = xc(&ms.m1, rs(3, "0", "", ""), &ms.m2, rs(3, "", "1", "0"), SPMD_DTYPE_BF16, 3,
               SHAPE(N, 2 * B, A));
    run_batch(cs, 3, 0, 0);
    /* different dtypes again, with replication, another device set and a scalar */
    xcase ds[3];
    ds[0] = xc(&ms.m1, rs(1, "0"), &ms.m1, rs(0), SPMD_DTYPE_U8, 2, SHAPE(3 * N, 2));
    ds[1] = ms.halves ? xc(&ms.h0, rs(1, "0"), &ms.h1, rs(1, "0"), SPMD_DTYPE_F64, 2, SHAPE(N, 3))
                      : xc(&ms.m1, rs(1, "0"), &ms.p0, rs(0), SPMD_DTYPE_F64, 2, SHAPE(N, 3));
    ds[2] = xc(&ms.m1, rs(0), &ms.m2, rs(0), SPMD_DTYPE_F16, 0, NULL);
    run_batch(ds, 3, 0, 0);
    /* one array alone, and a donated batch */
    run_batch(cs, 1, 0, 0);
    xcase es[3];
    for (int i = 0; i < 3; i++)
        es[i] = cs[i];
    run_batch(es, 3, 1, 0);
    /* one array to three layouts at once */
    xcase fs[3];
    fs[0] = xc(&ms.m1, rs(1, "0"), &ms.m2, rs(2, "1", "0"), SPMD_DTYPE_I32, 2, SHAPE(2 * N, 2 * N));
    fs[1] = xc(&ms.m1, rs(1, "0"), &ms.m1, rs(0), SPMD_DTYPE_I32, 2, SHAPE(2 * N, 2 * N));
    fs[2] = xc(&ms.m1, rs(1, "0"), &ms.p0, rs(2, "", "0"), SPMD_DTYPE_I32, 2, SHAPE(2 * N, 2 * N));
    fs[1].seed = fs[2].seed = fs[0].seed;
    run_batch(fs, 3, 0, 1);
    meshes_destroy(&ms);
    end_test(before);
}

/* ---- 4. donation --------------------------------------------------------------------------------
 */

static void test_donate(void **state)
{
    (void)state;
    int before = nfail;
    mesh_set ms;
    meshes_create(&ms);
    const int64_t N = ndev;
    run_opts donate = {1, 0, 0, 0}, donate_same = {1, 1, 1, 0}, donate_ident = {1, 0, 1, 0};
    xcase c;
    c = xc(&ms.m1, rs(1, "0"), &ms.m1, rs(2, "", "0"), SPMD_DTYPE_F32, 2, SHAPE(2 * N, 3 * N));
    run_case(&c, &donate);
    c = xc(&ms.m1, rs(1, "0"), &ms.m2, rs(2, "0", "1"), SPMD_DTYPE_I64, 2, SHAPE(2 * N, N));
    run_case(&c, &donate);
    c = xc(&ms.p0, rs(1, "0"), &ms.m1, rs(1, "0"), SPMD_DTYPE_U8, 2, SHAPE(2 * N, 3));
    run_case(&c, &donate); /* deleted also where it had no shards */
    if (ms.halves) {
        c = xc(&ms.h0, rs(1, "0"), &ms.h1, rs(1, "0"), SPMD_DTYPE_F16, 2, SHAPE(N, 4));
        run_case(&c, &donate);
    }
    /* identical layouts: the result takes over the source's buffers */
    c = xc(&ms.m2, rs(2, "0", "1"), &ms.m2, rs(2, "0", "1"), SPMD_DTYPE_F64, 2, SHAPE(2 * N, N));
    run_case(&c, &donate_same);
    c = xc(&ms.m1, rs(1, "0"), &ms.g2, rs(1, "01"), SPMD_DTYPE_I32, 2, SHAPE(N, 3));
    run_case(&c, &donate_ident);
    c = xc(&ms.m1, rs(0), &ms.m1, rs(0), SPMD_DTYPE_BF16, 0, NULL);
    run_case(&c, &donate_ident);
    meshes_destroy(&ms);
    end_test(before);
}

/* ---- 5. copies
 * ----------------------------------------------------------------------------------- */

static void copy_case(const rmesh *m, rspec s, spmd_dtype t, int ndim, const int64_t *shape,
                      int only_process0)
{
    xcase c = xc(m, s, m, s, t, ndim, shape);
    xrun r;
    xrun_prepare(&r, &c);
    if (only_process0 && me != 0) { /* not collective: the others do not take part */
        xrun_release(&r);
        return;
    }
    spmd_array *y = SENTINEL;
    char what[360];
    snprintf(what, sizeof what, "spmd_array_copy of %s", c.what);
    if (EXPECT_OK(spmd_array_copy(r.x, &y))) {
        verify_array(y, &r.S, r.ssh, t, r.host, what);
        const spmd_sharding *ysh = spmd_array_sharding(y);
        CHECK(ysh && spmd_sharding_is_equivalent(ysh, r.ssh, ndim),
              "%s: the copy's sharding is not the source's", what);
        for (int i = 0; i < spmd_array_num_shards(y) && i < m->num_local; i++) {
            spmd_shard sd;
            if (EXPECT_OK(spmd_array_shard(y, i, &sd)))
                CHECK(sd.data != r.src_ptr[i],
                      "%s: shard %d (device %d) shares the source's buffer", what, i, sd.device_id);
        }
        /* buffers of its own: the copy outlives the source */
        spmd_array_destroy(r.x);
        r.x = NULL;
        char tag[720];
        snprintf(tag, sizeof tag, "%s, after the source is destroyed", what);
        verify_array(y, &r.S, r.ssh, t, r.host, tag);
        spmd_array_destroy(y);
    } else {
        CHECK(y == NULL, "%s: failed, yet *out is set", what);
    }
    xrun_release(&r);
}

static void test_copy(void **state)
{
    (void)state;
    int before = nfail;
    mesh_set ms;
    meshes_create(&ms);
    const int64_t N = ndev;
    copy_case(&ms.m1, rs(1, "0"), SPMD_DTYPE_F32, 2, SHAPE(2 * N, 3), 0);
    copy_case(&ms.m2, rs(2, "0", "1"), SPMD_DTYPE_I64, 2, SHAPE(2 * N, N), 0);
    copy_case(&ms.m2, rs(1, "1"), SPMD_DTYPE_F16, 3, SHAPE(N, 2, 3), 0);
    copy_case(&ms.p0, rs(0), SPMD_DTYPE_BF16, 1, SHAPE(5), 0);
    copy_case(&ms.m1, rs(0), SPMD_DTYPE_F64, 0, NULL, 0);
    copy_case(&ms.m1, rs(1, "0"), SPMD_DTYPE_U8, 2, SHAPE(N, 7), 1);
    copy_case(&ms.g2, rs(2, "1", "0"), SPMD_DTYPE_I32, 2, SHAPE(N, N), 1);

    spmd_array *out = SENTINEL;
    EXPECT_STATUS(spmd_array_copy(NULL, &out), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    CHECK(out == NULL, "spmd_array_copy(NULL) left *out set%s", "");
    xcase c = xc(&ms.m1, rs(1, "0"), &ms.m1, rs(1, "0"), SPMD_DTYPE_F32, 1, SHAPE(N));
    xrun r;
    xrun_prepare(&r, &c);
    EXPECT_STATUS(spmd_array_copy(r.x, NULL), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    xrun_release(&r);
    meshes_destroy(&ms);
    end_test(before);
}

/* ---- 6. errors
 * ----------------------------------------------------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    int before = nfail;
    mesh_set ms;
    meshes_create(&ms);
    const int64_t N = ndev;
    xcase c = xc(&ms.m1, rs(1, "0"), &ms.m1, rs(0), SPMD_DTYPE_F32, 2, SHAPE(2 * N, 3));
    xrun r;
    xrun_prepare(&r, &c);
    rspec by_cols = rs(2, "", "0");
    spmd_sharding *cols = sharding_make(&ms.m1, &by_cols); /* 3 columns over ndev devices */
    spmd_reshard_stats st;
    spmd_reshard_options opts = SPMD_RESHARD_OPTIONS_INIT;
    opts.stats = &st;
    spmd_array *out;

    /* NULL arguments */
    out = SENTINEL;
    EXPECT_STATUS(spmd_reshard(NULL, r.ssh, &opts, &out), SPMD_ERR_INVALID_ARGUMENT, "spmd_reshard",
                  "NULL");
    CHECK(out == NULL, "x NULL: *out = %p", (void *)out);
    out = SENTINEL;
    EXPECT_STATUS(spmd_reshard(r.x, NULL, &opts, &out), SPMD_ERR_INVALID_ARGUMENT, "spmd_reshard",
                  "NULL");
    CHECK(out == NULL, "new_sharding NULL: *out = %p", (void *)out);
    EXPECT_STATUS(spmd_reshard(r.x, r.ssh, &opts, NULL), SPMD_ERR_INVALID_ARGUMENT, "spmd_reshard",
                  "NULL");

    /* a new sharding that does not split the shape: 3 columns over the devices */
    if (ndev >= 2) {
        out = SENTINEL;
        EXPECT_STATUS(spmd_reshard(r.x, cols, &opts, &out), SPMD_ERR_SHAPE, "axis 1|dimension 1");
        CHECK(out == NULL, "indivisible: *out = %p", (void *)out);
    }
    /* a spec longer than the rank (also with one device) */
    {
        rspec s3 = rs(3, "0", "", "");
        spmd_sharding *sh3 = sharding_make(&ms.m1, &s3);
        out = SENTINEL;
        EXPECT_STATUS(spmd_reshard(r.x, sh3, &opts, &out), SPMD_ERR_SHAPE, "rank");
        CHECK(out == NULL, "spec longer than the rank: *out = %p", (void *)out);
        spmd_sharding_destroy(sh3);
        /* a scalar with P('a') */
        xcase sc = xc(&ms.m1, rs(0), &ms.m1, rs(0), SPMD_DTYPE_F64, 0, NULL);
        xrun rsc;
        xrun_prepare(&rsc, &sc);
        rspec s1 = rs(1, "0");
        spmd_sharding *sh1 = sharding_make(&ms.m1, &s1);
        out = SENTINEL;
        EXPECT_STATUS(spmd_reshard(rsc.x, sh1, NULL, &out), SPMD_ERR_SHAPE, "rank");
        CHECK(out == NULL, "scalar with P('a'): *out = %p", (void *)out);
        spmd_sharding_destroy(sh1);
        xrun_release(&rsc);
    }

    /* options of another version */
    unsigned bad_versions[2] = {0u, SPMD_RESHARD_OPTIONS_VERSION + 1u};
    for (int k = 0; k < 2; k++) {
        spmd_reshard_options bad = SPMD_RESHARD_OPTIONS_INIT;
        bad.version = bad_versions[k];
        out = SENTINEL;
        EXPECT_STATUS(spmd_reshard(r.x, r.ssh, &bad, &out), SPMD_ERR_INVALID_ARGUMENT, "version");
        CHECK(out == NULL, "options.version %u: *out = %p", bad_versions[k], (void *)out);
    }

    /* batches: NULL arrays, a negative count, one bad array among good ones */
    {
        spmd_array *outs[3] = {SENTINEL, SENTINEL, SENTINEL};
        const spmd_sharding *shs[3] = {r.ssh, r.ssh, r.ssh};
        spmd_array *xs[3] = {r.x, r.x, r.x};
        EXPECT_STATUS(spmd_reshard_batch(2, NULL, shs, NULL, outs), SPMD_ERR_INVALID_ARGUMENT, "");
        EXPECT_STATUS(spmd_reshard_batch(2, xs, NULL, NULL, outs), SPMD_ERR_INVALID_ARGUMENT, "");
        EXPECT_STATUS(spmd_reshard_batch(2, xs, shs, NULL, NULL), SPMD_ERR_INVALID_ARGUMENT, "");
        EXPECT_STATUS(spmd_reshard_batch(-1, xs, shs, NULL, outs), SPMD_ERR_INVALID_ARGUMENT, "");
        for (int i = 0; i < 3; i++)
            outs[i] = SENTINEL;
        spmd_array *with_null[3] = {r.x, NULL, r.x};
        EXPECT_STATUS(spmd_reshard_batch(3, with_null, shs, NULL, outs), SPMD_ERR_INVALID_ARGUMENT,
                      "NULL");
        for (int i = 0; i < 3; i++)
            CHECK(outs[i] == NULL, "batch with a NULL array: outs[%d] = %p", i, (void *)outs[i]);
        if (ndev >= 2) {
            const spmd_sharding *mixed[3] = {r.ssh, cols, r.dsh};
            for (int i = 0; i < 3; i++)
                outs[i] = SENTINEL;
            EXPECT_STATUS(spmd_reshard_batch(3, xs, mixed, NULL, outs), SPMD_ERR_SHAPE,
                          "axis 1|dimension 1");
            for (int i = 0; i < 3; i++)
                CHECK(outs[i] == NULL, "batch with an indivisible array: outs[%d] = %p", i,
                      (void *)outs[i]);
        }
        spmd_reshard_options bad = SPMD_RESHARD_OPTIONS_INIT;
        bad.version = 7;
        for (int i = 0; i < 3; i++)
            outs[i] = SENTINEL;
        EXPECT_STATUS(spmd_reshard_batch(3, xs, shs, &bad, outs), SPMD_ERR_INVALID_ARGUMENT,
                      "version");
        for (int i = 0; i < 3; i++)
            CHECK(outs[i] == NULL, "batch with bad options: outs[%d] = %p", i, (void *)outs[i]);
    }

    /* the failed calls left the source intact and usable */
    verify_array(r.x, &r.S, r.ssh, c.t, r.host, "source after the failed calls");
    {
        xcase good = xc(&ms.m1, rs(1, "0"), &ms.m1, rs(0), SPMD_DTYPE_F32, 2, SHAPE(2 * N, 3));
        run_case(&good, NULL);
    }

    /* a deleted (donated) source */
    {
        spmd_reshard_options don = SPMD_RESHARD_OPTIONS_INIT;
        don.donate = 1;
        rspec s0 = rs(0);
        spmd_sharding *rep = sharding_make(&ms.m1, &s0);
        spmd_array *y = SENTINEL;
        if (EXPECT_OK(spmd_reshard(r.x, rep, &don, &y))) {
            out = SENTINEL;
            EXPECT_STATUS(spmd_reshard(r.x, rep, &opts, &out), SPMD_ERR_INVALID_ARGUMENT,
                          "deleted|donated");
            CHECK(out == NULL, "deleted source: *out = %p", (void *)out);
            spmd_array *xs[2] = {y, r.x}, *outs[2] = {SENTINEL, SENTINEL};
            const spmd_sharding *shs[2] = {rep, rep};
            EXPECT_STATUS(spmd_reshard_batch(2, xs, shs, NULL, outs), SPMD_ERR_INVALID_ARGUMENT,
                          "deleted|donated");
            CHECK(outs[0] == NULL && outs[1] == NULL, "batch with a deleted array left outputs%s",
                  "");
            spmd_array_destroy(y);
        }
        spmd_sharding_destroy(rep);
    }
    spmd_sharding_destroy(cols);
    xrun_release(&r);
    meshes_destroy(&ms);
    end_test(before);
}

/* ---- 7. one source sharding, many reshards ------------------------------------------------- */

/* The same source and destination sharding objects serve arrays of many shapes and dtypes, more
 * combinations than any cache would keep, twice over; destination shardings that live for one
 * call only are replaced by others (which may be allocated at the same address). */
static void test_sharding_reuse(void **state)
{
    (void)state;
    int before = nfail;
    mesh_set ms;
    meshes_create(&ms);
    const int64_t N = ndev, L = nlocal;
    rspec ss = rs(1, "0");
    spmd_sharding *src = sharding_make(&ms.m1, &ss);
    const rmesh *dm[3] = {&ms.m2, &ms.m1, &ms.p0};
    rspec ds[3] = {rs(2, "1", "0"), rs(0), rs(1, "0")};
    spmd_sharding *dst[3];
    for (int k = 0; k < 3; k++)
        dst[k] = sharding_make(dm[k], &ds[k]);
    struct {
        spmd_dtype t;
        int ndim;
        int64_t shape[3];
    } arrays[5] = {
        {SPMD_DTYPE_F32, 2, {2 * N, 2 * N}}, {SPMD_DTYPE_I64, 2, {N, 4 * N}},
        {SPMD_DTYPE_U8, 2, {4 * N, 2}},      {SPMD_DTYPE_BF16, 3, {N, 2, 2 * L}},
        {SPMD_DTYPE_F16, 2, {2 * N, 6}},
    };
    for (int round = 0; round < 2; round++)
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 5; i++) {
                xcase c =
                    xc(&ms.m1, ss, dm[k], ds[k], arrays[i].t, arrays[i].ndim, arrays[i].shape);
                run_case_on(&c, NULL, src, dst[k]);
            }
    for (int i = 0; i < 6; i++) {
        rspec s = i % 2 ? rs(2, "0", "1") : rs(2, "1", "0");
        spmd_sharding *tmp = sharding_make(&ms.m2, &s);
        xcase c = xc(&ms.m1, ss, &ms.m2, s, SPMD_DTYPE_I32, 2, SHAPE(2 * N, 2 * N));
        run_case_on(&c, NULL, src, tmp);
        spmd_sharding_destroy(tmp);
    }
    for (int k = 0; k < 3; k++)
        spmd_sharding_destroy(dst[k]);
    spmd_sharding_destroy(src);
    meshes_destroy(&ms);
    end_test(before);
}

/* ---- 8. random layout changes ------------------------------------------------------------- */

static void shuffle(int *v, int n, spmd_test_rng *rng)
{
    for (int i = n - 1; i > 0; i--) {
        int k = spmd_test_rng_below(rng, i + 1);
        int t = v[i];
        v[i] = v[k];
        v[k] = t;
    }
}

/* A random spec for a rank-`ndim` array on mesh m: each mesh axis goes to a random dimension or
 * to none, in random order within a dimension's tuple. */
static rspec random_spec(const rmesh *m, int ndim, spmd_test_rng *rng)
{
    rspec s;
    memset(&s, 0, sizeof s);
    int order[MAX_AXES];
    for (int k = 0; k < m->ndim; k++)
        order[k] = k;
    shuffle(order, m->ndim, rng);
    for (int k = 0; k < m->ndim; k++) {
        int d = spmd_test_rng_below(rng, ndim + 1);
        if (d < ndim)
            s.axes[d][s.naxes[d]++] = order[k];
    }
    s.len = ndim;
    while (s.len > 0 && s.naxes[s.len - 1] == 0 && spmd_test_rng_below(rng, 2))
        s.len--; /* trailing Nones may be left out */
    return s;
}

static int64_t spec_blocks(const rmesh *m, const rspec *s, int j)
{
    int64_t b = 1;
    for (int k = 0; j < s->len && k < s->naxes[j]; k++)
        b *= m->shape[s->axes[j][k]];
    return b;
}

static int64_t lcm64(int64_t a, int64_t b)
{
    int64_t x = a, y = b;
    while (y) {
        int64_t t = x % y;
        x = y;
        y = t;
    }
    return a / x * b;
}

/* Random pairs of layouts over every mesh of the set plus a shuffled 2-D and a 3-D mesh, every
 * dtype, ranks 0 to 3; every fourth case donates its source. Same seed on every process. */
static void test_random(void **state)
{
    (void)state;
    int before = nfail;
    mesh_set ms;
    meshes_create(&ms);
    spmd_test_rng rng = {0x7e5a4dull};
    const char *ab[] = {"a", "b"}, *abc[] = {"a", "b", "c"};
    int ids[MAX_DEV];
    rmesh sh2, m3;
    for (int d = 0; d < ndev; d++)
        ids[d] = d;
    shuffle(ids, ndev, &rng);
    spmd_test_mesh_build(&sh2, "2d_shuffled", 2, (int[]){ms.B, ms.A}, ab, ids);
    int c3 = ndev % 4 == 0 ? ndev / 4 : ndev;
    int a3 = ndev % 4 == 0 ? 2 : 1;
    shuffle(ids, ndev, &rng);
    spmd_test_mesh_build(&m3, "3d_shuffled", 3, (int[]){a3, a3, c3}, abc, ids);
    const rmesh *pool[10];
    int np = 0;
    pool[np++] = &ms.m1;
    pool[np++] = &ms.m2;
    pool[np++] = &ms.g2;
    pool[np++] = &ms.p0;
    pool[np++] = &sh2;
    pool[np++] = &m3;
    if (ms.halves) {
        pool[np++] = &ms.h0;
        pool[np++] = &ms.h1;
    }
    if (ms.procs_half)
        pool[np++] = &ms.ph;
    static const spmd_dtype dtypes[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_I32,
                                        SPMD_DTYPE_I64, SPMD_DTYPE_U8,  SPMD_DTYPE_BOOL,
                                        SPMD_DTYPE_F16, SPMD_DTYPE_BF16};
    run_opts donate = {1, 0, 0, 0};
    for (int i = 0; i < 48; i++) {
        const rmesh *sm = pool[spmd_test_rng_below(&rng, np)];
        const rmesh *dm = pool[spmd_test_rng_below(&rng, np)];
        int ndim = spmd_test_rng_below(&rng, 4);
        rspec ss = random_spec(sm, ndim, &rng), ds = random_spec(dm, ndim, &rng);
        int64_t shape[3];
        int64_t total = 1;
        for (int j = 0; j < ndim; j++) {
            shape[j] = lcm64(spec_blocks(sm, &ss, j), spec_blocks(dm, &ds, j));
            total *= shape[j];
        }
        for (int j = 0; j < ndim; j++) { /* grow while small: 1, 2 or 3 times the minimum */
            int64_t f = 1 + spmd_test_rng_below(&rng, 3);
            if (total * f <= 2048) {
                total *= f;
                shape[j] *= f;
            }
        }
        spmd_dtype t = dtypes[spmd_test_rng_below(&rng, 8)];
        xcase c = xc(sm, ss, dm, ds, t, ndim, shape);
        run_case(&c, i % 4 == 3 ? &donate : NULL);
    }
    spmd_mesh_destroy(sh2.mesh);
    spmd_mesh_destroy(m3.mesh);
    meshes_destroy(&ms);
    end_test(before);
}

/* ---- 9. processes that own no device of either mesh ------------------------------------------ */

static void test_outsiders(void **state)
{
    (void)state;
    if (nproc < 3)
        skip(); /* needs a process outside both meshes */
    int before = nfail;
    const char *a[] = {"a"}, *ab[] = {"a", "b"};
    int ids[MAX_DEV];
    rmesh q, q2;
    for (int k = 0; k < 2 * nlocal; k++)
        ids[k] = k; /* the devices of processes 0 and 1 */
    spmd_test_mesh_build(&q, "processes01", 1, (int[]){2 * nlocal}, a, ids);
    for (int k = 0; k < 2 * nlocal; k++)
        ids[k] = 2 * nlocal - 1 - k;
    spmd_test_mesh_build(&q2, "processes01_2d", 2, (int[]){2, nlocal}, ab, ids);
    const int64_t L = nlocal;
    xcase cs[4];
    cs[0] = xc(&q, rs(1, "0"), &q2, rs(2, "1", "0"), SPMD_DTYPE_F32, 2, SHAPE(2 * L, 4));
    cs[1] = xc(&q, rs(0), &q2, rs(1, "0"), SPMD_DTYPE_I32, 1, SHAPE(6));
    cs[2] = xc(&q2, rs(2, "0", "1"), &q, rs(2, "", "0"), SPMD_DTYPE_BF16, 2, SHAPE(4, 2 * L));
    cs[3] = xc(&q, rs(0), &q2, rs(0), SPMD_DTYPE_U8, 0, NULL);
    /* every process calls: the outsiders get arrays with no shards */
    for (int i = 0; i < 4; i++)
        run_case(&cs[i], NULL);
    /* ... and they need not call at all */
    run_opts skip_outsiders = {0, 0, 0, 1};
    for (int i = 0; i < 4; i++)
        run_case(&cs[i], &skip_outsiders);
    /* donation and batches with outsiders */
    run_opts donate = {1, 0, 0, 0};
    run_case(&cs[0], &donate);
    run_batch(cs, 4, 0, 0);
    spmd_mesh_destroy(q.mesh);
    spmd_mesh_destroy(q2.mesh);
    end_test(before);
}

int main(void)
{
    spmd_test_init();
    nproc = spmd_process_count();
    nlocal = spmd_local_device_count();
    me = spmd_process_index();
    ndev = spmd_device_count();
    if (ndev > MAX_DEV || nproc > MAX_PROC || ndev != nproc * nlocal) {
        fprintf(stderr, "test_reshard: needs at most %d devices and %d processes, %d per process\n",
                MAX_DEV, MAX_PROC, nlocal);
        return spmd_test_finish(1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),        cmocka_unit_test(test_identical),
        cmocka_unit_test(test_batch),          cmocka_unit_test(test_donate),
        cmocka_unit_test(test_copy),           cmocka_unit_test(test_errors),
        cmocka_unit_test(test_sharding_reuse), cmocka_unit_test(test_random),
        cmocka_unit_test(test_outsiders),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures);
}
