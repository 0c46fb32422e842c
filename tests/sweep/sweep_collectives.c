/* The sweeps of the functions of a shard_map body (test_api_sweep): collectives, axis queries
 * and spmd_ctx_alloc, each called by every device inside one spmd_shard_map. */
#define _POSIX_C_SOURCE 200809L

#include "sweep.h"

/* ==== shard_map bodies: collectives and the functions of spmd_ctx ============================= */

typedef enum coll_op {
    C_PSUM,
    C_PMEAN,
    C_PMAX,
    C_PMIN,
    C_ALL_GATHER,
    C_PSUM_SCATTER,
    C_PPERMUTE,
    C_ALL_TO_ALL,
    C_PBROADCAST,
    C_AXIS_INDEX,
    C_AXIS_SIZE,
    C_CTX_ALLOC,
    C_PSUM_G,
    C_PMEAN_G,
    C_PMAX_G,
    C_PMIN_G,
    C_ALL_GATHER_G,
    C_PSUM_SCATTER_G,
    C_ALL_TO_ALL_G,
    C_PSWAPAXES,
    C_PSHUFFLE, /* pairs, npairs: perm, n */
    C_PARGMAX,
    C_PARGMIN,
    C_PSUM_MANY, /* the _many forms: i3 blocks (0: one); out2, when set, is the last block's out */
    C_PMEAN_MANY,
    C_PMAX_MANY,
    C_PMIN_MANY,
    C_ALL_GATHER_MANY,
    C_PPERMUTE_MANY,
    C_PSEND,           /* alone: only its argument checks can fail */
    C_PRECV,           /* alone: no psend waits for it */
    C_ALL_TO_ALL_MANY, /* i1, i2: every block's split and concat axes; npairs: tiled */
    C_PSWAPAXES_MANY,  /* i1: every block's axis */
    C_ALL_GATHER_INV,
    C_RAGGED, /* in: operand, out: output, out2: out (else output); i1: counts flaw */
} coll_op;

/* One call made by every device inside spmd_shard_map over M. Block templates whose data is BUF
 * get the device's own buffer; a NULL template passes NULL. */
typedef struct coll_case {
    coll_op op;
    const spmd_block *in, *out;
    const char *axes;
    int i1, i2, i3; /* all_gather: axis, tiled; psum_scatter: dimension, tiled;
                       all_to_all: split, concat, tiled */
    const int *pairs;
    int npairs;
    int null_result; /* axis_index / axis_size: NULL result; ctx_alloc: NULL block */
    int ndim;        /* ctx_alloc */
    const int64_t *shape;
    spmd_dtype dtype;
    const spmd_axis_groups *groups; /* the _groups variants and pswapaxes */
    const spmd_block *out2;
} coll_case;

static char buf_marker;
#define BUF ((void *)&buf_marker)

static const spmd_block B_F22 = {BUF, SPMD_DTYPE_F32, 2, {2, 2}},
                        B_F33 = {BUF, SPMD_DTYPE_F32, 2, {3, 3}},
                        B_F23 = {BUF, SPMD_DTYPE_F32, 2, {2, 3}},
                        B_F222 = {BUF, SPMD_DTYPE_F32, 3, {2, 2, 2}},
                        B_F2 = {BUF, SPMD_DTYPE_F32, 1, {2}}, B_F0 = {BUF, SPMD_DTYPE_F32, 0, {0}},
                        B_I22 = {BUF, SPMD_DTYPE_I32, 2, {2, 2}},
                        B_F64_22 = {BUF, SPMD_DTYPE_F64, 2, {2, 2}},
                        B_U22 = {BUF, SPMD_DTYPE_U8, 2, {2, 2}},
                        B_NEG_RANK = {BUF, SPMD_DTYPE_F32, -1, {2, 2}},
                        B_RANK17 = {BUF, SPMD_DTYPE_F32, 17, {2, 2}},
                        B_MAX_RANK = {BUF, SPMD_DTYPE_F32, INT_MAX, {2, 2}},
                        B_MIN_RANK = {BUF, SPMD_DTYPE_F32, INT_MIN, {2, 2}},
                        B_COUNT = {BUF, SPMD_DTYPE_COUNT, 2, {2, 2}},
                        B_MINUS1 = {BUF, (spmd_dtype)-1, 2, {2, 2}},
                        B_NODATA = {NULL, SPMD_DTYPE_F32, 2, {2, 2}},
                        B_ZERO = {BUF, SPMD_DTYPE_F32, 2, {0, 2}},
                        B_NEG = {BUF, SPMD_DTYPE_F32, 2, {2, -2}},
                        B_I64MIN = {BUF, SPMD_DTYPE_F32, 2, {INT64_MIN, 2}},
                        /* 2^64 elements: the count overflows int64_t (and size_t) */
    B_HUGE = {BUF, SPMD_DTYPE_F32, 2, {(int64_t)1 << 32, (int64_t)1 << 32}},
                        /* what all_gather of B_HUGE over 2 devices gives (untiled, axis 0) */
    B_HUGE3 = {BUF, SPMD_DTYPE_F32, 3, {2, (int64_t)1 << 32, (int64_t)1 << 32}};

typedef struct dev_result {
    int ran;
    spmd_status status;
    char message[2048];
    int value;
    spmd_block block;
} dev_result;

static dev_result g_results[NDEV];
static double g_dev_in[NDEV][512], g_dev_out[NDEV][512];

static void instantiate(const spmd_block *tpl, void *buf, spmd_block *b)
{
    *b = *tpl;
    if (b->data == BUF)
        b->data = buf;
}

static double g_dev_out2[NDEV][512];

/* A _many collective over c->i3 blocks (0: one), all made of the in and out templates but the
 * last out (out2 when given). */
