/* test_reshard, part: the cases, sections 1-9 (layouts, identical layouts, batches, donation,
 * copies, errors, one source sharding reused, random layouts, outsiders). */
#define _POSIX_C_SOURCE 200809L

#include "test_reshard.h"

/* ---- 1. layout changes ------------------------------------------------------------------- */

void test_layouts(void **state)
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
    /* past what the calling thread copies alone (src/array/reshard.c): the devices copy */
    cases[n++] = xc(m1, rs(1, "0"), m1, rs(2, "", "0"), SPMD_DTYPE_F32, 2, SHAPE(128 * N, 1024));
    cases[n++] = xc(m2, rs(3, "1", "", "0"), m1, rs(3, "", "", "0"), SPMD_DTYPE_I32, 3,
                    SHAPE(16 * B, 64, 16 * N));
    /* a process's own rows, one run of 384 KiB at 2 x 1, copied by the calling thread in slabs
     * between the exchange's steps */
    cases[n++] = xc(m1, rs(1, "0"), m1, rs(0), SPMD_DTYPE_F64, 2, SHAPE(96, 1024));
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

void test_identical(void **state)
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

void test_batch(void **state)
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

void test_donate(void **state)
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

void test_copy(void **state)
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

void test_errors(void **state)
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
void test_sharding_reuse(void **state)
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
void test_random(void **state)
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

void test_outsiders(void **state)
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
