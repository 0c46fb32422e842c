/* The sweeps of array_ops.h, the ops on whole arrays (test_api_sweep), with their own fixtures. */
#define _POSIX_C_SOURCE 200809L

#include "sweep.h"

/* ==== array_ops.h ============================================================================= */

/* More fixtures for the ops on whole arrays, made by xfix_up (after fixture_up) and freed by
 * fixture_down. */
static spmd_spec *P_YX, *P_U, *P_YU;
static spmd_sharding *S_YX; /* M, P('y', 'x') */
static spmd_sharding *S_U;  /* M, P(unreduced={'x'}) */
static spmd_sharding *S_YU; /* M, P('y', unreduced={'x'}) */
static spmd_array *A_YX;    /* float32 (4, 4) on S_YX */
static spmd_array *A_U;     /* float32 (4) on S_YU: the sum of A over dimension 0, unreduced */
static spmd_array *A_BOOL;  /* bool (4, 4) on S_XY */
static spmd_array *A_U8;    /* uint8 (4, 4) on S_XY */
static spmd_array *I32_X;   /* int32 (4, 4) on S_X: dimension 1 unsharded */
static spmd_array *COL_X;   /* float32 (4, 1) on S_X */
static spmd_array *ROW_X;   /* float32 (4) on S_X */
static spmd_array *IDX;     /* int32 (2) on S_REP: indices 0, 1 */
static spmd_array *IDX_X;   /* int32 (4) on S_X: indices 0, 1, 0, 1 */
static int g_xfix_up;

static const int32_t IDX_DATA[4] = {0, 1, 0, 1};
static const uint8_t ZERO_BYTES[64];
static const int64_t S41[2] = {4, 1}, S2[1] = {2};

/* What a failing op must leave as it was: every operand it could have been given (fixture
 * arrays), alive, in its sharding, with the same bytes on every device. */
enum { MAX_WATCHED = 24, WATCH_BYTES = 256 };
typedef struct watched {
    spmd_array *x;
    const char *name;
    const spmd_sharding *sharding;
    int ndim, nshards;
    spmd_dtype dtype;
    int64_t shape[SPMD_MAX_RANK];
    unsigned char bytes[NDEV][WATCH_BYTES];
    size_t nbytes[NDEV];
} watched;
static watched g_watched[MAX_WATCHED];
static int g_nwatched;

static void watch(spmd_array *x, const char *name)
{
    watched *w = &g_watched[g_nwatched++];
    memset(w, 0, sizeof *w);
    w->x = x;
    w->name = name;
    w->sharding = spmd_array_sharding(x);
    w->ndim = spmd_array_ndim(x);
    w->dtype = spmd_array_dtype(x);
    memcpy(w->shape, spmd_array_shape(x), sizeof(int64_t) * (size_t)w->ndim);
    w->nshards = spmd_array_num_shards(x);
    for (int k = 0; k < w->nshards && k < NDEV; k++) {
        spmd_shard sh;
        SETUP(spmd_array_shard(x, k, &sh));
        if (sh.nbytes > WATCH_BYTES)
            die("watch: a fixture shard is too large", SPMD_ERR_INTERNAL);
        w->nbytes[k] = sh.nbytes;
        memcpy(w->bytes[k], sh.data, sh.nbytes);
    }
}

/* "Operands are never changed, also when the op fails" (array_ops.h). */
static void check_watched(void)
{
    for (int i = 0; i < g_nwatched; i++) {
        const watched *w = &g_watched[i];
        int k = 0;
        if (spmd_array_sharding(w->x) != w->sharding || spmd_array_ndim(w->x) != w->ndim ||
            spmd_array_dtype(w->x) != w->dtype || spmd_array_num_shards(w->x) != w->nshards ||
            !spmd_array_shape(w->x) ||
            memcmp(spmd_array_shape(w->x), w->shape, sizeof(int64_t) * (size_t)w->ndim) != 0) {
            case_fail("modified", "failed but changed the type or sharding of %s", w->name);
            continue;
        }
        for (k = 0; k < w->nshards && k < NDEV; k++) {
            spmd_shard sh;
            if (spmd_array_shard(w->x, k, &sh) != SPMD_OK) {
                case_fail("modified", "failed but deleted %s (shard %d: %s)", w->name, k,
                          spmd_last_error());
                break;
            }
            if (sh.nbytes != w->nbytes[k] || memcmp(sh.data, w->bytes[k], sh.nbytes) != 0) {
                case_fail("modified", "failed but changed the data of %s (shard %d)", w->name, k);
                break;
            }
        }
    }
}

static void xfix_up(void)
{
    fixture_up();
    if (g_xfix_up)
        return;
    g_xfix_up = 1;
    SETUP(spmd_spec_parse("'y', 'x'", &P_YX));
    SETUP(spmd_spec_parse("unreduced={'x'}", &P_U));
    SETUP(spmd_spec_parse("'y', unreduced={'x'}", &P_YU));
    SETUP(spmd_sharding_create(M, P_YX, &S_YX));
    SETUP(spmd_sharding_create(M, P_U, &S_U));
    SETUP(spmd_sharding_create(M, P_YU, &S_YU));
    SETUP(spmd_device_put(HOST, 2, S44, F32, S_YX, &A_YX));
    SETUP(spmd_device_put(ZERO_BYTES, 2, S44, SPMD_DTYPE_BOOL, S_XY, &A_BOOL));
    SETUP(spmd_device_put(HOST, 2, S44, SPMD_DTYPE_U8, S_XY, &A_U8));
    SETUP(spmd_device_put(HOST, 2, S44, SPMD_DTYPE_I32, S_X, &I32_X));
    SETUP(spmd_device_put(HOST, 2, S41, F32, S_X, &COL_X));
    SETUP(spmd_device_put(HOST, 1, S4, F32, S_X, &ROW_X));
    SETUP(spmd_device_put(IDX_DATA, 1, S2, SPMD_DTYPE_I32, S_REP, &IDX));
    SETUP(spmd_device_put(IDX_DATA, 1, S4, SPMD_DTYPE_I32, S_X, &IDX_X));
    const int dim0[1] = {0};
    SETUP(spmd_array_reduce(SPMD_REDUCE_SUM, A, 1, dim0, 0, S_YU, NULL, &A_U));
    g_nwatched = 0;
#define WATCH(x) watch((x), #x)
    WATCH(A);
    WATCH(A_X);
    WATCH(A_REV);
    WATCH(A_I32);
    WATCH(A_SCALAR);
    WATCH(A_RANK16);
    WATCH(A_ODD);
    WATCH(A_YX);
    WATCH(A_U);
    WATCH(A_BOOL);
    WATCH(A_U8);
    WATCH(I32_X);
    WATCH(COL_X);
    WATCH(ROW_X);
    WATCH(IDX);
    WATCH(IDX_X);
#undef WATCH
}

void xfix_down(void)
{
    if (!g_xfix_up)
        return;
    spmd_array *all[] = {A_U, IDX_X, IDX, ROW_X, COL_X, I32_X, A_U8, A_BOOL, A_YX};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        spmd_array_destroy(all[i]);
    spmd_sharding_destroy(S_YU);
    spmd_sharding_destroy(S_U);
    spmd_sharding_destroy(S_YX);
    spmd_spec_destroy(P_YU);
    spmd_spec_destroy(P_U);
    spmd_spec_destroy(P_YX);
    g_nwatched = 0;
    g_xfix_up = 0;
}

/* Options whose plan and budget a failure must leave as they were: W (no limits), W_TIGHT
 * (no collective allowed) and W_DRY (a dry run, no limits), reset before each case. */
static spmd_op_plan g_plan;
static spmd_comm_budget g_budget, g_tight;
static spmd_op_options g_w, g_w_tight, g_w_dry;
#define W ((const spmd_op_options *)&g_w)
#define W_TIGHT ((const spmd_op_options *)&g_w_tight)
#define W_DRY ((const spmd_op_options *)&g_w_dry)

static void opts_reset(void)
{
    memset(&g_plan, 0xA5, sizeof g_plan);
    g_budget = (spmd_comm_budget){-1, -1, 0, 0};
    g_tight = (spmd_comm_budget){-1, 0, 0, 0};
    g_w = (spmd_op_options){SPMD_OP_OPTIONS_VERSION, "sweep", 0, &g_plan, &g_budget};
    g_w_tight = (spmd_op_options){SPMD_OP_OPTIONS_VERSION, "sweep", 0, &g_plan, &g_tight};
    g_w_dry = (spmd_op_options){SPMD_OP_OPTIONS_VERSION, "sweep", 1, &g_plan, &g_budget};
}