static spmd_status call_many(spmd_ctx *ctx, const coll_case *c, const spmd_block *pin,
                             spmd_block *pout, int d)
{
    int n = c->i3 ? c->i3 : 1;
    spmd_block ins[4], outs[4];
    for (int i = 0; i < n && i < 4; i++) {
        if (pin)
            ins[i] = *pin;
        if (pout)
            outs[i] = *pout;
    }
    if (c->out2 && n >= 1 && n <= 4)
        instantiate(c->out2, g_dev_out2[d], &outs[n - 1]);
    const spmd_block *in = pin ? ins : NULL;
    spmd_block *out = pout ? outs : NULL;
    switch (c->op) {
    case C_PSUM_MANY:
        return spmd_psum_many(ctx, n, in, out, c->axes);
    case C_PMEAN_MANY:
        return spmd_pmean_many(ctx, n, in, out, c->axes);
    case C_PMAX_MANY:
        return spmd_pmax_many(ctx, n, in, out, c->axes);
    case C_PMIN_MANY:
        return spmd_pmin_many(ctx, n, in, out, c->axes);
    case C_PPERMUTE_MANY:
        return spmd_ppermute_many(ctx, n, in, out, c->axes, c->pairs, c->npairs);
    case C_ALL_TO_ALL_MANY:
    case C_PSWAPAXES_MANY: {
        int split[4], concat[4];
        for (int i = 0; i < 4; i++)
            split[i] = c->i1, concat[i] = c->op == C_PSWAPAXES_MANY ? c->i1 : c->i2;
        return c->op == C_PSWAPAXES_MANY
                   ? spmd_pswapaxes_many(ctx, n, in, out, c->axes, split)
                   : spmd_all_to_all_many(ctx, n, in, out, c->axes, split, concat, c->npairs);
    }
    default:
        return spmd_all_gather_many(ctx, n, in, out, c->axes, c->i1, c->i2);
    }
}

/* ragged_all_to_all with zero counts (nothing moves) of the group's size, but for the flaw
 * c->i1 gives them: 1 send_sizes NULL, 2 one entry too many, 3 float counts, 4 a slice past
 * the operand's rows. */
static spmd_status call_ragged(spmd_ctx *ctx, const coll_case *c, const spmd_block *pin,
                               spmd_block *pout, int d)
{
    static int32_t counts[NDEV][4][NDEV + 1];
    memset(counts[d], 0, sizeof counts[d]);
    int n = 1;
    if (spmd_axis_size(ctx, c->axes, &n) != SPMD_OK)
        n = 1;
    spmd_block cb[4];
    for (int k = 0; k < 4; k++)
        cb[k] = (spmd_block){counts[d][k], SPMD_DTYPE_I32, 1, {n}};
    if (c->i1 == 2)
        cb[0].shape[0] = n + 1;
    if (c->i1 == 3)
        cb[2].dtype = SPMD_DTYPE_F32;
    if (c->i1 == 4)
        counts[d][1][0] = 100;
    spmd_block out2, *out = pout;
    if (c->out2) {
        instantiate(c->out2, g_dev_out2[d], &out2);
        out = &out2;
    }
    return spmd_ragged_all_to_all(ctx, pin, pout, &cb[0], c->i1 == 1 ? NULL : &cb[1], &cb[2],
                                  &cb[3], out, c->axes);
}

static spmd_status coll_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin;
    (void)in;
    (void)nout;
    (void)out;
    const coll_case *c = user;
    int d = spmd_ctx_device(ctx);
    if (d < 0 || d >= NDEV)
        return SPMD_OK;
    dev_result *r = &g_results[d];
    spmd_block bin, bout;
    const spmd_block *pin = NULL;
    spmd_block *pout = NULL;
    if (c->in) {
        instantiate(c->in, g_dev_in[d], &bin);
        pin = &bin;
    }
    if (c->out) {
        instantiate(c->out, g_dev_out[d], &bout);
        pout = &bout;
    }
    int value = 0x5a5a5a5a;
    spmd_block block;
    memset(&block, 0xA5, sizeof block);
    spmd_clear_error();
    spmd_status st = SPMD_ERR_INTERNAL;
    switch (c->op) {
    case C_PSUM:
        st = spmd_psum(ctx, pin, pout, c->axes);
        break;
    case C_PMEAN:
        st = spmd_pmean(ctx, pin, pout, c->axes);
        break;
    case C_PMAX:
        st = spmd_pmax(ctx, pin, pout, c->axes);
        break;
    case C_PMIN:
        st = spmd_pmin(ctx, pin, pout, c->axes);
        break;
    case C_ALL_GATHER:
        st = spmd_all_gather(ctx, pin, pout, c->axes, c->i1, c->i2);
        break;
    case C_PSUM_SCATTER:
        st = spmd_psum_scatter(ctx, pin, pout, c->axes, c->i1, c->i2);
        break;
    case C_PPERMUTE:
        st = spmd_ppermute(ctx, pin, pout, c->axes, c->pairs, c->npairs);
        break;
    case C_ALL_TO_ALL:
        st = spmd_all_to_all(ctx, pin, pout, c->axes, c->i1, c->i2, c->i3);
        break;
    case C_PBROADCAST:
        st = spmd_pbroadcast(ctx, pin, pout, c->axes, c->i1);
        break;
    case C_PSEND:
        st = spmd_psend(ctx, pin, c->axes, c->pairs, c->npairs);
        break;
    case C_PRECV:
        st = spmd_precv(ctx, pout, c->axes, c->pairs, c->npairs);
        break;
    case C_AXIS_INDEX:
        st = spmd_axis_index(ctx, c->axes, c->null_result ? NULL : &value);
        break;
    case C_AXIS_SIZE:
        st = spmd_axis_size(ctx, c->axes, c->null_result ? NULL : &value);
        break;
    case C_CTX_ALLOC:
        st = spmd_ctx_alloc(ctx, c->ndim, c->shape, c->dtype, c->null_result ? NULL : &block);
        break;
    case C_PSUM_G:
        st = spmd_psum_groups(ctx, pin, pout, c->axes, c->groups);
        break;
    case C_PMEAN_G:
        st = spmd_pmean_groups(ctx, pin, pout, c->axes, c->groups);
        break;
    case C_PMAX_G:
        st = spmd_pmax_groups(ctx, pin, pout, c->axes, c->groups);
        break;
    case C_PMIN_G:
        st = spmd_pmin_groups(ctx, pin, pout, c->axes, c->groups);
        break;
    case C_ALL_GATHER_G:
        st = spmd_all_gather_groups(ctx, pin, pout, c->axes, c->i1, c->i2, c->groups);
        break;
    case C_PSUM_SCATTER_G:
        st = spmd_psum_scatter_groups(ctx, pin, pout, c->axes, c->i1, c->i2, c->groups);
        break;
    case C_ALL_TO_ALL_G:
        st = spmd_all_to_all_groups(ctx, pin, pout, c->axes, c->i1, c->i2, c->i3, c->groups);
        break;
    case C_PSWAPAXES:
        st = spmd_pswapaxes(ctx, pin, pout, c->axes, c->i1, c->groups);
        break;
    case C_PSHUFFLE:
        st = spmd_pshuffle(ctx, pin, pout, c->axes, c->pairs, c->npairs);
        break;
    case C_PARGMAX:
        st = spmd_pargmax(ctx, pin, pout, c->axes);
        break;
    case C_PARGMIN:
        st = spmd_pargmin(ctx, pin, pout, c->axes);
        break;
    case C_PSUM_MANY:
    case C_PMEAN_MANY:
    case C_PMAX_MANY:
    case C_PMIN_MANY:
    case C_ALL_GATHER_MANY:
    case C_PPERMUTE_MANY:
    case C_ALL_TO_ALL_MANY:
    case C_PSWAPAXES_MANY:
        st = call_many(ctx, c, pin, pout, d);
        break;
    case C_RAGGED:
        st = call_ragged(ctx, c, pin, pout, d);
        break;
    case C_ALL_GATHER_INV:
        st = spmd_all_gather_invariant(ctx, pin, pout, c->axes, c->i1, c->i2);
        break;
    }
    r->status = st;
    snprintf(r->message, sizeof r->message, "%s", spmd_last_error());
    r->value = value;
    r->block = block;
    r->ran = 1;
    return SPMD_OK;
}

