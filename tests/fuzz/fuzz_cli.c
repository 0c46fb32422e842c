/* libFuzzer harness: the spmd CLI's argument parsing (src/cli/cli_args.c).
 *
 * The input is the command line after "spmd", one argument per NUL-separated piece (the seeds
 * in corpus/fuzz_cli are written that way: `printf 'sharding\0--mesh\0a=4\0' > seed`). It goes
 * through the parsers main() uses: the global options and the command name, then the options of
 * `info` or `sharding` with the values of --mesh, --shape and --devices. No device starts.
 * Whatever the arguments, the parsers must not crash, leak or read out of bounds, and:
 *   - they return one of the CLI_* codes that main() turns into an exit status;
 *   - a failure writes exactly one line, starting with "spmd: " (the CLI's error contract);
 *     success and --help write nothing to the error stream;
 *   - an option reported as unknown is not one of the command's options spelled exactly;
 *   - what they parse obeys the limits the rest of the CLI relies on (mesh axes, ranks, ids). */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "fuzz_common.h"
#include "spmd/spec.h"
#include "spmd/status.h"

#define MAX_ARGS 64

static char program[] = "spmd";

static const char *const commands[] = {"info", "sharding"};
static const char *const global_options[] = {"help", "version", NULL};
static const char *const info_options[] = {"json", "help", NULL};
static const char *const sharding_options[] = {"mesh", "spec", "shape", "devices",
                                               "json", "help", NULL};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* The error stream of one parse, in memory. */
typedef struct capture {
    FILE *f;
    char *buf;
    size_t len;
} capture;

static void capture_start(capture *c)
{
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    if (c->f == NULL)
        abort();
    cli_set_error_stream(c->f);
}

static void capture_end(capture *c)
{
    cli_set_error_stream(NULL);
    fclose(c->f);
    free(c->buf);
}

static const char *captured(capture *c)
{
    fflush(c->f);
    return c->buf != NULL ? c->buf : "";
}

static int is_option(const char *const *options, const char *name, size_t len)
{
    for (const char *const *o = options; *o != NULL; o++)
        if (strlen(*o) == len && strncmp(*o, name, len) == 0)
            return 1;
    return 0;
}

/* The last occurrence of `needle` in `hay`, or NULL. */
static const char *last_strstr(const char *hay, const char *needle)
{
    const char *last = NULL;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        last = p;
    return last;
}

/* Checks what a parser that returned rc wrote: `cmd` is the command its messages name (NULL
 * for the global options), `options` its long options and `shorts` its short ones. */
static void check_report(const char *who, const char *cmd, int rc, capture *c,
                         const char *const *options, const char *shorts)
{
    const char *err = captured(c);
    size_t len = strlen(err);

    if (rc == CLI_OK || rc == CLI_HELP) {
        FUZZ_CHECK(len == 0, "%s: returned %d but reported \"%s\"", who, rc, err);
        return;
    }
    FUZZ_CHECK(rc == CLI_USAGE || rc == CLI_FAILED, "%s: returned %d", who, rc);
    FUZZ_CHECK(len == c->len, "%s: the report has a NUL byte: \"%s\"", who, err);
    FUZZ_CHECK(strncmp(err, "spmd: ", 6) == 0, "%s: report \"%s\" does not start with spmd:", who,
               err);
    FUZZ_CHECK(len > 0 && err[len - 1] == '\n' && memchr(err, '\n', len - 1) == NULL,
               "%s: report is not exactly one line: \"%s\"", who, err);

    /* The message proper, after "spmd: " and the command's "sharding: ". */
    const char *body = err + 6;
    if (cmd != NULL) {
        size_t n = strlen(cmd);
        FUZZ_CHECK(strncmp(body, cmd, n) == 0 && strncmp(body + n, ": ", 2) == 0,
                   "%s: report \"%s\" does not name the command", cmd, err);
        body += n + 2;
    }
    /* "unknown or ambiguous option '--NAME[=VALUE]'; see 'spmd..." */
    static const char unknown_long[] = "unknown or ambiguous option '--";
    const char *end = last_strstr(body, "'; see 'spmd");
    if (strncmp(body, unknown_long, sizeof unknown_long - 1) == 0 && end != NULL) {
        const char *name = body + sizeof unknown_long - 1;
        size_t n = end > name ? (size_t)(end - name) : 0;
        const char *eq = memchr(name, '=', n);
        if (eq != NULL)
            n = (size_t)(eq - name);
        FUZZ_CHECK(!is_option(options, name, n), "%s: '--%.*s' reported as unknown: \"%s\"", who,
                   (int)n, name, err);
    }
    /* "unknown option '-C'; see ..." */
    static const char unknown_short[] = "unknown option '-";
    if (strncmp(body, unknown_short, sizeof unknown_short - 1) == 0) {
        char opt = body[sizeof unknown_short - 1];
        if (opt != '\0' && body[sizeof unknown_short] == '\'')
            FUZZ_CHECK(strchr(shorts, opt) == NULL, "%s: '-%c' reported as unknown: \"%s\"", who,
                       opt, err);
    }
}

