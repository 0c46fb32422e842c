/* spmd launch: runs a program as P processes x L devices on this machine, under the mpiexec
 * libspmd was built with, with the settings such runs need (root, a container, more
 * processes than cores), and compares the outputs of several layouts. spmd compare: the
 * comparison alone, over saved outputs (what SpmdTesting's comparison tests run). */
#define _POSIX_C_SOURCE 200809L /* setenv, fileno */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include <spmd/runtime.h>

#include "cli_args.h"
#include "compare_text.h"

#ifndef SPMD_LAUNCH_MPIEXEC
#define SPMD_LAUNCH_MPIEXEC ""
#endif
/* The mpiexec option that prefixes each line of output with its process ("--tag-output" for
 * Open MPI, "-prepend-rank" for MPICH's hydra; "" when unknown): captured outputs are put in
 * process order with it. */
#ifndef SPMD_LAUNCH_TAG_OPTION
#define SPMD_LAUNCH_TAG_OPTION ""
#endif

#define MAX_LAYOUTS 16
/* Every process runs on this machine: beyond this, a typo rather than a plan. */
#define MAX_PROCESSES 1024

typedef struct layout {
    int processes;
    int devices;
} layout;

/* "PxL": P processes of L devices each, digits alone on each side (no blank, no sign). 0, or
 * CLI_USAGE after saying why. */
static int parse_layout(const char *text, size_t len, layout *out)
{
    const char *x = memchr(text, 'x', len);
    uint64_t p = 0, l = 0;
    if (!x || cli_parse_digits(text, (size_t)(x - text), MAX_PROCESSES, &p) != 0 ||
        cli_parse_digits(x + 1, len - (size_t)(x - text) - 1, SPMD_MAX_CPU_DEVICES, &l) != 0 ||
        p < 1 || l < 1)
        return cli_usage_error("launch",
                               "layout \"%.*s\" is not PxL (processes x devices per process, "
                               "digits alone, P in [1, %d], L in [1, %d], e.g. 2x4)",
                               (int)len, text, MAX_PROCESSES, SPMD_MAX_CPU_DEVICES);
    out->processes = (int)p;
    out->devices = (int)l;
    return CLI_OK;
}

void spmd_cli_mpi_settings(int processes, int devices)
{
    if (geteuid() == 0) { /* Open MPI refuses root without both */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    /* more processes than the slots Open MPI counts; its single-copy path needs ptrace rights
     * that containers withhold; polling processes on shared cores yield to each other */
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 0 && (long)processes * devices > cores)
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
}

/* Settings a run on one machine needs, applied only where the caller has not set them. */
static void apply_launcher_settings(const layout *lay)
{
    char devices[16];
    snprintf(devices, sizeof devices, "%d", lay->devices);
    setenv("SPMD_NUM_CPU_DEVICES", devices, 1);
    setenv("SPMD_CUDA_DEVICES_PER_GPU", devices, 1);
    spmd_cli_mpi_settings(lay->processes, lay->devices);
}

/* The exit status a shell would give: the code, or 128 + the signal. */
static int status_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

/*
 * A stream of the job's output (standard output or standard error), shown as it comes without
 * the process tags mpiexec puts in. Standard output is also kept on disk as it comes (memory
 * stays bounded whatever its size): with tagged lines (`ordered`), each process's lines go to a
 * spill file of their own, and the output is those files one after another in process order
 * (lines without a tag first): mpiexec interleaves the processes' lines in whatever order they
 * come, but a program that prints what each process holds, in device order, or its results
 * from process 0 alone, then reads the same in every layout. NUL bytes are kept.
 */
typedef struct capture {
    FILE *screen; /* where the text is shown */
    int tagged;   /* mpiexec tags the text: take the tags out */
    int processes, ordered, failed;
    FILE **spill; /* NULL: shown only; else [processes + 1]: text without a tag, then process
                     p's at p + 1 */
    int to;       /* the spill the text goes to now */
    int line_start, last_newline, shown;
    char pend[48]; /* the start of what may be a tag, until it is told apart */
    size_t pend_len;
} capture;

/* keep: the text is also kept, for capture_close to write out. On failure (out of memory) the
 * text is still shown, tags and all, and capture_close fails. */