static void opts_check(void)
{
    check_untouched(&g_plan, sizeof g_plan, "*opts->plan");
    if (g_budget.bytes_per_device != 0 || g_budget.collectives != 0 ||
        g_tight.bytes_per_device != 0 || g_tight.collectives != 0)
        case_fail("modified", "failed but charged opts->budget (\"never when it failed\")");
}

/* An array op that must fail with `want` (or `alt`): *out NULL (when out_arg: the call passes
 * &out), the operands, opts->plan and opts->budget unchanged. */
#define OP_L(label, want, alt, out_arg, expr)                                                      \
    do {                                                                                           \
        if (case_begin(label)) {                                                                   \
            spmd_array *out = SENTINEL(spmd_array);                                                \
            opts_reset();                                                                          \
            spmd_status st_ = (expr);                                                              \
            check_status(st_, (want), (alt));                                                      \
            if (out_arg)                                                                           \
                check_out_null(out, "*out");                                                       \
            if (out != NULL && out != SENTINEL(spmd_array))                                        \
                spmd_array_destroy(out);                                                           \
            if (st_ != SPMD_OK) {                                                                  \
                opts_check();                                                                      \
                check_watched();                                                                   \
            }                                                                                      \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)
#define OP(want, expr) OP_L(#expr, want, want, 1, expr)
#define OP2(want, alt, expr) OP_L(#expr, want, alt, 1, expr)
/* the same for a call given out NULL (or without out) */
#define OP_NO_OUT(want, expr) OP_L(#expr, want, want, 0, expr)

/* Bad options, for every op: `CALL(opts)` is the op with valid arguments otherwise. */
#define SWEEP_BAD_OPTS(CALL)                                                                       \
    do {                                                                                           \
        spmd_op_options version0_ = SPMD_OP_OPTIONS_INIT, version2_ = SPMD_OP_OPTIONS_INIT;        \
        spmd_op_options dry_run_no_plan_ = SPMD_OP_OPTIONS_INIT;                                   \
        spmd_op_options dry_run_2_ = SPMD_OP_OPTIONS_INIT, with_budget_ = SPMD_OP_OPTIONS_INIT;    \
        spmd_comm_budget max_bytes_m2_ = {-2, -1, 0, 0}, max_colls_min_ = {-1, INT_MIN, 0, 0},     \
                         spent_bytes_m1_ = {-1, -1, -1, 0}, spent_colls_m5_ = {-1, -1, 0, -5};     \
        version0_.version = 0;                                                                     \
        version2_.version = SPMD_OP_OPTIONS_VERSION + 1;                                           \
        dry_run_no_plan_.dry_run = 1;                                                              \
        dry_run_2_.dry_run = 2;                                                                    \
        dry_run_2_.plan = &g_plan;                                                                 \
        OP(INV, CALL(&version0_));                                                                 \
        OP(INV, CALL(&version2_));                                                                 \
        OP(INV, CALL(&dry_run_no_plan_));                                                          \
        OP(INV, CALL(&dry_run_2_));                                                                \
        OP(INV, CALL((with_budget_.budget = &max_bytes_m2_, &with_budget_)));                      \
        OP(INV, CALL((with_budget_.budget = &max_colls_min_, &with_budget_)));                     \
        OP(INV, CALL((with_budget_.budget = &spent_bytes_m1_, &with_budget_)));                    \
        OP(INV, CALL((with_budget_.budget = &spent_colls_m5_, &with_budget_)));                    \
    } while (0)

void sweep_spmd_op_options_init(void)
{
    spmd_op_options o;
    BAD(INV, spmd_op_options_init(NULL, SPMD_OP_OPTIONS_VERSION));
    BAD_KEEP(INV, o, spmd_op_options_init(&o, 0));
    BAD_KEEP(INV, o, spmd_op_options_init(&o, SPMD_OP_OPTIONS_VERSION + 1));
    BAD_KEEP(INV, o, spmd_op_options_init(&o, UINT_MAX));
}

void sweep_spmd_array_type_format(void)
{
    char buf[64];
    fixture_up();
    BAD_KEEP(INV, buf, spmd_array_type_format(NULL, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_array_type_format(DEAD_ARRAY, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_array_type_format(DEL, buf, sizeof buf));
    BAD(INV, spmd_array_type_format(A, NULL, sizeof buf));
    BAD(INV, spmd_array_type_format(A, NULL, 0));
    BAD_KEEP(INV, buf, spmd_array_type_format(A, buf, 0));
    BAD(INV, spmd_array_type_format(A, buf, 5)); /* too small: truncated */
}

/* mode 0: spmd_op_plan_format, 1: spmd_op_plan_json */
static void sweep_plan_text(int json)
{
    char buf[64];
    static char big[1 << 16];
    spmd_op_plan plan, bad;
    memset(&plan, 0, sizeof plan);
    snprintf(plan.op, sizeof plan.op, "matmul");
    snprintf(plan.out_type, sizeof plan.out_type, "float32[8,16@x]");
#define PLAN_TEXT(p, b, n)                                                                         \
    (json ? spmd_op_plan_json((p), (b), (n)) : spmd_op_plan_format((p), (b), (n)))
    BAD_KEEP(INV, buf, PLAN_TEXT(NULL, buf, sizeof buf));
    BAD_KEEP(INV, buf, PLAN_TEXT((bad = plan, bad.nsteps = -1, &bad), buf, sizeof buf));
    BAD_KEEP(
        INV, buf,
        PLAN_TEXT((bad = plan, bad.nsteps = SPMD_OP_PLAN_MAX_STEPS + 1, &bad), buf, sizeof buf));
    BAD_KEEP(INV, buf, PLAN_TEXT((bad = plan, bad.nsteps = INT_MAX, &bad), buf, sizeof buf));
    BAD_KEEP(INV, buf, PLAN_TEXT((bad = plan, bad.nsteps = INT_MIN, &bad), buf, sizeof buf));
    BAD(INV, PLAN_TEXT(&plan, NULL, sizeof buf));
    BAD(INV, PLAN_TEXT(&plan, NULL, 0));
    BAD_KEEP(INV, buf, PLAN_TEXT(&plan, buf, 0));
    BAD(INV, PLAN_TEXT(&plan, buf, 4)); /* too small: truncated */
    /* a plan not filled by an op: no string terminated, every step used. The text is garbage,
     * but no byte past the plan may be read (a heap block of its exact size) */
    spmd_op_plan *raw = malloc(sizeof *raw);
    if (!raw)
        die("malloc", SPMD_ERR_OUT_OF_MEMORY);
    memset(raw, 'A', sizeof *raw);
    raw->nsteps = SPMD_OP_PLAN_MAX_STEPS;
    spmd_status st = SPMD_OK;
    if (!json)
        Q_THAT(st = PLAN_TEXT(raw, big, sizeof big), st == SPMD_OK || st == INV,
               "failed with another status than SPMD_ERR_INVALID_ARGUMENT");
    free(raw);
#undef PLAN_TEXT
}

void sweep_spmd_op_plan_format(void) { sweep_plan_text(0); }
void sweep_spmd_op_plan_json(void) { sweep_plan_text(1); }

/* ---- nullary ---- */

enum { NY_ZEROS, NY_FULL, NY_IOTA, NY_RANDOM };

static spmd_status nullary(int kind, spmd_mesh *mesh, int ndim, const int64_t *shape,
                           spmd_dtype dtype, const spmd_sharding *osh, const spmd_op_options *opts,
                           spmd_array **out)
{
    switch (kind) {
    case NY_ZEROS:
        return spmd_array_zeros(mesh, ndim, shape, dtype, osh, opts, out);
    case NY_FULL:
        return spmd_array_full(mesh, ndim, shape, dtype, 1.5, osh, opts, out);
    case NY_IOTA:
        return spmd_array_iota(mesh, ndim, shape, dtype, 0, osh, opts, out);
    default:
        return spmd_array_random_values(mesh, ndim, shape, dtype, 1, SPMD_RANDOM_UNIFORM, osh, opts,
                                        out);
    }
}

static void sweep_nullary(int kind)
{
    spmd_mesh *abstract = NULL;
    const int shape22[2] = {2, 2};
    OP(INV, nullary(kind, NULL, 2, S44, F32, NULL, NULL, &out)); /* before spmd_init */
    xfix_up();
    SETUP(spmd_mesh_create_abstract(2, shape22, XY, NULL, 0, &abstract));
#define NY(...) nullary(kind, __VA_ARGS__)
#define NY_OPTS(o) NY(M, 2, S44, F32, S_XY, (o), &out)
    OP_NO_OUT(INV, NY(M, 2, S44, F32, S_XY, NULL, NULL));
    OP(INV, NY(NULL, 2, S44, F32, NULL, NULL, &out));
    OP(INV, NY(DEAD_MESH, 2, S44, F32, NULL, NULL, &out));
    OP(INV, NY(abstract, 2, S44, F32, NULL, NULL, &out));
    OP(INV, NY(M, -1, S44, F32, NULL, NULL, &out));
    OP(INV, NY(M, SPMD_MAX_RANK + 1, S17, F32, NULL, NULL, &out));
    OP(INV, NY(M, INT_MAX, S44, F32, NULL, NULL, &out));
    OP(INV, NY(M, INT_MIN, S44, F32, NULL, NULL, &out));
    OP(INV, NY(M, 2, NULL, F32, NULL, NULL, &out));
    OP(SHP, NY(M, 2, S04, F32, NULL, NULL, &out));
    OP(SHP, NY(M, 2, S4N, F32, NULL, NULL, &out));
    OP(SHP, NY(M, 2, SMIN, F32, NULL, NULL, &out));
    OP(INV, NY(M, 2, S44, COUNT, NULL, NULL, &out));
    OP(INV, NY(M, 2, S44, MINUS1, NULL, NULL, &out));
    OP(INV, NY(M, 2, S44, (spmd_dtype)INT_MAX, NULL, NULL, &out));
    OP(INV, NY(M, 2, S44, F32, DEAD_SHARDING, NULL, &out));
    OP(INV, NY(M, 2, S44, F32, S_REV, NULL, &out)); /* out_sharding on another mesh */
    OP(SPC, NY(M, 2, S44, F32, S_U, NULL, &out));   /* a new array cannot be unreduced */
    OP(SPC, NY(M, 1, S4, F32, S_XY, NULL, &out));   /* more entries than the rank */
    OP(SHP, NY(M, 2, S34, F32, S_XY, NULL, &out));  /* 3 does not split over 'x' */
    OP(SHP, NY(M, 2, S34, F32, S_XY, W, &out));     /* the same with a plan and budget */
    OP(SPC, NY(M, 2, S44, F32, S_U, W_TIGHT, &out));
    OP(SHP, NY(M, 2, S34, F32, S_XY, W_DRY, &out));
    OP(SHP, NY(M, 1, S2P62, F32, NULL, NULL, &out)); /* 2^64 bytes */
    OP(SHP, NY(M, 2, S2P32, F32, NULL, NULL, &out)); /* 2^64 elements */
    OP(SHP, NY(M, 2, SMAX, F32, NULL, NULL, &out));
    SWEEP_BAD_OPTS(NY_OPTS);
    if (kind == NY_IOTA) {
        OP(INV, spmd_array_iota(M, 2, S44, F32, -1, NULL, NULL, &out));
        OP(INV, spmd_array_iota(M, 2, S44, F32, 2, NULL, NULL, &out));
        OP(INV, spmd_array_iota(M, 2, S44, F32, INT_MAX, NULL, NULL, &out));
        OP(INV, spmd_array_iota(M, 2, S44, F32, INT_MIN, NULL, NULL, &out));
        OP(INV, spmd_array_iota(M, 0, NULL, F32, 0, NULL, NULL, &out)); /* a scalar: no dim */
    }
    if (kind == NY_RANDOM) {
        OP(UNS, spmd_array_random_values(M, 2, S44, SPMD_DTYPE_I32, 1, SPMD_RANDOM_UNIFORM, NULL,
                                         NULL, &out));
        OP(UNS, spmd_array_random_values(M, 2, S44, SPMD_DTYPE_U8, 1, SPMD_RANDOM_NORMAL, NULL,
                                         NULL, &out));
        OP(INV, spmd_array_random_values(M, 2, S44, F32, 1, (spmd_random_distribution)2, NULL, NULL,
                                         &out));
        OP(INV, spmd_array_random_values(M, 2, S44, F32, 1, (spmd_random_distribution)-1, NULL,
                                         NULL, &out));
        OP(INV, spmd_array_random_values(M, 2, S44, SPMD_DTYPE_F64, 1,
                                         (spmd_random_distribution)INT_MAX, NULL, NULL, &out));
    }
#undef NY_OPTS
#undef NY
    spmd_mesh_destroy(abstract);
}

void sweep_spmd_array_zeros(void) { sweep_nullary(NY_ZEROS); }
void sweep_spmd_array_full(void) { sweep_nullary(NY_FULL); }
void sweep_spmd_array_iota(void) { sweep_nullary(NY_IOTA); }
void sweep_spmd_array_random_values(void) { sweep_nullary(NY_RANDOM); }

/* ---- elementwise ---- */

void sweep_spmd_array_unary(void)
{
    const spmd_unary_op NEG = SPMD_UNARY_NEG;
    xfix_up();
#define UN_OPTS(o) spmd_array_unary(NEG, A, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_unary(NEG, A, NULL, NULL, NULL));
    OP(INV, spmd_array_unary(NEG, NULL, NULL, NULL, &out));
    OP(INV, spmd_array_unary(NEG, DEAD_ARRAY, NULL, NULL, &out));
    OP(INV, spmd_array_unary(NEG, DEL, NULL, NULL, &out));
    OP(INV, spmd_array_unary((spmd_unary_op)-1, A, NULL, NULL, &out));
    OP(INV, spmd_array_unary((spmd_unary_op)(SPMD_UNARY_RELU + 1), A, NULL, NULL, &out));
    OP(INV, spmd_array_unary((spmd_unary_op)INT_MAX, A, NULL, NULL, &out));
    OP(INV, spmd_array_unary((spmd_unary_op)INT_MIN, A, NULL, NULL, &out));
    OP(SPC, spmd_array_unary(NEG, A_U, NULL, NULL, &out)); /* unreduced */
    OP(INV, spmd_array_unary(NEG, A, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_unary(NEG, A, S_REV, NULL, &out));
    OP(SPC, spmd_array_unary(NEG, A, S_U, NULL, &out));
    OP(SPC, spmd_array_unary(NEG, A_SCALAR, S_X, NULL, &out)); /* longer than the rank */
    OP(SHP, spmd_array_unary(NEG, A_ODD, S_XY, NULL, &out));   /* 3 does not split */
    OP(UNS, spmd_array_unary(SPMD_UNARY_EXP, A_I32, NULL, NULL, &out));
    OP(UNS, spmd_array_unary(NEG, A_U8, NULL, NULL, &out));
    OP(UNS, spmd_array_unary(SPMD_UNARY_EXP, A_I32, NULL, W, &out)); /* plan untouched too */
    SWEEP_BAD_OPTS(UN_OPTS);
#undef UN_OPTS
}

void sweep_spmd_array_binary(void)
{
    const spmd_binary_op ADD = SPMD_BINARY_ADD;
    xfix_up();
#define BIN_OPTS(o) spmd_array_binary(ADD, A, A, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_binary(ADD, A, A, NULL, NULL, NULL));
    OP(INV, spmd_array_binary(ADD, NULL, A, NULL, NULL, &out));
    OP(INV, spmd_array_binary(ADD, A, NULL, NULL, NULL, &out));
    OP(INV, spmd_array_binary(ADD, DEAD_ARRAY, A, NULL, NULL, &out));
    OP(INV, spmd_array_binary(ADD, A, DEAD_ARRAY, NULL, NULL, &out));
    OP(INV, spmd_array_binary(ADD, DEL, A, NULL, NULL, &out));
    OP(INV, spmd_array_binary(ADD, A, DEL, NULL, NULL, &out));
    OP(INV, spmd_array_binary((spmd_binary_op)-1, A, A, NULL, NULL, &out));
    OP(INV, spmd_array_binary((spmd_binary_op)(SPMD_BINARY_XOR + 1), A, A, NULL, NULL, &out));
    OP(INV, spmd_array_binary((spmd_binary_op)INT_MAX, A, A, NULL, NULL, &out));
    OP(INV, spmd_array_binary((spmd_binary_op)INT_MIN, A, A, NULL, NULL, &out));
    OP(INV, spmd_array_binary(ADD, A, A_REV, NULL, NULL, &out)); /* two meshes */
    OP(INV, spmd_array_binary(ADD, A_REV, A, NULL, NULL, &out));
    OP(INV, spmd_array_binary(ADD, A, A_I32, NULL, NULL, &out)); /* dtypes differ */
    OP(SHP, spmd_array_binary(ADD, A, A_ODD, NULL, NULL, &out)); /* (4, 4) and (3, 4) */
    OP(SHP, spmd_array_binary(ADD, A_ODD, A, S_REP, NULL, &out));
    OP(SPC, spmd_array_binary(ADD, A, A_U, NULL, NULL, &out)); /* unreduced */
    OP(SPC, spmd_array_binary(ADD, A_U, A_U, NULL, NULL, &out));
    OP(SPC, spmd_array_binary(ADD, A, A_YX, NULL, NULL, &out));      /* 'x' against 'y' */
    OP(SPC, spmd_array_binary(ADD, COL_X, ROW_X, NULL, NULL, &out)); /* 'x' used twice */
    OP(INV, spmd_array_binary(ADD, A, A, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_binary(ADD, A, A, S_REV, NULL, &out));
    OP(INV, spmd_array_binary(ADD, A, A_YX, S_REV, NULL, &out));
    OP(SPC, spmd_array_binary(ADD, A, A, S_U, NULL, &out));
    OP(SPC, spmd_array_binary(ADD, ROW_X, ROW_X, S_XY, NULL, &out)); /* longer than the rank */
    OP(SHP, spmd_array_binary(ADD, A_ODD, A_ODD, S_XY, NULL, &out));
    OP(UNS, spmd_array_binary(SPMD_BINARY_AND, A, A, NULL, NULL, &out)); /* bitwise: no floats */
    OP(UNS, spmd_array_binary(ADD, A_U8, A_U8, NULL, NULL, &out));
    SWEEP_BAD_OPTS(BIN_OPTS);
#undef BIN_OPTS
}

void sweep_spmd_array_binary_scalar(void)
{
    const spmd_binary_op MUL = SPMD_BINARY_MUL;
    xfix_up();
#define BS_OPTS(o) spmd_array_binary_scalar(MUL, A, 2.0, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_binary_scalar(MUL, A, 2.0, NULL, NULL, NULL));
    OP(INV, spmd_array_binary_scalar(MUL, NULL, 2.0, NULL, NULL, &out));
    OP(INV, spmd_array_binary_scalar(MUL, DEAD_ARRAY, 2.0, NULL, NULL, &out));
    OP(INV, spmd_array_binary_scalar(MUL, DEL, 2.0, NULL, NULL, &out));
    OP(INV, spmd_array_binary_scalar((spmd_binary_op)-1, A, 2.0, NULL, NULL, &out));
    OP(INV,
       spmd_array_binary_scalar((spmd_binary_op)(SPMD_BINARY_XOR + 1), A, 2.0, NULL, NULL, &out));
    OP(INV, spmd_array_binary_scalar((spmd_binary_op)INT_MIN, A, 2.0, NULL, NULL, &out));
    OP(SPC, spmd_array_binary_scalar(MUL, A_U, 2.0, NULL, NULL, &out));
    OP(INV, spmd_array_binary_scalar(MUL, A, 2.0, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_binary_scalar(MUL, A, 2.0, S_REV, NULL, &out));
    OP(SPC, spmd_array_binary_scalar(MUL, A, 2.0, S_U, NULL, &out));
    OP(SHP, spmd_array_binary_scalar(MUL, A_ODD, 2.0, S_XY, NULL, &out));
    OP(UNS, spmd_array_binary_scalar(SPMD_BINARY_XOR, A, 2.0, NULL, NULL, &out));
    OP(UNS, spmd_array_binary_scalar(MUL, A_U8, 2.0, NULL, NULL, &out));
    SWEEP_BAD_OPTS(BS_OPTS);
#undef BS_OPTS
}

void sweep_spmd_array_where(void)
{
    xfix_up();
#define WH_OPTS(o) spmd_array_where(A_BOOL, A, A, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_where(A_BOOL, A, A, NULL, NULL, NULL));
    OP(INV, spmd_array_where(NULL, A, A, NULL, NULL, &out));
    OP(INV, spmd_array_where(A_BOOL, NULL, A, NULL, NULL, &out));
    OP(INV, spmd_array_where(A_BOOL, A, NULL, NULL, NULL, &out));
    OP(INV, spmd_array_where(DEAD_ARRAY, A, A, NULL, NULL, &out));
    OP(INV, spmd_array_where(A_BOOL, DEAD_ARRAY, A, NULL, NULL, &out));
    OP(INV, spmd_array_where(A_BOOL, A, DEAD_ARRAY, NULL, NULL, &out));
    OP(INV, spmd_array_where(DEL, A, A, NULL, NULL, &out));
    OP(INV, spmd_array_where(A_BOOL, DEL, A, NULL, NULL, &out));
    OP(INV, spmd_array_where(A_BOOL, A, DEL, NULL, NULL, &out));
    OP(INV, spmd_array_where(A_BOOL, A, A_REV, NULL, NULL, &out)); /* two meshes */
    OP(INV, spmd_array_where(A, A, A, NULL, NULL, &out));          /* cond not bool */
    OP(INV, spmd_array_where(A_BOOL, A, A_I32, NULL, NULL, &out)); /* dtypes differ */
    OP(SHP, spmd_array_where(A_BOOL, A, A_ODD, NULL, NULL, &out));
    OP(SPC, spmd_array_where(A_BOOL, A, A_U, NULL, NULL, &out));
    OP(SPC, spmd_array_where(A_BOOL, A, A_YX, NULL, NULL, &out));
    OP(INV, spmd_array_where(A_BOOL, A, A, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_where(A_BOOL, A, A, S_REV, NULL, &out));
    OP(SPC, spmd_array_where(A_BOOL, A, A, S_U, NULL, &out));
    SWEEP_BAD_OPTS(WH_OPTS);
#undef WH_OPTS
}

void sweep_spmd_array_astype(void)
{
    xfix_up();
#define AS_OPTS(o) spmd_array_astype(A, SPMD_DTYPE_F64, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_astype(A, SPMD_DTYPE_F64, NULL, NULL, NULL));
    OP(INV, spmd_array_astype(NULL, SPMD_DTYPE_F64, NULL, NULL, &out));
    OP(INV, spmd_array_astype(DEAD_ARRAY, SPMD_DTYPE_F64, NULL, NULL, &out));
    OP(INV, spmd_array_astype(DEL, SPMD_DTYPE_F64, NULL, NULL, &out));
    OP(INV, spmd_array_astype(A, COUNT, NULL, NULL, &out));
    OP(INV, spmd_array_astype(A, MINUS1, NULL, NULL, &out));
    OP(INV, spmd_array_astype(A, (spmd_dtype)INT_MAX, NULL, NULL, &out));
    OP(INV, spmd_array_astype(A, (spmd_dtype)INT_MIN, NULL, NULL, &out));
    OP(SPC, spmd_array_astype(A_U, SPMD_DTYPE_F64, NULL, NULL, &out));
    OP(INV, spmd_array_astype(A, SPMD_DTYPE_F64, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_astype(A, SPMD_DTYPE_F64, S_REV, NULL, &out));
    OP(SPC, spmd_array_astype(A, SPMD_DTYPE_F64, S_U, NULL, &out));
    OP(SHP, spmd_array_astype(A_ODD, SPMD_DTYPE_F64, S_XY, NULL, &out));
    SWEEP_BAD_OPTS(AS_OPTS);
#undef AS_OPTS
}

/* ---- reductions ---- */

static const int AX0[1] = {0}, AX1[1] = {1}, AX2[1] = {2}, AXM3[1] = {-3}, AXMAX[1] = {INT_MAX},
                 AXMIN[1] = {INT_MIN}, AX00[2] = {0, 0}, AX0M2[2] = {0, -2}, AX01[2] = {0, 1},
                 AX10[2] = {1, 0}, AX11[2] = {1, 1};

void sweep_spmd_array_reduce(void)
{
    const spmd_reduce_kind SUM = SPMD_REDUCE_SUM;
    xfix_up();
#define RD_OPTS(o) spmd_array_reduce(SUM, A, 1, AX0, 0, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_reduce(SUM, A, 1, AX0, 0, NULL, NULL, NULL));
    OP(INV, spmd_array_reduce(SUM, NULL, 1, AX0, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, DEAD_ARRAY, 1, AX0, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, DEL, 1, AX0, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce((spmd_reduce_kind)-1, A, 1, AX0, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce((spmd_reduce_kind)(SPMD_REDUCE_ARGMIN + 1), A, 1, AX0, 0, NULL, NULL,
                              &out));
    OP(INV, spmd_array_reduce((spmd_reduce_kind)INT_MAX, A, 1, AX0, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, 1, AX0, 2, NULL, NULL, &out)); /* keepdims not 0 / 1 */
    OP(INV, spmd_array_reduce(SUM, A, 1, AX0, -1, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, 1, AX0, INT_MIN, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, -2, AX0, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, 3, AX0, 0, NULL, NULL, &out)); /* more than the rank */
    OP(INV, spmd_array_reduce(SUM, A, INT_MAX, AX0, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, INT_MIN, AX0, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, 1, NULL, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, 1, AX2, 0, NULL, NULL, &out)); /* an absent dimension */
    OP(INV, spmd_array_reduce(SUM, A, 1, AXM3, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, 1, AXMAX, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, 1, AXMIN, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A_SCALAR, 1, AX0, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, 2, AX00, 0, NULL, NULL, &out)); /* dimension 0 twice */
    OP(INV, spmd_array_reduce(SUM, A, 2, AX0M2, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SPMD_REDUCE_MAX, A, 2, AX11, 1, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SPMD_REDUCE_ARGMAX, A, 2, AX01, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SPMD_REDUCE_ARGMIN, A, 0, NULL, 0, NULL, NULL, &out));
    OP(INV, spmd_array_reduce(SPMD_REDUCE_ARGMAX, A, 1, AX2, 0, NULL, NULL, &out));
    OP(SPC, spmd_array_reduce(SUM, A_U, 1, AX0, 0, NULL, NULL, &out)); /* unreduced */
    OP(INV, spmd_array_reduce(SUM, A, 1, AX0, 0, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_reduce(SUM, A, 1, AX0, 0, S_REV, NULL, &out));
    OP(SPC, spmd_array_reduce(SUM, A, 2, AX10, 0, S_X, NULL, &out)); /* longer than the rank */
    /* unreduced over other axes than the reduced dimension's ('x'), or of a max */
    OP(SPC, spmd_array_reduce(SUM, A, 1, AX1, 0, S_YU, NULL, &out));
    OP(SPC, spmd_array_reduce(SPMD_REDUCE_MAX, A, 1, AX0, 0, S_YU, NULL, &out));
    OP(SPC, spmd_array_reduce(SPMD_REDUCE_ARGMAX, A, 1, AX0, 0, S_YU, NULL, &out));
    OP(SPC, spmd_array_reduce(SUM, A, 1, AX0, 0, NULL, W_TIGHT, &out)); /* a psum: over budget */
    OP(INV, spmd_array_reduce(SUM, A, 2, AX00, 0, NULL, W_DRY, &out));
    SWEEP_BAD_OPTS(RD_OPTS);
#undef RD_OPTS
}

/* ---- contractions ---- */

void sweep_spmd_array_dot_general(void)
{
    xfix_up();
#define DOT(a, b, nb, ab, bb, nc, ac, bc, osh)                                                     \
    spmd_array_dot_general((a), (b), (nb), (ab), (bb), (nc), (ac), (bc), (osh), NULL, &out)
#define DOT_OPTS(o) spmd_array_dot_general(A_X, A_X, 0, NULL, NULL, 1, AX1, AX0, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_dot_general(A_X, A_X, 0, NULL, NULL, 1, AX1, AX0, NULL, NULL, NULL));
    OP(INV, DOT(NULL, A_X, 0, NULL, NULL, 1, AX1, AX0, NULL));
    OP(INV, DOT(A_X, NULL, 0, NULL, NULL, 1, AX1, AX0, NULL));
    OP(INV, DOT(DEAD_ARRAY, A_X, 0, NULL, NULL, 1, AX1, AX0, NULL));
    OP(INV, DOT(A_X, DEAD_ARRAY, 0, NULL, NULL, 1, AX1, AX0, NULL));
    OP(INV, DOT(DEL, A_X, 0, NULL, NULL, 1, AX1, AX0, NULL));
    OP(INV, DOT(A_X, DEL, 0, NULL, NULL, 1, AX1, AX0, NULL));
    OP(INV, DOT(A_X, A_REV, 0, NULL, NULL, 1, AX1, AX0, NULL)); /* two meshes */
    OP(INV, DOT(A_X, A_I32, 0, NULL, NULL, 1, AX1, AX0, NULL)); /* dtypes differ */
    OP(INV, DOT(A_X, A_X, -1, AX0, AX0, 1, AX1, AX1, NULL));
    OP(INV, DOT(A_X, A_X, 0, NULL, NULL, -1, AX1, AX0, NULL));
    OP(INV, DOT(A_X, A_X, INT_MIN, AX0, AX0, 1, AX1, AX0, NULL));
    OP(INV, DOT(A_X, A_X, 0, NULL, NULL, INT_MIN, AX1, AX0, NULL));
    OP(INV, DOT(A_X, A_X, 3, AX0, AX0, 0, NULL, NULL, NULL)); /* more than the rank */
    OP(INV, DOT(A_X, A_X, 2, AX01, AX01, 1, AX1, AX0, NULL)); /* together more than the rank */
    OP(INV, DOT(A_X, A_SCALAR, 0, NULL, NULL, 1, AX1, AX0, NULL));
    OP(INV, DOT(A_X, A_X, INT_MAX, AX0, AX0, 1, AX1, AX0, NULL)); /* the sum overflows */
    OP(INV, DOT(A_X, A_X, 1, AX0, AX0, INT_MAX, AX1, AX1, NULL));
    OP(INV, DOT(A_X, A_X, 1, NULL, AX0, 0, NULL, NULL, NULL));
    OP(INV, DOT(A_X, A_X, 1, AX0, NULL, 0, NULL, NULL, NULL));
    OP(INV, DOT(A_X, A_X, 0, NULL, NULL, 1, NULL, AX0, NULL));
    OP(INV, DOT(A_X, A_X, 0, NULL, NULL, 1, AX1, NULL, NULL));
    OP(INV, DOT(A_X, A_X, 0, NULL, NULL, 1, AX2, AX0, NULL)); /* absent dimensions */
    OP(INV, DOT(A_X, A_X, 0, NULL, NULL, 1, AX1, AXM3, NULL));
    OP(INV, DOT(A_X, A_X, 0, NULL, NULL, 1, AXMIN, AX0, NULL));
    OP(INV, DOT(A_X, A_X, 1, AXMAX, AX0, 0, NULL, NULL, NULL));
    OP(INV, DOT(A_X, A_X, 1, AX0, AX0, 1, AX0, AX1, NULL));       /* a's 0 batch and contracted */
    OP(INV, DOT(A_X, A_X, 1, AX1, AX0, 1, AX0, AX0, NULL));       /* b's 0 batch and contracted */
    OP(INV, DOT(A_X, A_X, 0, NULL, NULL, 2, AX11, AX01, NULL));   /* a's 1 contracted twice */
    OP(INV, DOT(A_X, A_X, 2, AX00, AX01, 0, NULL, NULL, NULL));   /* a's 0 batch twice */
    OP(SHP, DOT(A_ODD, A_ODD, 0, NULL, NULL, 1, AX1, AX0, NULL)); /* 4 against 3 */
    OP(SHP, DOT(A_ODD, A_X, 1, AX0, AX0, 0, NULL, NULL, NULL));   /* batch 3 against 4 */
    OP(SHP, DOT(A_RANK16, A_X, 0, NULL, NULL, 0, NULL, NULL, NULL));      /* rank 18 */
    OP(SHP, DOT(A_RANK16, A_RANK16, 0, NULL, NULL, 0, NULL, NULL, NULL)); /* rank 32 */
    OP(SPC, DOT(A_X, A_YX, 1, AX0, AX0, 0, NULL, NULL, NULL)); /* batch 'x' against 'y' */
    OP(SPC, DOT(A, A, 0, NULL, NULL, 1, AX1, AX0, NULL));      /* contracted 'y' against 'x' */
    OP(SPC, DOT(A_YX, A_X, 0, NULL, NULL, 1, AX1, AX0, NULL)); /* both 'x': ambiguous */
    OP(SPC, DOT(A, A_YX, 0, NULL, NULL, 1, AX1, AX0, NULL));   /* 'x' on free a and b */
    OP(SPC, DOT(A_X, A_U, 0, NULL, NULL, 1, AX1, AX0, NULL));  /* unreduced */
    OP(INV, DOT(A_X, A_X, 0, NULL, NULL, 1, AX1, AX0, DEAD_SHARDING));
    OP(INV, DOT(A_X, A_X, 0, NULL, NULL, 1, AX1, AX0, S_REV));
    OP(SPC, DOT(A_X, A_X, 0, NULL, NULL, 1, AX1, AX0, S_U));      /* sums over no axis */
    OP(SHP, DOT(A_ODD, A_X, 0, NULL, NULL, 1, AX1, AX0, S_XY));   /* 3 does not split */
    OP(UNS, DOT(I32_X, I32_X, 0, NULL, NULL, 1, AX1, AX0, NULL)); /* gemm: floats */
    SWEEP_BAD_OPTS(DOT_OPTS);
#undef DOT_OPTS
#undef DOT
}

void sweep_spmd_array_matmul(void)
{
    xfix_up();
#define MM_OPTS(o) spmd_array_matmul(A_X, A_X, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_matmul(A_X, A_X, NULL, NULL, NULL));
    OP(INV, spmd_array_matmul(NULL, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_matmul(A_X, NULL, NULL, NULL, &out));
    OP(INV, spmd_array_matmul(DEAD_ARRAY, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_matmul(A_X, DEAD_ARRAY, NULL, NULL, &out));
    OP(INV, spmd_array_matmul(DEL, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_matmul(A_X, DEL, NULL, NULL, &out));
    OP(INV, spmd_array_matmul(A_X, A_REV, NULL, NULL, &out));
    OP(INV, spmd_array_matmul(A_X, A_I32, NULL, NULL, &out));
    OP(SHP, spmd_array_matmul(A_X, ROW_X, NULL, NULL, &out)); /* ranks 2 and 1 */
    OP(SHP, spmd_array_matmul(ROW_X, ROW_X, NULL, NULL, &out));
    OP(SHP, spmd_array_matmul(A_SCALAR, A_SCALAR, NULL, NULL, &out));
    OP(SHP, spmd_array_matmul(A_X, A_RANK16, NULL, NULL, &out));
    OP(SHP, spmd_array_matmul(A_ODD, A_ODD, NULL, NULL, &out)); /* (3, 4) @ (3, 4) */
    OP(SPC, spmd_array_matmul(A, A, NULL, NULL, &out));
    OP(SPC, spmd_array_matmul(A, A, NULL, W_DRY, &out)); /* a dry run: the plan untouched */
    OP(SPC, spmd_array_matmul(A_YX, A_X, NULL, NULL, &out));
    OP(SPC, spmd_array_matmul(A, A_YX, NULL, NULL, &out));
    OP(SPC, spmd_array_matmul(A_U, A_U, NULL, NULL, &out));
    OP(INV, spmd_array_matmul(A_X, A_X, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_matmul(A_X, A_X, S_REV, NULL, &out));
    OP(INV, spmd_array_matmul(A_YX, A_X, S_REV, NULL, &out));
    OP(SPC, spmd_array_matmul(A_X, A_X, S_U, NULL, &out));
    OP(SPC, spmd_array_matmul(A_YX, A_X, SPMD_REPLICATED, W_TIGHT, &out)); /* a psum */
    OP(UNS, spmd_array_matmul(I32_X, I32_X, NULL, NULL, &out));
    SWEEP_BAD_OPTS(MM_OPTS);
#undef MM_OPTS
}

void sweep_spmd_array_einsum(void)
{
    const char *IJ = "ij,jk->ik";
    xfix_up();
#define ES_OPTS(o) spmd_array_einsum(IJ, A_X, A_X, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_einsum(IJ, A_X, A_X, NULL, NULL, NULL));
    OP(INV, spmd_array_einsum(NULL, A_X, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum(IJ, NULL, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum(IJ, A_X, NULL, NULL, NULL, &out));
    OP(INV, spmd_array_einsum(IJ, DEAD_ARRAY, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum(IJ, A_X, DEAD_ARRAY, NULL, NULL, &out));
    OP(INV, spmd_array_einsum(IJ, DEL, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum(IJ, A_X, DEL, NULL, NULL, &out));
    OP(INV, spmd_array_einsum(IJ, A_X, A_REV, NULL, NULL, &out));
    OP(INV, spmd_array_einsum(IJ, A_X, A_I32, NULL, NULL, &out));
    OP(INV, spmd_array_einsum("", A_X, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum("ij,jk", A_X, A_X, NULL, NULL, &out));  /* no output */
    OP(INV, spmd_array_einsum("ij->ik", A_X, A_X, NULL, NULL, &out)); /* one operand */
    OP(INV, spmd_array_einsum("ij,jk,kl->il", A_X, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum("ij,jk->ik->i", A_X, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum("ii,jk->ik", A_X, A_X, NULL, NULL, &out)); /* a letter twice */
    OP(INV, spmd_array_einsum("ij,jj->ij", A_X, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum("ij,jk->ii", A_X, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum("i1,jk->ik", A_X, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum("...j,jk->...k", A_X, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum("ij,jk->iq", A_X, A_X, NULL, NULL, &out)); /* in no operand */
    OP(INV, spmd_array_einsum("ij,jk->ikq", A_X, A_X, NULL, NULL, &out));
    OP(INV, spmd_array_einsum("ij,jk->i", A_X, A_X, NULL, NULL, &out));  /* k in b only */
    OP(INV, spmd_array_einsum("ij,kl->jl", A_X, A_X, NULL, NULL, &out)); /* i in a only */
    OP(INV, spmd_array_einsum("abcdefghijklmnopq,qr->ar", A_X, A_X, NULL, NULL, &out));
    OP(SHP, spmd_array_einsum("ijk,jk->ik", A_X, A_X, NULL, NULL, &out)); /* ranks differ */
    OP(SHP, spmd_array_einsum("i,jk->ik", A_X, A_X, NULL, NULL, &out));
    OP(SHP, spmd_array_einsum(IJ, A_ODD, A_ODD, NULL, NULL, &out)); /* j: 4 against 3 */
    OP(SPC, spmd_array_einsum(IJ, A, A, NULL, NULL, &out));
    OP(SPC, spmd_array_einsum(IJ, A_YX, A_X, NULL, NULL, &out));
    OP(SPC, spmd_array_einsum("ij,ij->ij", A_X, A_YX, NULL, NULL, &out)); /* batch unlike */
    OP(SPC, spmd_array_einsum("ij,j->i", A_X, A_U, NULL, NULL, &out));    /* unreduced */
    OP(INV, spmd_array_einsum(IJ, A_X, A_X, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_einsum(IJ, A_X, A_X, S_REV, NULL, &out));
    OP(SPC, spmd_array_einsum("ij,jk->ki", A_X, A_X, S_U, NULL, &out));
    SWEEP_BAD_OPTS(ES_OPTS);
#undef ES_OPTS
}

/* ---- structure ---- */

void sweep_spmd_array_transpose(void)
{
    const int swap[2] = {1, 0}, twice[2] = {0, 0}, neg[2] = {-1, 0}, big[2] = {0, 2},
              minmax[2] = {INT_MIN, INT_MAX};
    xfix_up();
#define TR_OPTS(o) spmd_array_transpose(A, swap, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_transpose(A, swap, NULL, NULL, NULL));
    OP(INV, spmd_array_transpose(NULL, swap, NULL, NULL, &out));
    OP(INV, spmd_array_transpose(DEAD_ARRAY, swap, NULL, NULL, &out));
    OP(INV, spmd_array_transpose(DEL, swap, NULL, NULL, &out));
    OP(INV, spmd_array_transpose(A, twice, NULL, NULL, &out)); /* an axis twice */
    OP(INV, spmd_array_transpose(A, neg, NULL, NULL, &out));
    OP(INV, spmd_array_transpose(A, big, NULL, NULL, &out));
    OP(INV, spmd_array_transpose(A, minmax, NULL, NULL, &out));
    OP(SPC, spmd_array_transpose(A_U, NULL, NULL, NULL, &out));
    OP(INV, spmd_array_transpose(A, swap, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_transpose(A, swap, S_REV, NULL, &out));
    OP(SPC, spmd_array_transpose(A, swap, S_U, NULL, &out));        /* a result of partial sums */
    OP(SPC, spmd_array_transpose(A_SCALAR, NULL, S_X, NULL, &out)); /* longer than the rank */
    OP(SHP, spmd_array_transpose(A_ODD, NULL, S_XY, NULL, &out));   /* (4, 3): 3 over 'y' */
    OP(SPC, spmd_array_transpose(A, swap, S_X, W_TIGHT, &out));     /* a reshard after: budget */
    SWEEP_BAD_OPTS(TR_OPTS);
#undef TR_OPTS
}

void sweep_spmd_array_reshape(void)
{
    const int64_t s16[1] = {16}, s28[2] = {2, 8}, s0[1] = {0},
                  wrap[2] = {((int64_t)1 << 60) + 1, 16};
    const int64_t s116[2] = {1, 16};
    xfix_up();
#define RS_OPTS(o) spmd_array_reshape(A_X, 2, S44, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_reshape(A_X, 2, S44, NULL, NULL, NULL));
    OP(INV, spmd_array_reshape(NULL, 2, S44, NULL, NULL, &out));
    OP(INV, spmd_array_reshape(DEAD_ARRAY, 2, S44, NULL, NULL, &out));
    OP(INV, spmd_array_reshape(DEL, 2, S44, NULL, NULL, &out));
    OP(INV, spmd_array_reshape(A_X, 2, NULL, NULL, NULL, &out));
    OP(INV, spmd_array_reshape(A_X, -1, S44, NULL, NULL, &out));
    OP(INV, spmd_array_reshape(A_X, SPMD_MAX_RANK + 1, S17, NULL, NULL, &out));
    OP(INV, spmd_array_reshape(A_X, INT_MAX, S44, NULL, NULL, &out));
    OP(INV, spmd_array_reshape(A_X, INT_MIN, S44, NULL, NULL, &out));
    OP(SHP, spmd_array_reshape(A_X, 1, s0, NULL, NULL, &out));
    OP(SHP, spmd_array_reshape(A_X, 2, S4N, NULL, NULL, &out));
    OP(SHP, spmd_array_reshape(A_X, 2, SMIN, NULL, NULL, &out));
    OP(SHP, spmd_array_reshape(A_X, 2, S34, NULL, NULL, &out)); /* 12 elements, not 16 */
    OP(SHP, spmd_array_reshape(A_X, 0, NULL, NULL, NULL, &out));
    OP(SHP, spmd_array_reshape(A_X, 2, SMAX, NULL, NULL, &out)); /* the count overflows */
    OP(SHP, spmd_array_reshape(A_X, 2, wrap, NULL, NULL, &out)); /* (2^60 + 1) * 16 wraps to 16 */
    OP(SPC, spmd_array_reshape(A, 1, s16, NULL, NULL, &out));    /* a sharded minor merged */
    OP(SPC, spmd_array_reshape(A_X, 2, s28, NULL, NULL, &out));  /* several into several */
    OP(SPC, spmd_array_reshape(A_U, 2, S22, NULL, NULL, &out));
    OP(INV, spmd_array_reshape(A_X, 2, S44, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_reshape(A_X, 2, S44, S_REV, NULL, &out));
    OP(SPC, spmd_array_reshape(A_X, 2, S44, S_U, NULL, &out));
    OP(SPC, spmd_array_reshape(A_X, 1, s16, S_XY, NULL, &out)); /* longer than the rank */
    OP(SHP, spmd_array_reshape(A_ODD, 2, S34, S_XY, NULL, &out));
    OP(SPC, spmd_array_reshape(A, 2, s116, SPMD_REPLICATED, W_TIGHT, &out)); /* reshards */
    SWEEP_BAD_OPTS(RS_OPTS);
#undef RS_OPTS
}

void sweep_spmd_array_slice(void)
{
    const int64_t z[2] = {0, 0}, neg[2] = {-1, 0}, one[2] = {1, 0}, three[2] = {3, 4},
                  past[2] = {5, 4}, min[2] = {INT64_MIN, 0}, max[2] = {INT64_MAX, 4},
                  two[2] = {2, 4};
    xfix_up();
#define SL_OPTS(o) spmd_array_slice(A, z, S44, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_slice(A, z, S44, NULL, NULL, NULL));
    OP(INV, spmd_array_slice(NULL, z, S44, NULL, NULL, &out));
    OP(INV, spmd_array_slice(DEAD_ARRAY, z, S44, NULL, NULL, &out));
    OP(INV, spmd_array_slice(DEL, z, S44, NULL, NULL, &out));
    OP(INV, spmd_array_slice(A, NULL, S44, NULL, NULL, &out));
    OP(INV, spmd_array_slice(A, z, NULL, NULL, NULL, &out));
    OP(INV, spmd_array_slice(A, neg, S44, NULL, NULL, &out));
    OP(INV, spmd_array_slice(A, z, past, NULL, NULL, &out));    /* past the extent */
    OP(INV, spmd_array_slice(A, z, z, NULL, NULL, &out));       /* empty */
    OP(INV, spmd_array_slice(A, three, one, NULL, NULL, &out)); /* start > limit */
    OP(INV, spmd_array_slice(A, min, S44, NULL, NULL, &out));
    OP(INV, spmd_array_slice(A, z, max, NULL, NULL, &out));
    OP(INV, spmd_array_slice(A, z, min, NULL, NULL, &out));
    OP(SPC, spmd_array_slice(A, z, three, NULL, NULL, &out)); /* 3 over 'x': uneven */
    OP(SPC, spmd_array_slice(A_U, z, S4, NULL, NULL, &out));
    OP(INV, spmd_array_slice(A, z, S44, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_slice(A, z, S44, S_REV, NULL, &out));
    OP(SPC, spmd_array_slice(A, z, S44, S_U, NULL, &out));
    OP(SPC, spmd_array_slice(ROW_X, z, S4, S_XY, NULL, &out)); /* longer than the rank */
    OP(SHP, spmd_array_slice(A, z, three, S_XY, NULL, &out));  /* 3 does not split */
    OP(SPC, spmd_array_slice(A, z, two, NULL, W_TIGHT, &out)); /* an all_gather: budget */
    SWEEP_BAD_OPTS(SL_OPTS);
#undef SL_OPTS
}

void sweep_spmd_array_take(void)
{
    const spmd_take_mode FILL = SPMD_TAKE_FILL;
    xfix_up();
#define TK_OPTS(o) spmd_array_take(A_X, IDX, 1, FILL, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_take(A_X, IDX, 1, FILL, NULL, NULL, NULL));
    OP(INV, spmd_array_take(NULL, IDX, 1, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_X, NULL, 1, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(DEAD_ARRAY, IDX, 1, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_X, DEAD_ARRAY, 1, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(DEL, IDX, 1, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_X, DEL, 1, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_REV, IDX, 0, FILL, NULL, NULL, &out)); /* two meshes */
    OP(INV, spmd_array_take(A_X, A, 1, FILL, NULL, NULL, &out));     /* float indices */
    OP(INV, spmd_array_take(A_X, A_BOOL, 1, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_X, IDX, 2, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_X, IDX, -3, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_X, IDX, INT_MAX, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_X, IDX, INT_MIN, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_SCALAR, IDX, 0, FILL, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_X, IDX, 1, (spmd_take_mode)3, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_X, IDX, 1, (spmd_take_mode)-1, NULL, NULL, &out));
    OP(INV, spmd_array_take(A_X, IDX, 1, (spmd_take_mode)INT_MIN, NULL, NULL, &out));
    OP(SHP, spmd_array_take(A_RANK16, A_I32, 0, FILL, NULL, NULL, &out)); /* rank 17 */
    OP(SPC, spmd_array_take(A_X, IDX, 0, FILL, NULL, NULL, &out));        /* axis sharded */
    OP(SPC, spmd_array_take(A_X, IDX_X, 1, FILL, NULL, NULL, &out));      /* 'x' twice */
    OP(SPC, spmd_array_take(A_U, IDX, 0, FILL, NULL, NULL, &out));        /* unreduced */
    OP(INV, spmd_array_take(A_X, IDX, 1, FILL, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_take(A_X, IDX, 1, FILL, S_REV, NULL, &out));
    OP(SPC, spmd_array_take(A_X, IDX, 1, FILL, S_U, NULL, &out));
    OP(SPC, spmd_array_take(A_X, IDX, 0, FILL, S_REP, W_TIGHT, &out)); /* reshards x: budget */
    SWEEP_BAD_OPTS(TK_OPTS);
#undef TK_OPTS
}

void sweep_spmd_array_concatenate(void)
{
    xfix_up();
    spmd_array *two[2] = {A, A}, *with_null[2] = {A, NULL}, *with_dead[2] = {A, DEAD_ARRAY};
    spmd_array *with_del[2] = {A, DEL}, *meshes[2] = {A, A_REV}, *dtypes[2] = {A_X, I32_X};
    spmd_array *ranks[2] = {A_X, ROW_X}, *shapes[2] = {A_X, A_ODD}, *layouts[2] = {A_X, A_YX};
    spmd_array *unreduced[2] = {A_U, A_U}, *xs_x[2] = {A_X, A_X};
    spmd_array *many[17];
    for (int i = 0; i < 17; i++)
        many[i] = A_X;
#define CC_OPTS(o) spmd_array_concatenate(2, xs_x, 1, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_concatenate(2, xs_x, 1, NULL, NULL, NULL));
    OP(INV, spmd_array_concatenate(2, NULL, 1, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(0, xs_x, 1, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(-1, xs_x, 1, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(INT_MIN, xs_x, 1, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(INT_MAX, xs_x, 1, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(17, many, 1, NULL, NULL, &out)); /* > 16 */
    OP(INV, spmd_array_concatenate(2, with_null, 1, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(2, with_dead, 1, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(2, with_del, 1, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(2, meshes, 1, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(2, xs_x, 2, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(2, xs_x, -3, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(2, xs_x, INT_MIN, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(2, xs_x, INT_MAX, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(2, dtypes, 1, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(2, ranks, 1, NULL, NULL, &out));
    OP(SHP, spmd_array_concatenate(2, shapes, 1, NULL, NULL, &out));  /* (4, 4) and (3, 4) */
    OP(SPC, spmd_array_concatenate(2, layouts, 1, NULL, NULL, &out)); /* two shardings */
    OP(SPC, spmd_array_concatenate(2, two, 0, NULL, NULL, &out));     /* along 'x' */
    OP(SPC, spmd_array_concatenate(2, unreduced, 0, NULL, NULL, &out));
    OP(INV, spmd_array_concatenate(2, xs_x, 1, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_concatenate(2, xs_x, 1, S_REV, NULL, &out));
    OP(SPC, spmd_array_concatenate(2, xs_x, 1, S_U, NULL, &out));
    OP(SPC, spmd_array_concatenate(2, two, 0, S_REP, W_TIGHT, &out)); /* reshards: budget */
    SWEEP_BAD_OPTS(CC_OPTS);
#undef CC_OPTS
}

void sweep_spmd_array_softmax(void)
{
    xfix_up();
#define SM_OPTS(o) spmd_array_softmax(A_X, 1, NULL, (o), &out)
    OP_NO_OUT(INV, spmd_array_softmax(A_X, 1, NULL, NULL, NULL));
    OP(INV, spmd_array_softmax(NULL, 1, NULL, NULL, &out));
    OP(INV, spmd_array_softmax(DEAD_ARRAY, 1, NULL, NULL, &out));
    OP(INV, spmd_array_softmax(DEL, 1, NULL, NULL, &out));
    OP(INV, spmd_array_softmax(A_X, 2, NULL, NULL, &out));
    OP(INV, spmd_array_softmax(A_X, -3, NULL, NULL, &out));
    OP(INV, spmd_array_softmax(A_X, INT_MAX, NULL, NULL, &out));
    OP(INV, spmd_array_softmax(A_X, INT_MIN, NULL, NULL, &out));
    OP(INV, spmd_array_softmax(A_SCALAR, 0, NULL, NULL, &out));
    OP(SPC, spmd_array_softmax(A_U, 0, NULL, NULL, &out));
    OP(UNS, spmd_array_softmax(I32_X, 1, NULL, NULL, &out)); /* the axis unsharded */
    OP(UNS, spmd_array_softmax(I32_X, 0, NULL, NULL, &out)); /* the axis sharded */
    OP(UNS, spmd_array_softmax(A_BOOL, 0, NULL, NULL, &out));
    OP(INV, spmd_array_softmax(A_X, 1, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_softmax(A_X, 1, S_REV, NULL, &out));
    OP(SPC, spmd_array_softmax(A_X, 1, S_U, NULL, &out));
    OP(SPC, spmd_array_softmax(ROW_X, 0, S_XY, NULL, &out)); /* longer than the rank */
    OP(SHP, spmd_array_softmax(A_ODD, 1, S_XY, NULL, &out));
    OP(SPC, spmd_array_softmax(A_X, 0, NULL, W_TIGHT, &out)); /* pmax, psum: budget */
    SWEEP_BAD_OPTS(SM_OPTS);
#undef SM_OPTS
}

/* ---- shardings ---- */

void sweep_spmd_array_constrain(void)
{
    xfix_up();
    OP_NO_OUT(INV, spmd_array_constrain(NULL, S_XY));
    OP_NO_OUT(INV, spmd_array_constrain(DEAD_ARRAY, S_XY));
    OP_NO_OUT(INV, spmd_array_constrain(DEL, S_XY));
    OP_NO_OUT(INV, spmd_array_constrain(A, NULL));
    OP_NO_OUT(INV, spmd_array_constrain(A, DEAD_SHARDING));
    OP_NO_OUT(SPC, spmd_array_constrain(A, S_X)); /* another layout */
    OP_NO_OUT(SPC, spmd_array_constrain(A, S_YX));
    OP_NO_OUT(SPC, spmd_array_constrain(A, S_REV)); /* another mesh */
    OP_NO_OUT(SPC, spmd_array_constrain(A_REV, S_XY));
    OP_NO_OUT(SPC, spmd_array_constrain(A_SCALAR, S_X)); /* longer than the rank */
    OP_NO_OUT(SPC, spmd_array_constrain(A_U, S_REP));    /* unreduced against not */
    OP_NO_OUT(SPC, spmd_array_constrain(A, S_U));
    /* the marker of out_sharding arguments is no spmd_sharding: refused, or taken as P() (A
     * is not replicated). (The library reads the 1-byte marker as a sharding's magic, which
     * the sanitizers here do not catch: a bug seen in the code, not by this case.) */
    OP_L("spmd_array_constrain(A, SPMD_REPLICATED)", INV, SPC, 0,
         spmd_array_constrain(A, SPMD_REPLICATED));
}

void sweep_spmd_array_reshard_to(void)
{
    xfix_up();
#define RT_OPTS(o) spmd_array_reshard_to(A, S_X, (o), &out)
    OP_NO_OUT(INV, spmd_array_reshard_to(A, S_X, NULL, NULL));
    OP(INV, spmd_array_reshard_to(NULL, S_X, NULL, &out));
    OP(INV, spmd_array_reshard_to(DEAD_ARRAY, S_X, NULL, &out));
    OP(INV, spmd_array_reshard_to(DEL, S_X, NULL, &out));
    OP(INV, spmd_array_reshard_to(A, NULL, NULL, &out));
    OP(INV, spmd_array_reshard_to(A, DEAD_SHARDING, NULL, &out));
    OP(INV, spmd_array_reshard_to(A, S_REV, NULL, &out)); /* another mesh */
    OP(INV, spmd_array_reshard_to(A_REV, S_XY, NULL, &out));
    OP(SHP, spmd_array_reshard_to(A_ODD, S_XY, NULL, &out));
    OP(SPC, spmd_array_reshard_to(A_SCALAR, S_X, NULL, &out));  /* longer than the rank */
    OP(SHP, spmd_array_reshard_to(A_RANK16, S_XY, NULL, &out)); /* 1 does not split */
    OP2(SPC, UNS, spmd_array_reshard_to(A, S_U, NULL, &out));   /* into partial sums */
    OP(SPC, spmd_array_reshard_to(A, S_X, W_TIGHT, &out));      /* over the budget */
    OP(SHP, spmd_array_reshard_to(A_ODD, S_XY, W_DRY, &out));
    SWEEP_BAD_OPTS(RT_OPTS);
#undef RT_OPTS
}
