/* spmd bench: runs the benchmark programs of bench/ (launching mpirun for the multi-process
 * ones), repeats each until its rows are stable or its time cap passes, and writes
 * DIR/report.md (each result beside its baseline and the ratio), DIR/results.json (machine,
 * build, every row with min/median/max) and gnuplot PNGs. `spmd bench compare OLD NEW` sets
 * two results.json side by side and flags regressions beyond their noise. */
#define _GNU_SOURCE
#include "bench.h"
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli_args.h"
#include "spmd.h"

#define CMD "bench"
#define MAX_RUNS 20
#define MAX_ROWS 512
/* A row is stable once (max - min) / median of its result is at most this. */
#define STABLE_SPREAD 0.10
/* A suite's runs, at least, when its cap allows: fewer than 3 give no spread to judge by. */
#define MIN_RUNS 3
/* The most a suite's iteration counts are divided by to fit MIN_RUNS runs in its cap. */
#define MAX_SHRINK 16

/* One headline number of a row and the baseline it is compared with. */
typedef struct metric {
    const char *name;     /* what is measured, for the report */
    const char *value;    /* JSON field of the result */
    const char *baseline; /* JSON field of the baseline measured in the same run */
    const char *baseline_name;
    const char *unit;
    int higher_is_better;
} metric;

typedef struct suite {
    const char *name;
    const char *program;
    const char *what;
    int mpi;             /* under mpirun -np <procs>, one device per process */
    const char *rows;    /* the array of rows in the program's JSON; NULL: the root is one row */
    const char *keys[3]; /* the fields that identify a row */
    metric metrics[3];
} suite;

static const suite suites[] = {
    {"collectives",
     "bench_collectives",
     "in-process collectives against the least traffic at "
     "memory-copy bandwidth",
     0,
     "rows",
     {"op", "size"},
     {{"time", "time_us", "bound_time_us", "least-traffic bound", "us", 0}}},
    {"collectives_mpi",
     "bench_collectives",
     "cross-process collectives against raw MPI",
     1,
     "rows",
     {"op", "size"},
     {{"busbw", "busbw", "mpi_busbw", "MPI", "GB/s", 1}}},
    {"calls_mpi",
     "bench_collectives",
     "whole shard_map calls between processes (empty; one 4-byte psum) against MPI_Barrier and "
     "MPI_Allreduce",
     1,
     "calls",
     {"call"},
     {{"time", "median_us", "mpi_median_us", "MPI", "us", 0}}},
    {"gradients_mpi",
     "bench_gradients",
     "a training step's 200 float32 gradients (1 KiB-1 MiB, 30 MB) psum'd: psum_many and one "
     "psum per array against one MPI_Allreduce of them concatenated, in place and into another "
     "buffer",
     1,
     "rows",
     {"method"},
     {{"time", "time_us", "mpi_concat_us", "MPI_Allreduce of the concatenation", "us", 0},
      {"time, against MPI into another buffer", "time_us", "mpi_separate_us",
       "MPI_Allreduce of the concatenation into another buffer", "us", 0}}},
    {"dispatch",
     "bench_collectives",
     "empty fn through a reused plan against a thread pool",
     0,
     "dispatch",
     {"devices"},
     {{"dispatch", "plan_median_us", "thread_pool_median_us", "hand-written thread pool", "us",
       0}}},
    {"pmap",
     "bench_pmap",
     "empty pmap against the equivalent shard_map plan",
     0,
     "rows",
     {"devices"},
     {{"median", "pmap_median_us", "plan_median_us", "shard_map plan", "us", 0},
      {"p99", "pmap_p99_us", "plan_p99_us", "shard_map plan", "us", 0}}},
    {"unreplicate",
     "bench_unreplicate",
     "unreplicate against gather-then-index",
     0,
     "rows",
     {"devices", "slice_bytes"},
     {{"time", "unreplicate_us", "gather_then_index_us", "gather-then-index", "us", 0}}},
    {"replicate",
     "bench_replicate",
     "device_put_replicated against stacking n copies",
     0,
     "rows",
     {"devices", "bytes"},
     {{"host copies", "replicated_host_copies", "stacked_host_copies", "stacking", "copies", 0},
      {"time", "replicated_us", "stacked_us", "stacking", "us", 0}}},
    {"reshard",
     "bench_reshard",
     "spmd_reshard against MPI_Alltoallv of the same bytes",
     1,
     "rows",
     {"change", "n"},
     {{"vs Alltoallv", "reshard_med_us", "a2av_med_us", "Alltoallv (moved bytes)", "us", 0},
      {"vs Alltoallv+self", "reshard_med_us", "a2av_self_med_us", "Alltoallv + self", "us", 0},
      {"vs gather-scatter", "reshard_med_us", "gather_scatter_med_us", "gather-scatter", "us", 0}}},
    {"gemm",
     "bench_gemm",
     "sharded matmul against one BLAS call",
     0,
     NULL,
     {NULL},
     {{"M-sharded", "m_sharded_tflops", "baseline_tflops", "one BLAS call", "TFLOP/s", 1},
      {"K-sharded", "k_sharded_tflops", "baseline_tflops", "one BLAS call", "TFLOP/s", 1}}},
    {"array_ops",
     "bench_array_ops",
     "array ops (spmd/array_ops.h) in one process: elementwise against memcpy of their bytes, "
     "matmul against one BLAS call per device (+ its collective alone), memory of 100 ops",
     0,
     "rows",
     {"op", "shape"},
     {{"time", "time_us", "copy_us", "memcpy of the in+out bytes per device", "us", 0},
      {"time", "time_us", "anchor_us", "sgemm per device + collective alone", "us", 0},
      {"peak RSS", "peak_mib", "first_peak_mib", "peak after the first op", "MiB", 0}}},
    {"array_ops_mpi",
     "bench_array_ops",
     "array ops (spmd/array_ops.h) between processes: elementwise against memcpy of their "
     "bytes, matmul against one BLAS call per device (+ its collective alone), memory of 100 ops",
     1,
     "rows",
     {"op", "shape"},
     {{"time", "time_us", "copy_us", "memcpy of the in+out bytes per device", "us", 0},
      {"time", "time_us", "anchor_us", "sgemm per device + collective alone", "us", 0},
      {"peak RSS", "peak_mib", "first_peak_mib", "peak after the first op", "MiB", 0}}},
};
#define NUM_SUITES ((int)(sizeof suites / sizeof suites[0]))

typedef struct options {
    int selected[NUM_SUITES];
    int procs, devices, quick;
    double cap_s;
    long long min_bytes, max_bytes;
    const char *out;
} options;

/* ---- small helpers ---- */

