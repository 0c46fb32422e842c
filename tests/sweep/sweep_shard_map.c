/* The sweeps of shard_map.h outside a body (shard_map, plans, the ctx queries, blocks) and of
 * ops.h, the block ops (test_api_sweep); the collectives are in sweep_collectives.c. */
#define _POSIX_C_SOURCE 200809L

#include "sweep.h"

/* ==== shard_map.h ============================================================================= */

void sweep_spmd_shard_map_options_init(void)
{
    spmd_shard_map_options o;
    BAD(INV, spmd_shard_map_options_init(NULL, SPMD_SHARD_MAP_OPTIONS_VERSION));
    BAD_KEEP(INV, o, spmd_shard_map_options_init(&o, 0));
    BAD_KEEP(INV, o, spmd_shard_map_options_init(&o, SPMD_SHARD_MAP_OPTIONS_VERSION + 1));
    BAD_KEEP(INV, o, spmd_shard_map_options_init(&o, UINT_MAX));
}

/* Output descriptions: a good one and bad ones. */
static const spmd_out_desc OD[1] = {{2, {4, 4}, SPMD_DTYPE_F32}},
                           OD_NEG_RANK[1] = {{-1, {4, 4}, SPMD_DTYPE_F32}},
                           OD_RANK17[1] = {{SPMD_MAX_RANK + 1, {4, 4}, SPMD_DTYPE_F32}},
                           OD_MAX_RANK[1] = {{INT_MAX, {4, 4}, SPMD_DTYPE_F32}},
                           OD_MIN_RANK[1] = {{INT_MIN, {4, 4}, SPMD_DTYPE_F32}},
                           OD_COUNT[1] = {{2, {4, 4}, SPMD_DTYPE_COUNT}},
                           OD_MINUS1[1] = {{2, {4, 4}, (spmd_dtype)-1}},
                           OD_ODD[1] = {{2, {3, 4}, SPMD_DTYPE_F32}},
                           OD_ZERO[1] = {{2, {0, 4}, SPMD_DTYPE_F32}},
                           OD_NEG[1] = {{2, {4, INT64_MIN}, SPMD_DTYPE_F32}},
                           OD_SHORT[1] = {{1, {4}, SPMD_DTYPE_F32}};

