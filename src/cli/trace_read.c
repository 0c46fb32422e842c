/*
 * spmd trace show DIR: where each process of a traced run was (its last call, each device's
 * collective, how long it waited, how the process ended).
 * spmd trace diff A B: the first call and collective whose description, status or data digest
 * differ between two traces (two layouts, two versions, two processes).
 */
#define _GNU_SOURCE
#include "trace_read.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <spmd.h>

#include "cli_args.h"

#define MAX_FILES 100000
/* load_file's and load_run's failure for a path that is no regular file: bad usage */
#define NOT_A_FILE (-2)

typedef struct trace_file {
    spmd_trace_header h;
    spmd_trace_record *records; /* the valid ones, oldest first */
    size_t count;
    uint64_t lost;   /* records the ring overwrote */
    int64_t last_ns; /* its last sign of life: a record's time or a wait's turn */
    char *path;
    struct placed *placed; /* trace diff: where each record goes in the common order of calls */
} trace_file;

typedef struct trace_run {
    trace_file *files; /* by process */
    int count;
    int is_dir;
    const char *name;
    int64_t earliest_ns; /* the earliest start among the files (realtime) */
} trace_run;

static int by_stamp(const void *a, const void *b)
{
    uint64_t x = ((const spmd_trace_record *)a)->stamp, y = ((const spmd_trace_record *)b)->stamp;
    return x < y ? -1 : x > y;
}

