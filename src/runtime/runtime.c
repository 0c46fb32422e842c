/* spmd_init / spmd_finalize and the global device list. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spmd/config.h>
#include <spmd/version.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/notes.h"
#include "runtime/base/env.h"
#include "runtime/devices/cores.h"
#include "runtime/devices/event.h"
#include "runtime/base/log.h"
#include "runtime/devices/memory_pool.h"
#include "runtime/comm/process.h"
#include "runtime/runtime_impl.h"
#include "runtime/calls/trace.h"
#include "runtime/devices/worker.h"
#include "runtime/devices/backend/cuda.h" /* SPMD__CUDA_KERNEL_MIN_BYTES */

#define MAX_DEVICES_PER_GPU 64
/* Long enough for a slow step on another process; short enough to report a mistake. */
#define DEFAULT_COLLECTIVE_TIMEOUT_S 300.0
/* How long spmd_init waits for the other processes: jax.distributed.initialize's default
 * initialization_timeout. Apart from the collective timeout, so that a short one (to catch a
 * mismatched collective quickly) does not fail a job whose processes start unevenly. */
#define DEFAULT_INIT_TIMEOUT_S 300.0
#define DEFAULT_BUFFER_POOL_MB 1024

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_count;
static spmd__runtime rt; /* built by spmd_init, then published (session.c) */
static unsigned last_session;
/* spmd__calls_failures at the session's start: after any failure since, spmd_finalize leaves
 * the private communicator unfreed (spmd__proc_finalize) */
static unsigned long failures_at_init;

/* What each process tells the others at start-up (a failing process's message travels only
 * when one failed, in a second exchange). */
typedef struct process_record {
    int32_t status;
    int32_t platform;
    int32_t num_local;
    int32_t devices_per_gpu;
    uint64_t host;  /* processes on one machine share it */
    uint64_t nonce; /* process 0's names this start-up's shared memory (host_rings.h) */
} process_record;

/* The lowest failing process's message. */
typedef struct failure_record {
    int32_t process; /* INT32_MAX: none */
    char message[500];
} failure_record;

int spmd_version_number(void) { return SPMD_VERSION_NUMBER; }
const char *spmd_version_string(void) { return SPMD_VERSION_STRING; }

unsigned int spmd_build_features(void)
{
    unsigned int f = 0;
#ifdef SPMD_HAVE_MPI
    f |= SPMD_FEATURE_MPI;
#endif
#ifdef SPMD_HAVE_CUDA
    f |= SPMD_FEATURE_CUDA;
#endif
#ifdef SPMD_HAVE_NCCL
    f |= SPMD_FEATURE_NCCL;
#endif
    return f;
}

const char *spmd_platform_name(spmd_platform p)
{
    switch (p) {
    case SPMD_PLATFORM_CPU:
        return "cpu";
    case SPMD_PLATFORM_CUDA:
        return "cuda";
    }
    return "invalid";
}

spmd_status spmd_init_options_init(spmd_init_options *opts, unsigned int version)
{
    SPMD_REQUIRE_NOT_NULL(opts, "spmd_init_options_init");
    SPMD_REQUIRE(version == SPMD_INIT_OPTIONS_VERSION, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_init_options_init: version %u is not supported by this libspmd (%s); use "
                 "SPMD_INIT_OPTIONS_VERSION (%d)",
                 version, SPMD_VERSION_STRING, SPMD_INIT_OPTIONS_VERSION);
    const spmd_init_options defaults = SPMD_INIT_OPTIONS_INIT;
    *opts = defaults;
    return SPMD_OK;
}