void sweep_spmd_shard_map(void)
{
    fixture_up();
    spmd_array *outs[1];
    spmd_array *in[1] = {A}, *in_null[1] = {NULL}, *in_dead[1] = {DEAD_ARRAY}, *in_del[1] = {DEL};
    spmd_array *in_x[1] = {A_X}, *in_rev[1] = {A_REV}, *in_scalar[1] = {A_SCALAR};
    spmd_array *in_twice[2] = {A, A};
    const spmd_spec *sp[2] = {P_XY, P_XY}, *sp_null[1] = {NULL}, *sp_dead[1] = {DEAD_SPEC};
    const spmd_spec *sp_z[1] = {P_Z};
    spmd_shard_map_options v0 = SPMD_SHARD_MAP_OPTIONS_INIT, donate = SPMD_SHARD_MAP_OPTIONS_INIT;
    v0.version = 0;
    const int donate_first[2] = {1, 0};
    donate.donate = donate_first;
    BAD_OUTS(INV, outs, spmd_shard_map(NULL, noop_fn, NULL, 1, in, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(DEAD_MESH, noop_fn, NULL, 1, in, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, NULL, NULL, 1, in, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, -1, in, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 4097, in, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, INT_MAX, in, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, INT_MIN, in, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, NULL, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in_null, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in_dead, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in_del, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, NULL, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp_null, 1, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp_dead, 1, OD, sp, NULL, outs));
    BAD_OUTS(SPC, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp_z, 1, OD, sp, NULL, outs));
    BAD(INV, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, -1, OD, sp, NULL, outs));
    BAD(INV, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, INT_MIN, OD, sp, NULL, outs));
    BAD(INV, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 4097, OD, sp, NULL, outs));
    BAD(INV, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, INT_MAX, OD, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, NULL, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD, NULL, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD, sp_null, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD, sp_dead, NULL, outs));
    BAD_OUTS(SPC, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD, sp_z, NULL, outs));
    BAD(INV, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD, sp, NULL, NULL));
    BAD_OUTS(SHP, outs,
             spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD_NEG_RANK, sp, NULL, outs));
    BAD_OUTS(SHP, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD_RANK17, sp, NULL, outs));
    BAD_OUTS(SHP, outs,
             spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD_MAX_RANK, sp, NULL, outs));
    BAD_OUTS(SHP, outs,
             spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD_MIN_RANK, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD_COUNT, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD_MINUS1, sp, NULL, outs));
    BAD_OUTS(SHP, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD_ODD, sp, NULL, outs));
    BAD_OUTS(SHP, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD_ZERO, sp, NULL, outs));
    BAD_OUTS(SHP, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD_NEG, sp, NULL, outs));
    BAD_OUTS(SHP, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD_SHORT, sp, NULL, outs));
    BAD_OUTS(INV, outs, spmd_shard_map(M, noop_fn, NULL, 1, in, sp, 1, OD, sp, &v0, outs));
    BAD_OUTS(INC, outs, spmd_shard_map(M, noop_fn, NULL, 1, in_x, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(INC, outs, spmd_shard_map(M, noop_fn, NULL, 1, in_rev, sp, 1, OD, sp, NULL, outs));
    BAD_OUTS(SHP, outs, spmd_shard_map(M, noop_fn, NULL, 1, in_scalar, sp, 1, OD, sp, NULL, outs));
    /* last: a library that accepts it deletes A */
    BAD_OUTS(INV, outs,
             spmd_shard_map(M, noop_fn, NULL, 2, in_twice, sp, 1, OD, sp, &donate, outs));
}

void sweep_spmd_plan_create(void)
{
    fixture_up();
    const spmd_in_desc *ID = OD;
    const spmd_spec *sp[1] = {P_XY}, *sp_null[1] = {NULL}, *sp_dead[1] = {DEAD_SPEC};
    const spmd_spec *sp_z[1] = {P_Z};
    spmd_shard_map_options v0 = SPMD_SHARD_MAP_OPTIONS_INIT, v2 = SPMD_SHARD_MAP_OPTIONS_INIT;
    v0.version = 0;
    v2.version = SPMD_SHARD_MAP_OPTIONS_VERSION + 1;
    BAD(INV, spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, OD, sp, NULL, NULL));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(NULL, noop_fn, NULL, 1, ID, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(DEAD_MESH, noop_fn, NULL, 1, ID, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV, spmd_plan_create(M, NULL, NULL, 1, ID, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV, spmd_plan_create(M, noop_fn, NULL, -1, ID, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 4097, ID, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, INT_MAX, ID, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, INT_MIN, ID, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV, spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, -1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 4097, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, INT_MAX, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, INT_MIN, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV, spmd_plan_create(M, noop_fn, NULL, 1, NULL, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV, spmd_plan_create(M, noop_fn, NULL, 1, ID, NULL, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 1, ID, sp_null, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 1, ID, sp_dead, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, SPC, spmd_plan_create(M, noop_fn, NULL, 1, ID, sp_z, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV, spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, NULL, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV, spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, OD, NULL, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, OD, sp_null, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, OD, sp_dead, NULL, &out));
    BAD_OUT(spmd_plan, SPC, spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, OD, sp_z, NULL, &out));
    BAD_OUT(spmd_plan, SHP,
            spmd_plan_create(M, noop_fn, NULL, 1, OD_NEG_RANK, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, SHP,
            spmd_plan_create(M, noop_fn, NULL, 1, OD_RANK17, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, SHP,
            spmd_plan_create(M, noop_fn, NULL, 1, OD_MAX_RANK, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, SHP,
            spmd_plan_create(M, noop_fn, NULL, 1, OD_MIN_RANK, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 1, OD_COUNT, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 1, OD_MINUS1, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, SHP,
            spmd_plan_create(M, noop_fn, NULL, 1, OD_ODD, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, SHP,
            spmd_plan_create(M, noop_fn, NULL, 1, OD_ZERO, sp, 1, OD, sp, NULL, &out));
    BAD_OUT(spmd_plan, SHP,
            spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, OD_NEG, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV,
            spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, OD_COUNT, sp, NULL, &out));
    BAD_OUT(spmd_plan, SHP,
            spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, OD_MAX_RANK, sp, NULL, &out));
    BAD_OUT(spmd_plan, INV, spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, OD, sp, &v0, &out));
    BAD_OUT(spmd_plan, INV, spmd_plan_create(M, noop_fn, NULL, 1, ID, sp, 1, OD, sp, &v2, &out));
}

void sweep_spmd_plan_execute(void)
{
    fixture_up();
    spmd_array *outs[1];
    spmd_array *in[1] = {A}, *in_null[1] = {NULL}, *in_dead[1] = {DEAD_ARRAY}, *in_del[1] = {DEL};
    spmd_array *in_x[1] = {A_X}, *in_rev[1] = {A_REV}, *in_scalar[1] = {A_SCALAR};
    spmd_array *in_i32[1] = {A_I32}, *in_odd[1] = {A_ODD};
    BAD(INV, spmd_plan_execute(NULL, in, outs));
    BAD(INV, spmd_plan_execute(DEAD_PLAN, in, outs));
    BAD_OUTS(INV, outs, spmd_plan_execute(PLAN, NULL, outs));
    BAD(INV, spmd_plan_execute(PLAN, in, NULL));
    BAD_OUTS(INV, outs, spmd_plan_execute(PLAN, in_null, outs));
    BAD_OUTS(INV, outs, spmd_plan_execute(PLAN, in_dead, outs));
    BAD_OUTS(INV, outs, spmd_plan_execute(PLAN, in_del, outs));
    BAD_OUTS(SHP, outs, spmd_plan_execute(PLAN, in_scalar, outs));
    BAD_OUTS(SHP, outs, spmd_plan_execute(PLAN, in_i32, outs));
    BAD_OUTS(SHP, outs, spmd_plan_execute(PLAN, in_odd, outs));
    BAD_OUTS(INC, outs, spmd_plan_execute(PLAN, in_x, outs));
    BAD_OUTS(INC, outs, spmd_plan_execute(PLAN, in_rev, outs));
}

void sweep_spmd_plan_destroy(void)
{
    Q_VOID(spmd_plan_destroy(NULL));
    Q_VOID(spmd_plan_destroy(DEAD_PLAN));
}

void sweep_spmd_ctx_device(void) { Q_INT(-1, spmd_ctx_device(NULL)); }
void sweep_spmd_ctx_mesh(void) { Q_NULL(spmd_ctx_mesh(NULL)); }
void sweep_spmd_ctx_stream(void) { Q_NULL(spmd_ctx_stream(NULL)); }
void sweep_spmd_ctx_cublas(void) { Q_NULL(spmd_ctx_cublas(NULL)); }

/* Blocks for the queries and the block ops, over host memory. */
static const spmd_block H_NEG_RANK = {g_host_block, SPMD_DTYPE_F32, -1, {2, 2}},
                        H_RANK17 = {g_host_block, SPMD_DTYPE_F32, 17, {2, 2}},
                        H_MAX_RANK = {g_host_block, SPMD_DTYPE_F32, INT_MAX, {2, 2}},
                        H_NEG = {g_host_block, SPMD_DTYPE_F32, 2, {2, -2}},
                        H_I64MIN = {g_host_block, SPMD_DTYPE_F32, 1, {INT64_MIN}},
                        H_COUNT = {g_host_block, SPMD_DTYPE_COUNT, 2, {2, 2}},
                        /* 2^64 elements: the count overflows int64_t */
    H_HUGE = {g_host_block, SPMD_DTYPE_F32, 2, {(int64_t)1 << 32, (int64_t)1 << 32}},
                        /* 2^62 + 2^31 elements: the count fits, the bytes (x 4) overflow size_t */
    H_HUGE_BYTES = {g_host_block, SPMD_DTYPE_F32, 2, {(int64_t)1 << 31, ((int64_t)1 << 31) + 1}};

/* The header documents no value for invalid blocks besides what the implementation gives NULL
 * and bad ranks (0): the same for extents that are not counts, and for counts that overflow. */
void sweep_spmd_block_size(void)
{
    Q_INT(0, spmd_block_size(NULL));
    Q_INT(0, spmd_block_size(&H_NEG_RANK));
    Q_INT(0, spmd_block_size(&H_RANK17));
    Q_INT(0, spmd_block_size(&H_MAX_RANK));
    Q_INT(0, spmd_block_size(&H_NEG));
    Q_INT(0, spmd_block_size(&H_I64MIN));
    Q_INT(0, spmd_block_size(&H_HUGE));
}

void sweep_spmd_block_nbytes(void)
{
    Q_INT(0, spmd_block_nbytes(NULL));
    Q_INT(0, spmd_block_nbytes(&H_NEG_RANK));
    Q_INT(0, spmd_block_nbytes(&H_MAX_RANK));
    Q_INT(0, spmd_block_nbytes(&H_COUNT));
    Q_INT(0, spmd_block_nbytes(&H_NEG));
    Q_INT(0, spmd_block_nbytes(&H_HUGE));
    Q_INT(0, spmd_block_nbytes(&H_HUGE_BYTES));
}

/* ==== ops.h (ctx may be NULL outside shard_map: the blocks are in host memory) ================ */

static float g_zeros[64];

/* Room for any rank: a global shape that holds every valid block, starting at 0. */
static const int64_t G_ROOMY[SPMD_MAX_RANK + 1] = {1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20,
                                                   1 << 20, 1 << 20, 1 << 20, 1 << 20};
static const int64_t G_ORIGIN[SPMD_MAX_RANK + 1] = {0};

/* mode 0 fill, 1 iota, 2 random */
static void sweep_block_out_op(int mode)
{
    const spmd_block n_data = {NULL, SPMD_DTYPE_F32, 2, {2, 2}},
                     minus1 = {g_host_block, (spmd_dtype)-1, 2, {2, 2}},
                     zero = {g_host_block, SPMD_DTYPE_F32, 2, {0, 2}};
    spmd_block b;
#define OUT_OP(blk)                                                                                \
    (mode == 1   ? spmd_op_iota(NULL, (blk), 0.0, 1.0)                                             \
     : mode == 2 ? spmd_op_random(NULL, 1, SPMD_RANDOM_UNIFORM, G_ROOMY, G_ORIGIN, (blk))          \
                 : spmd_op_fill(NULL, (blk), 1.0))
    BAD(INV, OUT_OP(NULL));
    BAD2(SHP, INV, OUT_OP((b = H_NEG_RANK, &b)));
    BAD2(SHP, INV, OUT_OP((b = H_RANK17, &b)));
    BAD2(SHP, INV, OUT_OP((b = H_MAX_RANK, &b)));
    BAD(INV, OUT_OP((b = H_COUNT, &b)));
    BAD(INV, OUT_OP((b = minus1, &b)));
    BAD(INV, OUT_OP((b = n_data, &b)));
    BAD(SHP, OUT_OP((b = zero, &b)));
    BAD(SHP, OUT_OP((b = H_NEG, &b)));
    BAD(SHP, OUT_OP((b = H_I64MIN, &b)));
    BAD(SHP, OUT_OP((b = H_HUGE, &b)));
#undef OUT_OP
}

void sweep_spmd_op_fill(void) { sweep_block_out_op(0); }
void sweep_spmd_op_iota(void) { sweep_block_out_op(1); }

void sweep_spmd_op_random(void)
{
    sweep_block_out_op(2);
    HB(f22, F32, 2, 2, 2);
    HB(i22, SPMD_DTYPE_I32, 2, 2, 2);
    HB(h22, SPMD_DTYPE_F16, 2, 2, 2);
    const int64_t g22[2] = {2, 2}, g33[2] = {3, 3}, at11[2] = {1, 1}, at0m[2] = {0, -1},
                  gneg[2] = {-2, 2}, g_huge[2] = {INT64_MAX, INT64_MAX};
    BAD(UNS, spmd_op_random(NULL, 1, SPMD_RANDOM_UNIFORM, g22, G_ORIGIN, &i22));
    BAD(UNS, spmd_op_random(NULL, 1, SPMD_RANDOM_NORMAL, g22, G_ORIGIN, &h22));
    BAD(INV, spmd_op_random(NULL, 1, (spmd_random_distribution)2, g22, G_ORIGIN, &f22));
    BAD(INV, spmd_op_random(NULL, 1, (spmd_random_distribution)-1, g22, G_ORIGIN, &f22));
    BAD(INV, spmd_op_random(NULL, 1, SPMD_RANDOM_UNIFORM, NULL, G_ORIGIN, &f22));
    BAD(INV, spmd_op_random(NULL, 1, SPMD_RANDOM_UNIFORM, g22, NULL, &f22));
    BAD(INV, spmd_op_random(NULL, 1, SPMD_RANDOM_UNIFORM, g22, at11, &f22)); /* overruns */
    BAD(INV, spmd_op_random(NULL, 1, SPMD_RANDOM_UNIFORM, g33, at0m, &f22));
    BAD(INV, spmd_op_random(NULL, 1, SPMD_RANDOM_UNIFORM, gneg, G_ORIGIN, &f22));
    BAD(INV, spmd_op_random(NULL, 1, SPMD_RANDOM_UNIFORM, g_huge, G_ORIGIN, &f22)); /* > 2^64 */
}

void sweep_spmd_op_copy(void)
{
    HB(f22, F32, 2, 2, 2);
    HB(f23, F32, 2, 2, 3);
    HB(i22, SPMD_DTYPE_I32, 2, 2, 2);
    spmd_block b;
    BAD(INV, spmd_op_copy(NULL, NULL, &f22));
    BAD(INV, spmd_op_copy(NULL, &f22, NULL));
    BAD(INV, spmd_op_copy(NULL, &H_COUNT, &f22));
    BAD(INV, spmd_op_copy(NULL, &f22, (b = H_COUNT, &b)));
    BAD2(SHP, INV, spmd_op_copy(NULL, &H_RANK17, &f22));
    BAD(SHP, spmd_op_copy(NULL, &H_NEG, &f22));
    BAD(SHP, spmd_op_copy(NULL, &f22, &f23));
    BAD(INV, spmd_op_copy(NULL, &f22, &i22)); /* same memory, another dtype: in place */
    BAD(SHP, spmd_op_copy(NULL, &H_HUGE, (b = H_HUGE, &b)));
}

void sweep_spmd_op_slice(void)
{
    HB(f23, F32, 2, 2, 3);
    static float other[64];
    spmd_block f12 = {other, SPMD_DTYPE_F32, 2, {1, 2}};
    spmd_block i12 = {other, SPMD_DTYPE_I32, 2, {1, 2}};
    spmd_block f3 = {other, SPMD_DTYPE_F32, 1, {3}};
    spmd_block b;
    const int64_t ok[2] = {1, 1}, past[2] = {1, 2}, neg[2] = {-1, 0}, huge[2] = {INT64_MAX, 0};
    BAD(INV, spmd_op_slice(NULL, NULL, ok, &f12));
    BAD(INV, spmd_op_slice(NULL, &f23, ok, NULL));
    BAD(INV, spmd_op_slice(NULL, &f23, NULL, &f12));
    BAD(INV, spmd_op_slice(NULL, &f23, ok, &i12));
    BAD(SHP, spmd_op_slice(NULL, &f23, ok, &f3));
    BAD(SHP, spmd_op_slice(NULL, &f23, past, &f12));
    BAD(SHP, spmd_op_slice(NULL, &f23, neg, &f12));
    BAD(SHP, spmd_op_slice(NULL, &f23, huge, &f12));
    BAD(INV, spmd_op_slice(NULL, &f23, ok, (b = f12, b.data = g_host_block, &b)));
}

void sweep_spmd_op_concatenate(void)
{
    HB(f23, F32, 2, 2, 3);
    static float other[64], outbuf[64];
    spmd_block parts[2] = {{other, SPMD_DTYPE_F32, 2, {2, 1}},
                           {other + 2, SPMD_DTYPE_F32, 2, {2, 2}}};
    spmd_block out = {outbuf, SPMD_DTYPE_F32, 2, {2, 3}};
    spmd_block i23 = {outbuf, SPMD_DTYPE_I32, 2, {2, 3}};
    spmd_block o24 = {outbuf, SPMD_DTYPE_F32, 2, {2, 4}};
    spmd_block scalar = {outbuf, SPMD_DTYPE_F32, 0, {0}};
    spmd_block b[2];
    BAD(INV, spmd_op_concatenate(NULL, 2, NULL, 1, &out));
    BAD(INV, spmd_op_concatenate(NULL, 2, parts, 1, NULL));
    BAD(INV, spmd_op_concatenate(NULL, 0, parts, 1, &out));
    BAD(INV, spmd_op_concatenate(NULL, -1, parts, 1, &out));
    BAD(INV, spmd_op_concatenate(NULL, 2, parts, 2, &out));
    BAD(INV, spmd_op_concatenate(NULL, 2, parts, -3, &out));
    BAD(INV, spmd_op_concatenate(NULL, 2, parts, INT_MIN, &out));
    BAD(INV, spmd_op_concatenate(NULL, 2, parts, 1, &i23));
    BAD(SHP, spmd_op_concatenate(NULL, 2, parts, 1, &o24));
    BAD(SHP, spmd_op_concatenate(NULL, 2, parts, 0, &out));
    BAD(SHP, spmd_op_concatenate(NULL, 1, &f23, 0, &scalar));
    BAD(INV, spmd_op_concatenate(NULL, 2, (b[0] = parts[0], b[1] = parts[1], b[1].data = NULL, b),
                                 1, &out));
    BAD(INV, spmd_op_concatenate(NULL, 2, (b[0] = parts[0], b[1] = parts[1], b[1].data = outbuf, b),
                                 1, &out));
}

void sweep_spmd_op_softmax(void)
{
    HB(f23, F32, 2, 2, 3);
    HB(i23, SPMD_DTYPE_I32, 2, 2, 3);
    static double other[64];
    spmd_block d23 = {other, SPMD_DTYPE_F64, 2, {2, 3}};
    spmd_block f32 = {other, SPMD_DTYPE_F32, 2, {3, 2}};
    spmd_block f0 = {other, SPMD_DTYPE_F32, 0, {0}};
    spmd_block b;
    BAD(INV, spmd_op_softmax(NULL, NULL, 1, &f23));
    BAD(INV, spmd_op_softmax(NULL, &f23, 1, NULL));
    BAD(UNS, spmd_op_softmax(NULL, &i23, 1, &i23));
    BAD(INV, spmd_op_softmax(NULL, &f23, 1, &d23)); /* dtypes differ */
    BAD(SHP, spmd_op_softmax(NULL, &f23, 1, &f32));
    BAD(INV, spmd_op_softmax(NULL, &f23, 2, &f23));
    BAD(INV, spmd_op_softmax(NULL, &f23, -3, &f23));
    BAD(INV, spmd_op_softmax(NULL, &f23, INT_MIN, &f23));
    BAD(SHP, spmd_op_softmax(NULL, &f0, 0, &f0));
    BAD(INV, spmd_op_softmax(NULL, &f23, 1, (b = f23, b.data = (float *)g_host_block + 1, &b)));
}

void sweep_spmd_op_take(void)
{
    HB(f23, F32, 2, 2, 3);
    static int32_t idx[4] = {0, 1, 2, 0};
    static float outbuf[64];
    spmd_block i2 = {idx, SPMD_DTYPE_I32, 1, {2}};
    spmd_block f2 = {idx, SPMD_DTYPE_F32, 1, {2}};
    spmd_block out = {outbuf, SPMD_DTYPE_F32, 2, {2, 2}}; /* take 2 along axis 1 */
    spmd_block o33 = {outbuf, SPMD_DTYPE_F32, 2, {3, 3}};
    spmd_block o3 = {outbuf, SPMD_DTYPE_F32, 1, {2}};
    spmd_block i_out = {outbuf, SPMD_DTYPE_I32, 2, {2, 2}};
    spmd_block f0 = {outbuf, SPMD_DTYPE_F32, 0, {0}};
    spmd_block b;
    BAD(INV, spmd_op_take(NULL, NULL, &i2, 1, SPMD_TAKE_FILL, &out));
    BAD(INV, spmd_op_take(NULL, &f23, NULL, 1, SPMD_TAKE_FILL, &out));
    BAD(INV, spmd_op_take(NULL, &f23, &i2, 1, SPMD_TAKE_FILL, NULL));
    BAD(INV, spmd_op_take(NULL, &f23, &i2, 1, (spmd_take_mode)3, &out));
    BAD(INV, spmd_op_take(NULL, &f23, &i2, 1, (spmd_take_mode)-1, &out));
    BAD(INV, spmd_op_take(NULL, &f23, &f2, 1, SPMD_TAKE_FILL, &out));
    BAD(INV, spmd_op_take(NULL, &f23, &i2, 1, SPMD_TAKE_FILL, &i_out));
    BAD(INV, spmd_op_take(NULL, &f23, &i2, 2, SPMD_TAKE_FILL, &out));
    BAD(INV, spmd_op_take(NULL, &f23, &i2, INT_MIN, SPMD_TAKE_FILL, &out));
    BAD(SHP, spmd_op_take(NULL, &f23, &i2, 1, SPMD_TAKE_FILL, &o33));
    BAD(SHP, spmd_op_take(NULL, &f23, &i2, 1, SPMD_TAKE_FILL, &o3));
    BAD(SHP, spmd_op_take(NULL, &f0, &i2, 0, SPMD_TAKE_FILL, &o3));
    BAD(INV,
        spmd_op_take(NULL, &f23, &i2, 1, SPMD_TAKE_FILL, (b = out, b.data = g_host_block, &b)));
    BAD(INV, spmd_op_take(NULL, &f23, &i2, 1, SPMD_TAKE_FILL, (b = out, b.data = idx, &b)));
}

void sweep_spmd_op_update_slice(void)
{
    HB(f23, F32, 2, 2, 3);
    static float other[64], outbuf[64];
    spmd_block u12 = {other, SPMD_DTYPE_F32, 2, {1, 2}};
    spmd_block i12 = {other, SPMD_DTYPE_I32, 2, {1, 2}};
    spmd_block out = {outbuf, SPMD_DTYPE_F32, 2, {2, 3}};
    spmd_block o22 = {outbuf, SPMD_DTYPE_F32, 2, {2, 2}};
    spmd_block b;
    const int64_t ok[2] = {1, 1}, past[2] = {2, 0};
    BAD(INV, spmd_op_update_slice(NULL, NULL, &u12, ok, &out));
    BAD(INV, spmd_op_update_slice(NULL, &f23, NULL, ok, &out));
    BAD(INV, spmd_op_update_slice(NULL, &f23, &u12, ok, NULL));
    BAD(INV, spmd_op_update_slice(NULL, &f23, &u12, NULL, &out));
    BAD(INV, spmd_op_update_slice(NULL, &f23, &i12, ok, &out));
    BAD(SHP, spmd_op_update_slice(NULL, &f23, &u12, ok, &o22));
    BAD(SHP, spmd_op_update_slice(NULL, &f23, &u12, past, &out));
    BAD(INV, spmd_op_update_slice(NULL, &f23, (b = u12, b.data = outbuf, &b), ok, &out));
}

void sweep_spmd_op_transpose(void)
{
    HB(f23, F32, 2, 2, 3);
    static float other[64];
    spmd_block f32o = {other, SPMD_DTYPE_F32, 2, {3, 2}};
    spmd_block i32o = {other, SPMD_DTYPE_I32, 2, {3, 2}};
    spmd_block f22o = {other, SPMD_DTYPE_F32, 2, {2, 2}};
    spmd_block f33o = {other, SPMD_DTYPE_F32, 3, {3, 2, 1}};
    spmd_block b;
    const int swap[2] = {1, 0}, twice[2] = {0, 0}, neg[2] = {-1, 0}, big[2] = {0, 2};
    BAD(INV, spmd_op_transpose(NULL, NULL, swap, &f32o));
    BAD(INV, spmd_op_transpose(NULL, &f23, swap, NULL));
    BAD(INV, spmd_op_transpose(NULL, &f23, twice, &f32o));
    BAD(INV, spmd_op_transpose(NULL, &f23, neg, &f32o));
    BAD(INV, spmd_op_transpose(NULL, &f23, big, &f32o));
    BAD(INV, spmd_op_transpose(NULL, &f23, swap, &i32o)); /* dtypes differ */
    BAD(SHP, spmd_op_transpose(NULL, &f23, swap, &f22o));
    BAD(SHP, spmd_op_transpose(NULL, &f23, swap, &f33o));
    BAD(INV, spmd_op_transpose(NULL, &f23, swap, (b = f23, b.shape[0] = 3, b.shape[1] = 2, &b)));
    BAD(INV, spmd_op_transpose(NULL, &H_COUNT, NULL, &f32o));
}

void sweep_spmd_op_where(void)
{
    HB(f22, F32, 2, 2, 2);
    HB(f23, F32, 2, 2, 3);
    HB(i22, SPMD_DTYPE_I32, 2, 2, 2);
    HB(c22, SPMD_DTYPE_BOOL, 2, 2, 2);
    HB(c23, SPMD_DTYPE_BOOL, 2, 2, 3);
    HB(c2, SPMD_DTYPE_BOOL, 1, 2);
    spmd_block b;
    BAD(INV, spmd_op_where(NULL, NULL, &f22, &f22, &f22));
    BAD(INV, spmd_op_where(NULL, &c22, NULL, &f22, &f22));
    BAD(INV, spmd_op_where(NULL, &c22, &f22, NULL, &f22));
    BAD(INV, spmd_op_where(NULL, &c22, &f22, &f22, NULL));
    BAD(INV, spmd_op_where(NULL, &f22, &f22, &f22, &f22)); /* cond not bool */
    BAD(INV, spmd_op_where(NULL, &c22, &f22, &i22, &f22)); /* dtypes differ */
    BAD(SHP, spmd_op_where(NULL, &c23, &f22, &f22, &f22));
    BAD(SHP, spmd_op_where(NULL, &c2, &f22, &f22, &f22)); /* no broadcast but a scalar */
    BAD(SHP, spmd_op_where(NULL, &c22, &f23, &f22, &f22));
    BAD(INV, spmd_op_where(NULL, &c22, &H_COUNT, &f22, &f22));
    BAD(SHP, spmd_op_where(NULL, &c22, &f22, &f22, (b = H_NEG, &b)));
}

void sweep_spmd_op_unary(void)
{
    HB(f22, F32, 2, 2, 2);
    HB(f23, F32, 2, 2, 3);
    HB(d22, SPMD_DTYPE_F64, 2, 2, 2);
    HB(i22, SPMD_DTYPE_I32, 2, 2, 2);
    HB(u22, SPMD_DTYPE_U8, 2, 2, 2);
    BAD(INV, spmd_op_unary(NULL, (spmd_unary_op)-1, &f22, &f22));
    BAD(INV, spmd_op_unary(NULL, (spmd_unary_op)(SPMD_UNARY_RELU + 1), &f22, &f22));
    BAD(INV, spmd_op_unary(NULL, (spmd_unary_op)INT_MAX, &f22, &f22));
    BAD(INV, spmd_op_unary(NULL, (spmd_unary_op)INT_MIN, &f22, &f22));
    BAD(INV, spmd_op_unary(NULL, SPMD_UNARY_NEG, NULL, &f22));
    BAD(INV, spmd_op_unary(NULL, SPMD_UNARY_NEG, &f22, NULL));
    BAD(INV, spmd_op_unary(NULL, SPMD_UNARY_NEG, &H_COUNT, &f22));
    BAD2(SHP, INV, spmd_op_unary(NULL, SPMD_UNARY_NEG, &H_NEG_RANK, &f22));
    BAD(SHP, spmd_op_unary(NULL, SPMD_UNARY_NEG, &f22, &f23));
    BAD(INV, spmd_op_unary(NULL, SPMD_UNARY_NEG, &f22, &d22));
    BAD(UNS, spmd_op_unary(NULL, SPMD_UNARY_EXP, &i22, &i22));
    BAD(UNS, spmd_op_unary(NULL, SPMD_UNARY_NEG, &u22, &u22));
}

void sweep_spmd_op_binary(void)
{
    HB(f22, F32, 2, 2, 2);
    HB(f23, F32, 2, 2, 3);
    HB(f3, F32, 1, 3);
    HB(d22, SPMD_DTYPE_F64, 2, 2, 2);
    HB(u22, SPMD_DTYPE_U8, 2, 2, 2);
    spmd_block i22 = {g_host_block, SPMD_DTYPE_I32, 2, {2, 2}};
    spmd_block zeros = {g_zeros, SPMD_DTYPE_I32, 2, {2, 2}};
    BAD(INV, spmd_op_binary(NULL, (spmd_binary_op)-1, &f22, &f22, &f22));
    BAD(INV, spmd_op_binary(NULL, (spmd_binary_op)(SPMD_BINARY_XOR + 1), &f22, &f22, &f22));
    BAD(INV, spmd_op_binary(NULL, (spmd_binary_op)INT_MAX, &f22, &f22, &f22));
    BAD(INV, spmd_op_binary(NULL, (spmd_binary_op)INT_MIN, &f22, &f22, &f22));
    BAD(INV, spmd_op_binary(NULL, SPMD_BINARY_ADD, NULL, &f22, &f22));
    BAD(INV, spmd_op_binary(NULL, SPMD_BINARY_ADD, &f22, NULL, &f22));
    BAD(INV, spmd_op_binary(NULL, SPMD_BINARY_ADD, &f22, &f22, NULL));
    BAD(INV, spmd_op_binary(NULL, SPMD_BINARY_ADD, &f22, &H_COUNT, &f22));
    BAD2(SHP, INV, spmd_op_binary(NULL, SPMD_BINARY_ADD, &f22, &H_RANK17, &f22));
    BAD(SHP, spmd_op_binary(NULL, SPMD_BINARY_ADD, &f22, &H_NEG, &f22));
    BAD(INV, spmd_op_binary(NULL, SPMD_BINARY_ADD, &f22, &d22, &f22));
    BAD(SHP, spmd_op_binary(NULL, SPMD_BINARY_ADD, &f22, &f3, &f22));
    BAD(SHP, spmd_op_binary(NULL, SPMD_BINARY_ADD, &f22, &f22, &f23));
    BAD(UNS, spmd_op_binary(NULL, SPMD_BINARY_ADD, &u22, &u22, &u22));
    BAD(INV, spmd_op_binary(NULL, SPMD_BINARY_DIV, &i22, &zeros, &i22));
    BAD(UNS, spmd_op_binary(NULL, SPMD_BINARY_AND, &f22, &f22, &f22)); /* bitwise: no floats */
    BAD(UNS, spmd_op_binary(NULL, SPMD_BINARY_XOR, &d22, &d22, &d22));
    BAD(INV, spmd_op_binary(NULL, SPMD_BINARY_OR, &u22, &u22, &f22)); /* out's dtype differs */
}

void sweep_spmd_op_binary_scalar(void)
{
    HB(f22, F32, 2, 2, 2);
    HB(f23, F32, 2, 2, 3);
    HB(u22, SPMD_DTYPE_U8, 2, 2, 2);
    spmd_block i22 = {g_host_block, SPMD_DTYPE_I32, 2, {2, 2}};
    BAD(INV, spmd_op_binary_scalar(NULL, (spmd_binary_op)-1, &f22, 1.0, &f22));
    BAD(INV, spmd_op_binary_scalar(NULL, (spmd_binary_op)INT_MAX, &f22, 1.0, &f22));
    BAD(INV, spmd_op_binary_scalar(NULL, (spmd_binary_op)INT_MIN, &f22, 1.0, &f22));
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, NULL, 1.0, &f22));
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, &f22, 1.0, NULL));
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, &H_COUNT, 1.0, &f22));
    BAD(SHP, spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, &f22, 1.0, &f23));
    BAD(UNS, spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, &u22, 1.0, &u22));
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, &i22, NAN, &i22));
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, &i22, INFINITY, &i22));
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, &i22, 1e30, &i22));
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_DIV, &i22, 0.0, &i22));
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_AND, &i22, 1.5, &i22));    /* not whole */
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_AND, &i22, 0x1p31, &i22)); /* int32's range */
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_OR, &u22, 256.0, &u22));
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_OR, &u22, -1.0, &u22));
    spmd_block b22 = {g_host_block, SPMD_DTYPE_BOOL, 2, {2, 2}};
    BAD(INV, spmd_op_binary_scalar(NULL, SPMD_BINARY_XOR, &b22, 2.0, &b22));
    BAD(UNS, spmd_op_binary_scalar(NULL, SPMD_BINARY_OR, &f22, 1.0, &f22));
}