static void capture_open(capture *c, FILE *screen, int processes, int tagged, int keep)
{
    memset(c, 0, sizeof *c);
    c->screen = screen;
    c->tagged = tagged;
    c->ordered = tagged && keep;
    c->processes = c->ordered ? processes : 0;
    c->line_start = 1;
    if (keep && !(c->spill = calloc((size_t)c->processes + 1, sizeof *c->spill)))
        c->failed = 1, c->tagged = 0;
}

/* Text of the current process, to its spill file and to the screen. */
static void emit(capture *c, const char *data, size_t n)
{
    if (!n)
        return;
    FILE **f = c->spill ? &c->spill[c->to] : NULL;
    if (f && !*f && !(*f = tmpfile()))
        c->failed = 1;
    if (f && *f && fwrite(data, 1, n, *f) != n)
        c->failed = 1;
    fwrite(data, 1, n, c->screen);
    c->shown = 1;
    c->line_start = c->last_newline = data[n - 1] == '\n';
}

/* Reads the digits at p[*i..n) into *value: how many there were, or -1 when the number passes
 * 2^24 (no process's). */
static int tag_number(const char *p, size_t n, size_t *i, long *value)
{
    int digits = 0;
    for (*value = 0; *i < n && p[*i] >= '0' && p[*i] <= '9'; (*i)++, digits++) {
        if (*value >= 1 << 24)
            return -1;
        *value = *value * 10 + (p[*i] - '0');
    }
    return digits;
}

/* Whether pend holds a whole tag (1: *process set), may still become one (0), or cannot (-1).
 * Open MPI tags every fragment it forwards ("[1,3]<stdout>:", "[1,3]<stderr>:"), also in the
 * middle of a line when a line crosses its 4 KiB fragments; hydra tags each line ("[3] ") at
 * its start. */
static int tag_state(const capture *c, int *process)
{
    static const char *const streams[] = {"<stdout>:", "<stderr>:", "<stddiag>:"};
    const char *p = c->pend;
    size_t n = c->pend_len, i = 1;
    long first = 0, second = 0;
    int digits = tag_number(p, n, &i, &first);
    if (digits < 0)
        return -1;
    if (i == n)
        return 0;
    if (!digits)
        return -1;
    if (p[i] == ']') { /* hydra's, at a line's start only */
        if (!c->line_start)
            return -1;
        if (i + 1 == n)
            return 0;
        *process = (int)first;
        return p[i + 1] == ' ' ? 1 : -1;
    }
    if (p[i] != ',')
        return -1;
    i++;
    digits = tag_number(p, n, &i, &second);
    if (digits < 0)
        return -1;
    if (i == n)
        return 0;
    if (!digits || p[i++] != ']')
        return -1;
    int state = -1; /* Open MPI's: a stream's name follows, whole or begun */
    for (size_t k = 0; k < sizeof streams / sizeof streams[0]; k++) {
        size_t m = strlen(streams[k]);
        if (n - i <= m && memcmp(p + i, streams[k], n - i) == 0)
            state = n - i == m ? 1 : state < 0 ? 0 : state;
    }
    if (state > 0)
        *process = (int)second;
    return state;
}

static void capture_feed(capture *c, const char *buf, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (!c->tagged) {
            emit(c, buf + i, n - i);
            return;
        }
        if (!c->pend_len) { /* text up to the next '[' */
            const char *open = memchr(buf + i, '[', n - i);
            size_t m = open ? (size_t)(open - (buf + i)) : n - i;
            emit(c, buf + i, m);
            i += m;
            if (!open)
                return;
        }
        c->pend[c->pend_len++] = buf[i++];
        int process = -1, state = tag_state(c, &process);
        if (state > 0) {
            c->to = process >= 0 && process < c->processes ? process + 1 : 0;
            c->pend_len = 0;
        } else if (state < 0 || c->pend_len == sizeof c->pend) {
            size_t keep = c->pend[c->pend_len - 1] == '[' && c->pend_len > 1; /* may start one */
            emit(c, c->pend, c->pend_len - keep);
            c->pend[0] = '[';
            c->pend_len = keep;
        }
    }
}

/* The end of the stream: what was kept, in process order, appended to `into`; 0, or -1 when a
 * spill file could not be written or read. */