static spmd_status check_options(const spmd_init_options *o)
{
    SPMD_REQUIRE(o->version == SPMD_INIT_OPTIONS_VERSION, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_init: options.version is %u; initialize the options with "
                 "SPMD_INIT_OPTIONS_INIT or spmd_init_options_init()",
                 o->version);
    SPMD_REQUIRE(o->num_cpu_devices >= 0 && o->num_cpu_devices <= SPMD_MAX_CPU_DEVICES,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_init: options.num_cpu_devices is %d; use 1..%d, or 0 to read "
                 "SPMD_NUM_CPU_DEVICES",
                 o->num_cpu_devices, SPMD_MAX_CPU_DEVICES);
    SPMD_REQUIRE(o->platform == SPMD_AUTO || o->platform == SPMD_PLATFORM_CPU ||
                     o->platform == SPMD_PLATFORM_CUDA,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_init: options.platform is %d; use SPMD_PLATFORM_CPU, SPMD_PLATFORM_CUDA or "
                 "SPMD_AUTO",
                 o->platform);
    SPMD_REQUIRE(o->use_mpi == SPMD_AUTO || o->use_mpi == 0 || o->use_mpi == 1,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_init: options.use_mpi is %d; use 0, 1 or SPMD_AUTO", o->use_mpi);
    return SPMD_OK;
}

/* The variable a setting comes from: SPMD_*, else the JAX variable a porter may have set
 * (noted in the log); NULL when neither is set. */
static const char *setting_variable(const char *spmd_name, const char *jax_name)
{
    const char *v = getenv(spmd_name);
    if (v && *v)
        return spmd_name;
    v = getenv(jax_name);
    if (!v || !*v)
        return NULL;
    spmd__log(SPMD__LOG_INFO, "using %s=%s, JAX's variable (%s, when set, wins)", jax_name, v,
              spmd_name);
    return jax_name;
}

/* SPMD_PLATFORM, else JAX_PLATFORMS: a comma-separated list, as JAX_PLATFORMS is. As in JAX,
 * devices come from the first entry and every listed platform must be usable; *cuda_listed
 * says whether cuda is among them. */
static spmd_status platform_from_env(int *platform, int *cuda_listed)
{
    const char *var = setting_variable("SPMD_PLATFORM", "JAX_PLATFORMS");
    if (!var)
        return SPMD_OK;
    const char *env = getenv(var);
    int first = -1;
    for (const char *p = env;;) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, ",");
        size_t word = len;
        while (word > 0 && p[word - 1] == ' ')
            word--;
        int this = -1;
        if (word == 3 && strncmp(p, "cpu", 3) == 0)
            this = SPMD_PLATFORM_CPU;
        else if ((word == 4 && strncmp(p, "cuda", 4) == 0) ||
                 (word == 3 && strncmp(p, "gpu", 3) == 0))
            this = SPMD_PLATFORM_CUDA;
        SPMD_REQUIRE(this >= 0, SPMD_ERR_INVALID_ARGUMENT,
                     "environment variable %s=\"%s\": \"%.*s\" is not a platform; use cpu or "
                     "cuda (gpu means cuda), or a comma-separated list of them whose first "
                     "gives the devices, or unset it to pick cuda when a GPU is usable",
                     var, env, (int)word, p);
        if (first < 0)
            first = this;
        if (this == SPMD_PLATFORM_CUDA)
            *cuda_listed = 1;
        if (p[len] != ',')
            break;
        p += len + 1;
    }
    *platform = first;
    return SPMD_OK;
}

