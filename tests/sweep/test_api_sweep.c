/* Bad input to EVERY public function (every SPMD_API declaration in include/spmd/; the list
 * is extracted from the headers at configure time into sweep_functions.h, see CMakeLists.txt).
 *
 * For each function, a table of bad inputs: NULL for each pointer argument, out-of-range values
 * for each integer argument (negative, too large, INT_MAX, INT_MIN), destroyed handles, invalid
 * dtypes (SPMD_DTYPE_COUNT, -1), deleted (donated) arrays, and arrays from another mesh or in
 * another layout where a function needs a match. Every fallible call must return its documented
 * status with a non-empty spmd_last_error() that names the function and quotes no source
 * location (src/..., .c:), leave *out NULL (and other
 * out-parameters untouched: status.h says a caller error modifies nothing), not crash, not hang
 * and not leak; queries must answer their documented sentinels.
 *
 * A destroyed handle cannot be passed for real (its memory is freed: undefined behaviour), so a
 * "dead" handle is a 64 KiB heap block whose first word is 0xdeadbeef, what the library writes
 * into the magic field of every handle it frees (SPMD__MAGIC_DEAD in src/runtime/base/check.h): the
 * memory a destroyed handle leaves behind while it is still mapped. A deleted array is a real
 * one: the source of a donating spmd_reshard.
 *
 * The program runs as a parent that re-executes itself once per public function (argv:
 * --sweep-child NAME SKIP); the child runs that function's cases one after the other and reports
 * each on stdout. A child that crashes or hangs is restarted after the case it died in, so that
 * one crash hides nothing else; under AddressSanitizer each child's exit runs LeakSanitizer, so
 * a leak is charged to its function. Collectives and the other functions of a shard_map body are
 * swept inside one (every device making the same bad call), and must refuse their arguments
 * before communicating.
 *
 * Cases marked KNOWN("...") are library bugs found by this sweep, and so are the [name] failures
 * of the functions listed in g_known_name: they fail (the test reports them, as known) until the
 * library is fixed, and the parent says when one starts passing so that the marker can go.
 * KNOWN_UB marks undefined behaviour, which only a sanitized build is sure to catch.
 *
 * This file holds the harness (the child's case protocol and checks, the fixtures), the table of
 * sweeps and the parent. The sweeps themselves, one sweep_<name> function per public function,
 * are in sweep_<area>.c by header: sweep_runtime.c (status.h, version.h, dtype.h, runtime.h,
 * mpi.h), sweep_meshes.c (mesh.h, spec.h, sharding.h), sweep_arrays.c (array.h, reshard.h),
 * sweep_shard_map.c (shard_map.h outside a body, ops.h), sweep_collectives.c (the functions of a
 * shard_map body), sweep_pmap.c (multihost.h, compat.h, pmap.h) and sweep_array_ops.c
 * (array_ops.h); sweep.h declares what they share. */
#define _POSIX_C_SOURCE 200809L

#include "sweep.h"

#include <stdarg.h>
#include <sys/wait.h>

enum {
    CASE_SECONDS = 60,    /* a case running longer hangs */
    DEAD_BYTES = 1 << 16, /* the memory behind a dead handle */
    MAX_RESTARTS = 64,    /* children started for one function (crashes resume after the case) */
};

/* ==== the child: one function's cases ========================================================= */

const char *g_fn; /* the function swept */
int g_case;       /* number of the current case, from 1 */
int g_skip;       /* cases up to this number ran in an earlier child */
static int g_case_failed;
const char *g_known_next;   /* known-bug id of the next case */
static const char *g_known; /* known-bug id of the current case */