static int capture_close(capture *c, FILE *into)
{
    emit(c, c->pend, c->pend_len);
    c->pend_len = 0;
    for (int k = 0; k <= c->processes && c->ordered; k++) /* each process's last line ended */
        if (c->spill[k]) {
            fseek(c->spill[k], -1, SEEK_END);
            int last = fgetc(c->spill[k]);
            fseek(c->spill[k], 0, SEEK_END); /* from reading to writing */
            if (last != '\n' && fputc('\n', c->spill[k]) == EOF)
                c->failed = 1;
        }
    if (c->shown && !c->last_newline)
        fputc('\n', c->screen);
    fflush(c->screen);
    char chunk[65536];
    for (int k = 0; c->spill && k <= c->processes; k++) {
        FILE *f = c->spill[k];
        if (!f)
            continue;
        rewind(f);
        size_t got;
        while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
            if (into && fwrite(chunk, 1, got, into) != got)
                c->failed = 1;
        c->failed |= ferror(f);
        fclose(f);
    }
    free(c->spill);
    return c->failed ? -1 : 0;
}

/* Feeds what the job writes on fds[k] to caps[k] until every one ends. */
static void pump(const int *fds, capture *caps, int n)
{
    struct pollfd p[2];
    int open = n;
    for (int k = 0; k < n; k++)
        p[k] = (struct pollfd){.fd = fds[k], .events = POLLIN};
    char chunk[65536];
    while (open > 0) {
        if (poll(p, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            return; /* the caller closes the pipes: the job is not left blocked on them */
        }
        for (int k = 0; k < n; k++) {
            if (p[k].fd < 0 || !p[k].revents)
                continue;
            ssize_t got = read(p[k].fd, chunk, sizeof chunk);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) { /* the end (poll passes over a negative fd) */
                p[k].fd = -1;
                open--;
            } else {
                capture_feed(&caps[k], chunk, (size_t)got);
            }
        }
    }
}

/* ---- signals: the job goes with the launcher ---- */

static volatile sig_atomic_t job_pid, stop_signal;

/* SIGINT, SIGTERM or SIGHUP: passed on to the job (mpiexec stops its ranks on it); the
 * launcher then waits for the job and ends by the same signal. */
static void pass_on(int sig)
{
    stop_signal = sig;
    if (job_pid > 0)
        kill((pid_t)job_pid, sig);
}

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pass_on;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* After the job ended: a stop signal the launcher got ends it the same way. */
static void end_like_the_signal(void)
{
    if (!stop_signal)
        return;
    signal(stop_signal, SIG_DFL);
    raise(stop_signal);
}

/* Closes the ends of the job's pipes that are still open. */
static void close_pipes(int (*pipes)[2], int n)
{
    for (int k = 0; k < n; k++)
        for (int e = 0; e < 2; e++)
            if (pipes[k][e] >= 0) {
                close(pipes[k][e]);
                pipes[k][e] = -1;
            }
}

/* Runs prog as lay, its stdout shown and, when `into` is given, written there too (in process
 * order, struct capture); stderr shown, without the tags mpiexec then adds to it too. Returns
 * the program's exit status, or -1 when it could not start or its output could not be kept
 * (said why). */