/* Decides this process's platform and device count (no communication). */
static spmd_status resolve_local_devices(const spmd_init_options *o, process_record *rec)
{
    /* first: the start-up exchange waits this long even when something below fails (a bad
     * value leaves the default) */
    double init_s = DEFAULT_INIT_TIMEOUT_S;
    spmd_status init_st = spmd__env_seconds("SPMD_INIT_TIMEOUT", &init_s);
    rt.init_timeout_ns = (int64_t)(init_s * 1e9);
    /* the start-up exchanges take their step timing and grace period from it too */
    spmd__comm_set_timeout(rt.init_timeout_ns);
    SPMD_CHECK(init_st);
    double timeout_s = DEFAULT_COLLECTIVE_TIMEOUT_S;
    SPMD_CHECK(spmd__env_seconds("SPMD_COLLECTIVE_TIMEOUT", &timeout_s));
    rt.collective_timeout_ns = (int64_t)(timeout_s * 1e9);
    int platform = o->platform, cuda_listed = platform == SPMD_PLATFORM_CUDA;
    if (platform == SPMD_AUTO)
        SPMD_CHECK(platform_from_env(&platform, &cuda_listed));
    long cpu_devices = o->num_cpu_devices;
    int from_env = 0;
    if (cpu_devices == 0) {
        cpu_devices = 1;
        const char *var = setting_variable("SPMD_NUM_CPU_DEVICES", "JAX_NUM_CPU_DEVICES");
        if (var)
            SPMD_CHECK(spmd__env_int(var, 1, SPMD_MAX_CPU_DEVICES, &cpu_devices, &from_env));
    }
    long per_gpu = 1;
    SPMD_CHECK(
        spmd__env_int("SPMD_CUDA_DEVICES_PER_GPU", 1, MAX_DEVICES_PER_GPU, &per_gpu, &from_env));
    int log_level = 0;
    SPMD_CHECK(spmd__log_level_from_env(&log_level));
    long pool_mb = DEFAULT_BUFFER_POOL_MB;
    SPMD_CHECK(spmd__env_int("SPMD_BUFFER_POOL_MB", 0, 1L << 30, &pool_mb, &from_env));
    rt.buffer_pool_bytes = (size_t)pool_mb << 20;
    long blas_threads = 1;
    SPMD_CHECK(spmd__env_int("SPMD_BLAS_THREADS", 1, 1024, &blas_threads, &from_env));
    rt.blas_threads = (int)blas_threads;
    long huge_pages = 1;
    SPMD_CHECK(spmd__env_int("SPMD_HUGE_PAGES", 0, 1, &huge_pages, &from_env));
    rt.huge_pages = (int)huge_pages;
    long strict = 0;
    SPMD_CHECK(spmd__env_int("SPMD_STRICT_REPLICATION", 0, 1, &strict, &from_env));
    rt.strict_replication = (int)strict;
    long rings = 1;
    SPMD_CHECK(spmd__env_int("SPMD_SHM", 0, 1, &rings, &from_env));
    long direct = 1;
    SPMD_CHECK(spmd__env_int("SPMD_CMA", 0, 1, &direct, &from_env));
    rt.host_rings = (int)rings | (rings && direct ? SPMD__RINGS_DIRECT : 0);
    long kernel_min = SPMD__CUDA_KERNEL_MIN_BYTES;
    SPMD_CHECK(spmd__env_int("SPMD_CUDA_KERNEL_MIN_BYTES", 0, 1L << 40, &kernel_min, &from_env));
    rt.cuda_kernel_min_bytes = (size_t)kernel_min;
    int gpus = 0;
#ifdef SPMD_HAVE_CUDA
    if (platform == SPMD_AUTO) {
        platform =
            spmd__backend_cuda.probe(&gpus) == SPMD_OK ? SPMD_PLATFORM_CUDA : SPMD_PLATFORM_CPU;
        spmd_clear_error();
    } else if (cuda_listed) { /* listed after cpu too: it must be usable, as in JAX */
        SPMD_CHECK(spmd__backend_cuda.probe(&gpus));
    }
#else
    SPMD_REQUIRE(!cuda_listed, SPMD_ERR_UNSUPPORTED,
                 "the cuda platform was requested but libspmd was built without CUDA; "
                 "reconfigure with -DSPMD_ENABLE_CUDA=ON, or use SPMD_PLATFORM=cpu");
    platform = SPMD_PLATFORM_CPU;
#endif
    rec->platform = platform;
    rec->devices_per_gpu = (int32_t)per_gpu;
    rec->num_local =
        platform == SPMD_PLATFORM_CUDA ? (int32_t)(gpus * per_gpu) : (int32_t)cpu_devices;
    return SPMD_OK;
}

static const spmd__backend *backend_for(int platform)
{
#ifdef SPMD_HAVE_CUDA
    if (platform == SPMD_PLATFORM_CUDA)
        return &spmd__backend_cuda;
#endif
    (void)platform;
    return &spmd__backend_cpu;
}

/* Every process learns every other's outcome, so a failure anywhere fails everywhere. */
static spmd_status agree_on_devices(const process_record *all, int count, int me,
                                    const failure_record *failure)
{
    for (int p = 0; p < count; p++) {
        if (all[p].status == SPMD_OK)
            continue;
        if (p == me)
            return (spmd_status)all[p].status; /* our own message is already recorded */
        return SPMD_ERROR(SPMD_ERR_DISTRIBUTED, "process %d failed to initialize libspmd: %s", p,
                          failure->process == p ? failure->message : "(no message)");
    }
    for (int p = 1; p < count; p++)
        SPMD_REQUIRE(all[p].platform == all[0].platform, SPMD_ERR_DISTRIBUTED,
                     "processes disagree on the platform: process 0 uses %s, process %d uses %s; "
                     "set SPMD_PLATFORM to the same value on every process",
                     spmd_platform_name((spmd_platform)all[0].platform), p,
                     spmd_platform_name((spmd_platform)all[p].platform));
    return SPMD_OK;
}

static void describe_start_up(const void *arg, char *text, size_t size)
{
    (void)arg;
    snprintf(text, size, "spmd_init of libspmd %s", SPMD_VERSION_STRING);
}

