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

/* "PxL": P processes of L devices each. 0, or CLI_USAGE after saying why. */
static int parse_layout(const char *text, size_t len, layout *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return cli_usage_error("launch",
                               "layout \"%.*s\" is not PxL (processes x devices per "
                               "process, e.g. 2x4)",
                               (int)len, text);
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *x = strchr(buf, 'x');
    char *end1 = NULL, *end2 = NULL;
    long p = 0, l = 0;
    if (x) {
        *x = '\0';
        errno = 0;
        p = strtol(buf, &end1, 10);
        l = strtol(x + 1, &end2, 10);
    }
    if (!x || errno || end1 == buf || *end1 || end2 == x + 1 || *end2 || buf[0] == '+' ||
        x[1] == '+' || p < 1 || l < 1 || p > 1 << 20 || l > SPMD_MAX_CPU_DEVICES)
        return cli_usage_error("launch",
                               "layout \"%.*s\" is not PxL (processes x devices per process, "
                               "each at least 1, at most %d devices, e.g. 2x4)",
                               (int)len, text, SPMD_MAX_CPU_DEVICES);
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

/* Appends n bytes to a growing buffer; 0, or -1 without memory. */
static int append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t want = *cap ? *cap : 4096;
        while (want < *len + n + 1)
            want *= 2;
        char *grown = realloc(*buf, want);
        if (!grown)
            return -1;
        *buf = grown;
        *cap = want;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

/* The process a tagged line comes from, and where its text starts: Open MPI's
 * "[1,3]<stdout>:text" or hydra's "[3] text". -1 for a line without a tag. */
static int line_process(const char *line, size_t len, size_t *text)
{
    if (len < 3 || line[0] != '[')
        return -1;
    size_t i = 1;
    long first = 0, second = -1;
    while (i < len && line[i] >= '0' && line[i] <= '9' && first < 1 << 24)
        first = first * 10 + (line[i++] - '0');
    if (i < len && line[i] == ',') {
        second = 0;
        for (i++; i < len && line[i] >= '0' && line[i] <= '9' && second < 1 << 24; i++)
            second = second * 10 + (line[i] - '0');
    }
    if (i >= len || line[i] != ']')
        return -1;
    i++;
    if (second >= 0) { /* Open MPI: "<stdout>:" follows */
        static const char stream[] = "<stdout>:";
        size_t n = sizeof stream - 1;
        if (len - i < n || memcmp(line + i, stream, n) != 0)
            return -1;
        *text = i + n;
        return (int)second;
    }
    if (i < len && line[i] == ' ')
        i++;
    *text = i;
    return (int)first;
}

/*
 * The output of a run of `processes` processes with tagged lines, each process's lines
 * together, in process order (process 0's first), untagged: mpiexec interleaves the processes'
 * lines in whatever order they come, but a program that prints what each process holds, in
 * device order, or its results from process 0 alone, then reads the same in every layout.
 * Lines without a tag come first. NULL without memory.
 */
static char *in_process_order(const char *raw, size_t total, int processes, size_t *out_len)
{
    char *out = malloc(total + 2); /* a newline added to a last line without one */
    if (!out)
        return NULL;
    size_t at = 0;
    for (int p = -1; p < processes; p++) {
        for (size_t from = 0; from < total;) {
            const char *end = memchr(raw + from, '\n', total - from);
            size_t len = end ? (size_t)(end - (raw + from)) : total - from, text = 0;
            int who = line_process(raw + from, len, &text);
            if (who >= processes)
                who = -1;
            if (who == p) {
                memcpy(out + at, raw + from + text, len - text);
                at += len - text;
                out[at++] = '\n';
            }
            from += len + (end != NULL);
        }
    }
    out[at] = '\0';
    *out_len = at;
    return out;
}

/* Shows the whole lines of buf[from, len) (and a last partial one when `all`), without their
 * process tags, as they come; returns where the next line starts. */
static size_t show_lines(const char *buf, size_t from, size_t len, int all)
{
    while (from < len) {
        const char *end = memchr(buf + from, '\n', len - from);
        if (!end && !all)
            break;
        size_t n = end ? (size_t)(end - (buf + from)) : len - from, text = 0;
        if (line_process(buf + from, n, &text) < 0)
            text = 0;
        fwrite(buf + from + text, 1, n - text, stdout);
        fputc('\n', stdout);
        from += n + (end != NULL);
    }
    fflush(stdout);
    return from;
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

/* Runs prog as lay, its stdout shown and, when `captured` is given, kept there (malloc'd,
 * *captured_len bytes, NUL bytes included; in process order, in_process_order). Returns the
 * program's exit status, or -1 when it could not start (said why). */
static int run_layout(const layout *lay, char **prog, char **captured, size_t *captured_len)
{
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
        if (captured && SPMD_LAUNCH_TAG_OPTION[0])
            argv[k++] = SPMD_LAUNCH_TAG_OPTION;
    }
    for (int i = 0; i < argc; i++)
        argv[k++] = prog[i];
    int pipe_fd[2] = {-1, -1};
    if (captured && pipe(pipe_fd) != 0) {
        free(argv);
        cli_failure("launch", "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    pid_t launcher = getpid();
    (void)launcher;
    pid_t pid = fork();
    if (pid < 0) {
        free(argv);
        cli_failure("launch", "cannot fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        if (captured) {
            dup2(pipe_fd[1], 1);
            close(pipe_fd[0]);
            close(pipe_fd[1]);
        }
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
    int failed_memory = 0;
    if (captured) {
        close(pipe_fd[1]);
        size_t len = 0, cap = 0, shown = 0;
        *captured = NULL;
        char chunk[65536];
        for (;;) {
            ssize_t got = read(pipe_fd[0], chunk, sizeof chunk);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                break;
            if (append(captured, &len, &cap, chunk, (size_t)got) != 0) {
                failed_memory = 1;
                fwrite(chunk, 1, (size_t)got, stdout);
                continue;
            }
            shown = show_lines(*captured, shown, len, 0);
        }
        if (*captured)
            show_lines(*captured, shown, len, 1);
        fflush(stdout);
        close(pipe_fd[0]);
        if (!*captured && !failed_memory)
            *captured = calloc(1, 1);
        *captured_len = len;
        if (*captured && mpi && SPMD_LAUNCH_TAG_OPTION[0]) {
            char *ordered = in_process_order(*captured, len, lay->processes, captured_len);
            free(*captured);
            *captured = ordered;
            failed_memory |= !ordered;
        }
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    job_pid = 0;
    if (failed_memory || (captured && !*captured)) {
        cli_failure("launch", "out of memory keeping the output of layout %dx%d", lay->processes,
                    lay->devices);
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
    "                     NaN matches only NaN, an infinity only itself, hex is text\n"

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
            "                       named), else the first failing run's status, else 0\n"
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
            char *end = NULL;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            long most = opt == 'n' ? MAX_PROCESSES : SPMD_MAX_CPU_DEVICES;
            if (errno || end == optarg || *end || v < 1 || v > most)
                return cli_usage_error("launch", "%s \"%s\" is not a number of %s in [1, %ld]",
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
                size_t len = strcspn(p, ",");
                if (nlayouts == MAX_LAYOUTS)
                    return cli_usage_error("launch", "more than %d layouts", MAX_LAYOUTS);
                if (parse_layout(p, len, &layouts[nlayouts++]) != CLI_OK)
                    return CLI_USAGE;
                if (p[len] != ',')
                    break;
                p += len + 1;
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
        char *captured = NULL;
        size_t len = 0;
        int rc = run_layout(&single, prog, output ? &captured : NULL, &len);
        if (f && ((rc >= 0 && fwrite(captured, 1, len, f) != len) || fclose(f) != 0)) {
            free(captured);
            cli_failure("launch", "cannot write %s: %s", output, strerror(errno));
            return rc > 0 ? rc : CLI_FAILED; /* the program's own failure goes first */
        }
        free(captured);
        end_like_the_signal();
        return rc < 0 ? CLI_FAILED : rc;
    }
    char *outputs[MAX_LAYOUTS] = {0};
    size_t lens[MAX_LAYOUTS] = {0};
    int first_failure = 0, rc = CLI_OK;
    for (int i = 0; i < nlayouts && rc == CLI_OK; i++) {
        fprintf(stderr, "spmd launch: layout %dx%d\n", layouts[i].processes, layouts[i].devices);
        int code = run_layout(&layouts[i], prog, &outputs[i], &lens[i]);
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
        if (compare_outputs(outputs[0], lens[0], outputs[i], lens[i], &rule, &sum)) {
            rc = cli_failure("launch",
                             "layouts %dx%d and %dx%d give different output:", layouts[0].processes,
                             layouts[0].devices, layouts[i].processes, layouts[i].devices);
            compare_print_summary(stderr, "spmd: launch:   ", &rule, &sum);
        }
    }
    for (int i = 0; i < nlayouts; i++)
        free(outputs[i]);
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

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL, chunk[65536];
    size_t cap = 0, got;
    int ok = 1;
    *len = 0;
    while (ok && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
        ok = append(&buf, len, &cap, chunk, got) == 0;
    ok = ok && !ferror(f);
    fclose(f);
    if (ok && !buf)
        buf = calloc(1, 1);
    if (!ok) {
        free(buf);
        return NULL;
    }
    return buf;
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
    size_t first_len = 0;
    char *first = read_file(argv[optind], &first_len);
    if (!first)
        return cli_failure("compare", "cannot read %s: %s", argv[optind], strerror(errno));
    int rc = CLI_OK;
    for (int i = optind + 1; i < argc && rc == CLI_OK; i++) {
        size_t len = 0;
        char *other = read_file(argv[i], &len);
        compare_summary sum;
        if (!other) {
            rc = cli_failure("compare", "cannot read %s: %s", argv[i], strerror(errno));
        } else if (compare_outputs(first, first_len, other, len, &rule, &sum)) {
            rc = cli_failure("compare", "%s and %s differ:", argv[optind], argv[i]);
            compare_print_summary(stderr, "spmd: compare:   ", &rule, &sum);
        } else {
            printf("%s and %s match: ", argv[optind], argv[i]);
            compare_print_summary(stdout, "", &rule, &sum);
        }
        free(other);
    }
    free(first);
    return rc;
}