/* Reads one file; 0, or -1 with the reason in `why`, or NOT_A_FILE. */
static int load_file(const char *path, trace_file *t, char *why, size_t size)
{
    memset(t, 0, sizeof *t);
    /* O_NONBLOCK: opening a FIFO waits for a writer; fstat then tells what was opened */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    FILE *f = NULL;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, size, "cannot read %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, size,
                 "%s is not a regular file; give a trace directory (SPMD_TRACE=DIR) or one of its "
                 "trace.<process>.spmd files",
                 path);
        close(fd);
        return NOT_A_FILE;
    }
    if (!(f = fdopen(fd, "rb"))) {
        snprintf(why, size, "cannot read %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    unsigned char page[SPMD_TRACE_HEADER_BYTES];
    int ok = fread(page, 1, sizeof page, f) == sizeof page;
    if (ok)
        memcpy(&t->h, page, sizeof t->h);
    if (!ok || memcmp(t->h.magic, SPMD_TRACE_MAGIC, sizeof t->h.magic) != 0) {
        snprintf(why, size, "%s is not a libspmd trace (no %s header)", path, SPMD_TRACE_MAGIC);
        fclose(f);
        return -1;
    }
    if (t->h.format_version != SPMD_TRACE_FORMAT_VERSION ||
        t->h.header_bytes != SPMD_TRACE_HEADER_BYTES ||
        t->h.record_bytes != sizeof(spmd_trace_record) || t->h.capacity == 0 ||
        t->h.capacity > (1u << 24)) {
        snprintf(why, size,
                 "%s: trace format %u with %u-byte records; this spmd reads format %d with "
                 "%zu-byte records",
                 path, t->h.format_version, t->h.record_bytes, SPMD_TRACE_FORMAT_VERSION,
                 sizeof(spmd_trace_record));
        fclose(f);
        return -1;
    }
    if (t->h.num_local_devices < 0 || t->h.num_local_devices > (1 << 20) ||
        t->h.first_local_device < 0 || t->h.first_local_device > (1 << 30) ||
        t->h.num_processes < 1 || t->h.process < 0 || t->h.process >= t->h.num_processes) {
        snprintf(why, size, "%s: the header is damaged (process %d of %d, %d devices from %d)",
                 path, t->h.process, t->h.num_processes, t->h.num_local_devices,
                 t->h.first_local_device);
        fclose(f);
        return -1;
    }
    uint64_t held =
        st.st_size > SPMD_TRACE_HEADER_BYTES
            ? (uint64_t)(st.st_size - SPMD_TRACE_HEADER_BYTES) / sizeof(spmd_trace_record)
            : 0;
    size_t slots =
        held < t->h.capacity ? (size_t)held : t->h.capacity; /* cut short: what is there */
    t->h.host[sizeof t->h.host - 1] = t->h.program[sizeof t->h.program - 1] = '\0';
    t->h.last_error[sizeof t->h.last_error - 1] = '\0';
    t->records = malloc((slots ? slots : 1) * sizeof *t->records);
    if (!t->records) {
        snprintf(why, size, "out of memory for %s", path);
        fclose(f);
        return -1;
    }
    size_t got = fread(t->records, sizeof *t->records, slots, f);
    fclose(f);
    for (size_t k = 0; k < got; k++) {
        spmd_trace_record r = t->records[k];
        /* written whole, and the one that slot holds now */
        if (r.stamp == 0 || r.stamp > t->h.next || (r.stamp - 1) % t->h.capacity != k)
            continue;
        r.what[sizeof r.what - 1] = '\0';
        t->records[t->count++] = r;
    }
    qsort(t->records, t->count, sizeof *t->records, by_stamp);
    t->lost = t->h.next > t->h.capacity ? t->h.next - t->h.capacity : 0;
    t->last_ns = t->h.alive_ns;
    for (size_t k = 0; k < t->count; k++) {
        const spmd_trace_record *r = &t->records[k];
        int64_t latest = r->end_ns > r->start_ns ? r->end_ns : r->start_ns;
        t->last_ns = latest > t->last_ns ? latest : t->last_ns;
    }
    t->path = strdup(path);
    return 0;
}

static int by_process(const void *a, const void *b)
{
    int x = ((const trace_file *)a)->h.process, y = ((const trace_file *)b)->h.process;
    return (x > y) - (x < y);
}

static void free_run(trace_run *run)
{
    for (int k = 0; k < run->count; k++) {
        free(run->files[k].records);
        free(run->files[k].path);
        free(run->files[k].placed);
    }
    free(run->files);
    memset(run, 0, sizeof *run);
}

/* A directory of trace.<p>.spmd files, or one such file; 0, or load_file's failure. */
static int load_run(const char *name, trace_run *run, char *why, size_t size)
{
    memset(run, 0, sizeof *run);
    run->name = name;
    struct stat st;
    if (stat(name, &st) != 0) {
        snprintf(why, size, "cannot read %s: %s", name, strerror(errno));
        return -1;
    }
    int cap = 8;
    run->files = malloc((size_t)cap * sizeof *run->files);
    if (!run->files) {
        snprintf(why, size, "out of memory");
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        int rc = load_file(name, &run->files[0], why, size);
        if (rc != 0)
            return free_run(run), rc;
        run->count = 1;
    } else {
        run->is_dir = 1;
        DIR *d = opendir(name);
        if (!d) {
            snprintf(why, size, "cannot read the directory %s: %s", name, strerror(errno));
            return free_run(run), -1;
        }
        struct dirent *e;
        int rc = 0;
        while (rc == 0 && (e = readdir(d)) != NULL) {
            size_t n = strlen(e->d_name);
            if (strncmp(e->d_name, "trace.", 6) != 0 || n < 11 ||
                strcmp(e->d_name + n - 5, ".spmd") != 0)
                continue;
            if (run->count == MAX_FILES) {
                snprintf(why, size, "%s holds more than %d trace files", name, MAX_FILES);
                rc = -1;
                break;
            }
            if (run->count == cap) {
                trace_file *more = realloc(run->files, (size_t)cap * 2 * sizeof *more);
                if (!more) {
                    snprintf(why, size, "out of memory");
                    rc = -1;
                    break;
                }
                run->files = more;
                cap *= 2;
            }
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", name, e->d_name);
            rc = load_file(path, &run->files[run->count], why, size);
            if (rc == 0)
                run->count++;
        }
        closedir(d);
        if (rc != 0)
            return free_run(run), rc;
        if (run->count == 0) {
            snprintf(why, size,
                     "%s holds no trace (trace.<process>.spmd); run the program with "
                     "SPMD_TRACE=%s",
                     name, name);
            return free_run(run), -1;
        }
        qsort(run->files, (size_t)run->count, sizeof *run->files, by_process);
        for (int k = 1; k < run->count; k++)
            if (run->files[k].h.num_processes != run->files[0].h.num_processes) {
                snprintf(why, size,
                         "%s mixes the traces of runs of %d and %d processes (%s, %s); give each "
                         "run a directory of its own",
                         name, run->files[0].h.num_processes, run->files[k].h.num_processes,
                         run->files[0].path, run->files[k].path);
                return free_run(run), -1;
            }
    }
    run->earliest_ns = run->files[0].h.start_realtime_ns;
    for (int k = 1; k < run->count; k++)
        if (run->files[k].h.start_realtime_ns < run->earliest_ns)
            run->earliest_ns = run->files[k].h.start_realtime_ns;
    return 0;
}

/* A run that cannot be read: bad usage for a path that is no regular file, else a failure. */
static int refuse_run(const char *cmd, int rc, const char *why)
{
    return rc == NOT_A_FILE ? cli_usage_error(cmd, "%s", why) : cli_failure(cmd, "%s", why);
}

/* ---- spmd trace show ---- */

static double seconds(int64_t ns) { return (double)ns / 1e9; }

/* A record's time since the run's earliest start. */
static double at(const trace_run *run, const trace_file *t, int64_t ns)
{
    return seconds(t->h.start_realtime_ns - run->earliest_ns + ns);
}

static const char *state_text(const trace_file *t, char *buf, size_t size)
{
    switch (t->h.state) {
    case SPMD_TRACE_STOPPED:
        return "ended: spmd_finalize or spmd_trace_stop";
    case SPMD_TRACE_EXITED:
        return "ended: the process exited without spmd_finalize";
    case SPMD_TRACE_SIGNALLED:
        snprintf(buf, size, "ended: killed by signal %d (%s)", t->h.signal, strsignal(t->h.signal));
        return buf;
    default:
        return "no end recorded: still running, or killed (SIGKILL, a lost node)";
    }
}

/* How a record that ended did, or how long an open one has lasted. */
static void record_state(const trace_file *t, const spmd_trace_record *r, char *buf, size_t size)
{
    if (r->status == SPMD_TRACE_OPEN) {
        int64_t last = t->last_ns > r->start_ns ? t->last_ns : r->start_ns;
        snprintf(buf, size,
                 "not ended: waited at least %.3f s (until the process's last sign "
                 "of life)",
                 seconds(last - r->start_ns));
    } else if (r->status == SPMD_OK) {
        snprintf(buf, size, "ended after %.3f s", seconds(r->end_ns - r->start_ns));
    } else {
        snprintf(buf, size, "failed after %.3f s: %s", seconds(r->end_ns - r->start_ns),
                 spmd_status_name((spmd_status)r->status));
    }
}

/* Where each device was, for the summary: devices grouped by the same words. */
typedef struct where {
    int device;
    char text[240];
} where;

typedef struct where_list {
    where *items;
    int count, cap;
} where_list;

static void note_where(where_list *w, int device, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note_where(where_list *w, int device, const char *fmt, ...)
{
    if (w->count == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        where *more = realloc(w->items, (size_t)cap * sizeof *more);
        if (!more)
            return; /* the summary is shorter; the listing above it is whole */
        w->items = more, w->cap = cap;
    }
    where *it = &w->items[w->count++];
    it->device = device;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->text, sizeof it->text, fmt, ap);
    va_end(ap);
}

static int by_text_then_device(const void *a, const void *b)
{
    const where *x = a, *y = b;
    int c = strcmp(x->text, y->text);
    return c ? c : (x->device > y->device) - (x->device < y->device);
}

typedef struct where_group {
    int start, size; /* items[start .. start + size) */
} where_group;

static int by_size_then_start(const void *a, const void *b)
{
    const where_group *x = a, *y = b;
    if (x->size != y->size)
        return (x->size > y->size) - (x->size < y->size);
    return (x->start > y->start) - (x->start < y->start);
}

/* "devices 0, 1, 3..7: in all_gather ... of call #3", the smallest groups first: the device
 * that is not where the others are shows at the top. Sorted, not searched by size: as many
 * groups as devices must not cost devices squared. */
static void print_summary(where_list *w)
{
    if (w->count == 0)
        return;
    qsort(w->items, (size_t)w->count, sizeof *w->items, by_text_then_device);
    int groups = 0;
    where_group *group = malloc((size_t)w->count * sizeof *group);
    if (!group)
        return;
    for (int i = 0; i < w->count; i++)
        if (i == 0 || strcmp(w->items[i].text, w->items[i - 1].text) != 0)
            group[groups++] = (where_group){i, 0};
    for (int g = 0; g < groups; g++)
        group[g].size = (g + 1 < groups ? group[g + 1].start : w->count) - group[g].start;
    qsort(group, (size_t)groups, sizeof *group, by_size_then_start);
    printf("where the devices were (the smallest groups first):\n");
    for (int g = 0; g < groups; g++) {
        int end = group[g].start + group[g].size;
        printf("  device%s ", group[g].size > 1 ? "s" : "");
        for (int i = group[g].start; i < end; i++) { /* runs of consecutive ids as a..b */
            int j = i;
            while (j + 1 < end && w->items[j + 1].device == w->items[j].device + 1)
                j++;
            printf(i > group[g].start ? ", " : "");
            if (j > i + 1)
                printf("%d..%d", w->items[i].device, w->items[j].device);
            else if (j == i + 1)
                printf("%d, %d", w->items[i].device, w->items[j].device);
            else
                printf("%d", w->items[i].device);
            i = j;
        }
        printf(": %s\n", w->items[group[g].start].text);
    }
    free(group);
}

static int by_device_then_order(const void *a, const void *b)
{
    const spmd_trace_record *x = *(const spmd_trace_record *const *)a;
    const spmd_trace_record *y = *(const spmd_trace_record *const *)b;
    if (x->device != y->device)
        return (x->device > y->device) - (x->device < y->device);
    return (x > y) - (x < y); /* a file's records are in the order they were made */
}

/* Where one device was in call `latest`: its fn and its last collective (the last that ended
 * too), either NULL. */
static void show_device(const trace_run *run, const trace_file *t, where_list *w, uint64_t latest,
                        const spmd_trace_record *fn, const spmd_trace_record *coll,
                        const spmd_trace_record *done)
{
    char buf[256];
    int device = fn ? fn->device : coll->device;
    if (coll && coll->status != SPMD_OK) {
        record_state(t, coll, buf, sizeof buf);
        printf("    device %d: in %s since %.3f s: %s\n", device, coll->what,
               at(run, t, coll->start_ns), buf);
        note_where(w, device, "in %s of call #%" PRIu64, coll->what, latest);
    } else if (fn && fn->status == SPMD_TRACE_OPEN) {
        record_state(t, fn, buf, sizeof buf);
        if (done)
            printf("    device %d: in fn, in no collective; its last, %s, ended at %.3f s; "
                   "fn %s\n",
                   device, done->what, at(run, t, done->end_ns), buf);
        else
            printf("    device %d: in fn, in no collective yet; fn %s\n", device, buf);
        note_where(w, device, "in fn, past %u collective(s)%s%s, of call #%" PRIu64,
                   done ? done->seq : 0, done ? ", the last " : "", done ? done->what : "", latest);
    } else if (fn) {
        double ran = (double)(fn->end_ns - fn->start_ns) / 1e9;
        printf("    device %d: returned from fn (%s) after %.3f s and %u collective%s%s%s\n",
               device, fn->status == SPMD_OK ? "ok" : spmd_status_name((spmd_status)fn->status),
               ran, coll ? coll->seq : 0, coll && coll->seq == 1 ? "" : "s",
               coll ? "; the last " : "", coll ? coll->what : "");
        note_where(w, device, "returned from fn (%s) after %u collective(s), of call #%" PRIu64,
                   fn->status == SPMD_OK ? "ok" : spmd_status_name((spmd_status)fn->status),
                   coll ? coll->seq : 0, latest);
    }
}

static void show_file(const trace_run *run, const trace_file *t, where_list *w)
{
    char buf[256];
    printf("process %d of %d (pid %d on %s, devices %d..%d): %s\n", t->h.process,
           t->h.num_processes, t->h.pid, t->h.host, t->h.first_local_device,
           t->h.first_local_device + t->h.num_local_devices - 1, state_text(t, buf, sizeof buf));
    /* the last call that did something (spmd_finalize is said apart), even when the ring went
     * round inside it and its own record is gone */
    const spmd_trace_record *call = NULL, *outer = NULL, *finalize = NULL;
    uint64_t latest = 0;
    for (size_t k = 0; k < t->count; k++) {
        const spmd_trace_record *r = &t->records[k];
        if (r->kind == SPMD_TRACE_CALL && strcmp(r->what, "spmd_finalize") == 0) {
            finalize = r;
            continue;
        }
        latest = r->call > latest ? r->call : latest;
    }
    for (size_t k = 0; k < t->count; k++) {
        const spmd_trace_record *r = &t->records[k];
        if (r->kind != SPMD_TRACE_CALL || r->call != latest || r == finalize)
            continue;
        call = r;
        if (!call->nested)
            outer = call;
    }
    if (!latest) {
        printf("  no call recorded\n");
        return;
    }
    if (outer && outer != call) {
        record_state(t, outer, buf, sizeof buf);
        printf("  call #%" PRIu64 " %s: started at %.3f s, %s\n", outer->call, outer->what,
               at(run, t, outer->start_ns), buf);
    }
    if (call) {
        record_state(t, call, buf, sizeof buf);
        printf("  %scall #%" PRIu64 " %s: started at %.3f s, %s\n", call->nested ? "  " : "",
               call->call, call->what, at(run, t, call->start_ns), buf);
    } else {
        printf("  call #%" PRIu64 ": its record was overwritten (the ring holds %u records; "
               "SPMD_TRACE_RECORDS keeps more)\n",
               latest, t->h.capacity);
    }
    /* each local device with records in that call: the records of the call, by device, read
     * once (the header's device count, up to 2^20, does not bound the work) */
    const spmd_trace_record **mine = malloc((t->count ? t->count : 1) * sizeof *mine);
    size_t n = 0;
    if (!mine)
        printf("  (out of memory: the devices are left out)\n");
    for (size_t k = 0; mine && k < t->count; k++) {
        const spmd_trace_record *r = &t->records[k];
        if (r->call == latest && (r->kind == SPMD_TRACE_FN || r->kind == SPMD_TRACE_COLLECTIVE) &&
            r->device >= t->h.first_local_device &&
            (int64_t)r->device - t->h.first_local_device < t->h.num_local_devices)
            mine[n++] = r;
    }
    if (n)
        qsort(mine, n, sizeof *mine, by_device_then_order);
    for (size_t i = 0; i < n;) {
        int device = mine[i]->device;
        const spmd_trace_record *fn = NULL, *coll = NULL, *done = NULL;
        for (; i < n && mine[i]->device == device; i++) { /* the last of each */
            if (mine[i]->kind == SPMD_TRACE_FN) {
                fn = mine[i];
            } else {
                coll = mine[i];
                if (coll->status != SPMD_TRACE_OPEN)
                    done = coll;
            }
        }
        show_device(run, t, w, latest, fn, coll, done);
    }
    free(mine);
    if (finalize && finalize->call > latest) {
        record_state(t, finalize, buf, sizeof buf);
        printf("  then call #%" PRIu64 " spmd_finalize: %s\n", finalize->call, buf);
    }
    if (t->h.last_error[0])
        printf("  last failure: %.600s\n", t->h.last_error);
    if (t->lost)
        printf("  (%" PRIu64 " older records were overwritten: the ring holds %u)\n", t->lost,
               t->h.capacity);
}

static int trace_show(const char *name)
{
    trace_run run;
    char why[512];
    int rc = load_run(name, &run, why, sizeof why);
    if (rc != 0)
        return refuse_run("trace show", rc, why);
    time_t secs = (time_t)(run.earliest_ns / 1000000000);
    struct tm tm;
    char when[64] = "";
    if (gmtime_r(&secs, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    int expected = run.files[0].h.num_processes;
    printf("trace %s: %d of %d process%s, started %s; times in seconds from then\n", name,
           run.count, expected, expected == 1 ? "" : "es", when);
    where_list w = {NULL, 0, 0};
    for (int k = 0; k < run.count; k++)
        show_file(&run, &run.files[k], &w);
    if (run.is_dir && run.count < expected)
        printf("missing: %d process%s wrote no trace here (a process that never started "
               "tracing, or another host's directory)\n",
               expected - run.count, expected - run.count == 1 ? "" : "es");
    print_summary(&w);
    free(w.items);
    free_run(&run);
    return CLI_OK;
}

/* ---- spmd trace diff ---- */

/*
 * Pairing the calls of two runs. Each process numbers its own calls, and skips those on meshes
 * without its devices, so one call's numbers differ between processes and layouts. A call is
 * named instead by what it is: which call of its stream it is in its process, a stream being the
 * calls of one description (a shard_map's names its mesh and its number on that mesh) or the
 * multihost calls. The calls of both runs then take one order, each process's own (a
 * topological order, ties to the smallest call number), and that order numbers them.
 */

/* Where a record goes in trace diff. */
typedef struct placed {
    uint64_t call; /* its call's place in the common order (1, 2, ...); 0: left out */
    int optional;  /* of a call that ended well and showed no description and no device: a
                      process outside a mesh records one, a layout without such a process none */
} placed;

/* An outer call of one process. */
typedef struct call_ref {
    const spmd_trace_record *r; /* its call record */
    const char *stream;         /* the calls it counts among: its description, or every_process */
    uint64_t hash;              /* of stream */
    int64_t occurrence;         /* which of its file's calls of that stream it is */
    size_t order;               /* which of its file's calls it is */
    int file;                   /* A's files, then B's */
    int run;                    /* 0: A, 1: B */
    int seen;                   /* a device has a record in it */
    uint32_t key;               /* what pairs: one key, one call */
} call_ref;

#define CMP(x, y) (((x) > (y)) - ((x) < (y)))

static uint64_t text_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

/* The stream of the multihost calls (described, on no mesh): every process makes each of them,
 * in one order, so the k-th is one call in every layout, whatever its description says (a
 * host-local shape). */
static const char every_process[] = "\001multihost"; /* no description reads so */

static int by_text(const call_ref *x, const call_ref *y)
{
    return x->hash != y->hash ? CMP(x->hash, y->hash) : strcmp(x->stream, y->stream);
}

static int by_file_then_order(const void *pa, const void *pb)
{
    const call_ref *x = pa, *y = pb;
    return x->file != y->file ? CMP(x->file, y->file) : CMP(x->order, y->order);
}

static int by_text_then_file(const void *pa, const void *pb)
{
    int c = by_text(pa, pb);
    return c ? c : by_file_then_order(pa, pb);
}

static int by_file_then_text(const void *pa, const void *pb)
{
    const call_ref *x = pa, *y = pb;
    int c = x->file != y->file ? CMP(x->file, y->file) : by_text(x, y);
    return c ? c : CMP(x->order, y->order);
}

static int by_text_then_occurrence(const void *pa, const void *pb)
{
    const call_ref *x = pa, *y = pb;
    int c = by_text(x, y);
    if (!c)
        c = CMP(x->occurrence, y->occurrence);
    return c ? c : by_file_then_order(x, y);
}

/* A key and the smallest call number it has, to rank it. */
typedef struct key_rank {
    uint64_t least;
    const call_ref *ref;
    uint32_t key;
} key_rank;

static int by_least_then_text(const void *pa, const void *pb)
{
    const key_rank *x = pa, *y = pb;
    if (x->least != y->least)
        return CMP(x->least, y->least);
    int c = by_text(x->ref, y->ref);
    return c ? c : CMP(x->ref->occurrence, y->ref->occurrence);
}

static void heap_push(uint32_t *heap, size_t *n, uint32_t v)
{
    size_t i = (*n)++;
    for (; i > 0 && heap[(i - 1) / 2] > v; i = (i - 1) / 2)
        heap[i] = heap[(i - 1) / 2];
    heap[i] = v;
}

static uint32_t heap_pop(uint32_t *heap, size_t *n)
{
    uint32_t top = heap[0], v = heap[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && heap[c + 1] < heap[c])
            c++;
        if (heap[c] >= v)
            break;
        heap[i] = heap[c];
        i = c;
    }
    if (*n)
        heap[i] = v;
    return top;
}

/* index[key] = the key's place (1, 2, ...) in an order that keeps every file's order of its
 * calls (refs: by file, then order; keys numbered by rank), the ready key of the lowest rank
 * first. Processes that disagree on the order (a cycle) are cut at its lowest rank. */
static int order_keys(const call_ref *refs, size_t n, uint32_t keys, uint64_t *index)
{
    uint32_t *start = calloc((size_t)keys + 1, sizeof *start);
    uint32_t *fill = malloc(((size_t)keys + 1) * sizeof *fill);
    uint32_t *to = malloc((n ? n : 1) * sizeof *to);
    uint32_t *waits = calloc(keys ? keys : 1, sizeof *waits); /* edges not yet passed */
    uint32_t *heap = malloc((keys ? keys : 1) * sizeof *heap);
    unsigned char *queued = calloc(keys ? keys : 1, 1);
    int ok = start && fill && to && waits && heap && queued;
    for (size_t i = 1; ok && i < n; i++)
        if (refs[i].file == refs[i - 1].file) {
            start[refs[i - 1].key + 1]++;
            waits[refs[i].key]++;
        }
    for (uint32_t k = 0; ok && k < keys; k++)
        start[k + 1] += start[k];
    if (ok)
        memcpy(fill, start, ((size_t)keys + 1) * sizeof *fill);
    for (size_t i = 1; ok && i < n; i++)
        if (refs[i].file == refs[i - 1].file)
            to[fill[refs[i - 1].key]++] = refs[i].key;
    size_t queue = 0;
    for (uint32_t k = 0; ok && k < keys; k++)
        if (!waits[k])
            heap_push(heap, &queue, k), queued[k] = 1;
    for (uint32_t done = 0, lowest = 0; ok && done < keys;) {
        if (!queue) { /* a cycle */
            while (queued[lowest])
                lowest++;
            heap_push(heap, &queue, lowest), queued[lowest] = 1;
        }
        uint32_t k = heap_pop(heap, &queue);
        index[k] = ++done;
        for (uint32_t e = start[k]; e < start[k + 1]; e++)
            if (--waits[to[e]] == 0 && !queued[to[e]])
                heap_push(heap, &queue, to[e]), queued[to[e]] = 1;
    }
    free(start), free(fill), free(to), free(waits), free(heap), free(queued);
    return ok ? 0 : -1;
}

/* Which of its file's calls of one description each call is. When a ring went round, its
 * file's count starts late: then the calls count from an anchor, a description every file holds
 * once, on both sides of it (0, -1, ... before it), so counts agree in every file. */
static int count_occurrences(call_ref *refs, size_t n, int files, int lossy, int *anchored)
{
    size_t *anchor = calloc((size_t)files, sizeof *anchor); /* its order in each file */
    if (!anchor)
        return -1;
    *anchored = 0;
    qsort(refs, n, sizeof *refs, by_text_then_file);
    for (size_t g = 0, h; lossy && g < n; g = h) {
        int once = 1;
        for (h = g; h < n && by_text(&refs[g], &refs[h]) == 0; h++)
            once = once && h - g < (size_t)files && refs[h].file == (int)(h - g);
        if (!once || h - g != (size_t)files || (*anchored && refs[g].order >= anchor[0]))
            continue;
        for (int f = 0; f < files; f++)
            anchor[f] = refs[g + (size_t)f].order;
        *anchored = 1;
    }
    qsort(refs, n, sizeof *refs, by_file_then_text);
    for (size_t g = 0, h; g < n; g = h) {
        int64_t before = 0;
        for (h = g; h < n && refs[h].file == refs[g].file && by_text(&refs[g], &refs[h]) == 0; h++)
            before += *anchored && refs[h].order < anchor[refs[h].file];
        for (size_t i = g; i < h; i++)
            refs[i].occurrence = (int64_t)(i - g) + 1 - before;
    }
    free(anchor);
    return 0;
}

/* Calls one run alone has between the same two calls both have pair in order: one call whose
 * description changed (another shape, another mesh) is compared as such, not as two calls each
 * run lacks. Calls that show nothing (no description, no device) stay apart. owner[run * keys +
 * key] < 0: the run lacks the key. */
static int pair_changed(const call_ref *refs, size_t n, uint32_t keys, const int *owner,
                        uint64_t *index)
{
    uint32_t *at = malloc((keys ? keys : 1) * sizeof *at); /* the key at each place */
    uint32_t *only_a = malloc((keys ? keys : 1) * sizeof *only_a);
    uint32_t *only_b = malloc((keys ? keys : 1) * sizeof *only_b);
    unsigned char *shows = calloc(keys ? keys : 1, 1);
    int ok = at && only_a && only_b && shows;
    for (size_t i = 0; ok && i < n; i++)
        shows[refs[i].key] |= refs[i].seen || refs[i].r->fingerprint || refs[i].r->mesh_call;
    for (uint32_t k = 0; ok && k < keys; k++)
        at[index[k] - 1] = k;
    size_t na = 0, nb = 0;
    for (uint32_t p = 0; ok && p <= keys; p++) {
        uint32_t k = p < keys ? at[p] : 0;
        int in_a = p < keys && owner[k] >= 0, in_b = p < keys && owner[(size_t)keys + k] >= 0;
        if (p < keys && in_a != in_b) {
            if (shows[k] && in_a)
                only_a[na++] = k;
            else if (shows[k])
                only_b[nb++] = k;
            continue;
        }
        for (size_t i = 0; i < na && i < nb; i++)
            index[only_b[i]] = index[only_a[i]];
        na = nb = 0;
    }
    free(at), free(only_a), free(only_b), free(shows);
    return ok ? 0 : -1;
}

/* Places every record of both runs in the common order of calls (trace_file.placed) and says
 * from which place every file holds its calls whole (*from: the rings went round). */
static int align_runs(trace_run *const runs[2], uint64_t *from, int *unanchored, char *why,
                      size_t size)
{
    size_t n = 0;
    int files = runs[0]->count + runs[1]->count, lossy = 0;
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < runs[s]->count; k++) {
            trace_file *t = &runs[s]->files[k];
            for (size_t i = 0; i < t->count; i++)
                n += t->records[i].kind == SPMD_TRACE_CALL && !t->records[i].nested;
            lossy |= t->lost > 0;
            if (!(t->placed = calloc(t->count ? t->count : 1, sizeof *t->placed)))
                return snprintf(why, size, "out of memory"), -1;
        }
    call_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    key_rank *ranks = malloc((n ? n : 1) * sizeof *ranks);
    uint64_t *index = malloc((n ? n : 1) * sizeof *index);
    int *owner = malloc(2 * (n ? n : 1) * sizeof *owner);
    int anchored = 0, rc = refs && ranks && index && owner ? 0 : -1;
    /* each record's call: the last outer call before it, if the record is of it (else the
     * ring overwrote its call's record); placed.call holds the call's ref + 1 for now */
    size_t m = 0;
    for (int s = 0, file = 0; rc == 0 && s < 2; s++)
        for (int k = 0; k < runs[s]->count; k++, file++) {
            trace_file *t = &runs[s]->files[k];
            size_t first = m, order = 0;
            for (size_t i = 0; i < t->count; i++) {
                const spmd_trace_record *r = &t->records[i];
                if (r->kind == SPMD_TRACE_CALL && !r->nested) {
                    const char *stream = r->fingerprint && !r->mesh_call ? every_process : r->what;
                    refs[m++] = (call_ref){r, stream, text_hash(stream), 0, order++, file, s, 0, 0};
                }
                if (m == first || refs[m - 1].r->call != r->call)
                    continue;
                t->placed[i].call = m;
                refs[m - 1].seen |= r->kind != SPMD_TRACE_CALL;
            }
            if (t->lost && t->count && m == first) {
                snprintf(why, size,
                         "%s holds no whole call (its ring of %u records went round inside "
                         "one); trace with more SPMD_TRACE_RECORDS",
                         t->path, t->h.capacity);
                rc = -1;
            }
        }
    if (rc == 0)
        rc = count_occurrences(refs, n, files, lossy, &anchored);
    /* the keys, ranked by the smallest call number that has them */
    uint32_t keys = 0;
    if (rc == 0)
        qsort(refs, n, sizeof *refs, by_text_then_occurrence);
    for (size_t g = 0, h; rc == 0 && g < n; g = h, keys++) {
        ranks[keys] = (key_rank){refs[g].r->call, &refs[g], keys};
        for (h = g;
             h < n && by_text(&refs[g], &refs[h]) == 0 && refs[h].occurrence == refs[g].occurrence;
             h++) {
            refs[h].key = keys;
            ranks[keys].least =
                refs[h].r->call < ranks[keys].least ? refs[h].r->call : ranks[keys].least;
        }
    }
    if (rc == 0) {
        qsort(ranks, keys, sizeof *ranks, by_least_then_text);
        for (uint32_t k = 0; k < keys; k++) /* index: the rank of each key, for now */
            index[ranks[k].key] = k;
        for (size_t i = 0; i < n; i++)
            refs[i].key = (uint32_t)index[refs[i].key];
        qsort(refs, n, sizeof *refs, by_file_then_order); /* as made */
        rc = order_keys(refs, n, keys, index);
    }
    for (size_t i = 0; rc == 0 && i < 2 * (size_t)keys; i++)
        owner[i] = -1;
    for (size_t i = 0; rc == 0 && i < n; i++) { /* each run's call records: its first file's */
        int *o = &owner[(size_t)refs[i].run * keys + refs[i].key];
        *o = *o < 0 ? refs[i].file : *o;
    }
    if (rc == 0)
        rc = pair_changed(refs, n, keys, owner, index);
    *from = 0;
    for (int s = 0, file = 0; rc == 0 && s < 2; s++)
        for (int k = 0; k < runs[s]->count; k++, file++) {
            trace_file *t = &runs[s]->files[k];
            int head = 1;
            for (size_t i = 0; i < t->count; i++) {
                placed *p = &t->placed[i];
                if (!p->call)
                    continue;
                const call_ref *c = &refs[p->call - 1];
                const spmd_trace_record *r = &t->records[i];
                int mine = owner[(size_t)s * keys + c->key] == file;
                /* calls nested without a description that ended well (pmap's conversions,
                 * made in some layouts only) are left out: nested calls pair by their order */
                int quiet =
                    r->nested && r->fingerprint == 0 && r->mesh_call == 0 && r->status == SPMD_OK;
                p->call = r->kind != SPMD_TRACE_CALL || (mine && !quiet) ? index[c->key] : 0;
                p->optional = !c->seen && c->r->fingerprint == 0 && c->r->mesh_call == 0 &&
                              c->r->status == SPMD_OK;
                if (t->lost && head) /* its first whole call */
                    *from = index[c->key] > *from ? index[c->key] : *from;
                head = 0;
            }
        }
    *unanchored = lossy && !anchored;
    if (rc != 0 && !why[0])
        snprintf(why, size, "out of memory");
    free(refs), free(ranks), free(index), free(owner);
    return rc;
}

/* One thing a trace says, in the order a program does things. */
typedef struct obs {
    uint64_t call; /* the call's place in the common order (placed.call) */
    uint32_t seq;  /* 0: the call and fn's inputs; a collective's number; UINT32_MAX: the end */
    int phase;     /* 0: what went in; 1: what came out */
    int device;    /* -1: the call itself */
    int nested;    /* a call inside another (pmap's shard_map) */
    int process;   /* where it was recorded */
    int optional;  /* placed.optional */
    const spmd_trace_record *r;
} obs;

static int obs_key_order(const obs *a, const obs *b)
{
    if (a->call != b->call)
        return a->call < b->call ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    if (a->phase != b->phase)
        return a->phase - b->phase;
    if (a->device != b->device)
        return a->device - b->device;
    return (int)a->r->kind - (int)b->r->kind;
}

static int obs_order(const void *pa, const void *pb)
{
    const obs *a = pa, *b = pb;
    int c = obs_key_order(a, b);
    if (c || a->nested != b->nested)
        return c ? c : a->nested - b->nested;
    return (a->r > b->r) - (a->r < b->r); /* a file's records are in the order they were made */
}

/* Every observation of a run (align_runs placed its records): a device is its global id, or
 * (ordinals) its local ordinal. A call's records are those of the run's first process that made
 * it; several records of one key (the calls inside one pmap) are told apart by their order. */
static obs *observations(const trace_run *run, int ordinals, size_t *count)
{
    size_t cap = 0;
    for (int k = 0; k < run->count; k++)
        cap += 2 * run->files[k].count;
    obs *o = malloc((cap ? cap : 1) * sizeof *o);
    if (!o)
        return NULL;
    size_t n = 0;
    for (int k = 0; k < run->count; k++) {
        const trace_file *t = &run->files[k];
        for (size_t i = 0; i < t->count; i++) {
            const spmd_trace_record *r = &t->records[i];
            if (!t->placed[i].call)
                continue;
            int device = r->device < 0 ? -1
                         : ordinals    ? r->device - t->h.first_local_device
                                       : r->device;
            obs in = {t->placed[i].call, 0, 0, device, 0, t->h.process, t->placed[i].optional, r};
            obs out = in;
            out.phase = 1;
            if (r->kind == SPMD_TRACE_CALL) {
                out.seq = UINT32_MAX;
            } else if (r->kind == SPMD_TRACE_FN) {
                out.seq = UINT32_MAX;
                out.phase = 0;
            } else {
                in.seq = out.seq = r->seq;
            }
            o[n++] = in;
            o[n++] = out;
        }
    }
    qsort(o, n, sizeof *o, obs_order);
    for (size_t i = 1; i < n; i++) /* the k-th record of a key: nested = k */
        if (obs_key_order(&o[i - 1], &o[i]) == 0)
            o[i].nested = o[i - 1].nested + 1;
    *count = n;
    return o;
}

typedef struct difference {
    const char *what; /* what differs */
    char a[200], b[200];
} difference;

static void hex_or_none(char *buf, size_t size, uint64_t digest)
{
    if (digest)
        snprintf(buf, size, "%016" PRIx64, digest);
    else
        snprintf(buf, size, "(none taken)");
}

/* 1 when the two observations of one key differ (and how, in *d). */
static int differs(const obs *x, const obs *y, difference *d)
{
    const spmd_trace_record *a = x->r, *b = y->r;
    int is_end = x->phase == 1 || x->seq == UINT32_MAX;
    if (!is_end || a->kind == SPMD_TRACE_FN) {
        if (x->seq != UINT32_MAX && strcmp(a->what, b->what) != 0) {
            d->what = "what was called";
            snprintf(d->a, sizeof d->a, "%s", a->what);
            snprintf(d->b, sizeof d->b, "%s", b->what);
            return 1;
        }
        if (x->seq != UINT32_MAX && a->fingerprint != b->fingerprint) {
            d->what = "the fingerprint (fn, specs, shapes, dtypes, axes or groups)";
            snprintf(d->a, sizeof d->a, "%016" PRIx64, a->fingerprint);
            snprintf(d->b, sizeof d->b, "%016" PRIx64, b->fingerprint);
            return 1;
        }
        if (!is_end && a->kind != SPMD_TRACE_CALL && a->digest_in && b->digest_in &&
            a->digest_in != b->digest_in) {
            d->what = "the input data (digests)";
            hex_or_none(d->a, sizeof d->a, a->digest_in);
            hex_or_none(d->b, sizeof d->b, b->digest_in);
            return 1;
        }
        if (!is_end)
            return 0;
    }
    if (a->status != b->status) {
        d->what = "the outcome";
        snprintf(d->a, sizeof d->a, "%s",
                 a->status == SPMD_TRACE_OPEN ? "not ended"
                                              : spmd_status_name((spmd_status)a->status));
        snprintf(d->b, sizeof d->b, "%s",
                 b->status == SPMD_TRACE_OPEN ? "not ended"
                                              : spmd_status_name((spmd_status)b->status));
        return 1;
    }
    if (a->kind != SPMD_TRACE_CALL && a->digest_out && b->digest_out &&
        a->digest_out != b->digest_out) {
        d->what = "the output data (digests)";
        hex_or_none(d->a, sizeof d->a, a->digest_out);
        hex_or_none(d->b, sizeof d->b, b->digest_out);
        return 1;
    }
    return 0;
}

/* "call #3, collective #2 on device 5" */
static void place_text(const obs *o, int ordinals, char *buf, size_t size)
{
    const spmd_trace_record *r = o->r;
    const char *dev = ordinals ? "local device" : "device";
    if (r->kind == SPMD_TRACE_CALL)
        snprintf(buf, size, "call #%" PRIu64 "%s (%s)", r->call, r->nested ? " (nested)" : "",
                 o->seq == UINT32_MAX ? "its outcome" : "what it is");
    else if (r->kind == SPMD_TRACE_FN)
        snprintf(buf, size, "call #%" PRIu64 ", fn on %s %d (%s)", r->call, dev, o->device,
                 o->seq == UINT32_MAX ? "its outputs and outcome" : "its inputs");
    else
        snprintf(buf, size, "call #%" PRIu64 ", collective #%u on %s %d: %s", r->call, r->seq, dev,
                 o->device, r->what);
}

/* The call record of `call` in a run's observations, for context. */
static const spmd_trace_record *call_of(const obs *o, size_t n, uint64_t call)
{
    for (size_t i = 0; i < n; i++)
        if (o[i].call == call && o[i].device == -1 && o[i].seq == 0)
            return o[i].r;
    return NULL;
}

static void layout_text(const trace_run *run, char *buf, size_t size)
{
    const spmd_trace_header *h = &run->files[0].h;
    snprintf(buf, size, "%d process%s x %d device%s", h->num_processes,
             h->num_processes == 1 ? "" : "es", h->num_local_devices,
             h->num_local_devices == 1 ? "" : "s");
}

/* "comparing from call #N of process P in A, <what>": the first call compared, as A (else B)
 * numbers it. */
static void print_from(const obs *oa, size_t na, const obs *ob, size_t nb, uint64_t from)
{
    for (int s = 0; s < 2; s++) {
        const obs *o = s ? ob : oa;
        size_t n = s ? nb : na, i = 0;
        while (i < n && o[i].call < from)
            i++;
        if (i == n)
            continue;
        const spmd_trace_record *call = call_of(o, n, o[i].call);
        printf("(the rings went round: comparing from call #%" PRIu64 " of process %d in %s%s%s)\n",
               o[i].r->call, o[i].process, s ? "B" : "A", call ? ", " : "", call ? call->what : "");
        return;
    }
}

static int trace_diff(const char *name_a, const char *name_b, int show_more)
{
    trace_run ra, rb;
    char why[512] = "";
    int rc = load_run(name_a, &ra, why, sizeof why);
    if (rc != 0)
        return refuse_run("trace diff", rc, why);
    if ((rc = load_run(name_b, &rb, why, sizeof why)) != 0) {
        free_run(&ra);
        return refuse_run("trace diff", rc, why);
    }
    /* two single files: two processes, whose devices pair by local ordinal */
    int ordinals = !ra.is_dir && !rb.is_dir;
    size_t na = 0, nb = 0;
    uint64_t from = 0;
    int unanchored = 0;
    trace_run *const runs[2] = {&ra, &rb};
    obs *oa = NULL, *ob = NULL;
    if (align_runs(runs, &from, &unanchored, why, sizeof why) == 0) {
        oa = observations(&ra, ordinals, &na);
        ob = observations(&rb, ordinals, &nb);
        if (!oa || !ob)
            snprintf(why, sizeof why, "out of memory");
    }
    if (!oa || !ob) {
        free(oa);
        free(ob);
        free_run(&ra);
        free_run(&rb);
        return cli_failure("trace diff", "%s", why);
    }
    char la[64], lb[64];
    layout_text(&ra, la, sizeof la);
    layout_text(&rb, lb, sizeof lb);
    printf("A: %s (%s)\nB: %s (%s)\n", name_a, la, name_b, lb);
    if (from)
        print_from(oa, na, ob, nb, from);
    if (unanchored)
        printf("(no call is in every trace once: calls of one description pair by their order "
               "from each ring's oldest)\n");
    int digests = ra.files[0].h.digests && rb.files[0].h.digests;
    size_t i = 0, j = 0, compared = 0, found = 0;
    while (i < na || j < nb) {
        if (i < na && oa[i].call < from) {
            i++;
            continue;
        }
        if (j < nb && ob[j].call < from) {
            j++;
            continue;
        }
        int c = i == na ? 1 : j == nb ? -1 : obs_key_order(&oa[i], &ob[j]);
        if (c == 0)
            c = oa[i].nested - ob[j].nested;
        difference d = {NULL, "", ""};
        const obs *at_obs = c <= 0 ? &oa[i] : &ob[j];
        if (c == 0) {
            compared++;
            if (!differs(&oa[i], &ob[j], &d)) {
                i++, j++;
                continue;
            }
        } else if (at_obs->optional) { /* a call that did nothing to see, in one run only */
            c < 0 ? i++ : j++;
            continue;
        }
        char place[300];
        place_text(at_obs, ordinals, place, sizeof place);
        if (found == 0) {
            printf("first difference: %s\n", place);
            const spmd_trace_record *call =
                call_of(c <= 0 ? oa : ob, c <= 0 ? na : nb, at_obs->call);
            if (call && at_obs->device >= 0)
                printf("  in call #%" PRIu64 ": %s\n", at_obs->r->call, call->what);
            else if (c != 0)
                printf("  call #%" PRIu64 ": %s\n", at_obs->r->call, at_obs->r->what);
            if (c == 0)
                printf("  %s differs:\n    A: %s (process %d, call #%" PRIu64 ")\n    B: %s "
                       "(process %d, call #%" PRIu64 ")\n",
                       d.what, d.a, oa[i].process, oa[i].r->call, d.b, ob[j].process,
                       ob[j].r->call);
            else
                printf("  only %s has it (process %d); the other trace %s\n", c < 0 ? "A" : "B",
                       at_obs->process,
                       at_obs->device >= 0 && at_obs->r->kind == SPMD_TRACE_COLLECTIVE
                           ? "issued fewer or other collectives here"
                           : "has no such record");
        } else if ((int)found <= show_more) {
            if (c == 0 && ob[j].r->call != oa[i].r->call)
                printf("then: %s: %s (B: process %d, call #%" PRIu64 ")\n", place, d.what,
                       ob[j].process, ob[j].r->call);
            else
                printf("then: %s: %s\n", place,
                       c == 0  ? d.what
                       : c < 0 ? "only in A"
                               : "only in B");
        }
        found++;
        if (c <= 0)
            i++;
        if (c >= 0)
            j++;
    }
    if (found > (size_t)show_more + 1)
        printf("... %zu differences in all\n", found);
    if (!found)
        printf("the traces agree: %zu records compared%s\n", compared,
               digests ? ", data digests included" : "");
    if (!digests)
        printf("(no data digests in %s: trace with SPMD_TRACE_DIGESTS=1 to compare the data "
               "too)\n",
               ra.files[0].h.digests   ? "B"
               : rb.files[0].h.digests ? "A"
                                       : "either");
    free(oa);
    free(ob);
    free_run(&ra);
    free_run(&rb);
    return found ? CLI_FAILED : CLI_OK;
}

/* ---- the command ---- */

void spmd_cli_trace_usage(FILE *out)
{
    fputs("usage: spmd trace show DIR\n"
          "       spmd trace diff [--more N] A B\n"
          "\n"
          "Reads the collective traces that SPMD_TRACE=DIR (or spmd_trace_start) writes: one file\n"
          "per process, DIR/trace.<process>.spmd, a ring of its last calls and collectives.\n"
          "\n"
          "  show DIR   where each process was: its last call, each device's collective or fn,\n"
          "             how long it waited, whether it ended, how the process ended. For a run\n"
          "             that failed, hung or was killed (SIGKILL too: the file is written as the\n"
          "             program goes).\n"
          "  diff A B   the first call and collective where two traces differ: what was called,\n"
          "             its fingerprint, its outcome, or its data (SPMD_TRACE_DIGESTS=1). A and B\n"
          "             are two directories (two layouts or two versions of a program: devices\n"
          "             pair by global id) or two files (two processes: devices pair by local\n"
          "             ordinal). Calls pair by what they are (a shard_map's mesh and its number\n"
          "             on it), not by each process's numbers: a process may skip the calls on\n"
          "             meshes without its devices.\n"
          "\n"
          "options:\n"
          "  --more N   also list the next N differences (default 5)\n"
          "  -h, --help show this help\n"
          "\n"
          "Exit status: 0 show printed / the traces agree, 1 they differ or a trace cannot be\n"
          "read, 2 bad usage (a trace that is neither a directory nor a regular file too).\n",
          out);
}

int spmd_cli_trace(int argc, char **argv)
{
    static const struct option options[] = {{"more", required_argument, NULL, 'm'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    long more = 5;
    optind = 0;
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "m:h", options, NULL)) != -1) {
        if (opt == 'h') {
            spmd_cli_trace_usage(stdout);
            return CLI_OK;
        }
        if (opt != 'm')
            return cli_usage_error("trace", "unknown option or missing value: %s",
                                   argv[optind - 1]);
        char *end = NULL;
        errno = 0;
        more = strtol(optarg, &end, 10);
        if (errno || end == optarg || *end || more < 0 || more > 1000000)
            return cli_usage_error("trace", "--more takes a count 0..1000000, not '%s'", optarg);
    }
    int left = argc - optind;
    if (left < 1)
        return cli_usage_error("trace", "say 'show DIR' or 'diff A B'");
    const char *verb = argv[optind];
    if (strcmp(verb, "show") == 0) {
        if (left != 2)
            return cli_usage_error("trace", "show takes one directory (or file), not %d", left - 1);
        return trace_show(argv[optind + 1]);
    }
    if (strcmp(verb, "diff") == 0) {
        if (left != 3)
            return cli_usage_error("trace", "diff takes two traces (directories or files), not %d",
                                   left - 1);
        return trace_diff(argv[optind + 1], argv[optind + 2], (int)more);
    }
    return cli_usage_error("trace", "unknown verb '%s'; use 'show DIR' or 'diff A B'", verb);
}