void sweep_spmd_op_reduce(void)
{
    HB(f22, F32, 2, 2, 2);
    HB(f2, F32, 1, 2);
    HB(f3, F32, 1, 3);
    HB(f0, F32, 0, 0);
    HB(i0, SPMD_DTYPE_I32, 0, 0);
    HB(u22, SPMD_DTYPE_U8, 2, 2, 2);
    BAD(INV, spmd_op_reduce(NULL, (spmd_reduce_kind)-1, &f22, 0, &f2));
    BAD(INV, spmd_op_reduce(NULL, (spmd_reduce_kind)(SPMD_REDUCE_ARGMIN + 1), &f22, 0, &f2));
    BAD(INV, spmd_op_reduce(NULL, SPMD_REDUCE_ARGMAX, &f22, 0, &f2)); /* a float out */
    BAD(INV, spmd_op_reduce(NULL, (spmd_reduce_kind)INT_MAX, &f22, 0, &f2));
    BAD(INV, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, NULL, 0, &f2));
    BAD(INV, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &f22, 0, NULL));
    BAD(INV, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &H_COUNT, 0, &f2));
    BAD2(SHP, INV, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &H_MAX_RANK, 0, &f2));
    BAD(SHP, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &H_NEG, 0, &f2));
    BAD(INV, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &f22, 2, &f2));
    BAD(INV, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &f22, -3, &f2));
    BAD(INV, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &f22, INT_MAX, &f2));
    BAD(INV, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &f22, INT_MIN, &f2));
    BAD(SHP, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &f22, 0, &f22));
    BAD(SHP, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &f22, 0, &f3));
    BAD(SHP, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &f22, SPMD_ALL_AXES, &f2));
    BAD(INV, spmd_op_reduce(NULL, SPMD_REDUCE_MEAN, &f22, SPMD_ALL_AXES, &i0));
    BAD(UNS, spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &u22, SPMD_ALL_AXES, &f0));
}