static void check_sharding(const cli_sharding_args *a)
{
    FUZZ_CHECK(a->mesh_text != NULL && a->spec_text != NULL && a->shape_text != NULL,
               "sharding: a required option is missing after success");
    const cli_mesh_arg *m = &a->mesh;
    FUZZ_CHECK(m->ndim >= 1 && m->ndim <= SPMD_MAX_MESH_AXES, "mesh ndim %d", m->ndim);
    int64_t size = 1;
    for (int i = 0; i < m->ndim; i++) {
        const char *name = m->names[i];
        size_t len = strlen(name);
        FUZZ_CHECK(m->shape[i] >= 1, "mesh axis %d has size %d", i, m->shape[i]);
        FUZZ_CHECK(len >= 1, "mesh axis %d has an empty name", i);
        FUZZ_CHECK(name >= m->text && name + len <= m->text + strlen(a->mesh_text),
                   "mesh axis %d's name is not in the copy", i);
        FUZZ_CHECK(name[0] != ' ' && name[0] != '\t' && name[len - 1] != ' ' &&
                       name[len - 1] != '\t',
                   "mesh axis name \"%s\" is not trimmed", name);
        FUZZ_CHECK(strchr(name, ',') == NULL && strchr(name, '=') == NULL,
                   "mesh axis name \"%s\" holds a separator", name);
        size *= m->shape[i];
    }
    FUZZ_CHECK(size == m->size && size <= INT32_MAX, "mesh size %lld, product %lld",
               (long long)m->size, (long long)size);
    const cli_shape_arg *s = &a->shape;
    FUZZ_CHECK(s->ndim >= 1 && s->ndim <= SPMD_MAX_RANK, "shape ndim %d", s->ndim);
    for (int j = 0; j < s->ndim; j++)
        FUZZ_CHECK(s->dims[j] >= 1, "extent %d is %lld", j, (long long)s->dims[j]);
    if (a->devices_text != NULL) {
        const cli_devices_arg *d = &a->devices;
        int max = -1;
        FUZZ_CHECK(d->count >= 1 && d->ids != NULL, "%d device ids", d->count);
        for (int i = 0; i < d->count; i++) {
            FUZZ_CHECK(d->ids[i] >= 0, "device id %d", d->ids[i]);
            max = d->ids[i] > max ? d->ids[i] : max;
        }
        FUZZ_CHECK(d->max_id == max, "max_id %d, want %d", d->max_id, max);
    }
    /* What cmd_sharding does next with the spec: it parses or says why not. */
    spmd_spec *spec = NULL;
    spmd_status st = spmd_spec_parse(a->spec_text, &spec);
    FUZZ_CHECK(st == SPMD_OK || (st == SPMD_ERR_SPEC && spmd_last_error()[0] != '\0'),
               "spec parse returned %d", (int)st);
    spmd_spec_destroy(spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    capture c;

    if (text == NULL)
        abort();
    if (size > 0)
        memcpy(text, data, size);
    text[size] = '\0';
    argv[argc++] = program;
    for (size_t i = 0; size > 0 && i <= size && argc < MAX_ARGS; argc++) {
        argv[argc] = text + i;
        i += strlen(text + i) + 1;
    }
    argv[argc] = NULL;
    char *original[MAX_ARGS + 1]; /* getopt_long permutes argv */
    memcpy(original, argv, sizeof original);

    cli_global g;
    capture_start(&c);
    int rc = cli_parse_global(argc, argv, commands, 2, &g);
    check_report("global", NULL, rc, &c, global_options, "hV");
    capture_end(&c);
    FUZZ_CHECK(rc == CLI_OK || rc == CLI_USAGE, "global parse returned %d", rc);
    if (rc != CLI_OK) {
        free(text);
        return 0;
    }
    switch (g.action) {
    case CLI_ACTION_HELP:
    case CLI_ACTION_VERSION:
        break;
    case CLI_ACTION_HELP_COMMAND:
        FUZZ_CHECK(g.command >= 0 && g.command < 2, "help for command %d", g.command);
        break;
    case CLI_ACTION_RUN:
        FUZZ_CHECK(g.command >= 0 && g.command < 2, "run command %d", g.command);
        FUZZ_CHECK(g.sub_argc >= 1 && g.sub_argv > argv && g.sub_argv + g.sub_argc == argv + argc,
                   "the command's vector");
        FUZZ_CHECK(strcmp(g.sub_argv[0], commands[g.command]) == 0, "command name \"%s\"",
                   g.sub_argv[0]);
        break;
    default:
        FUZZ_CHECK(0, "action %d", (int)g.action);
    }
    if (g.action == CLI_ACTION_RUN && g.command == 0) {
        cli_info_args info;
        capture_start(&c);
        rc = cli_parse_info(g.sub_argc, g.sub_argv, &info);
        check_report("info", "info", rc, &c, info_options, "h");
        capture_end(&c);
        FUZZ_CHECK(rc == CLI_OK || rc == CLI_HELP || rc == CLI_USAGE, "info returned %d", rc);
        FUZZ_CHECK(info.json == 0 || info.json == 1, "info json %d", info.json);
    } else if (g.action == CLI_ACTION_RUN && g.command == 1) {
        cli_sharding_args a;
        capture_start(&c);
        rc = cli_parse_sharding(g.sub_argc, g.sub_argv, &a);
        check_report("sharding", "sharding", rc, &c, sharding_options, "h");
        capture_end(&c);
        FUZZ_CHECK(rc == CLI_OK || rc == CLI_HELP || rc == CLI_USAGE, "sharding returned %d", rc);
        if (rc == CLI_OK)
            check_sharding(&a);
        cli_sharding_args_release(&a);
    }
    /* Permuted, not changed: every argument is still there. */
    for (int i = 1; i < argc; i++) {
        int found = 0;
        for (int j = 1; j < argc && !found; j++)
            found = argv[j] == original[i];
        FUZZ_CHECK(found, "argument %d went missing", i);
    }
    free(text);
    return 0;
}
