/*
 * The replication check's proofs: a block that a psum (pmean, pmax, pmin, all_gather_invariant)
 * over the axes out_specs leaves out wrote whole is alike by construction and is not hashed;
 * any later write by a block op or another collective takes the proof away, so a block changed
 * after its psum is still caught; holders that differ only in how they were made (proven or
 * not) but hold the same bytes pass; SPMD_CHECK_REPLICATION_STRICT hashes every block. As in
 * JAX, a block that an all_gather, ppermute or all_to_all over those axes wrote last varies by
 * type: refused whatever its values, unless the check is off.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { N = 6 };

typedef enum {
    PSUM_ONLY,         /* psum into out: proven, passes */
    PSUM_THEN_OP,      /* psum into out, then out += device index on device 1: caught */
    PSUM_THEN_PERMUTE, /* psum into out, then a ppermute of a varying value into out: caught */
    HALF_PROVEN,       /* device 0 copies the psum from a temporary (unproven), the others psum
                          into out: the same bytes, passes */
    PSUM_THEN_HAND,    /* psum into out, then device 1 changes out by hand: trusted unless strict */
    ALL_GATHER_ONLY,   /* all_gather into out: varying by type, refused (JAX too) */
    ALL_GATHER_MANY,   /* all_gather_many into out: the same */
    PERMUTE_ALIKE,     /* a ppermute of a psum into out: alike values, varying type: refused */
    GATHER_THEN_PSUM,  /* all_gather into out, then a psum of it into out: proven, passes */
    GATHER_THEN_COPY,  /* all_gather into out, then spmd_op_copy of a psum into out: hashed */
    ALL_GATHER_INV,    /* all_gather_invariant (JAX's name for the same) into out: passes */
    GROUPS_ONLY        /* psum with axis_index_groups into out: not proven over the axis, hashed */
} plan_kind;

static spmd_mesh *mesh;
static spmd_spec *split, *replicated;
static spmd_array *x;
static int ndev;
static float host_x[N * 64];

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)nout;
    plan_kind kind = *(const plan_kind *)user;
    int me = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &me);
    if (st != SPMD_OK)
        return st;
    if (kind == ALL_GATHER_ONLY) /* out is (N * ndev,) */
        return spmd_all_gather(ctx, &in[0], &out[0], "i", 0, 1);
    if (kind == ALL_GATHER_MANY)
        return spmd_all_gather_many(ctx, 1, &in[0], &out[0], "i", 0, 1);
    if (kind == GATHER_THEN_PSUM) { /* ndev * (the gathered vector) */
        st = spmd_all_gather(ctx, &in[0], &out[0], "i", 0, 1);
        return st == SPMD_OK ? spmd_psum(ctx, &out[0], &out[0], "i") : st;
    }
    if (kind == GATHER_THEN_COPY) { /* the same, the last write a block op's */
        spmd_block sum;
        st = spmd_ctx_alloc(ctx, 1, out[0].shape, SPMD_DTYPE_F32, &sum);
        if (st == SPMD_OK)
            st = spmd_all_gather(ctx, &in[0], &out[0], "i", 0, 1);
        if (st == SPMD_OK)
            st = spmd_psum(ctx, &out[0], &sum, "i");
        return st == SPMD_OK ? spmd_op_copy(ctx, &sum, &out[0]) : st;
    }
    if (kind == ALL_GATHER_INV)
        return spmd_all_gather_invariant(ctx, &in[0], &out[0], "i", 0, 1);
    if (kind == GROUPS_ONLY) { /* one group of every position: alike, but not proven */
        int positions[64];
        for (int k = 0; k < ndev; k++)
            positions[k] = k;
        spmd_axis_groups g = {1, NULL, positions};
        return spmd_psum_groups(ctx, &in[0], &out[0], "i", &g);
    }
    if (kind == HALF_PROVEN && me == 0) {
        spmd_block tmp;
        int64_t shape[1] = {N};
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &tmp);
        if (st == SPMD_OK)
            st = spmd_psum(ctx, &in[0], &tmp, "i");
        return st == SPMD_OK ? spmd_op_copy(ctx, &tmp, &out[0]) : st;
    }
    st = spmd_psum(ctx, &in[0], &out[0], "i");
    if (st != SPMD_OK)
        return st;
    if (kind == PSUM_THEN_OP && me == 1)
        return spmd_op_binary_scalar(ctx, SPMD_BINARY_ADD, &out[0], 1.0, &out[0]);
    if (kind == PSUM_THEN_PERMUTE || kind == PERMUTE_ALIKE) {
        int pairs[2 * 64];
        for (int k = 0; k < ndev; k++)
            pairs[2 * k] = k, pairs[2 * k + 1] = (k + 1) % ndev;
        spmd_block src = in[0];
        if (kind == PERMUTE_ALIKE) { /* every device sends the sum: out is alike */
            int64_t shape[1] = {N};
            st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &src);
            if (st == SPMD_OK)
                st = spmd_op_copy(ctx, &out[0], &src);
            if (st != SPMD_OK)
                return st;
        }
        return spmd_ppermute(ctx, &src, &out[0], "i", pairs, ndev);
    }
    if (kind == PSUM_THEN_HAND && me == 1)
        ((float *)out[0].data)[0] += 1.0f;
    return SPMD_OK;
}