static void keep_lowest_failure(void *mine, const void *theirs, size_t bytes, void *arg)
{
    (void)arg;
    failure_record *m = mine;
    const failure_record *t = theirs;
    if (bytes == sizeof *t && t->process < m->process)
        *m = *t;
}

/*
 * The start-up records of every process, over a view of the chosen communicator (no collective
 * MPI call, so a missing process is named after the timeout, not waited for), checked against
 * the library version; then, only when a process failed, the lowest one's message.
 */
static spmd_status exchange_records(const process_record *mine, process_record *all,
                                    failure_record *failure)
{
    int n = rt.process_count;
    int *processes = malloc((size_t)n * sizeof *processes);
    size_t *counts = malloc((size_t)n * sizeof *counts);
    spmd__comm *view = NULL;
    spmd_status st = processes && counts ? SPMD_OK
                                         : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY,
                                                      "out of memory for %d processes' records", n);
    for (int p = 0; st == SPMD_OK && p < n; p++) {
        processes[p] = p;
        counts[p] = sizeof *mine;
    }
    if (st == SPMD_OK)
        st = spmd__comm_view(processes, n, &view);
    char version[64];
    snprintf(version, sizeof version, "libspmd start-up %s", SPMD_VERSION_STRING);
    spmd__agreement a = {spmd__fnv1a(SPMD__FNV1A_SEED, version, strlen(version)), describe_start_up,
                         NULL, NULL};
    int64_t timeout = rt.init_timeout_ns;
    spmd__wait w = {.deadline_ns = spmd__now_ns() + timeout,
                    .what = "spmd_init",
                    .timeout_name = "SPMD_INIT_TIMEOUT",
                    .spread_arrivals = 1};
    if (st == SPMD_OK) {
        all[rt.process_index] = *mine;
        st = spmd__comm_checked_allgatherv(view, &a, NULL, all, counts, &w);
    }
    int any_failed = 0;
    for (int p = 0; st == SPMD_OK && p < n; p++)
        any_failed |= all[p].status != SPMD_OK;
    if (any_failed) { /* everyone knows it: everyone takes part */
        size_t bytes = sizeof *failure;
        a.fingerprint = ~a.fingerprint;
        w.deadline_ns = spmd__now_ns() + timeout;
        st = spmd__comm_reduce_record(view, &a, failure, &bytes, sizeof *failure,
                                      keep_lowest_failure, NULL, &w);
    }
    if (st == SPMD_OK)
        spmd__comm_destroy(view);
    else
        spmd__comm_abandon(view); /* it may hold unfinished messages */
    free(processes);
    free(counts);
    return st;
}

static spmd_status build_device_table(const process_record *all)
{
    int total = 0;
    for (int p = 0; p < rt.process_count; p++) {
        if (p == rt.process_index)
            rt.first_local = total;
        total += all[p].num_local;
    }
    rt.devices = calloc((size_t)total, sizeof *rt.devices);
    if (!rt.devices)
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "could not allocate the table of %d devices",
                          total);
    rt.num_devices = total;
    int id = 0;
    for (int p = 0; p < rt.process_count; p++) {
        for (int k = 0; k < all[p].num_local; k++, id++) {
            spmd_device_info *d = &rt.devices[id];
            d->id = id;
            d->process_index = p;
            d->local_ordinal = k;
            d->platform = (spmd_platform)all[p].platform;
            d->hardware_ordinal =
                d->platform == SPMD_PLATFORM_CUDA ? k / all[p].devices_per_gpu : k;
        }
    }
    rt.num_local = all[rt.process_index].num_local;
    return SPMD_OK;
}

/* Spin only while every busy thread on this machine can have a core of its own. */
static void spin_if(int busy_threads, int cores, void (*set_policy)(int spins, int yields))
{
    if (busy_threads <= cores)
        set_policy(20000, 64);
    else
        set_policy(0, 8);
}

/* How long a wait for another process polls before it yields or naps, where this machine's
 * device threads have a core each (spmd__pause_set_polling). Under two busy loops pinned to the
 * 2 cores (2 x 1, Linux 6.18), a nap of 20 us took 2.5 ms on average before the thread ran
 * again, and a yield as long: the loop kept the core for its slice. */
#define WAIT_POLLING_NS 10000000