/* Writes one protocol line ("@@..."), unbuffered: the parent reads it even if the child dies. */
void emit(const char *fmt, ...)
{
    char line[3072];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
    for (size_t i = 0; i < len; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[len++] = '\n';
    for (size_t done = 0; done < len;) {
        ssize_t w = write(STDOUT_FILENO, line + done, len - done);
        if (w <= 0)
            return;
        done += (size_t)w;
    }
}

/* Sanitized builds see undefined behaviour that other builds may survive by chance. */
#define SWEEP_SANITIZED SPMD_TEST_ASAN

#if SWEEP_SANITIZED
/* LeakSanitizer's own false positive, seen at random in children that do nothing: with glibc
 * >= 2.34 the sanitizer's pthread_getattr_np call, made to find a thread's stack, allocates a
 * cpuset it never frees. Not libspmd's (it makes no such call). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:GetThreadStackTopAndBottom\n"; }
#endif

int g_known_ub_next;
static int g_known_ub;

void *g_dead;                      /* a dead handle: DEAD_BYTES, first word 0xdeadbeef */
static unsigned char *g_dead_copy; /* what it must still hold after every case */

int case_begin(const char *label)
{
    g_known = g_known_next;
    g_known_ub = g_known_ub_next;
    g_known_next = NULL;
    g_known_ub_next = 0;
    if (++g_case <= g_skip)
        return 0;
    g_case_failed = 0;
    emit("@@B %d %s %s", g_case, g_known ? g_known : "-", label);
    alarm(CASE_SECONDS);
    spmd_clear_error();
    return 1;
}

/* kind: ok, status, message, name, out, modified, value (what the failure is about). */
void case_fail(const char *kind, const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    g_case_failed = 1;
    emit("@@F %d %s %s %s", g_case, kind, g_known ? g_known : "-", text);
}

void case_end(void)
{
    alarm(0);
    if (g_dead && memcmp(g_dead, g_dead_copy, DEAD_BYTES) != 0) {
        case_fail("modified", "wrote into the memory of a destroyed handle");
        memcpy(g_dead, g_dead_copy, DEAD_BYTES);
    }
    if (g_known && !g_case_failed && (SWEEP_SANITIZED || !g_known_ub))
        emit("@@X %d %s", g_case, g_known);
}

/* Collectives and axis queries: their messages use the lax names ("psum", "all_gather"). */
static const char *const g_lax_named[] = {
    "spmd_psum",       "spmd_pmean",        "spmd_pmax",       "spmd_pmin",
    "spmd_all_gather", "spmd_psum_scatter", "spmd_ppermute",   "spmd_all_to_all",
    "spmd_axis_index", "spmd_axis_size",    "spmd_pswapaxes",  "spmd_pshuffle",
    "spmd_pargmax",    "spmd_pargmin",      "spmd_pbroadcast", NULL};

static int is_ident_char(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* 1 when `word` occurs in `msg` as a whole identifier. */
static int has_word(const char *msg, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(msg, word); p; p = strstr(p + 1, word))
        if ((p == msg || !is_ident_char(p[-1])) && !is_ident_char(p[n]))
            return 1;
    return 0;
}

/* 1 when `msg` names the swept function: its full name, or for the collectives the lax name
 * (the full name without "spmd_"). */
static int names_function(const char *msg)
{
    if (has_word(msg, g_fn))
        return 1;
    for (int i = 0; g_lax_named[i]; i++)
        if (strcmp(g_fn, g_lax_named[i]) == 0)
            return has_word(msg, g_fn + 5);
    return 0;
}

/* A fallible call given bad input: `want` (or `alt`), a message that names the function. */
void check_failure(spmd_status got, const char *msg, spmd_status want, spmd_status alt,
                   const char *where)
{
    if (got == SPMD_OK) {
        case_fail("ok", "%sreturned SPMD_OK on bad input; expected %s", where,
                  spmd_status_name(want));
        return;
    }
    if (got != want && got != alt)
        case_fail("status", "%sreturned %s, expected %s%s%s (message: %.600s)", where,
                  spmd_status_name(got), spmd_status_name(want), alt != want ? " or " : "",
                  alt != want ? spmd_status_name(alt) : "", msg);
    if (msg[0] == '\0')
        case_fail("message", "%sreturned %s but left spmd_last_error() empty", where,
                  spmd_status_name(got));
    else if (!names_function(msg))
        case_fail("name", "%sthe message of %s does not name %s: %.600s", where,
                  spmd_status_name(got), g_fn, msg);
    if (strstr(msg, "src/") || strstr(msg, ".c:")) /* spmd_last_error_location says where */
        case_fail("location", "%sthe message of %s quotes a source location: %.600s", where,
                  spmd_status_name(got), msg);
}

void check_status(spmd_status got, spmd_status want, spmd_status alt)
{
    check_failure(got, spmd_last_error(), want, alt, "");
}

char sentinel_byte; /* SENTINEL(T) points here */

void check_out_null(const void *out, const char *what)
{
    if (out == (const void *)&sentinel_byte)
        case_fail("out", "failed but left %s untouched; a failing constructor sets it to NULL",
                  what);
    else if (out != NULL)
        case_fail("out", "failed but set %s to %p instead of NULL", what, out);
}

void check_untouched(const void *p, size_t n, const char *what)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0xA5) {
            case_fail("modified",
                      "failed but modified %s (byte %zu); a caller error modifies "
                      "nothing",
                      what, i);
            return;
        }
}