static int run_layout(const layout *lay, char **prog, FILE *into)
{
    int captured = into != NULL;
    if (stop_signal) /* stopped before this layout began */
        return -1;
    int mpi = strcmp(SPMD_LAUNCH_MPIEXEC, "") != 0;
    if (!mpi && lay->processes > 1) {
        cli_failure("launch",
                    "layout %dx%d needs MPI, and this libspmd was built without it; "
                    "use 1xL layouts, or rebuild with MPI",
                    lay->processes, lay->devices);
        return -1;
    }
    int tagged = captured && mpi && SPMD_LAUNCH_TAG_OPTION[0] != '\0';
    int argc = 0;
    while (prog[argc])
        argc++;
    char **argv = calloc((size_t)argc + 5, sizeof *argv);
    char count[16];
    if (!argv) {
        cli_failure("launch", "out of memory");
        return -1;
    }
    snprintf(count, sizeof count, "%d", lay->processes);
    int k = 0;
    if (mpi) {
        argv[k++] = SPMD_LAUNCH_MPIEXEC;
        argv[k++] = "-n";
        argv[k++] = count;
        if (tagged)
            argv[k++] = SPMD_LAUNCH_TAG_OPTION;
    }
    for (int i = 0; i < argc; i++)
        argv[k++] = prog[i];
    /* stdout when captured; stderr too when mpiexec tags it, to take the tags out */
    int streams = captured + tagged, pipes[2][2] = {{-1, -1}, {-1, -1}};
    for (int s = 0; s < streams; s++)
        if (pipe(pipes[s]) != 0) {
            cli_failure("launch", "cannot make a pipe: %s", strerror(errno));
            close_pipes(pipes, streams);
            free(argv);
            return -1;
        }
    fflush(stdout);
    pid_t launcher = getpid();
    (void)launcher;
    pid_t pid = fork();
    if (pid < 0) {
        cli_failure("launch", "cannot fork: %s", strerror(errno));
        close_pipes(pipes, streams);
        free(argv);
        return -1;
    }
    if (pid == 0) {
        for (int s = 0; s < streams; s++)
            dup2(pipes[s][1], 1 + s);
        close_pipes(pipes, streams);
        apply_launcher_settings(lay);
#ifdef __linux__
        /* a launcher killed outright (SIGKILL) still takes its job along */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != launcher)
            _exit(128 + SIGTERM);
#endif
        execvp(argv[0], argv);
        fprintf(stderr, "spmd: launch: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    free(argv);
    job_pid = pid;
    if (stop_signal) /* came between the fork and here */
        kill(pid, stop_signal);
    int failed = 0, fds[2];
    capture caps[2];
    for (int s = 0; s < streams; s++) {
        close(pipes[s][1]);
        pipes[s][1] = -1;
        fds[s] = pipes[s][0];
        capture_open(&caps[s], s ? stderr : stdout, lay->processes, tagged, s == 0);
    }
    pump(fds, caps, streams);
    close_pipes(pipes, streams);
    for (int s = 0; s < streams; s++)
        failed |= capture_close(&caps[s], s ? NULL : into) != 0;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    job_pid = 0;
    if (failed) {
        cli_failure("launch", "cannot keep the output of layout %dx%d: %s", lay->processes,
                    lay->devices, strerror(errno ? errno : EIO));
        return -1;
    }
    return status_code(status);
}

/* ---- comparison ---- */

/* HOW of --compare into rule; CLI_USAGE after saying why. */
static int parse_rule(const char *cmd, const char *how, compare_rule *rule)
{
    char why[512];
    if (compare_parse_rule(how, rule, why, sizeof why) != 0)
        return cli_usage_error(cmd, "%s", why);
    return CLI_OK;
}

#define COMPARE_HELP                                                                               \
    "exact (default: every byte), or numbers found inside the text (key=value, [1.0, 2e-3],\n"     \
    "                     ...) compared within a tolerance and everything else equal:\n"           \
    "                     T or tolerance=T (|a-b| <= T x max(1,|a|,|b|)), abs=A, rel=R\n"          \
    "                     (|a-b| <= R x max(|a|,|b|)), ulps=N (float64 steps), ulps32=N\n"         \
    "                     (float32 steps), or several, comma-separated (any one suffices);\n"      \
    "                     NaN matches only NaN, an infinity only itself; hex and numbers\n"        \
    "                     beyond float64 (1e400, 1e-400) are text; a line's final CR counts\n"

/* ---- spmd launch ---- */

void spmd_cli_launch_usage(FILE *out)
{
    fprintf(out,
            "usage: spmd launch -n P -d L [--output FILE] [--] PROGRAM [ARGS...]\n"
            "       spmd launch --layouts PxL,PxL,... [--compare exact|T] [--] PROGRAM [ARGS...]\n"
            "\n"
            "Runs PROGRAM as P processes of L devices each on this machine, under the mpiexec\n"
            "libspmd was built with (%s), and exits with its exit status. It sets\n"
            "SPMD_NUM_CPU_DEVICES and SPMD_CUDA_DEVICES_PER_GPU to L, and what Open MPI needs\n"
            "as root, in a container and with more processes than cores (OMPI_ALLOW_RUN_AS_ROOT,\n"
            "OMPI_MCA_rmaps_base_oversubscribe, OMPI_MCA_btl_vader_single_copy_mechanism=none,\n"
            "OMPI_MCA_mpi_yield_when_idle), leaving any of them the caller has set.\n"
            "\n"
            "options:\n"
            "  -n, --processes P    processes (default 1)\n"
            "  -d, --devices L      devices per process (default 1)\n"
            "  -o, --output FILE    also write the program's standard output to FILE\n"
            "  -l, --layouts LIST   run each PxL layout in turn and compare their standard\n"
            "                       outputs: exit 1 when they differ (the first difference is\n"
            "                       named), else the first failing run's status, else 0;\n"
            "                       LIST: 1x8,2x4 or 1x8, 2x4 (no blanks inside a layout)\n"
            "  -c, --compare HOW    " COMPARE_HELP "  -h, --help           show this help\n"
            "\n"
            "Print results from one process (process 0): lines from several processes\n"
            "interleave in any order.\n",
            strcmp(SPMD_LAUNCH_MPIEXEC, "") ? SPMD_LAUNCH_MPIEXEC : "none: built without MPI");
}

int spmd_cli_launch(int argc, char **argv)
{
    static const struct option options[] = {{"processes", required_argument, NULL, 'n'},
                                            {"devices", required_argument, NULL, 'd'},
                                            {"output", required_argument, NULL, 'o'},
                                            {"layouts", required_argument, NULL, 'l'},
                                            {"compare", required_argument, NULL, 'c'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    layout single = {1, 1}, layouts[MAX_LAYOUTS];
    int nlayouts = 0, have_n = 0, have_d = 0, have_compare = 0;
    const char *output = NULL;
    compare_rule rule;
    compare_parse_rule("exact", &rule, NULL, 0);
    optind = 0;
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "+n:d:o:l:c:h", options, NULL)) != -1) {
        switch (opt) {
        case 'n':
        case 'd': {
            uint64_t v = 0;
            int most = opt == 'n' ? MAX_PROCESSES : SPMD_MAX_CPU_DEVICES;
            if (cli_parse_digits(optarg, strlen(optarg), (uint64_t)most, &v) != 0 || v < 1)
                return cli_usage_error("launch",
                                       "%s \"%s\" is not a number of %s in [1, %d] (digits "
                                       "alone)",
                                       opt == 'n' ? "-n" : "-d", optarg,
                                       opt == 'n' ? "processes" : "devices per process", most);
            if (opt == 'n')
                single.processes = (int)v, have_n = 1;
            else
                single.devices = (int)v, have_d = 1;
            break;
        }
        case 'o':
            output = optarg;
            break;
        case 'l':
            for (const char *p = optarg;;) {
                size_t len = strcspn(p, ","); /* blanks only after a comma: "1x8, 2x4" */
                if (nlayouts == MAX_LAYOUTS)
                    return cli_usage_error("launch", "more than %d layouts", MAX_LAYOUTS);
                if (parse_layout(p, len, &layouts[nlayouts++]) != CLI_OK)
                    return CLI_USAGE;
                if (p[len] != ',')
                    break;
                p += len + 1;
                p += strspn(p, " \t");
            }
            break;
        case 'c':
            if (parse_rule("launch", optarg, &rule) != CLI_OK)
                return CLI_USAGE;
            have_compare = 1;
            break;
        case 'h':
            spmd_cli_launch_usage(stdout);
            return CLI_OK;
        default:
            return cli_usage_error("launch", "unknown option or missing value: %s",
                                   argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error("launch", "no program given; usage: spmd launch -n P -d L -- "
                                         "PROGRAM [ARGS...]");
    if (nlayouts && (have_n || have_d || output))
        return cli_usage_error("launch", "--layouts replaces -n, -d and --output; give one or "
                                         "the others");
    if (!nlayouts && have_compare)
        return cli_usage_error("launch", "--compare needs --layouts");
    char **prog = argv + optind;
    catch_stop_signals();
    if (!nlayouts) {
        /* a file that cannot be written is found before the program runs */
        FILE *f = output ? fopen(output, "wb") : NULL;
        if (output && !f)
            return cli_failure("launch", "cannot write %s: %s", output, strerror(errno));
        int rc = run_layout(&single, prog, f);
        if (f && fclose(f) != 0 && rc >= 0) {
            cli_failure("launch", "cannot write %s: %s", output, strerror(errno));
            return rc > 0 ? rc : CLI_FAILED; /* the program's own failure goes first */
        }
        end_like_the_signal();
        return rc < 0 ? CLI_FAILED : rc;
    }
    FILE *outputs[MAX_LAYOUTS] = {0}; /* on disk: memory stays bounded */
    int first_failure = 0, rc = CLI_OK;
    for (int i = 0; i < nlayouts && rc == CLI_OK; i++) {
        fprintf(stderr, "spmd launch: layout %dx%d\n", layouts[i].processes, layouts[i].devices);
        outputs[i] = tmpfile();
        int code = outputs[i] ? run_layout(&layouts[i], prog, outputs[i]) : -1;
        if (!outputs[i])
            cli_failure("launch", "cannot make a file for the output: %s", strerror(errno));
        if (code < 0)
            rc = CLI_FAILED;
        else if (code != 0 && !first_failure) {
            first_failure = code;
            cli_failure("launch", "layout %dx%d exited with status %d", layouts[i].processes,
                        layouts[i].devices, code);
        }
    }
    for (int i = 1; i < nlayouts && rc == CLI_OK && !first_failure; i++) {
        compare_summary sum;
        rewind(outputs[0]);
        rewind(outputs[i]);
        int differ = compare_files(outputs[0], outputs[i], &rule, &sum);
        if (differ < 0)
            rc = cli_failure("launch", "cannot read the outputs back: %s", strerror(errno));
        else if (differ) {
            rc = cli_failure("launch",
                             "layouts %dx%d and %dx%d give different output:", layouts[0].processes,
                             layouts[0].devices, layouts[i].processes, layouts[i].devices);
            compare_print_summary(stderr, "spmd: launch:   ", &rule, &sum);
        }
    }
    for (int i = 0; i < nlayouts; i++)
        if (outputs[i])
            fclose(outputs[i]);
    if (rc == CLI_OK && !first_failure)
        fprintf(stderr, "spmd launch: %d layouts, the same output\n", nlayouts);
    end_like_the_signal();
    return rc != CLI_OK ? rc : first_failure;
}

/* ---- spmd compare ---- */

void spmd_cli_compare_usage(FILE *out)
{
    fputs("usage: spmd compare [--compare HOW] FILE FILE...\n"
          "\n"
          "Compares saved outputs (of spmd launch --output, as SpmdTesting's comparison tests\n"
          "do) with the first, byte for byte (NUL bytes too) or with numbers within a\n"
          "tolerance: exit 0 when all match, 1 with a summary of each difference (lines\n"
          "compared and differing, the largest absolute and relative differences and where,\n"
          "the first differing lines). Options may come before or after the files.\n"
          "\n"
          "options:\n"
          "  -c, --compare HOW  " COMPARE_HELP "  -h, --help         show this help\n",
          out);
}

int spmd_cli_compare(int argc, char **argv)
{
    static const struct option options[] = {{"compare", required_argument, NULL, 'c'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    compare_rule rule;
    compare_parse_rule("exact", &rule, NULL, 0);
    optind = 0;
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "c:h", options, NULL)) != -1) { /* options anywhere */
        if (opt == 'h') {
            spmd_cli_compare_usage(stdout);
            return CLI_OK;
        }
        if (opt != 'c')
            return cli_usage_error("compare", "unknown option or missing value: %s",
                                   argv[optind - 1]);
        if (parse_rule("compare", optarg, &rule) != CLI_OK)
            return CLI_USAGE;
    }
    if (argc - optind < 2)
        return cli_usage_error("compare", "give at least two files to compare");
    FILE *first = fopen(argv[optind], "rb");
    if (!first)
        return cli_failure("compare", "cannot read %s: %s", argv[optind], strerror(errno));
    int rc = CLI_OK;
    for (int i = optind + 1; i < argc && rc == CLI_OK; i++) {
        FILE *other = fopen(argv[i], "rb");
        compare_summary sum;
        rewind(first);
        int differ = other ? compare_files(first, other, &rule, &sum) : -1;
        if (differ < 0) {
            rc = cli_failure("compare", "cannot read %s: %s", other ? "the files" : argv[i],
                             strerror(errno));
        } else if (differ) {
            rc = cli_failure("compare", "%s and %s differ:", argv[optind], argv[i]);
            compare_print_summary(stderr, "spmd: compare:   ", &rule, &sum);
        } else {
            printf("%s and %s match: ", argv[optind], argv[i]);
            compare_print_summary(stdout, "", &rule, &sum);
        }
        if (other)
            fclose(other);
    }
    fclose(first);
    return rc;
}