static void choose_wait_policy(int processes_here, int machine_cores)
{
    int cores = spmd__usable_cores();
    rt.usable_cores = cores;
    spin_if(processes_here * (rt.num_local + 1), cores, spmd__event_set_policy);
    /* during fn the calling threads sleep in their joins: the device threads alone are busy */
    spin_if(processes_here * rt.num_local, cores, spmd__event_set_peer_policy);
    /* A wait between processes is one device thread's while the others of its process wait
     * for it: where every device thread of the machine has a core (of those the machine's
     * processes may use between them), a thread that finds its core shared shares it with
     * someone else's work, and polling holds up none of the job. */
    int fits = processes_here * rt.num_local <= machine_cores && rt.num_local <= cores;
    int64_t polling_ns = rt.process_count > 1 && fits ? WAIT_POLLING_NS : 0;
    spmd__pause_set_polling(polling_ns);
    spmd__log(SPMD__LOG_DEBUG,
              "waits for other processes poll for their first %d ms before they yield or nap "
              "(%d device thread(s) on this machine, %d core(s) its processes may use)",
              (int)(polling_ns / 1000000), processes_here * rt.num_local, machine_cores);
}

static spmd_status start_workers(void)
{
    int *hw = malloc((size_t)rt.num_local * sizeof *hw);
    if (!hw)
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "could not allocate %d worker slots",
                          rt.num_local);
    for (int k = 0; k < rt.num_local; k++)
        hw[k] = rt.devices[rt.first_local + k].hardware_ordinal;
    spmd_status st = spmd__workers_start(rt.num_local, rt.first_local, rt.backend, hw);
    free(hw);
    return st;
}

/* The processes on one machine share memory for their small messages (host_rings.h). */
static spmd_status link_hosts(const process_record *all, int n, int *machine_cores)
{
    uint64_t *hosts = malloc((size_t)n * sizeof *hosts);
    SPMD_REQUIRE(hosts != NULL, SPMD_ERR_OUT_OF_MEMORY,
                 "out of memory for the machines of %d processes", n);
    for (int p = 0; p < n; p++)
        hosts[p] = all[p].host;
    spmd_status st = spmd__proc_link_hosts(hosts, all[0].nonce, rt.host_rings, rt.init_timeout_ns,
                                           machine_cores);
    free(hosts);
    return st;
}

static spmd_status init_locked(const spmd_init_options *o, const void *user_comm)
{
    SPMD_CHECK(spmd__proc_init(o->use_mpi, user_comm, &rt.process_index, &rt.process_count));

    process_record mine;
    memset(&mine, 0, sizeof mine);
    failure_record failure = {INT32_MAX, ""};
    spmd_status local = resolve_local_devices(o, &mine);
    if (local != SPMD_OK) {
        mine.status = local;
        failure.process = rt.process_index;
        snprintf(failure.message, sizeof failure.message, "%s", spmd_last_error());
    }
    mine.host = spmd__proc_host_id();
    uint64_t salt[3] = {(uint64_t)getpid(), (uint64_t)spmd__now_ns(), last_session};
    mine.nonce = spmd__fnv1a(mine.host, salt, sizeof salt);
    process_record *all = calloc((size_t)rt.process_count, sizeof *all);
    spmd_status st =
        all ? SPMD_OK
            : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY,
                         "could not allocate start-up records for %d processes", rt.process_count);
    int missing = 0; /* a failure between processes: MPI_Finalize could wait for one */
    if (st == SPMD_OK && rt.process_count > 1) {
        st = exchange_records(&mine, all, &failure);
        missing = st != SPMD_OK;
    } else if (st == SPMD_OK)
        all[0] = mine;
    if (st == SPMD_OK)
        st = agree_on_devices(all, rt.process_count, rt.process_index, &failure);
    int processes_here = 0;
    if (st == SPMD_OK) {
        rt.platform = (spmd_platform)all[0].platform;
        rt.backend = backend_for(rt.platform);
        st = build_device_table(all);
        for (int p = 0; p < rt.process_count; p++)
            processes_here += all[p].host == mine.host;
        rt.machine_shared = processes_here > 1;
    }
    if (st == SPMD_OK) {
        int fresh = 0;
        st = spmd__proc_go_private(rt.init_timeout_ns, &fresh);
        if (st == SPMD_OK && fresh)
            spmd__comm_restart_wires();
        missing = st != SPMD_OK;
    }
    int machine_cores = 0; /* between the machine's processes (link_hosts) */
    if (st == SPMD_OK && rt.process_count > 1) {
        st = link_hosts(all, rt.process_count, &machine_cores);
        missing = st != SPMD_OK;
    }
    free(all);
    if (rt.collective_timeout_ns > 0) /* start-up is over (0: its variable was refused) */
        spmd__comm_set_timeout(rt.collective_timeout_ns);
    if (st == SPMD_OK)
        st = start_workers();
    if (st != SPMD_OK) {
        free(rt.devices);
        if (missing)
            spmd__proc_abandon();
        else
            spmd__proc_finalize(1); /* a start-up's message may still come */
        memset(&rt, 0, sizeof rt);
        return st;
    }
    choose_wait_policy(processes_here, machine_cores);
    rt.session = ++last_session;
    failures_at_init = spmd__calls_failures();
    spmd__calls_open(rt.num_local, rt.process_index, rt.collective_timeout_ns);
    spmd__notes_open();
    return SPMD_OK;
}