/* ==== fixtures ================================================================================ */

float HOST[4096]; /* host data: 0, 1, 2, ... (4096 floats, more than any case reads) */
const int64_t S44[2] = {4, 4}, S22[2] = {2, 2}, S34[2] = {3, 4}, S24[2] = {2, 4}, S04[2] = {0, 4},
              S4N[2] = {4, -1}, SMIN[2] = {INT64_MIN, 4}, SMAX[2] = {INT64_MAX, INT64_MAX},
              S4[1] = {4}, S2P32[2] = {(int64_t)1 << 32, (int64_t)1 << 32},
              S2P62[1] = {(int64_t)1 << 62},
              S17[17] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
const char *const XY[2] = {"x", "y"}, *const XX[2] = {"x", "x"}, *const ONE_I[1] = {"i"};
const int DEV4[4] = {0, 1, 2, 3}, DEV_DUP[4] = {0, 1, 1, 2}, DEV_NEG[4] = {0, 1, 2, -1},
          DEV_BIG[4] = {0, 1, 2, 4}, DEV_MAX[4] = {0, 1, 2, INT_MAX},
          DEV_MIN[4] = {0, 1, 2, INT_MIN};
/* More entries than any valid count, for counts that are too large: a library that reads the
 * array before checking the count against what is possible reads past it. */
int DEV_LONG[8] = {0, 1, 2, 3, 0, 1, 2, 3};

spmd_mesh *M;             /* Mesh('x': 2, 'y': 2) over devices 0..3 */
spmd_mesh *M_REV;         /* Mesh('i': 4) over devices 3, 2, 1, 0: another mesh */
spmd_mesh *M_SUB;         /* Mesh('i': 2) over devices 0, 1 */
spmd_spec *P_XY, *P_X;    /* P('x', 'y'), P('x') */
spmd_spec *P_REP, *P_Z;   /* P(), P('z') (an axis M lacks) */
spmd_spec *P_I;           /* P('i') */
spmd_sharding *S_XY;      /* M, P('x', 'y') */
spmd_sharding *S_X;       /* M, P('x') */
spmd_sharding *S_REP;     /* M, P() */
spmd_sharding *S_REV;     /* M_REV, P('i') */
spmd_sharding *S_SUB;     /* M_SUB, P('i') */
spmd_array *A;            /* float32 (4, 4) on S_XY */
spmd_array *A_X;          /* float32 (4, 4) on S_X: another layout */
spmd_array *A_REV;        /* float32 (4, 4) on S_REV: another mesh */
spmd_array *A_I32;        /* int32 (4, 4) on S_XY */
spmd_array *A_SCALAR;     /* float32 () on S_REP */
spmd_array *A_RANK16;     /* float32 (1, ..., 1), rank 16, on S_REP */
spmd_array *A_ODD;        /* float32 (3, 4) on S_REP: does not fit S_XY */
spmd_array *DEL;          /* float32 (4, 4) on S_XY, deleted: donated to spmd_reshard */
spmd_array *SINGLE[NDEV]; /* float32 (2, 2) on device k */
spmd_plan *PLAN;          /* (4, 4) float32 P('x', 'y') -> same */
static int g_fixture_up;

float g_host_block[64]; /* the data of HB blocks */

spmd_status noop_fn(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                    void *user)
{
    (void)ctx;
    (void)nin;
    (void)in;
    (void)nout;
    (void)out;
    (void)user;
    return SPMD_OK;
}

void die(const char *what, spmd_status st)
{
    emit("@@E %s: %s: %s", what, spmd_status_name(st), spmd_last_error());
    exit(3);
}

spmd_status init_four_cpu_devices(void)
{
    spmd_init_options o = SPMD_INIT_OPTIONS_INIT;
    o.num_cpu_devices = NDEV;
    o.platform = SPMD_PLATFORM_CPU;
    return spmd_init(&o);
}

void runtime_up(void)
{
    if (!spmd_is_initialized()) {
        spmd_status st = init_four_cpu_devices();
        if (st != SPMD_OK)
            die("spmd_init", st);
    }
}