void sweep_spmd_op_gemm(void)
{
    HB(f22, F32, 2, 2, 2);
    HB(f33, F32, 2, 3, 3);
    HB(f2, F32, 1, 2);
    HB(d22, SPMD_DTYPE_F64, 2, 2, 2);
    HB(i22, SPMD_DTYPE_I32, 2, 2, 2);
    HB(tall, F32, 2, (int64_t)1 << 32, 1);
    HB(one, F32, 2, 1, 1);
    BAD(INV, spmd_op_gemm(NULL, 0, 0, 1.0, NULL, &f22, 0.0, &f22));
    BAD(INV, spmd_op_gemm(NULL, 0, 0, 1.0, &f22, NULL, 0.0, &f22));
    BAD(INV, spmd_op_gemm(NULL, 0, 0, 1.0, &f22, &f22, 0.0, NULL));
    BAD(INV, spmd_op_gemm(NULL, 0, 0, 1.0, &H_COUNT, &f22, 0.0, &f22));
    BAD2(SHP, INV, spmd_op_gemm(NULL, 0, 0, 1.0, &H_NEG_RANK, &f22, 0.0, &f22));
    BAD(SHP, spmd_op_gemm(NULL, 0, 0, 1.0, &H_NEG, &f22, 0.0, &f22));
    BAD(SHP, spmd_op_gemm(NULL, 0, 0, 1.0, &f2, &f22, 0.0, &f22));
    BAD(SHP, spmd_op_gemm(NULL, 0, 0, 1.0, &f22, &f33, 0.0, &f22));
    BAD(SHP, spmd_op_gemm(NULL, INT_MIN, INT_MAX, 1.0, &f22, &f22, 0.0, &f33));
    BAD(INV, spmd_op_gemm(NULL, 0, 0, 1.0, &f22, &d22, 0.0, &f22));
    BAD(UNS, spmd_op_gemm(NULL, 0, 0, 1.0, &i22, &i22, 0.0, &i22));
    BAD(UNS, spmd_op_gemm(NULL, 0, 0, 1.0, &tall, &one, 0.0, &tall));
}