/* snprintf for file paths and commands: 0 when the result did not fit. */
static int join(char *out, size_t size, const char *fmt, ...) CLI_PRINTF(3, 4);
static int join(char *out, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, size, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < size;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* "8", "64K", "16M", "1G" -> bytes; -1 if malformed. */
static long long parse_size(const char *s)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 1)
        return -1;
    double scale = 1;
    if (*end == 'K' || *end == 'k')
        scale = 1024.0, end++;
    else if (*end == 'M' || *end == 'm')
        scale = 1048576.0, end++;
    else if (*end == 'G' || *end == 'g')
        scale = 1073741824.0, end++;
    return *end ? -1 : (long long)(v * scale);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        text = NULL;
    }
    if (text)
        text[n] = '\0';
    fclose(f);
    return text;
}

static cJSON *read_json(const char *path)
{
    char *text = read_file(path);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    return j;
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return 0;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* The directory of the benchmark programs: $SPMD_BENCH_DIR, else ../bench beside this tool
 * (the build tree's layout). */
static void bench_dir(char *out, size_t size)
{
    const char *env = getenv("SPMD_BENCH_DIR");
    if (env && *env) {
        (void)join(out, size, "%s", env);
        return;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    (void)join(out, size, "%s/../bench", n > 0 ? self : ".");
}

/* ---- running one program ---- */

typedef struct argv_list {
    char *items[64];
    char storage[64][256];
    int n;
} argv_list;

static void arg(argv_list *a, const char *fmt, ...) CLI_PRINTF(2, 3);
static void arg(argv_list *a, const char *fmt, ...)
{
    if (a->n >= 63)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->storage[a->n], sizeof a->storage[a->n], fmt, ap);
    va_end(ap);
    a->items[a->n] = a->storage[a->n];
    a->items[++a->n] = NULL;
}

/* An iteration count, divided by `shrink` (run_suite: to fit MIN_RUNS runs in the cap), at
 * least `least`. */
static int fewer(int count, int shrink, int least)
{
    int v = count / shrink;
    return v > least ? v : least;
}

/* The suites' processes run with glibc's malloc asking for transparent huge pages for its large
 * chunks, as libspmd asks for its CPU buffers of 2 MiB and more (from 64 KiB beside other
 * processes of the run, SPMD_HUGE_PAGES): so does Open MPI's own scratch (the baselines' buffers
 * ask for themselves, bench/host_memory.h), which a large MPI_Allreduce or
 * MPI_Reduce_scatter_block allocates at every call (with 4 KiB pages, 4 x 1 on the 2-core VM,
 * MPI_Allreduce of 64 MiB took 420 ms instead of 45). The GLIBC_TUNABLES value to run with, in
 * `out`; NULL where SPMD_HUGE_PAGES is 0 or the tunable is already set. */
#define HUGE_MALLOC_TUNABLE "glibc.malloc.hugetlb=1"
static const char *malloc_tunables(char *out, size_t size)
{
    const char *huge = getenv("SPMD_HUGE_PAGES"), *set = getenv("GLIBC_TUNABLES");
    /* read as spmd_init reads it: digits that make 0 turn it off */
    int off =
        huge && *huge && strspn(huge, "0123456789") == strlen(huge) && strtol(huge, NULL, 10) == 0;
    if (off || (set && strstr(set, "glibc.malloc.hugetlb")))
        return NULL;
    return join(out, size, "%s%s%s", set && *set ? set : "", set && *set ? ":" : "",
                HUGE_MALLOC_TUNABLE)
               ? out
               : NULL;
}

/* The GLIBC_TUNABLES the suites' processes run with (malloc_tunables' value, else the one they
 * inherit), in `out`; NULL where there is none. */
static const char *suite_tunables(char *out, size_t size)
{
    const char *ours = malloc_tunables(out, size), *set = getenv("GLIBC_TUNABLES");
    return ours ? ours : set && *set ? set : NULL;
}

/* The command line of one run of suite s, writing its JSON to json_path; its iteration counts
 * divided by `shrink` (1: as set). */
static void command_of(const suite *s, const options *o, const char *dir, const char *json_path,
                       int shrink, argv_list *a)
{
    a->n = 0;
    a->items[0] = NULL;
    if (s->mpi) {
        arg(a, "%s", SPMD_BENCH_MPIEXEC);
        arg(a, "-np");
        arg(a, "%d", o->procs);
        arg(a, "-x");
        arg(a, "SPMD_NUM_CPU_DEVICES=1");
        arg(a, "-x");
        arg(a, "SPMD_CUDA_DEVICES_PER_GPU=1");
        char tunables[512];
        if (malloc_tunables(tunables, sizeof tunables)) {
            arg(a, "-x");
            arg(a, "GLIBC_TUNABLES=%s", tunables);
        }
    }
    arg(a, "%s/%s", dir, s->program);
    long long max_bytes = o->quick && o->max_bytes > (1 << 20) ? (1 << 20) : o->max_bytes;
    if (strcmp(s->program, "bench_collectives") == 0) {
        int calls_mpi = strcmp(s->name, "calls_mpi") == 0;
        if (calls_mpi || strcmp(s->name, "dispatch") == 0) {
            /* one 8-byte psum per call: what the call costs, not its data */
            arg(a, "--op");
            arg(a, "psum");
            arg(a, "--min-bytes");
            arg(a, "8");
            arg(a, "--max-bytes");
            arg(a, "8");
            if (calls_mpi) {
                arg(a, "--calls");
                arg(a, "%d", fewer(o->quick ? 200 : 5000, shrink, 100));
            } else {
                arg(a, "--dispatch");
                arg(a, "--dispatch-calls");
                arg(a, "%d", fewer(o->quick ? 200 : 2000, shrink, 100));
            }
        } else {
            arg(a, "--op");
            arg(a, "all");
            arg(a, "--min-bytes");
            arg(a, "%lld", o->min_bytes);
            arg(a, "--max-bytes");
            arg(a, "%lld", max_bytes);
        }
        arg(a, "--iters");
        arg(a, "%d", fewer(o->quick ? 3 : 10, shrink, 2));
        /* the warm-up shrinks too: at 64 MiB five of them outlasted two timed iterations */
        arg(a, "--warmup");
        arg(a, "%d", fewer(5, shrink, 1));
        arg(a, "--rounds");
        arg(a, "%d", fewer(o->quick ? 1 : 3, shrink, 1));
    } else if (strcmp(s->program, "bench_gradients") == 0) {
        if (o->quick) {
            arg(a, "--grads");
            arg(a, "20");
        }
        arg(a, "--iters");
        arg(a, "%d", fewer(o->quick ? 2 : 10, shrink, 2));
        arg(a, "--rounds");
        arg(a, "%d", fewer(o->quick ? 1 : 3, shrink, 1));
    } else if (strcmp(s->program, "bench_pmap") == 0) {
        arg(a, "--calls");
        arg(a, "%d", fewer(o->quick ? 200 : 5000, shrink, 100));
    } else if (strcmp(s->program, "bench_unreplicate") == 0 ||
               strcmp(s->program, "bench_replicate") == 0) {
        long long lo = o->min_bytes < 1024 ? 1024 : o->min_bytes;
        long long hi = max_bytes > (16 << 20) ? (16 << 20) : max_bytes;
        /* below glibc's mmap threshold (bench_replicate sets 64 KiB) heap arenas blur the peak */
        if (strcmp(s->program, "bench_replicate") == 0 && lo < 262144)
            lo = 262144;
        arg(a, "--min-bytes");
        arg(a, "%lld", lo);
        arg(a, "--max-bytes");
        arg(a, "%lld", hi < lo ? lo : hi);
        if (strcmp(s->program, "bench_unreplicate") == 0) {
            arg(a, "--iters");
            arg(a, "%d", fewer(o->quick ? 3 : 10, shrink, 2));
        }
    } else if (strcmp(s->program, "bench_reshard") == 0) {
        arg(a, "--min-n");
        arg(a, "%d", o->quick ? 32 : 256);
        arg(a, "--max-n");
        arg(a, "%d", o->quick ? 64 : 1024);
        arg(a, "--iters");
        arg(a, "%d", fewer(o->quick ? 2 : 5, shrink, 2));
        arg(a, "--warmup");
        arg(a, "1");
    } else if (strcmp(s->program, "bench_gemm") == 0) {
        arg(a, "--size");
        arg(a, "%d", o->quick ? 64 : 512);
        arg(a, "--iters");
        arg(a, "%d", fewer(o->quick ? 2 : 5, shrink, 2));
    } else if (strcmp(s->program, "bench_array_ops") == 0) {
        /* rounded up to multiples of the devices; 8M float32 in and out outgrow a 32 MiB L3 */
        arg(a, "--elems");
        arg(a, "%d", o->quick ? 65536 : 8 << 20);
        arg(a, "--m");
        arg(a, "%d", o->quick ? 128 : 1024);
        arg(a, "--n");
        arg(a, "%d", o->quick ? 64 : 512);
        arg(a, "--k");
        arg(a, "%d", o->quick ? 128 : 512);
        arg(a, "--iters");
        arg(a, "%d", fewer(o->quick ? 2 : 10, shrink, 2));
        arg(a, "--warmup");
        arg(a, "%d", o->quick ? 1 : 2);
        arg(a, "--mem-ops");
        arg(a, "%d", o->quick ? 10 : 100);
    }
    arg(a, "--json");
    arg(a, "%s", json_path);
}

/* Runs argv with stdout and stderr appended to log_path; 0 when it exited with status 0. An MPI
 * suite runs one device per process (command_of). */
static int run_program(const argv_list *a, const options *o, int mpi, const char *log_path)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        char devices[32];
        (void)join(devices, sizeof devices, "%d", o->devices);
        setenv("SPMD_NUM_CPU_DEVICES", devices, 1);
        setenv("SPMD_CUDA_DEVICES_PER_GPU", devices, 1);
        char tunables[512];
        if (malloc_tunables(tunables,
                            sizeof tunables)) /* in-process suites: their bounds' buffers */
            setenv("GLIBC_TUNABLES", tunables, 1);
        /* as spmd launch, for the layout the suite runs: MPI processes yield their cores only
         * when more of them poll than there are cores (yielding slows MPI's baselines too) */
        spmd_cli_mpi_settings(mpi ? o->procs : 1, mpi ? 1 : o->devices);
        execvp(a->items[0], a->items);
        fprintf(stderr, "cannot run %s: %s\n", a->items[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- rows gathered over the runs ---- */

typedef struct row {
    char key[128];
    int metric;
    double value[MAX_RUNS], baseline[MAX_RUNS];
    int runs;
    double wrong;
    cJSON *fields; /* the last run's row, for the plots */
} row;

static const cJSON *number_field(const cJSON *obj, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);
    return cJSON_IsNumber(f) ? f : NULL;
}

static void key_of(const suite *s, const cJSON *r, char *out, size_t size)
{
    out[0] = '\0';
    size_t used = 0;
    for (int k = 0; k < 3 && s->keys[k]; k++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(r, s->keys[k]);
        char part[96] = "?";
        if (cJSON_IsString(f))
            snprintf(part, sizeof part, "%s", f->valuestring);
        else if (cJSON_IsNumber(f))
            snprintf(part, sizeof part, "%.0f", f->valuedouble);
        used += (size_t)snprintf(out + used, used < size ? size - used : 0, "%s%s=%s", k ? " " : "",
                                 s->keys[k], part);
    }
    if (!s->keys[0])
        snprintf(out, size, "-");
}

/* Adds one run's rows of suite s to rows[]; returns how many rows the run had. */
static int collect(const suite *s, cJSON *root, row *rows, int *nrows)
{
    cJSON *list = s->rows ? cJSON_GetObjectItemCaseSensitive(root, s->rows) : root;
    cJSON *single[1] = {list};
    int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : (list ? 1 : 0);
    int found = 0;
    for (int i = 0; i < n; i++) {
        cJSON *r = cJSON_IsArray(list) ? cJSON_GetArrayItem(list, i) : single[0];
        if (strcmp(s->name, "dispatch") == 0 && !number_field(r, "devices"))
            continue;
        for (int m = 0; m < 3 && s->metrics[m].name; m++) {
            const cJSON *v = number_field(r, s->metrics[m].value),
                        *b = number_field(r, s->metrics[m].baseline);
            if (!v || !b) /* a row without this baseline (e.g. MPI rows of one process) */
                continue;
            char key[128];
            key_of(s, r, key, sizeof key);
            row *w = NULL;
            for (int k = 0; k < *nrows && !w; k++)
                if (rows[k].metric == m && strcmp(rows[k].key, key) == 0)
                    w = &rows[k];
            if (!w && *nrows < MAX_ROWS) {
                w = &rows[(*nrows)++];
                memset(w, 0, sizeof *w);
                snprintf(w->key, sizeof w->key, "%s", key);
                w->metric = m;
            }
            if (!w || w->runs >= MAX_RUNS)
                continue;
            w->value[w->runs] = v->valuedouble;
            w->baseline[w->runs] = b->valuedouble;
            w->runs++;
            const cJSON *wrong = number_field(r, "wrong");
            if (wrong && wrong->valuedouble > w->wrong)
                w->wrong = wrong->valuedouble;
            cJSON_Delete(w->fields);
            w->fields = cJSON_Duplicate(r, 1);
            found++;
        }
    }
    return found;
}

typedef struct stats {
    double min, median, max;
} stats;

static stats stats_of(const double *v, int n)
{
    double sorted[MAX_RUNS];
    memcpy(sorted, v, (size_t)n * sizeof *v);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    return (stats){sorted[0], sorted[n / 2], sorted[n - 1]};
}

static int stable(const row *rows, int n)
{
    for (int i = 0; i < n; i++) {
        if (rows[i].runs < 3)
            return 0;
        stats s = stats_of(rows[i].value, rows[i].runs);
        if (s.median > 0 && (s.max - s.min) / s.median > STABLE_SPREAD)
            return 0;
    }
    return 1;
}

static double ratio_of(const metric *m, double value, double baseline)
{
    if (value <= 0 || baseline <= 0)
        return NAN;
    return m->higher_is_better ? value / baseline : baseline / value;
}

/* Each run's ratio to its own baseline, into out[runs]: steady where the machine's speed drifts
 * between runs (spmd bench compare judges by it). 0 when a run has none. */
static int run_ratios(const metric *m, const row *w, double *out)
{
    int all = w->runs > 0;
    for (int run = 0; run < w->runs; run++) {
        out[run] = ratio_of(m, w->value[run], w->baseline[run]);
        all &= !isnan(out[run]);
    }
    return all;
}

/* ---- one suite ---- */

typedef struct suite_result {
    const suite *s;
    row rows[MAX_ROWS];
    int nrows, runs, failed;
    int shrink; /* the most the iteration counts were divided by (1: never) */
    double seconds;
    char command[1024];
} suite_result;

static void progress(int index, int total, const suite_result *r, const char *state)
{
    int tty = isatty(2);
    fprintf(stderr, "%s[%d/%d] %-16s %s: %d run(s), %.1f s%s", tty ? "\r\033[K" : "", index, total,
            r->s->name, state, r->runs, r->seconds, tty ? "" : "\n");
    fflush(stderr);
}

/* The least power of two d <= MAX_SHRINK at which `runs` runs fit in `left` seconds, a run
 * taking full_s / d (its time taken to scale with its iterations, an overestimate: starting the
 * program does not shrink); 0 when none does. */
static int least_divisor(double full_s, int runs, double left)
{
    for (int d = 1; d <= MAX_SHRINK; d *= 2)
        if (runs * full_s / d <= left)
            return d;
    return 0;
}

/*
 * The divisor of the iteration counts that lets MIN_RUNS runs fit in cap_s, from one run at the
 * largest divisor (its results are dropped: a run that short is a clock, not a measurement).
 */
static int calibrated_shrink(const suite *s, const options *o, const char *dir,
                             const char *json_path, const char *log_path, double cap_s)
{
    argv_list a;
    command_of(s, o, dir, json_path, MAX_SHRINK, &a);
    double started = now_s();
    if (run_program(&a, o, s->mpi, log_path) != 0)
        return 1; /* the first real run fails the same way and says so */
    double shortest = now_s() - started;
    int shrink = least_divisor(shortest * MAX_SHRINK, MIN_RUNS, cap_s - shortest);
    return shrink ? shrink : MAX_SHRINK;
}

static void run_suite(const suite *s, const options *o, const char *dir, int index, int total,
                      suite_result *r)
{
    memset(r, 0, sizeof *r);
    r->s = s;
    char json_path[PATH_MAX], log_path[PATH_MAX];
    (void)join(json_path, sizeof json_path, "%s/raw/%s.json", o->out, s->name);
    (void)join(log_path, sizeof log_path, "%s/raw/%s.log", o->out, s->name);
    remove(log_path);
    argv_list a;
    double t0 = now_s();
    int max_runs = o->quick ? 1 : MAX_RUNS;
    /* the array_ops suites stay under a minute together */
    double cap_s = strncmp(s->name, "array_ops", 9) == 0 && o->cap_s > 25 ? 25 : o->cap_s;
    int shrink = o->quick ? 1 : calibrated_shrink(s, o, dir, json_path, log_path, cap_s);
    r->shrink = shrink;
    command_of(s, o, dir, json_path, shrink, &a);
    for (int i = 0; i < a.n; i++) { /* programs by name: the report reads the same anywhere */
        const char *item = a.items[i], *slash = strrchr(item, '/');
        if (strncmp(item, dir, strlen(dir)) == 0 && slash)
            item = slash + 1;
        size_t used = strlen(r->command);
        snprintf(r->command + used, sizeof r->command - used, "%s%s", i ? " " : "", item);
    }
    while (r->runs < max_runs) {
        progress(index, total, r, "running");
        remove(json_path);
        double started = now_s();
        int rc = run_program(&a, o, s->mpi, log_path);
        cJSON *root = rc == 0 ? read_json(json_path) : NULL;
        double run_s = now_s() - started;
        r->seconds = now_s() - t0;
        if (!root) {
            r->failed = 1;
            break;
        }
        collect(s, root, r->rows, &r->nrows);
        cJSON_Delete(root);
        r->runs++;
        if (stable(r->rows, r->nrows))
            break;
        /* The next runs divide the iterations by the least power of two at which the runs
         * still wanted (MIN_RUNS in all) fit in what is left of the cap; where none does, one
         * more run that fits; else the cap ends the suite. */
        double left = cap_s - r->seconds;
        int wanted = r->runs < MIN_RUNS ? MIN_RUNS - r->runs : 1;
        int next = least_divisor(run_s * shrink, wanted, left);
        if (!next && wanted > 1 && least_divisor(run_s * shrink, 1, left))
            next = MAX_SHRINK;
        if (!next)
            break;
        if (next != shrink)
            command_of(s, o, dir, json_path, shrink = next, &a);
        r->shrink = shrink > r->shrink ? shrink : r->shrink;
    }
    progress(index, total, r, r->failed ? "FAILED (see raw/*.log)" : "done");
    if (isatty(2))
        fputc('\n', stderr);
}

/* ---- outputs ---- */

static cJSON *stats_json(const double *v, int n)
{
    stats s = stats_of(v, n);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "min", s.min);
    cJSON_AddNumberToObject(j, "median", s.median);
    cJSON_AddNumberToObject(j, "max", s.max);
    return j;
}

/* Open MPI's single-copy mechanism for its shared-memory transport, as the MPI rows' baseline
 * ran with: it decides how fast large messages between processes on one machine go. */
static const char *single_copy_setting(void)
{
    static const char *names[] = {"OMPI_MCA_btl_vader_single_copy_mechanism",
                                  "OMPI_MCA_btl_sm_single_copy_mechanism"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return v;
    }
    return "Open MPI's default";
}

static cJSON *results_json(const options *o, const suite_result *res, int n)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *machine = cJSON_AddObjectToObject(root, "machine");
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    cJSON_AddStringToObject(machine, "hostname", host);
    cJSON_AddNumberToObject(machine, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
    const char *platform = getenv("SPMD_PLATFORM");
    cJSON_AddStringToObject(machine, "platform", platform && *platform ? platform : "default");
    cJSON *build = cJSON_AddObjectToObject(root, "build");
    cJSON_AddStringToObject(build, "version", spmd_version_string());
    unsigned f = spmd_build_features();
    cJSON_AddBoolToObject(build, "mpi", (f & SPMD_FEATURE_MPI) != 0);
    cJSON_AddBoolToObject(build, "cuda", (f & SPMD_FEATURE_CUDA) != 0);
    cJSON_AddBoolToObject(build, "nccl", (f & SPMD_FEATURE_NCCL) != 0);
    cJSON *settings = cJSON_AddObjectToObject(root, "settings");
    cJSON_AddNumberToObject(settings, "procs", o->procs);
    cJSON_AddNumberToObject(settings, "devices", o->devices);
    cJSON_AddNumberToObject(settings, "min_bytes", (double)o->min_bytes);
    cJSON_AddNumberToObject(settings, "max_bytes", (double)o->max_bytes);
    cJSON_AddNumberToObject(settings, "cap_seconds", o->cap_s);
    cJSON_AddNumberToObject(settings, "stable_spread", STABLE_SPREAD);
    cJSON_AddStringToObject(settings, "mpi_single_copy", single_copy_setting());
    char tunables[512];
    const char *t = suite_tunables(tunables, sizeof tunables);
    cJSON_AddStringToObject(settings, "glibc_tunables", t ? t : "");
    cJSON *list = cJSON_AddArrayToObject(root, "suites");
    for (int i = 0; i < n; i++) {
        const suite_result *r = &res[i];
        cJSON *js = cJSON_CreateObject();
        cJSON_AddStringToObject(js, "name", r->s->name);
        cJSON_AddStringToObject(js, "what", r->s->what);
        cJSON_AddStringToObject(js, "command", r->command);
        cJSON_AddNumberToObject(js, "runs", r->runs);
        cJSON_AddNumberToObject(js, "iteration_divisor", r->shrink);
        cJSON_AddNumberToObject(js, "seconds", r->seconds);
        cJSON_AddBoolToObject(js, "failed", r->failed);
        cJSON *rows = cJSON_AddArrayToObject(js, "rows");
        for (int k = 0; k < r->nrows; k++) {
            const row *w = &r->rows[k];
            const metric *m = &r->s->metrics[w->metric];
            cJSON *jr = cJSON_CreateObject();
            cJSON_AddStringToObject(jr, "key", w->key);
            cJSON_AddStringToObject(jr, "metric", m->name);
            cJSON_AddStringToObject(jr, "unit", m->unit);
            cJSON_AddBoolToObject(jr, "higher_is_better", m->higher_is_better);
            cJSON_AddItemToObject(jr, "result", stats_json(w->value, w->runs));
            cJSON_AddStringToObject(jr, "baseline_name", m->baseline_name);
            cJSON_AddItemToObject(jr, "baseline", stats_json(w->baseline, w->runs));
            double ratio = ratio_of(m, stats_of(w->value, w->runs).median,
                                    stats_of(w->baseline, w->runs).median);
            if (isnan(ratio))
                cJSON_AddNullToObject(jr, "ratio");
            else
                cJSON_AddNumberToObject(jr, "ratio", ratio);
            double run_ratio[MAX_RUNS];
            if (run_ratios(m, w, run_ratio))
                cJSON_AddItemToObject(jr, "run_ratio", stats_json(run_ratio, w->runs));
            cJSON_AddNumberToObject(jr, "runs", w->runs);
            cJSON_AddNumberToObject(jr, "wrong", w->wrong);
            cJSON_AddItemToArray(rows, jr);
        }
        cJSON_AddItemToArray(list, js);
    }
    return root;
}

/* A gnuplot script drawing, per series, y against x from `data` (columns: x, then one per
 * series); its PNG lands beside it. */
static int plot(const char *dir, const char *name, const char *title, const char *xlabel,
                const char *ylabel, int logx, int logy, const char *data, int nseries,
                const char *const *series)
{
    char dat[PATH_MAX], gp[PATH_MAX], cmd[PATH_MAX * 2];
    (void)join(dat, sizeof dat, "%s/plots/%s.dat", dir, name);
    (void)join(gp, sizeof gp, "%s/plots/%s.gp", dir, name);
    if (!write_text(dat, data))
        return 0;
    FILE *f = fopen(gp, "w");
    if (!f)
        return 0;
    fprintf(f,
            "set terminal pngcairo size 800,480 noenhanced\nset output '%s/%s.png'\n"
            "set title '%s'\nset xlabel '%s'\nset ylabel '%s'\nset key below\nset grid\n"
            "%s%s",
            dir, name, title, xlabel, ylabel,
            logx ? "set logscale x 2\nset format x '%.0f'\n" : "set xtics 1\n",
            logy ? "set logscale y\n" : "set yrange [0:*]\n"); /* linear axes start at 0 */
    fprintf(f, "plot ");
    for (int k = 0; k < nseries; k++)
        fprintf(f, "%s'%s' using 1:%d with linespoints title '%s'", k ? ", " : "", dat, k + 2,
                series[k]);
    fprintf(f, "\n");
    fclose(f);
    if (!join(cmd, sizeof cmd, "gnuplot '%s' > '%s/plots/%s.log' 2>&1", gp, dir, name))
        return 0;
    return system(cmd) == 0;
}

static double field(const row *w, const char *name)
{
    const cJSON *f = w->fields ? number_field(w->fields, name) : NULL;
    return f ? f->valuedouble : NAN;
}

static const char *string_field(const row *w, const char *name)
{
    const cJSON *f = w->fields ? cJSON_GetObjectItemCaseSensitive(w->fields, name) : NULL;
    return cJSON_IsString(f) ? f->valuestring : "";
}

/* Appends "x v1 v2\n" lines for the rows of metric m whose `match` field equals `want`
 * (NULL: all), x from field xs, values the medians of the result and of the baseline. */
static void series_data(const suite_result *r, int m, const char *match, const char *want,
                        const char *xs, double (*y)(double), char *buf, size_t size)
{
    size_t used = strlen(buf);
    for (int k = 0; k < r->nrows; k++) {
        const row *w = &r->rows[k];
        if (w->metric != m || (match && strcmp(string_field(w, match), want) != 0))
            continue;
        double v = stats_of(w->value, w->runs).median, b = stats_of(w->baseline, w->runs).median;
        used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "%g %g %g\n",
                                 field(w, xs), y ? y(v) : v, y ? y(b) : b);
    }
}

/* The plots of one suite, each appended to the report as an image; returns how many. */
static int plots_of(const suite_result *r, const char *dir, FILE *report)
{
    static const char *ops[] = {"psum", "all_gather", "psum_scatter", "ppermute", "all_to_all"};
    char data[32768];
    int made = 0;
    if (strcmp(r->s->name, "collectives_mpi") == 0 || strcmp(r->s->name, "collectives") == 0) {
        int mpi = r->s->mpi;
        for (int i = 0; i < 5; i++) {
            data[0] = '\0';
            series_data(r, 0, "op", ops[i], "size", NULL, data, sizeof data);
            if (!data[0])
                continue;
            char name[64], title[128];
            snprintf(name, sizeof name, "%s_%s", r->s->name, ops[i]);
            snprintf(title, sizeof title, "%s %s", ops[i],
                     mpi ? "between processes" : "in one process");
            const char *series[2] = {mpi ? "libspmd busbw" : "libspmd time",
                                     mpi ? "MPI busbw" : "least-traffic bound"};
            if (plot(dir, name, title, "bytes", mpi ? "busbw (GB/s)" : "time (us)", 1, !mpi, data,
                     2, series)) {
                fprintf(report, "![%s](%s.png)\n\n", title, name);
                made++;
            }
        }
    } else if (strcmp(r->s->name, "pmap") == 0) {
        data[0] = '\0';
        series_data(r, 0, NULL, NULL, "devices", NULL, data, sizeof data);
        const char *series[2] = {"pmap (median)", "shard_map plan (median)"};
        if (data[0] && plot(dir, "dispatch_devices", "dispatch time of an empty fn", "devices",
                            "time (us)", 0, 0, data, 2, series)) {
            fprintf(report, "![dispatch against device count](dispatch_devices.png)\n\n");
            made++;
        }
    } else if (strcmp(r->s->name, "unreplicate") == 0) {
        /* time against device count, at the largest slice */
        double largest = 0;
        for (int k = 0; k < r->nrows; k++)
            largest = fmax(largest, field(&r->rows[k], "slice_bytes"));
        data[0] = '\0';
        for (int k = 0; k < r->nrows; k++)
            if (field(&r->rows[k], "slice_bytes") == largest) {
                const row *w = &r->rows[k];
                size_t used = strlen(data);
                snprintf(data + used, sizeof data - used, "%g %g %g\n", field(w, "devices"),
                         stats_of(w->value, w->runs).median, stats_of(w->baseline, w->runs).median);
            }
        const char *series[2] = {"unreplicate", "gather-then-index"};
        if (data[0] && plot(dir, "unreplicate_devices", "unreplicate at the largest slice",
                            "devices", "time (us)", 0, 1, data, 2, series)) {
            fprintf(report, "![unreplicate against device count](unreplicate_devices.png)\n\n");
            made++;
        }
    } else if (strcmp(r->s->name, "reshard") == 0) {
        /* bandwidth: the matrix bytes over the median time, rows -> columns */
        data[0] = '\0';
        for (int k = 0; k < r->nrows; k++) {
            const row *w = &r->rows[k];
            if (w->metric != 0 || strstr(string_field(w, "layout"), "rows_to_cols") == NULL)
                continue;
            double bytes = field(w, "bytes");
            size_t used = strlen(data);
            snprintf(data + used, sizeof data - used, "%g %g %g\n", field(w, "n"),
                     bytes / stats_of(w->value, w->runs).median * 1e-3,
                     bytes / stats_of(w->baseline, w->runs).median * 1e-3);
        }
        const char *series[2] = {"spmd_reshard", "MPI_Alltoallv (moved bytes)"};
        if (data[0] &&
            plot(dir, "reshard_bandwidth", "reshard P('a') -> P(None, 'a')", "N (N x N float64)",
                 "matrix bytes / time (GB/s)", 1, 0, data, 2, series)) {
            fprintf(report, "![reshard bandwidth](reshard_bandwidth.png)\n\n");
            made++;
        }
    }
    return made;
}

static void write_report(FILE *f, const options *o, const suite_result *res, int n, const char *dir,
                         int *plots)
{
    fprintf(f, "# libspmd benchmark report\n\n");
    char tunables[512];
    const char *tunables_text = suite_tunables(tunables, sizeof tunables);
    if (!tunables_text)
        tunables_text = "(not set)";
    fprintf(f,
            "libspmd %s, %d process(es) for the MPI rows, %d device(s) per process for the "
            "others, %ld core(s). Every result is the median of its runs (min–max beside "
            "it); a suite repeats until each row's spread (max − min) / median is at most "
            "%.0f %% or its %.0f s cap is reached. ratio > 1: better than the baseline "
            "measured in the same run (ratio: of the medians; run ratio: the median, min and "
            "max of each run's ratio to its own baseline, steady where the machine's speed "
            "drifts between runs). `results.json` holds every row. The MPI baselines ran "
            "with single-copy mechanism: %s (OMPI_MCA_btl_vader_single_copy_mechanism; "
            "`none` sends every byte through the shared-memory FIFO, `cma` lets large "
            "messages be copied once). Every process's GLIBC_TUNABLES: %s%s.\n\n",
            spmd_version_string(), o->procs, o->devices, sysconf(_SC_NPROCESSORS_ONLN),
            STABLE_SPREAD * 100, o->cap_s, single_copy_setting(), tunables_text,
            strstr(tunables_text, "glibc.malloc.hugetlb=1")
                ? " (glibc's malloc asks for transparent huge pages for its large blocks, as "
                  "libspmd does for its CPU buffers of 2 MiB and more (from 64 KiB beside other "
                  "processes): Open MPI's own scratch "
                  "then faults in 2 MiB pages where the kernel gives them, not 4 KiB ones)"
                : "");
    *plots = 0;
    for (int i = 0; i < n; i++) {
        const suite_result *r = &res[i];
        fprintf(f, "## %s\n\n%s; %d run(s) in %.1f s%s.", r->s->name, r->s->what, r->runs,
                r->seconds, r->failed ? " — FAILED, see raw/" : "");
        if (r->shrink > 1)
            fprintf(f,
                    " Runs used as few as 1/%d of the iterations, so that %d runs fit in the "
                    "cap.",
                    r->shrink, MIN_RUNS);
        if (r->runs < MIN_RUNS && !o->quick && !r->failed)
            fprintf(f, " **Fewer than %d runs: the spreads below mean little.**", MIN_RUNS);
        fprintf(f, "\n\n`%s`\n\n", r->command);
        if (r->nrows) {
            fprintf(f,
                    "| row | metric | result | baseline | ratio | run ratio | spread | #wrong |\n"
                    "|---|---|---|---|---|---|---|---|\n");
            int wide = 0;
            for (int k = 0; k < r->nrows; k++) {
                const row *w = &r->rows[k];
                const metric *m = &r->s->metrics[w->metric];
                stats v = stats_of(w->value, w->runs), b = stats_of(w->baseline, w->runs);
                double spread = v.median > 0 ? (v.max - v.min) / v.median : 0;
                wide += spread > STABLE_SPREAD;
                double run_ratio[MAX_RUNS];
                char by_run[64] = "–";
                if (run_ratios(m, w, run_ratio)) {
                    stats q = stats_of(run_ratio, w->runs);
                    snprintf(by_run, sizeof by_run, "%.2f (%.2f–%.2f)", q.median, q.min, q.max);
                }
                fprintf(f,
                        "| %s | %s (%s) | %.4g (%.4g–%.4g) | %s %.4g | %.2f | %s | %s%.0f %%%s | "
                        "%.0f |\n",
                        w->key, m->name, m->unit, v.median, v.min, v.max, m->baseline_name,
                        b.median, ratio_of(m, v.median, b.median), by_run,
                        spread > STABLE_SPREAD ? "**" : "", spread * 100,
                        spread > STABLE_SPREAD ? "**" : "", w->wrong);
            }
            if (wide)
                fprintf(f,
                        "\n%d of %d row(s) spread more than %.0f %% (bold): read their min–max, "
                        "not only the median.\n",
                        wide, r->nrows, STABLE_SPREAD * 100);
            fprintf(f, "\n");
        }
        *plots += plots_of(r, dir, f);
    }
}

/* ---- spmd bench compare ---- */

static const cJSON *find_row(const cJSON *root, const char *suite_name, const char *key,
                             const char *metric_name)
{
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(root, "suites"))
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "name");
        if (!cJSON_IsString(name) || strcmp(name->valuestring, suite_name) != 0)
            continue;
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(s, "rows"))
        {
            const cJSON *k = cJSON_GetObjectItemCaseSensitive(r, "key"),
                        *m = cJSON_GetObjectItemCaseSensitive(r, "metric");
            if (cJSON_IsString(k) && cJSON_IsString(m) && strcmp(k->valuestring, key) == 0 &&
                strcmp(m->valuestring, metric_name) == 0)
                return r;
        }
    }
    return NULL;
}