/* Cycles the runtime, for the queries that must answer their "not initialized" value after it. */
void runtime_cycle(void)
{
    runtime_up();
    while (spmd_is_initialized())
        if (spmd_finalize() != SPMD_OK)
            break;
}

/* Builds the fixture (and starts the runtime) once; the sweeps call it after their cases that
 * need no runtime. */
void fixture_up(void)
{
    if (g_fixture_up)
        return;
    g_fixture_up = 1;
    runtime_up();
    const int shape22[2] = {2, 2}, four[1] = {4}, two[1] = {2};
    const int rev[4] = {3, 2, 1, 0}, sub[2] = {0, 1};
    SETUP(spmd_mesh_create(2, shape22, XY, NULL, 0, &M));
    SETUP(spmd_mesh_create(1, four, ONE_I, rev, 4, &M_REV));
    SETUP(spmd_mesh_create(1, two, ONE_I, sub, 2, &M_SUB));
    SETUP(spmd_spec_parse("'x', 'y'", &P_XY));
    SETUP(spmd_spec_parse("'x'", &P_X));
    SETUP(spmd_spec_parse("", &P_REP));
    SETUP(spmd_spec_parse("'z'", &P_Z));
    SETUP(spmd_spec_parse("'i'", &P_I));
    SETUP(spmd_sharding_create(M, P_XY, &S_XY));
    SETUP(spmd_sharding_create(M, P_X, &S_X));
    SETUP(spmd_sharding_create(M, P_REP, &S_REP));
    SETUP(spmd_sharding_create(M_REV, P_I, &S_REV));
    SETUP(spmd_sharding_create(M_SUB, P_I, &S_SUB));
    SETUP(spmd_device_put(HOST, 2, S44, SPMD_DTYPE_F32, S_XY, &A));
    SETUP(spmd_device_put(HOST, 2, S44, SPMD_DTYPE_F32, S_X, &A_X));
    SETUP(spmd_device_put(HOST, 2, S44, SPMD_DTYPE_F32, S_REV, &A_REV));
    SETUP(spmd_device_put(HOST, 2, S44, SPMD_DTYPE_I32, S_XY, &A_I32));
    SETUP(spmd_device_put(HOST, 0, NULL, SPMD_DTYPE_F32, S_REP, &A_SCALAR));
    SETUP(spmd_device_put(HOST, 16, S17, SPMD_DTYPE_F32, S_REP, &A_RANK16));
    SETUP(spmd_device_put(HOST, 2, S34, SPMD_DTYPE_F32, S_REP, &A_ODD));
    for (int k = 0; k < NDEV; k++)
        SETUP(spmd_array_create_on_device(k, HOST, 2, S22, SPMD_DTYPE_F32, &SINGLE[k]));
    /* a deleted array: the source of a donating reshard */
    spmd_array *moved = NULL;
    spmd_reshard_options ro = SPMD_RESHARD_OPTIONS_INIT;
    ro.donate = 1;
    SETUP(spmd_device_put(HOST, 2, S44, SPMD_DTYPE_F32, S_XY, &DEL));
    SETUP(spmd_reshard(DEL, S_XY, &ro, &moved));
    spmd_array_destroy(moved);
    spmd_in_desc d = {2, {4, 4}, SPMD_DTYPE_F32};
    const spmd_spec *specs[1] = {P_XY};
    SETUP(spmd_plan_create(M, noop_fn, NULL, 1, &d, specs, 1, &d, specs, NULL, &PLAN));
}

static void fixture_down(void)
{
    xfix_down();
    if (g_fixture_up) {
        spmd_plan_destroy(PLAN);
        for (int k = 0; k < NDEV; k++)
            spmd_array_destroy(SINGLE[k]);
        spmd_array_destroy(DEL);
        spmd_array_destroy(A_ODD);
        spmd_array_destroy(A_RANK16);
        spmd_array_destroy(A_SCALAR);
        spmd_array_destroy(A_I32);
        spmd_array_destroy(A_REV);
        spmd_array_destroy(A_X);
        spmd_array_destroy(A);
        spmd_sharding_destroy(S_SUB);
        spmd_sharding_destroy(S_REV);
        spmd_sharding_destroy(S_REP);
        spmd_sharding_destroy(S_X);
        spmd_sharding_destroy(S_XY);
        spmd_spec_destroy(P_I);
        spmd_spec_destroy(P_Z);
        spmd_spec_destroy(P_REP);
        spmd_spec_destroy(P_X);
        spmd_spec_destroy(P_XY);
        spmd_mesh_destroy(M_SUB);
        spmd_mesh_destroy(M_REV);
        spmd_mesh_destroy(M);
        g_fixture_up = 0;
    }
    spmd_pmap_clear_cache(); /* its entries hold meshes and plans */
    while (spmd_is_initialized())
        if (spmd_finalize() != SPMD_OK)
            break;
}