/* Runs the case on every device of M and checks what each got. */
static void run_coll(const coll_case *c, spmd_status want, spmd_status alt)
{
    memset(g_results, 0, sizeof g_results);
    spmd_clear_error();
    /* the call itself fails when a collective refuses its arguments (that aborts the call) */
    spmd_status call =
        spmd_shard_map(M, coll_body, (void *)c, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL);
    for (int d = 0; d < NDEV; d++) {
        const dev_result *r = &g_results[d];
        if (!r->ran) {
            case_fail("harness", "fn did not run on device %d (spmd_shard_map returned %s: %s)", d,
                      spmd_status_name(call), spmd_last_error());
            return;
        }
    }
    const dev_result *r0 = &g_results[0];
    check_failure(r0->status, r0->message, want, alt, "on device 0: ");
    for (int d = 1; d < NDEV; d++)
        if (g_results[d].status != r0->status)
            case_fail("status", "device %d returned %s but device 0 %s (%.400s)", d,
                      spmd_status_name(g_results[d].status), spmd_status_name(r0->status),
                      g_results[d].message);
    if (r0->status != SPMD_OK && c->op == C_CTX_ALLOC)
        check_untouched(&r0->block, sizeof r0->block, "*block");
    if (r0->status != SPMD_OK && (c->op == C_AXIS_INDEX || c->op == C_AXIS_SIZE) &&
        r0->value != 0x5a5a5a5a)
        case_fail("modified", "failed but wrote %d into the result", r0->value);
}