static double row_stat(const cJSON *r, const char *which, const char *part)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, which);
    const cJSON *v = s ? cJSON_GetObjectItemCaseSensitive(s, part) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The noise of a row's `which` (result or run_ratio): its relative spread, at least 5 %. */
static double noise(const cJSON *r, const char *which)
{
    double med = row_stat(r, which, "median");
    double spread = med > 0 ? (row_stat(r, which, "max") - row_stat(r, which, "min")) / med : 0;
    return spread > 0.05 ? spread : 0.05;
}

static int compare(const char *old_path, const char *new_path)
{
    cJSON *old = read_json(old_path), *cur = read_json(new_path);
    if (!old || !cur) {
        cJSON_Delete(old);
        cJSON_Delete(cur);
        return cli_failure(CMD, "compare: cannot read %s as the JSON of spmd bench",
                           !old ? old_path : new_path);
    }
    printf("%-16s %-36s %-18s %12s %12s %8s  %s\n", "suite", "row", "metric", "old", "new", "speed",
           "verdict");
    int compared = 0, regressions = 0, by_ratio = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(cur, "suites"))
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "name");
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(s, "rows"))
        {
            const cJSON *k = cJSON_GetObjectItemCaseSensitive(r, "key"),
                        *m = cJSON_GetObjectItemCaseSensitive(r, "metric"),
                        *h = cJSON_GetObjectItemCaseSensitive(r, "higher_is_better");
            if (!cJSON_IsString(name) || !cJSON_IsString(k) || !cJSON_IsString(m))
                continue;
            const cJSON *o = find_row(old, name->valuestring, k->valuestring, m->valuestring);
            if (!o)
                continue;
            /* Rows with a baseline compare their ratios to it, run by run: the machine's speed
             * may differ between the two runs (a VM's modes), the baseline's with it. */
            int ratios = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "run_ratio")) &&
                         cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "run_ratio"));
            const char *which = ratios ? "run_ratio" : "result";
            double a = row_stat(o, which, "median"), b = row_stat(r, which, "median");
            if (!(a > 0) || !(b > 0))
                continue;
            /* > 1: the new build is faster (or better) than the old one */
            double speed = ratios || cJSON_IsTrue(h) ? b / a : a / b;
            double band = fmax(noise(o, which), noise(r, which));
            int regressed = speed < 1 - band;
            regressions += regressed;
            compared++;
            by_ratio += ratios;
            char metric_text[64];
            snprintf(metric_text, sizeof metric_text, "%s%s", m->valuestring,
                     ratios ? " ratio" : "");
            printf("%-16s %-36s %-18s %12.4g %12.4g %8.3f  %s\n", name->valuestring, k->valuestring,
                   metric_text, a, b, speed,
                   regressed          ? "REGRESSION"
                   : speed > 1 + band ? "better"
                                      : "within noise");
        }
    }
    printf("%d row(s) compared, %d regression(s) beyond the noise band (the rows' spread, at "
           "least 5 %%); %d by their ratio to the baseline of the same run\n",
           compared, regressions, by_ratio);
    cJSON_Delete(old);
    cJSON_Delete(cur);
    if (!compared)
        return cli_failure(CMD, "compare: %s and %s have no row in common", old_path, new_path);
    return regressions ? CLI_FAILED : CLI_OK;
}