/* ==== the table: one entry per public function, from the headers ============================== */

typedef struct sweep_entry {
    const char *name;
    void (*sweep)(void);
} sweep_entry;

/* A public function without a sweep_<name> above fails to compile here. */
#define SWEEP_ENTRY(f) {#f, sweep_##f},
static const sweep_entry g_entries[] = {SPMD_SWEEP_FUNCTIONS(SWEEP_ENTRY)
#ifdef SPMD_HAVE_MPI
                                            SPMD_SWEEP_MPI_FUNCTIONS(SWEEP_ENTRY)
#endif
};
#undef SWEEP_ENTRY
enum { NUM_ENTRIES = sizeof g_entries / sizeof g_entries[0] };

static int child_main(const char *fn, int skip)
{
    const sweep_entry *e = NULL;
    for (size_t i = 0; i < NUM_ENTRIES; i++)
        if (strcmp(g_entries[i].name, fn) == 0)
            e = &g_entries[i];
    if (!e) {
        emit("@@E no sweep for %s", fn);
        return 2;
    }
    g_fn = e->name;
    g_skip = skip;
    g_dead = calloc(1, DEAD_BYTES);
    g_dead_copy = malloc(DEAD_BYTES);
    if (!g_dead || !g_dead_copy)
        return 2;
    const uint32_t dead_magic = 0xdeadbeefu; /* what the library leaves in a freed handle */
    memcpy(g_dead, &dead_magic, sizeof dead_magic);
    memcpy(g_dead_copy, g_dead, DEAD_BYTES);
    for (int k = 0; k < (int)(sizeof HOST / sizeof HOST[0]); k++)
        HOST[k] = (float)k;
    e->sweep();
    fixture_down();
    emit("@@D %d", g_case);
    free(g_dead);
    free(g_dead_copy);
    return 0;
}

/* ==== the parent: one child per function, resumed after a crash =============================== */

static const char *g_self;

typedef struct child_run {
    char *output; /* everything the child wrote (stdout and stderr) */
    size_t len;
    int status; /* exit status, or 128 + signal */
    int signaled;
} child_run;

static int spawn(const char *fn, int skip, child_run *run)
{
    memset(run, 0, sizeof *run);
    fflush(stdout);
    fflush(stderr);
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        char skip_text[16];
        snprintf(skip_text, sizeof skip_text, "%d", skip);
        execl("/proc/self/exe", g_self, "--sweep-child", fn, skip_text, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t cap = 1 << 16;
    run->output = malloc(cap);
    for (;;) {
        if (run->output && run->len + 4097 > cap) { /* room for a read and the NUL */
            char *bigger = realloc(run->output, cap * 2);
            if (bigger) {
                run->output = bigger;
                cap *= 2;
            }
        }
        char sink[4096];
        int room = run->output && run->len + 4097 <= cap;
        ssize_t n = read(fds[0], room ? run->output + run->len : sink, 4096);
        if (n <= 0)
            break;
        if (room)
            run->len += (size_t)n;
    }
    close(fds[0]);
    if (run->output)
        run->output[run->len] = '\0';
    int status = 0;
    if (waitpid(pid, &status, 0) < 0)
        return -1;
    run->signaled = WIFSIGNALED(status);
    run->status = run->signaled ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    return 0;
}

/* Totals over the whole sweep. */
static int g_total_cases, g_total_functions, g_failed_cases, g_failed_functions, g_known_fixed;
static int g_known_cases; /* failing cases that are known bugs */
static int g_kind_counts[16];
static const char *const g_kinds[] = {"ok",    "status", "message", "name", "out",     "modified",
                                      "value", "crash",  "hang",    "leak", "harness", NULL};

/* Functions whose messages do not name them: they report a function they call ("callee"), or
 * no function at all ("none"). Their [name] failures are reported as these known bugs. */
static const struct {
    const char *fn, *id;
} g_known_name[] = {
    {"", ""}, /* none known: add {function, bug id} entries here while a bug is open */
};

static const char *known_name_bug(const char *fn)
{
    for (size_t i = 0; i < sizeof g_known_name / sizeof g_known_name[0]; i++)
        if (strcmp(g_known_name[i].fn, fn) == 0)
            return g_known_name[i].id;
    return NULL;
}

static void count_kind(const char *kind)
{
    size_t n = strlen(kind);
    for (int k = 0; g_kinds[k]; k++) /* memcmp: gcc misjudges strcmp on this table */
        if (strlen(g_kinds[k]) == n && memcmp(kind, g_kinds[k], n) == 0)
            g_kind_counts[k]++;
}

/* Prints the lines of a child's output that say why it died (not a sanitizer's whole dump): the
 * reports' headlines, frames in libspmd, and the first frames of each leaked allocation. */
static void print_death_report(const char *output)
{
    int shown = 0, frames = 0, leak_frames = 0;
    const char *p = output;
    while (p && *p && shown < 40) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), p);
        int frame = strncmp(line, "    #", 5) == 0;
        int leak = strstr(line, "leak of") != NULL;
        if (leak)
            leak_frames = 6;
        if (strncmp(line, "@@", 2) != 0 &&
            (strstr(line, "ERROR: AddressSanitizer") || strstr(line, "ERROR: LeakSanitizer") ||
             strstr(line, "SUMMARY:") || strstr(line, "runtime error") || leak ||
             (frame && leak_frames > 0) || (frame && frames < 6 && strstr(line, " in spmd")))) {
            print_error("        | %s\n", line);
            shown++;
            frames += frame;
        }
        if (frame && leak_frames > 0)
            leak_frames--;
        p = end ? end + 1 : NULL;
    }
}

