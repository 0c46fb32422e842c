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
 * (on every process, so that they stay in step).
 *
 * This file holds the checks, the reference model, the array checker, the checked reshard, the
 * meshes and main; the cases (sections 1-9) are in test_reshard_cases.c, and test_reshard.h
 * declares what they share. */
#define _POSIX_C_SOURCE 200809L

#include "test_reshard.h"

/* The run's geometry; global device ids are process-major. */
int nproc, nlocal, me, ndev;

/* ---- non-fatal checks ------------------------------------------------------------------ */

int nfail;

void check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
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

int expect_status_impl(spmd_status got, spmd_status want, const char *expr, const char *file,
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

/* ---- collectives of the test itself (MPI_Allreduce on libspmd's communicator) ---------- */

uint64_t sum_u64(uint64_t v)
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
void end_test(int before)
{
    int mine = nfail - before;
    int any = max_int(mine);
    if (mine)
        fail_msg("%d check(s) failed on process %d (see above)", mine, me);
    if (any)
        fail_msg("check(s) failed on another process (see above)");
}

char sentinel_byte; /* SENTINEL points here */

/* ---- reference model: meshes, specs, layouts ------------------------------------------- */

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

/* rs(2, "0", "") is P(axis 0, None); "10" is the tuple (axis 1, axis 0). */
rspec rs(int len, ...)
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

spmd_sharding *sharding_make(const rmesh *m, const rspec *s)
{
    char text[256];
    spec_text(m, s, text, sizeof text);
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(m->mesh, text, &sh));
    return sh;
}

int64_t num_elems(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int j = 0; j < ndim; j++)
        n *= shape[j];
    return n;
}

/* Bytes per element, written out here rather than asked of the library. */
size_t esize(spmd_dtype t)
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

int box_equal(const spmd_box *a, const spmd_box *b)
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
int compare_elems(const void *want, const void *got, int64_t n, spmd_dtype t, const char *what,
                  const char *where)
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
void verify_array(const spmd_array *a, const rlayout *L, const spmd_sharding *want, spmd_dtype t,
                  const void *host, const char *what)
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
void check_deleted(spmd_array *x, size_t bytes, const spmd_sharding *some_sharding,
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

xcase xc(const rmesh *sm, rspec ss, const rmesh *dm, rspec ds, spmd_dtype t, int ndim,
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

void xrun_prepare(xrun *r, const xcase *c) { xrun_prepare_on(r, c, NULL, NULL); }

void xrun_release(xrun *r)
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
void check_sharing(const xrun *r, const char *what)
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

void run_case_on(const xcase *c, const run_opts *o, spmd_sharding *ssh, spmd_sharding *dsh)
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

void run_case(const xcase *c, const run_opts *o) { run_case_on(c, o, NULL, NULL); }

/* ---- the meshes ------------------------------------------------------------------------ */

void meshes_create(mesh_set *s)
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

void meshes_destroy(mesh_set *s)
{
    spmd_mesh_destroy(s->m1.mesh);
    spmd_mesh_destroy(s->m2.mesh);
    spmd_mesh_destroy(s->g2.mesh);
    spmd_mesh_destroy(s->h0.mesh);
    spmd_mesh_destroy(s->h1.mesh);
    spmd_mesh_destroy(s->p0.mesh);
    spmd_mesh_destroy(s->ph.mesh);
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