#define BAD_COLL_L(label, want, alt, ...)                                                          \
    do {                                                                                           \
        if (case_begin(label)) {                                                                   \
            const coll_case c_ = {__VA_ARGS__};                                                    \
            run_coll(&c_, (want), (alt));                                                          \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)
#define BAD_COLL2(want, alt, ...) BAD_COLL_L(#__VA_ARGS__, want, alt, __VA_ARGS__)
#define BAD_COLL(want, ...) BAD_COLL_L(#__VA_ARGS__, want, want, __VA_ARGS__)

/* ==== shard_map.h: inside a body ============================================================== */

void sweep_spmd_ctx_alloc(void)
{
    spmd_block b;
    BAD_KEEP(INV, b, spmd_ctx_alloc(NULL, 2, S22, F32, &b));
    fixture_up();
    BAD_COLL(INV, .op = C_CTX_ALLOC, .ndim = 2, .shape = S22, .dtype = F32, .null_result = 1);
    BAD_COLL2(SHP, INV, .op = C_CTX_ALLOC, .ndim = -1, .shape = S22, .dtype = F32);
    BAD_COLL2(SHP, INV, .op = C_CTX_ALLOC, .ndim = SPMD_MAX_RANK + 1, .shape = S17, .dtype = F32);
    BAD_COLL2(SHP, INV, .op = C_CTX_ALLOC, .ndim = INT_MAX, .shape = S22, .dtype = F32);
    BAD_COLL2(SHP, INV, .op = C_CTX_ALLOC, .ndim = INT_MIN, .shape = S22, .dtype = F32);
    BAD_COLL2(INV, SHP, .op = C_CTX_ALLOC, .ndim = 2, .shape = NULL, .dtype = F32);
    BAD_COLL(INV, .op = C_CTX_ALLOC, .ndim = 2, .shape = S22, .dtype = COUNT);
    BAD_COLL(INV, .op = C_CTX_ALLOC, .ndim = 2, .shape = S22, .dtype = MINUS1);
    BAD_COLL(SHP, .op = C_CTX_ALLOC, .ndim = 2, .shape = S04, .dtype = F32);
    BAD_COLL(SHP, .op = C_CTX_ALLOC, .ndim = 2, .shape = S4N, .dtype = F32);
    BAD_COLL(SHP, .op = C_CTX_ALLOC, .ndim = 2, .shape = SMIN, .dtype = F32);
    BAD_COLL(SHP, .op = C_CTX_ALLOC, .ndim = 1, .shape = S2P62, .dtype = F32);
    BAD_COLL(SHP, .op = C_CTX_ALLOC, .ndim = 2, .shape = SMAX, .dtype = F32);
}

/* psum, pmax, pmin (and most of pmean): block, dtype and axes checks, in every device. */
static void sweep_reduction(coll_op op)
{
    fixture_up();
    BAD_COLL(INV, .op = op, .in = NULL, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = NULL, .axes = "x");
    BAD_COLL2(SHP, INV, .op = op, .in = &B_NEG_RANK, .out = &B_F22, .axes = "x");
    BAD_COLL2(SHP, INV, .op = op, .in = &B_RANK17, .out = &B_F22, .axes = "x");
    BAD_COLL2(SHP, INV, .op = op, .in = &B_MAX_RANK, .out = &B_F22, .axes = "x");
    BAD_COLL2(SHP, INV, .op = op, .in = &B_MIN_RANK, .out = &B_F22, .axes = "x");
    BAD_COLL2(SHP, INV, .op = op, .in = &B_F22, .out = &B_NEG_RANK, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_COUNT, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_MINUS1, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_COUNT, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_NODATA, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_NODATA, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_ZERO, .out = &B_ZERO, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_NEG, .out = &B_NEG, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_I64MIN, .out = &B_I64MIN, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F23, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F222, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = NULL);
    BAD_COLL(SPC, .op = op, .in = &B_F22, .out = &B_F22, .axes = "");
    BAD_COLL(SPC, .op = op, .in = &B_F22, .out = &B_F22, .axes = "z");
    BAD_COLL(SPC, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x,x");
    BAD_COLL(SPC, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x,,z");
    BAD_COLL(SHP, .op = op, .in = &B_HUGE, .out = &B_HUGE, .axes = "x");
}

void sweep_spmd_psum(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_psum(NULL, &b, &b, "x"));
    sweep_reduction(C_PSUM);
    BAD_COLL(SHP, .op = C_PSUM, .in = &B_F22, .out = &B_I22, .axes = "x");
    BAD_COLL(UNS, .op = C_PSUM, .in = &B_U22, .out = &B_U22, .axes = "x");
}

void sweep_spmd_pmax(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pmax(NULL, &b, &b, "x"));
    sweep_reduction(C_PMAX);
    BAD_COLL(SHP, .op = C_PMAX, .in = &B_F22, .out = &B_I22, .axes = "x");
    BAD_COLL(UNS, .op = C_PMAX, .in = &B_U22, .out = &B_U22, .axes = "x");
}

void sweep_spmd_pmin(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pmin(NULL, &b, &b, "x"));
    sweep_reduction(C_PMIN);
    BAD_COLL(SHP, .op = C_PMIN, .in = &B_F22, .out = &B_I22, .axes = "x");
    BAD_COLL(UNS, .op = C_PMIN, .in = &B_U22, .out = &B_U22, .axes = "x");
}

void sweep_spmd_pmean(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pmean(NULL, &b, &b, "x"));
    sweep_reduction(C_PMEAN);
    BAD_COLL(SHP, .op = C_PMEAN, .in = &B_F22, .out = &B_F64_22, .axes = "x");
    BAD_COLL(SHP, .op = C_PMEAN, .in = &B_I22, .out = &B_I22, .axes = "x");
}

static void sweep_all_gather_op(coll_op op)
{
    fixture_up();
    /* the group of "x" has 2 devices: a (2, 2) block gathers to (2, 2, 2) untiled, axis 0 */
    BAD_COLL(INV, .op = op, .in = NULL, .out = &B_F222, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = NULL, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_COUNT, .out = &B_F222, .axes = "x");
    BAD_COLL2(SHP, INV, .op = op, .in = &B_NEG_RANK, .out = &B_F222, .axes = "x");
    BAD_COLL2(SHP, INV, .op = op, .in = &B_MAX_RANK, .out = &B_F222, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_NODATA, .out = &B_F222, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_ZERO, .out = &B_F222, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F222, .axes = "x", .i1 = 3);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F222, .axes = "x", .i1 = -4);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F222, .axes = "x", .i1 = INT_MAX);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F222, .axes = "x", .i1 = INT_MIN);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = 2, .i2 = 1);
    BAD_COLL(INV, .op = op, .in = &B_F0, .out = &B_F2, .axes = "x", .i1 = 0, .i2 = 1);
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F33, .axes = "x", .i2 = 1);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F222, .axes = NULL);
    BAD_COLL(SPC, .op = op, .in = &B_F22, .out = &B_F222, .axes = "z");
    BAD_COLL(SPC, .op = op, .in = &B_F22, .out = &B_F222, .axes = "");
    BAD_COLL(SHP, .op = op, .in = &B_HUGE, .out = &B_HUGE3, .axes = "x");
}

void sweep_spmd_all_gather(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_all_gather(NULL, &b, &b, "x", 0, 0));
    sweep_all_gather_op(C_ALL_GATHER);
}

void sweep_spmd_all_gather_invariant(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_all_gather_invariant(NULL, &b, &b, "x", 0, 0));
    sweep_all_gather_op(C_ALL_GATHER_INV);
}