static void run_function(void **state)
{
    const char *fn = *state;
    int skip = 0, cases = 0, failed = 0, known_failed = 0, restarts = 0, done = -1;
    int last_failed_case = 0, name_failures = 0;
    const char *name_bug = known_name_bug(fn);
    char last_label[1024] = "", last_known[128] = "-";
    while (restarts++ < MAX_RESTARTS) {
        child_run run;
        if (spawn(fn, skip, &run) != 0)
            fail_msg("could not start a child for %s", fn);
        int last_begun = skip;
        done = -1;
        char *copy = run.output ? strdup(run.output) : NULL;
        for (char *line = copy; line && *line;) {
            char *end = strchr(line, '\n');
            if (end)
                *end = '\0';
            int k = 0, n = 0;
            if (sscanf(line, "@@B %d %127s %n", &k, last_known, &n) == 2) {
                last_begun = k;
                cases++;
                snprintf(last_label, sizeof last_label, "%s", line + n);
            } else if (sscanf(line, "@@F %d %n", &k, &n) == 1) {
                char kind[32] = "", known[128] = "";
                int m = 0;
                sscanf(line + n, "%31s %127s %n", kind, known, &m);
                count_kind(kind);
                if (strcmp(kind, "name") == 0 && strcmp(known, "-") == 0 && name_bug) {
                    snprintf(known, sizeof known, "%s", name_bug);
                    name_failures++;
                }
                if (k != last_failed_case) {
                    failed++;
                    known_failed += strcmp(known, "-") != 0;
                    last_failed_case = k;
                    print_error("FAIL %s case %d: %s\n", fn, k, last_label);
                }
                print_error("    [%s%s%s] %s\n", kind, strcmp(known, "-") ? ", known bug " : "",
                            strcmp(known, "-") ? known : "", line + n + m);
            } else if (sscanf(line, "@@X %d %n", &k, &n) == 1) {
                g_known_fixed++;
                print_error("NOTE %s case %d: marked KNOWN(\"%s\") but passes now: remove the "
                            "marker (%s)\n",
                            fn, k, line + n, last_label);
            } else if (sscanf(line, "@@D %d", &k) == 1) {
                done = k;
            } else if (strncmp(line, "@@E ", 4) == 0) {
                print_error("ERROR %s: %s\n", fn, line + 4);
            }
            line = end ? end + 1 : NULL;
        }
        free(copy);
        if (done >= 0 && run.status == 0) {
            free(run.output);
            break;
        }
        if (done >= 0) { /* every case ran; the exit found a problem: a leak */
            count_kind("leak");
            failed++;
            print_error("FAIL %s: the child exited with %d after its last case (a leak or an "
                        "error at exit):\n",
                        fn, run.status);
            print_death_report(run.output);
            free(run.output);
            break;
        }
        if (last_begun == skip) { /* died before any case: nothing to resume from */
            print_error("FAIL %s: the child exited with %d before its first case:\n", fn,
                        run.status);
            print_death_report(run.output);
            failed++;
            free(run.output);
            break;
        }
        /* it died in case last_begun: charge it, then go on after it */
        const char *kind = run.signaled && run.status == 128 + SIGALRM ? "hang" : "crash";
        count_kind(kind);
        if (last_begun != last_failed_case) {
            failed++;
            known_failed += strcmp(last_known, "-") != 0;
            last_failed_case = last_begun;
            print_error("FAIL %s case %d: %s\n", fn, last_begun, last_label);
        }
        print_error("    [%s%s%s] the child %s %d in this case%s\n", kind,
                    strcmp(last_known, "-") ? ", known bug " : "",
                    strcmp(last_known, "-") ? last_known : "",
                    run.signaled ? "was killed by signal" : "exited with",
                    run.signaled ? run.status - 128 : run.status,
                    run.signaled && run.status == 128 + SIGALRM ? " (no return within the "
                                                                  "time limit)"
                                                                : "");
        print_death_report(run.output);
        free(run.output);
        skip = last_begun;
    }
    if (done < 0 && restarts > MAX_RESTARTS) {
        print_error("FAIL %s: gave up after %d children died; cases after %d did not run\n", fn,
                    MAX_RESTARTS, skip);
        failed++;
    }
    if (name_bug && name_failures == 0 && done >= 0) {
        g_known_fixed++;
        print_error("NOTE %s: listed in g_known_name (%s) but every message names it now: remove "
                    "the entry\n",
                    fn, name_bug);
    }
    g_total_cases += cases;
    g_total_functions++;
    if (cases == 0) {
        print_error("FAIL %s: its sweep ran no case; add bad inputs to sweep_%s\n", fn, fn);
        failed++;
    }
    if (failed) {
        g_failed_cases += failed;
        g_known_cases += known_failed;
        g_failed_functions++;
        fail_msg("%s: %d of %d cases failed (%d of them known bugs)", fn, failed, cases,
                 known_failed);
    }
}