/* Buffers from 64 KiB go on the pool's huge pages where peers on this machine read them
 * straight: the rings with SPMD_CMA, or MPI (its own single-copy reads) without the rings. */
static int pool_serves_reads(const spmd__runtime *r)
{
    return r->machine_shared && (!r->host_rings || (r->host_rings & SPMD__RINGS_DIRECT));
}

static spmd_status spmd_finalize_checked(void);

spmd_status spmd__runtime_init(const spmd_init_options *opts, const void *user_comm)
{
    spmd_init_options o = SPMD_INIT_OPTIONS_INIT;
    if (opts)
        o = *opts;
    SPMD_CHECK(check_options(&o));
    pthread_mutex_lock(&init_lock);
    spmd_status st = SPMD_OK;
    if (init_count == 0)
        st = init_locked(&o, user_comm);
    int first = 0;
    if (st == SPMD_OK) {
        if (init_count++ == 0) {
            spmd__memory_pool_open(rt.buffer_pool_bytes, rt.first_local, rt.num_local);
            spmd__cpu_set_blas_threads(rt.blas_threads);
            spmd__cpu_set_huge_pages(rt.huge_pages, rt.huge_pages && pool_serves_reads(&rt));
            spmd__runtime_publish(&rt);
            first = 1;
        }
    }
    pthread_mutex_unlock(&init_lock);
    if (first) { /* SPMD_TRACE: a trace that cannot start fails the start-up, undone */
        spmd_status traced = spmd__trace_start_from_env();
        if (traced != SPMD_OK) {
            char message[SPMD__MESSAGE_CAPACITY];
            snprintf(message, sizeof message, "%s", spmd_last_error());
            spmd__ignore(spmd_finalize_checked());
            st = SPMD_ERROR(traced, "%s", message);
        }
    }
    return st;
}

static spmd_status spmd_init_checked(const spmd_init_options *opts)
{
    return spmd__runtime_init(opts, NULL);
}

static spmd_status spmd_finalize_checked(void)
{
    /* from fn it would join the worker that calls it, or tear the runtime down mid-call; from
     * another thread it waits for the call under way */
    spmd__call_entry entry;
    SPMD_CHECK(spmd__calls_enter("spmd_finalize", &entry));
    pthread_mutex_lock(&init_lock);
    if (init_count == 0) {
        pthread_mutex_unlock(&init_lock);
        spmd__calls_exit(&entry, SPMD_ERR_INVALID_ARGUMENT);
        return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                          "spmd_finalize: libspmd is not initialized (more spmd_finalize calls "
                          "than successful spmd_init calls)");
    }
    spmd_status st = SPMD_OK;
    if (--init_count == 0) {
        spmd__trace_finalize();
        spmd__runtime_retract();
        spmd__memory_pool_drain();
        spmd__workers_stop();
        rt.backend->shutdown();
        free(rt.devices);
        spmd__notes_close();
        spmd__calls_close();
        st = spmd__proc_finalize(spmd__calls_failures() != failures_at_init);
        memset(&rt, 0, sizeof rt);
        spmd__runtime_clear();
    }
    pthread_mutex_unlock(&init_lock);
    spmd__calls_exit(&entry, st);
    return st;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_init(const spmd_init_options *opts)
{
    return spmd__error_in(spmd_init_checked(opts), "spmd_init");
}

spmd_status spmd_finalize(void) { return spmd__error_in(spmd_finalize_checked(), "spmd_finalize"); }