void sweep_spmd_psum_scatter(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_psum_scatter(NULL, &b, &b, "x", 0, 0));
    fixture_up();
    /* the group of "x" has 2 devices: (2, 2) scatters to (2,) untiled along dimension 0 */
    BAD_COLL(INV, .op = C_PSUM_SCATTER, .in = NULL, .out = &B_F2, .axes = "x");
    BAD_COLL(INV, .op = C_PSUM_SCATTER, .in = &B_F22, .out = NULL, .axes = "x");
    BAD_COLL(INV, .op = C_PSUM_SCATTER, .in = &B_COUNT, .out = &B_F2, .axes = "x");
    BAD_COLL2(SHP, INV, .op = C_PSUM_SCATTER, .in = &B_RANK17, .out = &B_F2, .axes = "x");
    BAD_COLL(INV, .op = C_PSUM_SCATTER, .in = &B_NODATA, .out = &B_F2, .axes = "x");
    BAD_COLL(UNS, .op = C_PSUM_SCATTER, .in = &B_U22, .out = &B_U22, .axes = "x");
    BAD_COLL(INV, .op = C_PSUM_SCATTER, .in = &B_F22, .out = &B_F2, .axes = "x", .i1 = 2);
    BAD_COLL(INV, .op = C_PSUM_SCATTER, .in = &B_F22, .out = &B_F2, .axes = "x", .i1 = -3);
    BAD_COLL(INV, .op = C_PSUM_SCATTER, .in = &B_F22, .out = &B_F2, .axes = "x", .i1 = INT_MAX);
    BAD_COLL(INV, .op = C_PSUM_SCATTER, .in = &B_F22, .out = &B_F2, .axes = "x", .i1 = INT_MIN);
    BAD_COLL(INV, .op = C_PSUM_SCATTER, .in = &B_F0, .out = &B_F0, .axes = "x");
    BAD_COLL(SHP, .op = C_PSUM_SCATTER, .in = &B_F33, .out = &B_F2, .axes = "x");
    BAD_COLL(SHP, .op = C_PSUM_SCATTER, .in = &B_F33, .out = &B_F2, .axes = "x", .i2 = 1);
    BAD_COLL(SHP, .op = C_PSUM_SCATTER, .in = &B_F22, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = C_PSUM_SCATTER, .in = &B_F22, .out = &B_F2, .axes = NULL);
    BAD_COLL(SPC, .op = C_PSUM_SCATTER, .in = &B_F22, .out = &B_F2, .axes = "z");
}

static const int PAIRS_SWAP[4] = {0, 1, 1, 0}, PAIRS_DUP_SRC[4] = {0, 1, 0, 0},
                 PAIRS_DUP_DST[4] = {0, 1, 1, 1}, PAIRS_LONG[10] = {0, 1, 1, 0, 0, 1, 1, 0, 0, 1};

void sweep_spmd_pbroadcast(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pbroadcast(NULL, &b, &b, "x", 0));
    fixture_up();
    BAD_COLL(INV, .op = C_PBROADCAST, .in = NULL, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = C_PBROADCAST, .in = &B_F22, .out = NULL, .axes = "x");
    BAD_COLL(INV, .op = C_PBROADCAST, .in = &B_NODATA, .out = &B_F22, .axes = "x");
    BAD_COLL(SHP, .op = C_PBROADCAST, .in = &B_F22, .out = &B_F23, .axes = "x");
    BAD_COLL(SHP, .op = C_PBROADCAST, .in = &B_F22, .out = &B_I22, .axes = "x");
    BAD_COLL(INV, .op = C_PBROADCAST, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = -1);
    BAD_COLL(INV, .op = C_PBROADCAST, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = 1 << 20);
    BAD_COLL(INV, .op = C_PBROADCAST, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = INT_MIN);
    BAD_COLL(SPC, .op = C_PBROADCAST, .in = &B_F22, .out = &B_F22, .axes = "nope");
    BAD_COLL(INV, .op = C_PBROADCAST, .in = &B_F22, .out = &B_F22, .axes = NULL);
    BAD_COLL(INV, .op = C_PBROADCAST, .in = &B_F22, .out = &B_F22, .axes = "y,x");
}

void sweep_spmd_ppermute(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_ppermute(NULL, &b, &b, "x", PAIRS_SWAP, 2));
    fixture_up();
    BAD_COLL(INV, .op = C_PPERMUTE, .in = NULL, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_F22, .out = NULL, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_COUNT, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_NODATA, .out = &B_F22, .axes = "x",
             .pairs = PAIRS_SWAP, .npairs = 2);
    BAD_COLL(SHP, .op = C_PPERMUTE, .in = &B_F22, .out = &B_F23, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(SHP, .op = C_PPERMUTE, .in = &B_F22, .out = &B_I22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = NULL,
             .npairs = 1);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = -1);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = INT_MIN);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_F22, .out = &B_F22, .axes = "x",
             .pairs = PAIRS_DUP_SRC, .npairs = 2);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_F22, .out = &B_F22, .axes = "x",
             .pairs = PAIRS_DUP_DST, .npairs = 2);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PAIRS_LONG,
             .npairs = INT_MAX);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_F22, .out = &B_F22, .axes = "y,x", .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(INV, .op = C_PPERMUTE, .in = &B_F22, .out = &B_F22, .axes = NULL, .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(SPC, .op = C_PPERMUTE, .in = &B_F22, .out = &B_F22, .axes = "z", .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(SHP, .op = C_PPERMUTE, .in = &B_HUGE, .out = &B_HUGE, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2);
}

void sweep_spmd_all_to_all(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_all_to_all(NULL, &b, &b, "x", 0, 0, 0));
    fixture_up();
    /* the group of "x" has 2 devices: (2, 2) split along 0 untiled */
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = NULL, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_F22, .out = NULL, .axes = "x");
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_COUNT, .out = &B_F22, .axes = "x");
    BAD_COLL2(SHP, INV, .op = C_ALL_TO_ALL, .in = &B_MIN_RANK, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_NODATA, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = 2);
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = -3);
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = INT_MAX);
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = INT_MIN);
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_F22, .out = &B_F22, .axes = "x", .i2 = 2);
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_F22, .out = &B_F22, .axes = "x", .i2 = INT_MAX);
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_F22, .out = &B_F22, .axes = "x", .i2 = INT_MIN);
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_F0, .out = &B_F0, .axes = "x");
    BAD_COLL(SHP, .op = C_ALL_TO_ALL, .in = &B_F33, .out = &B_F33, .axes = "x");
    BAD_COLL(SHP, .op = C_ALL_TO_ALL, .in = &B_F33, .out = &B_F33, .axes = "x", .i3 = 1);
    BAD_COLL(SHP, .op = C_ALL_TO_ALL, .in = &B_F22, .out = &B_F23, .axes = "x");
    BAD_COLL(INV, .op = C_ALL_TO_ALL, .in = &B_F22, .out = &B_F22, .axes = NULL);
    BAD_COLL(SPC, .op = C_ALL_TO_ALL, .in = &B_F22, .out = &B_F22, .axes = "z");
}