#define SWEEP_TEST(f) {#f, run_function, NULL, NULL, (void *)#f},
static struct CMUnitTest g_tests[] = {SPMD_SWEEP_FUNCTIONS(SWEEP_TEST)
#ifdef SPMD_HAVE_MPI
                                          SPMD_SWEEP_MPI_FUNCTIONS(SWEEP_TEST)
#endif
};
#undef SWEEP_TEST

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--sweep-child") == 0)
        return child_main(argv[2], atoi(argv[3]));
    g_self = argv[0];
    /* a collective that waits for devices that never come gives up well before the case alarm */
    setenv("SPMD_COLLECTIVE_TIMEOUT", "10", 1);
    /* Only the tests named on the command line, if any. */
    size_t count = sizeof g_tests / sizeof g_tests[0];
    struct CMUnitTest *tests = g_tests;
    struct CMUnitTest chosen[sizeof g_tests / sizeof g_tests[0]];
    if (argc > 1) {
        size_t n = 0;
        for (size_t i = 0; i < count; i++)
            for (int a = 1; a < argc; a++)
                if (strcmp(g_tests[i].name, argv[a]) == 0)
                    chosen[n++] = g_tests[i];
        tests = chosen;
        count = n;
    }
    int failures = _cmocka_run_group_tests("test_api_sweep", tests, count, NULL, NULL);
    printf("test_api_sweep: swept %d cases over %d public functions (%d declared in "
           "include/spmd, %d swept in this build)\n",
           g_total_cases, g_total_functions, SPMD_SWEEP_HEADER_FUNCTIONS, (int)NUM_ENTRIES);
    printf("test_api_sweep: %d failing cases in %d functions (%d known library bugs, %d new); by "
           "kind:",
           g_failed_cases, g_failed_functions, g_known_cases, g_failed_cases - g_known_cases);
    for (int k = 0; g_kinds[k]; k++)
        if (g_kind_counts[k])
            printf(" %s %d", g_kinds[k], g_kind_counts[k]);
    printf("\n");
    if (g_known_fixed)
        printf("test_api_sweep: %d cases marked KNOWN pass now\n", g_known_fixed);
    return failures ? 1 : 0;
}