/* ---- the command ---- */

void bench_usage(FILE *out)
{
    fputs("usage: spmd bench [SUITE...] [--out DIR] [--procs N] [--devices N] [--sizes MIN:MAX]\n"
          "                  [--cap SECONDS] [--quick]\n"
          "       spmd bench compare OLD.json NEW.json\n"
          "\n"
          "Runs the benchmark programs (bench/, found beside this tool or in $SPMD_BENCH_DIR),\n"
          "each against the baseline it measures in the same run, repeating a suite until\n"
          "each row's spread (max - min) / median is at most 10 % or its time cap passes;\n"
          "at least 3 runs, with fewer iterations per run where 3 would not fit the cap.\n"
          "The report marks the rows whose spread stays above 10 %.\n"
          "Writes DIR/report.md, DIR/results.json, DIR/*.png (gnuplot) and DIR/raw/.\n"
          "\n"
          "suites: all (default), collectives, collectives_mpi, calls_mpi, gradients_mpi,\n"
          "        dispatch, pmap, unreplicate, replicate, reshard, gemm, array_ops,\n"
          "        array_ops_mpi (the *_mpi suites and reshard run under mpirun)\n"
          "\n"
          "options:\n"
          "  --out DIR        where the report goes (default: bench-report)\n"
          "  --procs N        processes of the MPI suites (default 2)\n"
          "  --devices N      devices per process of the others (default 4)\n"
          "  --sizes MIN:MAX  message sizes, e.g. 8:64M (default 1K:16M)\n"
          "  --cap SECONDS    time cap per suite (default 40; array_ops, array_ops_mpi: 25)\n"
          "  --quick          one short run per suite (a smoke test)\n"
          "compare: prints new/old per common row ('speed' > 1: the new one is better) and\n"
          "flags rows worse beyond their noise band; exits 1 when any regressed. A row with a\n"
          "baseline compares its ratio to the baseline (run by run, 'METRIC ratio'): the\n"
          "machine's speed may differ between the two reports, the baseline's with it.\n",
          out);
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.procs = 2,
                   .devices = 4,
                   .cap_s = 40,
                   .min_bytes = 1024,
                   .max_bytes = 16 << 20,
                   .out = "bench-report"};
    static const struct option longs[] = {
        {"out", required_argument, 0, 'o'},     {"procs", required_argument, 0, 'p'},
        {"devices", required_argument, 0, 'd'}, {"sizes", required_argument, 0, 's'},
        {"cap", required_argument, 0, 'c'},     {"quick", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'o':
            o->out = optarg;
            break;
        case 'p':
        case 'd': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 1024)
                return cli_usage_error(CMD, "--%s %s: use a number of 1..1024",
                                       c == 'p' ? "procs" : "devices", optarg);
            *(c == 'p' ? &o->procs : &o->devices) = (int)v;
            break;
        }
        case 's': {
            char lo[64] = "", *colon = strchr(optarg, ':');
            if (colon && (size_t)(colon - optarg) < sizeof lo)
                memcpy(lo, optarg, (size_t)(colon - optarg));
            o->min_bytes = colon ? parse_size(lo) : -1;
            o->max_bytes = colon ? parse_size(colon + 1) : -1;
            if (o->min_bytes < 1 || o->max_bytes < o->min_bytes)
                return cli_usage_error(CMD, "--sizes %s: use MIN:MAX such as 8:64M", optarg);
            break;
        }
        case 'c':
            o->cap_s = strtod(optarg, &end);
            if (*end || !(o->cap_s > 0))
                return cli_usage_error(CMD, "--cap %s: use a positive number of seconds", optarg);
            break;
        case 'q':
            o->quick = 1;
            break;
        case 'h':
            return CLI_HELP;
        default:
            return cli_usage_error(CMD, "unknown option '%s'; see 'spmd bench --help'",
                                   argv[optind - 1]);
        }
    }
    int any = 0;
    for (int i = optind; i < argc; i++) {
        int all = strcmp(argv[i], "all") == 0, found = all;
        for (int k = 0; k < NUM_SUITES; k++)
            if (all || strcmp(argv[i], suites[k].name) == 0)
                o->selected[k] = found = 1;
        if (!found)
            return cli_usage_error(CMD, "unknown suite '%s'; see 'spmd bench --help'", argv[i]);
        any = 1;
    }
    if (!any)
        for (int k = 0; k < NUM_SUITES; k++)
            o->selected[k] = 1;
    return CLI_OK;
}