/* axis_index_groups over "x" (2 positions) and "x,y" (4): every way to get them wrong. */
static const int POS01[2] = {0, 1}, POS00[2] = {0, 0}, POS02[2] = {0, 2}, POSM1[2] = {-1, 0},
                 POS0123[4] = {0, 1, 2, 3}, SIZES13[2] = {1, 3}, SIZES04[2] = {0, 4},
                 SIZES22[2] = {2, 2}, SIZES_NEG[2] = {-1, 5};
static const spmd_axis_groups G_NONE = {0, NULL, POS01}, G_NEG = {-1, NULL, POS01},
                              G_MANY = {3, NULL, POS01}, G_NOPOS = {1, NULL, NULL},
                              G_DUP = {2, NULL, POS00}, G_RANGE = {2, NULL, POS02},
                              G_NEGPOS = {2, NULL, POSM1}, G_UNDIVIDED = {3, NULL, POS0123},
                              G_SHORT = {2, SIZES22, POS01}, G_ZERO = {2, SIZES04, POS0123},
                              G_SIZE_NEG = {2, SIZES_NEG, POS0123},
                              G_UNEVEN = {2, SIZES13, POS0123}, G_PAIRS = {1, NULL, POS01};

static void sweep_groups(coll_op op, const spmd_block *in, const spmd_block *out, int uneven_ok)
{
    fixture_up();
    const spmd_axis_groups *bad[] = {&G_NONE, &G_NEG,   &G_MANY,   &G_NOPOS,
                                     &G_DUP,  &G_RANGE, &G_NEGPOS, &G_SHORT};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        BAD_COLL(INV, .op = op, .in = in, .out = out, .axes = "x", .groups = bad[k]);
    BAD_COLL(INV, .op = op, .in = in, .out = out, .axes = "x,y", .groups = &G_UNDIVIDED);
    BAD_COLL(INV, .op = op, .in = in, .out = out, .axes = "x,y", .groups = &G_ZERO);
    BAD_COLL(INV, .op = op, .in = in, .out = out, .axes = "x,y", .groups = &G_SIZE_NEG);
    if (!uneven_ok)
        BAD_COLL(INV, .op = op, .in = in, .out = out, .axes = "x,y", .groups = &G_UNEVEN);
    BAD_COLL(INV, .op = op, .in = in, .out = out, .axes = NULL, .groups = &G_PAIRS);
    BAD_COLL(SPC, .op = op, .in = in, .out = out, .axes = "z", .groups = &G_PAIRS);
    BAD_COLL(INV, .op = op, .in = NULL, .out = out, .axes = "x", .groups = &G_PAIRS);
    BAD_COLL(INV, .op = op, .in = in, .out = NULL, .axes = "x", .groups = &G_PAIRS);
}

void sweep_spmd_psum_groups(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_psum_groups(NULL, &b, &b, "x", &G_PAIRS));
    sweep_reduction(C_PSUM_G);
    sweep_groups(C_PSUM_G, &B_F22, &B_F22, 1);
}

void sweep_spmd_pmean_groups(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pmean_groups(NULL, &b, &b, "x", &G_PAIRS));
    sweep_reduction(C_PMEAN_G);
    sweep_groups(C_PMEAN_G, &B_F22, &B_F22, 0);
}

void sweep_spmd_pmax_groups(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pmax_groups(NULL, &b, &b, "x", &G_PAIRS));
    sweep_reduction(C_PMAX_G);
    sweep_groups(C_PMAX_G, &B_F22, &B_F22, 1);
}

void sweep_spmd_pmin_groups(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pmin_groups(NULL, &b, &b, "x", &G_PAIRS));
    sweep_reduction(C_PMIN_G);
    sweep_groups(C_PMIN_G, &B_F22, &B_F22, 1);
}

/* The _many forms: every check of the one-block form, plus the count and a bad last block. */
static void sweep_many(coll_op op, const spmd_block *good_out, const spmd_block *bad_out)
{
    if (op == C_ALL_GATHER_MANY)
        sweep_all_gather_op(op);
    else
        sweep_reduction(op);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = good_out, .axes = "x", .i3 = -1);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = good_out, .axes = "x", .i3 = INT_MIN);
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = good_out, .axes = "x", .i3 = 3, .out2 = bad_out);
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = good_out, .axes = "x", .i3 = 2, .out2 = &B_I22);
}

void sweep_spmd_ppermute_many(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_ppermute_many(NULL, 1, &b, &b, "x", PAIRS_SWAP, 2));
    fixture_up();
    const coll_op op = C_PPERMUTE_MANY;
    BAD_COLL(INV, .op = op, .in = NULL, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = NULL, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(INV, .op = op, .in = &B_NODATA, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2, .i3 = -1);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2, .i3 = INT_MIN);
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2, .i3 = 3, .out2 = &B_F23);
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP,
             .npairs = 2, .i3 = 2, .out2 = &B_I22);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = NULL, .npairs = 1,
             .i3 = 2);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PAIRS_DUP_SRC,
             .npairs = 2, .i3 = 2);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "y,x", .pairs = PAIRS_SWAP,
             .npairs = 2, .i3 = 2);
}