/* Runs `kind` with check_replication `check`; returns the status. */
static spmd_status run(plan_kind kind, int check, float *result, size_t bytes)
{
    spmd_shard_map_options o = SPMD_SHARD_MAP_OPTIONS_INIT;
    o.check_replication = check;
    int wide = kind == ALL_GATHER_ONLY || kind == ALL_GATHER_INV || kind == ALL_GATHER_MANY ||
               kind == GATHER_THEN_PSUM || kind == GATHER_THEN_COPY;
    const spmd_out_desc desc = {1, {wide ? (int64_t)N * ndev : N}, SPMD_DTYPE_F32};
    spmd_array *y = NULL;
    spmd_status st = spmd_shard_map(mesh, body, &kind, 1, &x, (const spmd_spec *[]){split}, 1,
                                    &desc, (const spmd_spec *[]){replicated}, &o, &y);
    if (st == SPMD_OK && result)
        st = spmd_array_shard_to_host(y, 0, result, bytes);
    spmd_array_destroy(y);
    return st;
}

/* fn(x split, r replicated): out = r copied by spmd_op_copy (proven: JAX's invariant input),
 * or x's block (not proven, hashed: the blocks differ); `hand` then changes device 1's out. */
typedef struct copy_job {
    int from_split, hand;
} copy_job;

static spmd_status copy_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    const copy_job *j = user;
    int me = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &me);
    if (st == SPMD_OK)
        st = spmd_op_copy(ctx, &in[j->from_split ? 0 : 1], &out[0]);
    if (st == SPMD_OK && j->hand && me == 1)
        ((float *)out[0].data)[0] += 1.0f;
    return st;
}

static spmd_status run_copy(spmd_array *r, copy_job j, int check, float *got)
{
    spmd_shard_map_options o = SPMD_SHARD_MAP_OPTIONS_INIT;
    o.check_replication = check;
    const spmd_out_desc desc = {1, {N}, SPMD_DTYPE_F32};
    spmd_array *in[2] = {x, r}, *y = NULL;
    spmd_status st =
        spmd_shard_map(mesh, copy_body, &j, 2, in, (const spmd_spec *[]){split, replicated}, 1,
                       &desc, (const spmd_spec *[]){replicated}, &o, &y);
    if (st == SPMD_OK && got)
        st = spmd_array_shard_to_host(y, 0, got, sizeof(float) * N);
    spmd_array_destroy(y);
    return st;
}