int bench_command(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "compare") == 0) {
        if (argc == 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
            bench_usage(stdout);
            return CLI_OK;
        }
        if (argc != 4)
            return cli_usage_error(CMD, "compare takes two files: OLD.json NEW.json");
        return compare(argv[2], argv[3]);
    }
    options o;
    int rc = parse(argc, argv, &o);
    if (rc == CLI_HELP) {
        bench_usage(stdout);
        return CLI_OK;
    }
    if (rc != CLI_OK)
        return rc;
    char dir[PATH_MAX], sub[PATH_MAX];
    bench_dir(dir, sizeof dir);
    (void)join(sub, sizeof sub, "%s/raw", o.out);
    if ((mkdir(o.out, 0755) && errno != EEXIST) || (mkdir(sub, 0755) && errno != EEXIST))
        return cli_failure(CMD, "cannot create %s: %s", sub, strerror(errno));
    (void)join(sub, sizeof sub, "%s/plots", o.out);
    if (mkdir(sub, 0755) && errno != EEXIST)
        return cli_failure(CMD, "cannot create %s: %s", sub, strerror(errno));
    for (int k = 0; k < NUM_SUITES; k++) {
        char path[PATH_MAX];
        (void)join(path, sizeof path, "%s/%s", dir, suites[k].program);
        if (o.selected[k] && access(path, X_OK) != 0)
            return cli_failure(CMD,
                               "no benchmark program %s (build the bench/ targets, or point "
                               "SPMD_BENCH_DIR at them)",
                               path);
        if (o.selected[k] && suites[k].mpi && strcmp(SPMD_BENCH_MPIEXEC, "") == 0)
            return cli_failure(
                CMD, "suite %s needs mpirun, but libspmd was built without MPI; leave it out",
                suites[k].name);
    }
    int total = 0;
    for (int k = 0; k < NUM_SUITES; k++)
        total += o.selected[k];
    suite_result *res = calloc((size_t)total, sizeof *res);
    if (!res)
        return cli_failure(CMD, "out of memory");
    int n = 0, failed = 0;
    for (int k = 0; k < NUM_SUITES; k++)
        if (o.selected[k]) {
            run_suite(&suites[k], &o, dir, n + 1, total, &res[n]);
            failed += res[n].failed;
            n++;
        }
    cJSON *json = results_json(&o, res, n);
    char path[PATH_MAX];
    (void)join(path, sizeof path, "%s/results.json", o.out);
    char *text = cJSON_Print(json);
    int ok = text && write_text(path, text);
    free(text);
    cJSON_Delete(json);
    (void)join(path, sizeof path, "%s/report.md", o.out);
    FILE *report = fopen(path, "w");
    int plots = 0;
    if (report) {
        write_report(report, &o, res, n, o.out, &plots);
        ok &= fclose(report) == 0;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < res[i].nrows; k++)
            cJSON_Delete(res[i].rows[k].fields);
    free(res);
    if (!ok || !report)
        return cli_failure(CMD, "cannot write the report into %s", o.out);
    printf("%s/report.md, %s/results.json and %d plot(s) written%s\n", o.out, o.out, plots,
           plots ? "" : " (none: is gnuplot installed?)");
    if (failed)
        return cli_failure(CMD, "%d suite(s) failed; their output is in %s/raw/", failed, o.out);
    return CLI_OK;
}