void sweep_spmd_psend(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_psend(NULL, &b, "x", PAIRS_SWAP, 2));
    fixture_up();
    BAD_COLL(INV, .op = C_PSEND, .in = NULL, .axes = "x", .pairs = PAIRS_SWAP, .npairs = 2);
    BAD_COLL(INV, .op = C_PSEND, .in = &B_NODATA, .axes = "x", .pairs = PAIRS_SWAP, .npairs = 2);
    BAD_COLL(INV, .op = C_PSEND, .in = &B_F22, .axes = NULL, .pairs = PAIRS_SWAP, .npairs = 2);
    BAD_COLL(SPC, .op = C_PSEND, .in = &B_F22, .axes = "z", .pairs = PAIRS_SWAP, .npairs = 2);
    BAD_COLL(INV, .op = C_PSEND, .in = &B_F22, .axes = "x", .pairs = NULL, .npairs = 1);
    BAD_COLL(INV, .op = C_PSEND, .in = &B_F22, .axes = "x", .pairs = PAIRS_SWAP, .npairs = -1);
    BAD_COLL(INV, .op = C_PSEND, .in = &B_F22, .axes = "x", .pairs = PAIRS_DUP_SRC, .npairs = 2);
}

void sweep_spmd_precv(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_precv(NULL, &b, "x", PAIRS_SWAP, 2));
    fixture_up();
    BAD_COLL(INV, .op = C_PRECV, .out = &B_F22, .axes = "x", .pairs = PAIRS_SWAP, .npairs = 2);
    BAD_COLL(INV, .op = C_PRECV, .out = &B_F22, .axes = NULL, .pairs = PAIRS_SWAP, .npairs = 2);
    BAD_COLL(SPC, .op = C_PRECV, .out = &B_F22, .axes = "z", .pairs = PAIRS_SWAP, .npairs = 2);
    BAD_COLL(INV, .op = C_PRECV, .out = &B_F22, .axes = "x", .pairs = PAIRS_DUP_SRC, .npairs = 2);
}

void sweep_spmd_all_to_all_many(void)
{
    HB(b, F32, 2, 2, 2);
    static const int zero[1] = {0};
    BAD(INV, spmd_all_to_all_many(NULL, 1, &b, &b, "x", zero, zero, 0));
    fixture_up();
    const coll_op op = C_ALL_TO_ALL_MANY;
    BAD_COLL(INV, .op = op, .in = NULL, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = NULL, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_NODATA, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i3 = -1);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i3 = INT_MIN);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = 2);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i2 = INT_MIN);
    BAD_COLL(SPC, .op = op, .in = &B_F22, .out = &B_F22, .axes = "nope");
    BAD_COLL(SHP, .op = op, .in = &B_F33, .out = &B_F33, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_F33, .out = &B_F33, .axes = "x", .npairs = 1);
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i3 = 3, .out2 = &B_F23);
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i3 = 2, .out2 = &B_I22);
}

void sweep_spmd_ragged_all_to_all(void)
{
    HB(b, F32, 2, 2, 2);
    HB(k, SPMD_DTYPE_I32, 1, 2);
    BAD(INV, spmd_ragged_all_to_all(NULL, &b, &b, &k, &k, &k, &k, &b, "x"));
    fixture_up();
    const coll_op op = C_RAGGED;
    BAD_COLL(INV, .op = op, .in = NULL, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = NULL, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_NODATA, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = NULL);
    BAD_COLL(SPC, .op = op, .in = &B_F22, .out = &B_F22, .axes = "z");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = 1);
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = 2);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = 3);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = 4);
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F23, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_F0, .out = &B_F0, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_I22, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .out2 = &B_F33);
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .out2 = &B_I22);
}

void sweep_spmd_pswapaxes_many(void)
{
    HB(b, F32, 2, 2, 2);
    static const int zero[1] = {0};
    BAD(INV, spmd_pswapaxes_many(NULL, 1, &b, &b, "x", zero));
    fixture_up();
    const coll_op op = C_PSWAPAXES_MANY;
    BAD_COLL(INV, .op = op, .in = NULL, .out = &B_F22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = 2);
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = INT_MAX);
    BAD_COLL(SHP, .op = op, .in = &B_F33, .out = &B_F33, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x", .i3 = 2, .out2 = &B_F23);
}

void sweep_spmd_psum_many(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_psum_many(NULL, 1, &b, &b, "x"));
    sweep_many(C_PSUM_MANY, &B_F22, &B_F23);
    BAD_COLL(UNS, .op = C_PSUM_MANY, .in = &B_U22, .out = &B_U22, .axes = "x", .i3 = 2);
}

void sweep_spmd_pmean_many(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pmean_many(NULL, 1, &b, &b, "x"));
    sweep_many(C_PMEAN_MANY, &B_F22, &B_F64_22);
}

void sweep_spmd_pmax_many(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pmax_many(NULL, 1, &b, &b, "x"));
    sweep_many(C_PMAX_MANY, &B_F22, &B_F222);
}

void sweep_spmd_pmin_many(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pmin_many(NULL, 1, &b, &b, "x"));
    sweep_many(C_PMIN_MANY, &B_F22, &B_F33);
}

void sweep_spmd_all_gather_many(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_all_gather_many(NULL, 1, &b, &b, "x", 0, 0));
    sweep_many(C_ALL_GATHER_MANY, &B_F222, &B_F22);
}