static void test_copied_inputs(void)
{
    float host_r[N], got[N];
    for (int k = 0; k < N; k++)
        host_r[k] = 0.25f * (float)k - 1.0f;
    spmd_sharding *rep_sh = NULL;
    spmd_array *r = NULL;
    const int64_t shape[1] = {N};
    SPMD_TEST_CHECK(spmd_sharding_create(mesh, replicated, &rep_sh) == SPMD_OK &&
                        spmd_device_put(host_r, 1, shape, SPMD_DTYPE_F32, rep_sh, &r) == SPMD_OK,
                    "replicated input: %s", spmd_last_error());
    if (!r) {
        spmd_sharding_destroy(rep_sh);
        return;
    }
    spmd_status st = run_copy(r, (copy_job){0, 0}, 1, got);
    SPMD_TEST_CHECK(st == SPMD_OK, "a copied replicated input refused: %s", spmd_last_error());
    for (int k = 0; st == SPMD_OK && k < N; k++)
        SPMD_TEST_CHECK(got[k] == host_r[k], "copied input element %d is %g", k, got[k]);
    /* proven: a change by hand after the copy is trusted, as after a psum; strict catches it */
    st = run_copy(r, (copy_job){0, 1}, 1, NULL);
    SPMD_TEST_CHECK(st == SPMD_OK, "the copy of a replicated input was hashed: %s",
                    spmd_last_error());
    st = run_copy(r, (copy_job){0, 1}, SPMD_CHECK_REPLICATION_STRICT, NULL);
    SPMD_TEST_CHECK(st == SPMD_ERR_SPEC && strstr(spmd_last_error(), "replicated over mesh axis"),
                    "strict: a change after the copy went unseen (%s: %s)", spmd_status_name(st),
                    spmd_last_error());
    /* a copied block of the split input proves nothing: hashed, and the blocks differ */
    st = run_copy(r, (copy_job){1, 0}, 1, NULL);
    SPMD_TEST_CHECK(st == SPMD_ERR_SPEC && strstr(spmd_last_error(), "replicated over mesh axis"),
                    "a copied split input passed as replicated (%s: %s)", spmd_status_name(st),
                    spmd_last_error());
    spmd_array_destroy(r);
    spmd_sharding_destroy(rep_sh);
}

/* A gather over a size-1 axis that out_specs leaves out: JAX's types count that axis too. */
static spmd_status gather_unit(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    return *(const int *)user ? spmd_all_gather_invariant(ctx, &in[0], &out[0], "u", 0, 1)
                              : spmd_all_gather(ctx, &in[0], &out[0], "u", 0, 1);
}

static void test_size_one_axis(void)
{
    int shape[2] = {ndev, 1};
    const char *names[2] = {"i", "u"};
    spmd_mesh *m2 = NULL;
    spmd_sharding *sh = NULL;
    spmd_array *x2 = NULL;
    const int64_t global[1] = {(int64_t)N * ndev};
    spmd_status st = spmd_mesh_create(2, shape, names, NULL, 0, &m2);
    if (st == SPMD_OK)
        st = spmd_sharding_create(m2, split, &sh);
    if (st == SPMD_OK)
        st = spmd_device_put(host_x, 1, global, SPMD_DTYPE_F32, sh, &x2);
    SPMD_TEST_CHECK(st == SPMD_OK, "(n, 1) mesh: %s", spmd_last_error());
    const spmd_out_desc desc = {1, {(int64_t)N * ndev}, SPMD_DTYPE_F32};
    for (int invariant = 0; st == SPMD_OK && invariant <= 1; invariant++) {
        spmd_array *y = NULL;
        spmd_status got =
            spmd_shard_map(m2, gather_unit, &invariant, 1, &x2, (const spmd_spec *[]){split}, 1,
                           &desc, (const spmd_spec *[]){split}, NULL, &y);
        if (invariant) {
            SPMD_TEST_CHECK(got == SPMD_OK, "invariant gather over a size-1 axis: %s",
                            spmd_last_error());
            float back[N * 64];
            if (got == SPMD_OK && spmd_array_to_host(y, back, sizeof(float) * N * ndev) == SPMD_OK)
                for (int k = 0; k < N * ndev; k++)
                    SPMD_TEST_CHECK(back[k] == host_x[k], "size-1 gather element %d", k);
        } else {
            SPMD_TEST_CHECK(got == SPMD_ERR_SPEC && strstr(spmd_last_error(), "over mesh axis 'u'"),
                            "a gather over a size-1 left-out axis not refused (%s: %s)",
                            spmd_status_name(got), spmd_last_error());
        }
        spmd_array_destroy(y);
    }
    spmd_array_destroy(x2);
    spmd_sharding_destroy(sh);
    spmd_mesh_destroy(m2);
}

