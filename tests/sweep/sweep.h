/* What the sources of test_api_sweep share: the case protocol and its checks (test_api_sweep.c),
 * the macros that write the cases, the fixtures, and the sweep_<name> function of every entry. */
#ifndef SPMD_TEST_SWEEP_H
#define SPMD_TEST_SWEEP_H

#include "testutil.h"

#include "sweep_functions.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <spmd/config.h>
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

/* ==== the child: one function's cases (test_api_sweep.c) ===================================== */

extern const char *g_fn; /* the function swept */
extern int g_case;       /* number of the current case, from 1 */
extern int g_skip;       /* cases up to this number ran in an earlier child */
extern const char *g_known_next;
extern int g_known_ub_next;
extern void *g_dead;       /* a dead handle: its memory must not change */
extern char sentinel_byte; /* what SENTINEL points at */

/* Writes one protocol line ("@@..."), unbuffered: the parent reads it even if the child dies. */
void emit(const char *fmt, ...);
/* Starts the next case: 0 when it ran in an earlier child (skip it). */
int case_begin(const char *label);
/* kind: ok, status, message, name, out, modified, value (what the failure is about). */
void case_fail(const char *kind, const char *fmt, ...);
void case_end(void);
/* A fallible call given bad input: `want` (or `alt`), a message that names the function. */
void check_failure(spmd_status got, const char *msg, spmd_status want, spmd_status alt,
                   const char *where);
void check_status(spmd_status got, spmd_status want, spmd_status alt);
void check_out_null(const void *out, const char *what);
void check_untouched(const void *p, size_t n, const char *what);

/* Marks the next case as a known library bug (the parent lists them). */
#define KNOWN(id) (g_known_next = (id), g_known_ub_next = 0)
/* The same for a bug that is undefined behaviour: only a sanitized build is sure to see it, so
 * elsewhere the case passing proves nothing. */
#define KNOWN_UB(id) (g_known_next = (id), g_known_ub_next = 1)
/* A non-NULL value that a failing constructor must overwrite with NULL. */
#define SENTINEL(T) ((T *)(void *)&sentinel_byte)

#define DESTROY(p)                                                                                 \
    _Generic((p), spmd_mesh *                                                                      \
             : spmd_mesh_destroy, spmd_spec *                                                      \
             : spmd_spec_destroy, spmd_sharding *                                                  \
             : spmd_sharding_destroy, spmd_array *                                                 \
             : spmd_array_destroy, spmd_plan *                                                     \
             : spmd_plan_destroy)(p)

/* The labels are the calls as written (#expr in the outermost macro, before expansion). */