void sweep_spmd_all_gather_groups(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_all_gather_groups(NULL, &b, &b, "x", 0, 0, &G_PAIRS));
    sweep_groups(C_ALL_GATHER_G, &B_F22, &B_F222, 0);
    BAD_COLL(SHP, .op = C_ALL_GATHER_G, .in = &B_F22, .out = &B_F22, .axes = "x",
             .groups = &G_PAIRS);
}

void sweep_spmd_psum_scatter_groups(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_psum_scatter_groups(NULL, &b, &b, "x", 0, 0, &G_PAIRS));
    sweep_groups(C_PSUM_SCATTER_G, &B_F22, &B_F2, 0);
    BAD_COLL(SHP, .op = C_PSUM_SCATTER_G, .in = &B_F33, .out = &B_F2, .axes = "x",
             .groups = &G_PAIRS);
}

void sweep_spmd_all_to_all_groups(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_all_to_all_groups(NULL, &b, &b, "x", 0, 0, 0, &G_PAIRS));
    sweep_groups(C_ALL_TO_ALL_G, &B_F22, &B_F22, 0);
    BAD_COLL(SHP, .op = C_ALL_TO_ALL_G, .in = &B_F33, .out = &B_F33, .axes = "x",
             .groups = &G_PAIRS);
}

void sweep_spmd_pswapaxes(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pswapaxes(NULL, &b, &b, "x", 0, NULL));
    sweep_groups(C_PSWAPAXES, &B_F22, &B_F22, 0);
    BAD_COLL(INV, .op = C_PSWAPAXES, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = 2);
    BAD_COLL(INV, .op = C_PSWAPAXES, .in = &B_F22, .out = &B_F22, .axes = "x", .i1 = INT_MIN);
    BAD_COLL(SHP, .op = C_PSWAPAXES, .in = &B_F33, .out = &B_F33, .axes = "x");
    BAD_COLL(SHP, .op = C_PSWAPAXES, .in = &B_F22, .out = &B_F23, .axes = "x");
}

static const int PERM_DUP[2] = {1, 1}, PERM_RANGE[2] = {0, 2}, PERM_NEG[2] = {-1, 0};

void sweep_spmd_pshuffle(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pshuffle(NULL, &b, &b, "x", POS01, 2));
    fixture_up();
    BAD_COLL(INV, .op = C_PSHUFFLE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PERM_DUP,
             .npairs = 2);
    BAD_COLL(INV, .op = C_PSHUFFLE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PERM_RANGE,
             .npairs = 2);
    BAD_COLL(INV, .op = C_PSHUFFLE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = PERM_NEG,
             .npairs = 2);
    BAD_COLL(INV, .op = C_PSHUFFLE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = NULL,
             .npairs = 2);
    /* a permutation of range(n), but "x" has 2 positions (JAX's docstring rule) */
    BAD_COLL(INV, .op = C_PSHUFFLE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = POS01,
             .npairs = 1);
    BAD_COLL(INV, .op = C_PSHUFFLE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = NULL,
             .npairs = 0);
    BAD_COLL(INV, .op = C_PSHUFFLE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = POS01,
             .npairs = -1);
    BAD_COLL(INV, .op = C_PSHUFFLE, .in = &B_F22, .out = &B_F22, .axes = "x", .pairs = POS01,
             .npairs = INT_MIN);
    BAD_COLL(INV, .op = C_PSHUFFLE, .in = NULL, .out = &B_F22, .axes = "x", .pairs = POS01,
             .npairs = 2);
    BAD_COLL(SHP, .op = C_PSHUFFLE, .in = &B_F22, .out = &B_F23, .axes = "x", .pairs = POS01,
             .npairs = 2);
    BAD_COLL(SPC, .op = C_PSHUFFLE, .in = &B_F22, .out = &B_F22, .axes = "z", .pairs = POS01,
             .npairs = 2);
}

static void sweep_parg(coll_op op)
{
    fixture_up();
    BAD_COLL(INV, .op = op, .in = NULL, .out = &B_I22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = NULL, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_COUNT, .out = &B_I22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_NODATA, .out = &B_I22, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_F22, .out = &B_F22, .axes = "x");
    BAD_COLL(SHP, .op = op, .in = &B_F23, .out = &B_I22, .axes = "x");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_I22, .axes = "x,y");
    BAD_COLL(INV, .op = op, .in = &B_F22, .out = &B_I22, .axes = NULL);
    BAD_COLL(SPC, .op = op, .in = &B_F22, .out = &B_I22, .axes = "z");
    BAD_COLL(UNS, .op = op, .in = &B_U22, .out = &B_I22, .axes = "x");
}

void sweep_spmd_pargmax(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pargmax(NULL, &b, &b, "x"));
    sweep_parg(C_PARGMAX);
}

void sweep_spmd_pargmin(void)
{
    HB(b, F32, 2, 2, 2);
    BAD(INV, spmd_pargmin(NULL, &b, &b, "x"));
    sweep_parg(C_PARGMIN);
}

static void sweep_axis_query(coll_op op)
{
    char long_axes[200];
    memset(long_axes, 'q', sizeof long_axes - 1);
    long_axes[sizeof long_axes - 1] = '\0';
    fixture_up();
    BAD_COLL(INV, .op = op, .axes = NULL);
    BAD_COLL(SPC, .op = op, .axes = "");
    BAD_COLL(SPC, .op = op, .axes = "z");
    BAD_COLL(SPC, .op = op, .axes = "x,x");
    BAD_COLL(SPC, .op = op, .axes = long_axes);
    BAD_COLL(INV, .op = op, .axes = "x", .null_result = 1);
}

void sweep_spmd_axis_index(void)
{
    int v;
    BAD_KEEP(INV, v, spmd_axis_index(NULL, "x", &v));
    sweep_axis_query(C_AXIS_INDEX);
}

void sweep_spmd_axis_size(void)
{
    int v;
    BAD_KEEP(INV, v, spmd_axis_size(NULL, "x", &v));
    sweep_axis_query(C_AXIS_SIZE);
}