static void expect_sum(const float *got)
{
    for (int k = 0; k < N; k++) {
        float want = 0;
        for (int d = 0; d < ndev; d++)
            want += host_x[d * N + k];
        SPMD_TEST_CHECK(got[k] == want, "element %d is %g, want %g", k, got[k], want);
    }
}

int main(void)
{
    spmd_test_init();
    ndev = spmd_device_count();
    if (ndev < 2 || ndev > 64) {
        printf("skipped: needs 2..64 devices\n");
        spmd_test_finish(0);
        return SPMD_TEST_SKIP;
    }
    for (int k = 0; k < N * ndev; k++)
        host_x[k] = (float)((k * 7) % 13) - 3.5f;
    spmd_test_line line = spmd_test_line_create(N, host_x);
    mesh = line.mesh, split = line.split, replicated = line.replicated, x = line.x;

    float got[N * 64];
    for (int check = 1; check <= SPMD_CHECK_REPLICATION_STRICT; check++) {
        spmd_status st = run(PSUM_ONLY, check, got, sizeof(float) * N);
        SPMD_TEST_CHECK(st == SPMD_OK, "check %d: psum into out refused: %s", check,
                        spmd_last_error());
        if (st == SPMD_OK)
            expect_sum(got);
        st = run(HALF_PROVEN, check, got, sizeof(float) * N);
        SPMD_TEST_CHECK(st == SPMD_OK, "check %d: a copied psum beside psums refused: %s", check,
                        spmd_last_error());
        if (st == SPMD_OK)
            expect_sum(got);
        st = run(ALL_GATHER_ONLY, check, got, sizeof(float) * N * (size_t)ndev);
        SPMD_TEST_CHECK(st == SPMD_ERR_SPEC &&
                            strstr(spmd_last_error(), "spmd_all_gather over 'i', whose result "
                                                      "varies along 'i' by type") &&
                            strstr(spmd_last_error(), "out_specs[0] = P()") &&
                            strstr(spmd_last_error(), "spmd_all_gather_invariant") &&
                            strstr(spmd_last_error(), "check_replication = 0"),
                        "check %d: all_gather into P() not refused by type (%s: %s)", check,
                        spmd_status_name(st), spmd_last_error());
        st = run(ALL_GATHER_MANY, check, got, sizeof(float) * N * (size_t)ndev);
        SPMD_TEST_CHECK(st == SPMD_ERR_SPEC && strstr(spmd_last_error(), "by type"),
                        "check %d: all_gather_many into P() not refused by type (%s: %s)", check,
                        spmd_status_name(st), spmd_last_error());
        st = run(PERMUTE_ALIKE, check, got, sizeof(float) * N);
        SPMD_TEST_CHECK(st == SPMD_ERR_SPEC && strstr(spmd_last_error(), "spmd_ppermute") &&
                            strstr(spmd_last_error(), "by type"),
                        "check %d: a ppermute of alike values into P() not refused by type "
                        "(%s: %s)",
                        check, spmd_status_name(st), spmd_last_error());
        st = run(GATHER_THEN_PSUM, check, got, sizeof(float) * N * (size_t)ndev);
        SPMD_TEST_CHECK(st == SPMD_OK, "check %d: a psum after the all_gather refused: %s", check,
                        spmd_last_error());
        for (int k = 0; st == SPMD_OK && k < N * ndev; k++)
            SPMD_TEST_CHECK(got[k] == (float)ndev * host_x[k], "gather then psum element %d", k);
        memset(got, 0, sizeof(float) * N * (size_t)ndev);
        st = run(GATHER_THEN_COPY, check, got, sizeof(float) * N * (size_t)ndev);
        SPMD_TEST_CHECK(st == SPMD_OK,
                        "check %d: a block op's copy after the all_gather refused: %s", check,
                        spmd_last_error());
        for (int k = 0; st == SPMD_OK && k < N * ndev; k++)
            SPMD_TEST_CHECK(got[k] == (float)ndev * host_x[k], "gather then copy element %d", k);
        memset(got, 0, sizeof(float) * N * (size_t)ndev);
        st = run(ALL_GATHER_INV, check, got, sizeof(float) * N * (size_t)ndev);
        SPMD_TEST_CHECK(st == SPMD_OK, "check %d: all_gather_invariant into out refused: %s", check,
                        spmd_last_error());
        for (int k = 0; st == SPMD_OK && k < N * ndev; k++)
            SPMD_TEST_CHECK(got[k] == host_x[k], "all_gather_invariant element %d", k);
        st = run(GROUPS_ONLY, check, got, sizeof(float) * N);
        SPMD_TEST_CHECK(st == SPMD_OK, "check %d: psum in one group refused: %s", check,
                        spmd_last_error());
        st = run(PSUM_THEN_OP, check, NULL, 0);
        SPMD_TEST_CHECK(st == SPMD_ERR_SPEC &&
                            strstr(spmd_last_error(), "replicated over mesh axis"),
                        "check %d: a block op after the psum went unseen (%s: %s)", check,
                        spmd_status_name(st), spmd_last_error());
        st = run(PSUM_THEN_PERMUTE, check, NULL, 0);
        SPMD_TEST_CHECK(st == SPMD_ERR_SPEC &&
                            strstr(spmd_last_error(), "replicated over mesh axis"),
                        "check %d: a ppermute after the psum went unseen (%s: %s)", check,
                        spmd_status_name(st), spmd_last_error());
    }
    test_copied_inputs();
    test_size_one_axis();
    /* unchecked, the varying types are trusted as JAX's check_vma=False trusts them */
    memset(got, 0, sizeof got);
    spmd_status off = run(ALL_GATHER_ONLY, 0, got, sizeof(float) * N * (size_t)ndev);
    SPMD_TEST_CHECK(off == SPMD_OK, "unchecked all_gather into P() refused: %s", spmd_last_error());
    for (int k = 0; off == SPMD_OK && k < N * ndev; k++)
        SPMD_TEST_CHECK(got[k] == host_x[k], "unchecked all_gather element %d", k);
    off = run(PERMUTE_ALIKE, 0, got, sizeof(float) * N);
    SPMD_TEST_CHECK(off == SPMD_OK, "unchecked ppermute into P() refused: %s", spmd_last_error());
    if (off == SPMD_OK)
        expect_sum(got);
    /* a change by hand after the psum: trusted (proven), caught when strict */
    spmd_status st = run(PSUM_THEN_HAND, 1, NULL, 0);
    SPMD_TEST_CHECK(st == SPMD_OK, "a proven block was hashed: %s", spmd_last_error());
    st = run(PSUM_THEN_HAND, SPMD_CHECK_REPLICATION_STRICT, NULL, 0);
    SPMD_TEST_CHECK(st == SPMD_ERR_SPEC && strstr(spmd_last_error(), "replicated over mesh axis"),
                    "strict: a change by hand went unseen (%s: %s)", spmd_status_name(st),
                    spmd_last_error());
    st = run(PSUM_ONLY, 3, NULL, 0);
    SPMD_TEST_CHECK(st == SPMD_ERR_INVALID_ARGUMENT &&
                        strstr(spmd_last_error(), "options.check_replication is 3"),
                    "check_replication 3 accepted (%s)", spmd_status_name(st));
    spmd_test_line_destroy(&line);
    return spmd_test_finish(spmd_test_failed_checks());
}