/* A fallible call that must fail with `want` (or `alt`). */
#define BAD_L(label, want, alt, expr)                                                              \
    do {                                                                                           \
        if (case_begin(label)) {                                                                   \
            spmd_status st_ = (expr);                                                              \
            check_status(st_, (want), (alt));                                                      \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)
#define BAD2(want, alt, expr) BAD_L(#expr, want, alt, expr)
#define BAD(want, expr) BAD_L(#expr, want, want, expr)

/* A constructor: `expr` writes `out` (a T * declared here), which must come back NULL. */
#define BAD_OUT_L(label, T, want, alt, expr)                                                       \
    do {                                                                                           \
        if (case_begin(label)) {                                                                   \
            T *out = SENTINEL(T);                                                                  \
            spmd_status st_ = (expr);                                                              \
            check_status(st_, (want), (alt));                                                      \
            check_out_null(out, "*out");                                                           \
            if (out != NULL && out != SENTINEL(T))                                                 \
                DESTROY(out);                                                                      \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)
#define BAD_OUT2(T, want, alt, expr) BAD_OUT_L(#expr, T, want, alt, expr)
#define BAD_OUT(T, want, expr) BAD_OUT_L(#expr, T, want, want, expr)

/* A call with an out-parameter `obj` (an object in scope) that a failure must leave as it was. */
#define BAD_KEEP_L(label, want, alt, obj, expr)                                                    \
    do {                                                                                           \
        if (case_begin(label)) {                                                                   \
            memset(&(obj), 0xA5, sizeof(obj));                                                     \
            spmd_status st_ = (expr);                                                              \
            check_status(st_, (want), (alt));                                                      \
            if (st_ != SPMD_OK)                                                                    \
                check_untouched(&(obj), sizeof(obj), #obj);                                        \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)
#define BAD_KEEP2(want, alt, obj, expr) BAD_KEEP_L(#expr, want, alt, obj, expr)
#define BAD_KEEP(want, obj, expr) BAD_KEEP_L(#expr, want, want, obj, expr)

/* A call writing an array of outputs `outs` (spmd_array *[]), which must all come back NULL. */
#define BAD_OUTS(want, outs, expr)                                                                 \
    do {                                                                                           \
        if (case_begin(#expr)) {                                                                   \
            for (size_t k_ = 0; k_ < sizeof(outs) / sizeof((outs)[0]); k_++)                       \
                (outs)[k_] = SENTINEL(spmd_array);                                                 \
            spmd_status st_ = (expr);                                                              \
            check_status(st_, (want), (want));                                                     \
            for (size_t k_ = 0; k_ < sizeof(outs) / sizeof((outs)[0]); k_++) {                     \
                char what_[32];                                                                    \
                snprintf(what_, sizeof what_, "%s[%zu]", #outs, k_);                               \
                check_out_null((outs)[k_], what_);                                                 \
                if ((outs)[k_] != NULL && (outs)[k_] != SENTINEL(spmd_array))                      \
                    spmd_array_destroy((outs)[k_]);                                                \
            }                                                                                      \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)

/* Queries: the documented answer to bad input. */
#define Q_INT(want, expr)                                                                          \
    do {                                                                                           \
        if (case_begin(#expr)) {                                                                   \
            long long v_ = (long long)(expr), w_ = (long long)(want);                              \
            if (v_ != w_)                                                                          \
                case_fail("value", "returned %lld, expected %lld", v_, w_);                        \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)
#define Q_PTR_L(label, want, expr)                                                                 \
    do {                                                                                           \
        if (case_begin(label)) {                                                                   \
            const void *v_ = (const void *)(expr), *w_ = (const void *)(want);                     \
            if (v_ != w_)                                                                          \
                case_fail("value", "returned %p, expected %p", v_, w_);                            \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)
#define Q_PTR(want, expr) Q_PTR_L(#expr, want, expr)
#define Q_NULL(expr) Q_PTR_L(#expr, NULL, expr)
#define Q_STR(want, expr)                                                                          \
    do {                                                                                           \
        if (case_begin(#expr)) {                                                                   \
            const char *v_ = (expr), *w_ = (want);                                                 \
            if (!v_ || strcmp(v_, w_) != 0)                                                        \
                case_fail("value", "returned \"%s\", expected \"%s\"", v_ ? v_ : "(null)", w_);    \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)
/* `expr` (run first) must make `cond` true. */
#define Q_THAT_L(label, expr, cond, what)                                                          \
    do {                                                                                           \
        if (case_begin(label)) {                                                                   \
            expr;                                                                                  \
            if (!(cond))                                                                           \
                case_fail("value", "%s", what);                                                    \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)
#define Q_THAT(expr, cond, what) Q_THAT_L(#expr, expr, cond, what)
/* A void call (destroy, clear) that must simply not crash. */
#define Q_VOID(expr) Q_THAT_L(#expr, expr, 1, "")

/* ==== fixtures (test_api_sweep.c) ============================================================ */

#define NDEV 4

extern float HOST[4096]; /* host data: 0, 1, 2, ... (4096 floats, more than any case reads) */
extern const int64_t S44[2], S22[2], S34[2], S24[2], S04[2], S4N[2], SMIN[2], SMAX[2], S4[1],
    S2P32[2], S2P62[1], S17[17];
extern const char *const XY[2], *const XX[2], *const ONE_I[1];
extern const int DEV4[4], DEV_DUP[4], DEV_NEG[4], DEV_BIG[4], DEV_MAX[4], DEV_MIN[4];
extern int DEV_LONG[8];

extern spmd_mesh *M, *M_REV, *M_SUB;
extern spmd_spec *P_XY, *P_X, *P_REP, *P_Z, *P_I;
extern spmd_sharding *S_XY, *S_X, *S_REP, *S_REV, *S_SUB;
extern spmd_array *A, *A_X, *A_REV, *A_I32, *A_SCALAR, *A_RANK16, *A_ODD, *DEL;
extern spmd_array *SINGLE[NDEV];
extern spmd_plan *PLAN;

#define DEAD_MESH ((spmd_mesh *)g_dead)
#define DEAD_SPEC ((spmd_spec *)g_dead)
#define DEAD_SHARDING ((spmd_sharding *)g_dead)
#define DEAD_ARRAY ((spmd_array *)g_dead)
#define DEAD_PLAN ((spmd_plan *)g_dead)

spmd_status noop_fn(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                    void *user);
/* Reports a fixture that cannot be made, and exits. */
void die(const char *what, spmd_status st);
spmd_status init_four_cpu_devices(void);
void runtime_up(void);
/* Cycles the runtime, for the queries that must answer their "not initialized" value after it. */
void runtime_cycle(void);
/* Builds the fixture (and starts the runtime) once; the sweeps call it after their cases that
 * need no runtime. */
void fixture_up(void);
/* Frees the fixtures of the array ops (sweep_array_ops.c); fixture_down calls it. */
void xfix_down(void);

#define SETUP(expr)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (expr);                                                                  \
        if (st_ != SPMD_OK)                                                                        \
            die(#expr, st_);                                                                       \
    } while (0)

extern float g_host_block[64];
/* A host block for calls made outside shard_map (ctx NULL). */
#define HB(name, dtype, ndim, ...) spmd_block name = {g_host_block, dtype, ndim, {__VA_ARGS__}}

#define INV SPMD_ERR_INVALID_ARGUMENT
#define SHP SPMD_ERR_SHAPE
#define SPC SPMD_ERR_SPEC
#define UNS SPMD_ERR_UNSUPPORTED
#define INC SPMD_ERR_INCOMPATIBLE_DEVICES
#define F32 SPMD_DTYPE_F32
#define COUNT SPMD_DTYPE_COUNT
#define MINUS1 ((spmd_dtype)-1)

/* ==== the sweeps: one per public function (sweep_<area>.c) =================================== */

#define SWEEP_DECLARE(f) void sweep_##f(void);
SPMD_SWEEP_FUNCTIONS(SWEEP_DECLARE)
#ifdef SPMD_HAVE_MPI
SPMD_SWEEP_MPI_FUNCTIONS(SWEEP_DECLARE)
#endif
#undef SWEEP_DECLARE

#endif /* SPMD_TEST_SWEEP_H */
