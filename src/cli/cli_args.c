/* The spmd CLI's argument parsing (see cli_args.h): the global options and the command name,
 * and the options of each command with the values that can be checked before any device
 * starts. */
#include "cli_args.h"

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Error reporting                                                                              */

static FILE *error_stream; /* NULL: stderr (not a constant, so it cannot start as stderr) */

void cli_set_error_stream(FILE *err) { error_stream = err; }

/* Writes text with line breaks folded into spaces: an argument holding a newline must not
 * split the one-line report. */
static void put_one_line(FILE *err, const char *text)
{
    for (const char *p = text; *p != '\0'; p++)
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, err);
}

/* Prints "spmd: [cmd: ]<message>" as one line. */
static void vreport(const char *cmd, const char *fmt, va_list ap)
{
    FILE *err = error_stream != NULL ? error_stream : stderr;
    char small[512];
    char *text = small;
    va_list again;

    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n >= (int)sizeof small) {
        text = malloc((size_t)n + 1);
        if (text != NULL)
            vsnprintf(text, (size_t)n + 1, fmt, again);
        else
            text = small; /* out of memory: the message is cut short */
    }
    va_end(again);
    fputs("spmd: ", err);
    if (cmd != NULL)
        fprintf(err, "%s: ", cmd);
    put_one_line(err, n >= 0 ? text : fmt);
    fputc('\n', err);
    if (text != small)
        free(text);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_USAGE;
}

int cli_failure(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_FAILED;
}

/* 1 when `arg` ("--name=value") names an option of `longopts` that takes no value. */
static int is_flag_with_value(const struct option *longopts, const char *arg)
{
    const char *name = arg + 2;
    size_t len = (size_t)(strchr(name, '=') - name);
    for (const struct option *o = longopts; o->name != NULL; o++)
        if (strncmp(o->name, name, len) == 0 && o->name[len] == '\0')
            return o->has_arg == no_argument;
    return 0;
}

/* The long option whose value is `val` and whose argument rule is `has_arg`; NULL if none. */
static const char *long_name(const struct option *longopts, int val, int has_arg)
{
    for (const struct option *o = longopts; o->name != NULL; o++)
        if (o->val == val && o->has_arg == has_arg)
            return o->name;
    return NULL;
}

/* optind before the latest getopt_long call (1 after a reset), for option_error. */
static int optind_before;

static int next_option(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
    optind_before = optind > 0 ? optind : 1; /* optind 0 is glibc's reset: it starts at 1 */
    return getopt_long(argc, argv, shortopts, longopts, NULL);
}

/* Reports the option getopt_long just rejected ('?' or ':').
 *
 * The offending argument is argv[optind - 1], except for an unknown short option in the middle
 * of a cluster ("-zj"): getopt_long then leaves optind on the cluster (it moves on after the
 * cluster's last character), so argv[optind - 1] is the argument before it, maybe a long
 * option. For a long option, getopt_long sets optopt to the option's value when it is known
 * (a flag given a value, a value missing) and to 0 when it is unknown or ambiguous. */
static int option_error(const char *cmd, const struct option *longopts, int argc, char **argv,
                        int code)
{
    int mid_cluster = optind == optind_before && optind < argc;
    const char *arg = !mid_cluster && optind > 0 && optind <= argc ? argv[optind - 1] : "";
    int is_long = strncmp(arg, "--", 2) == 0;
    const char *where = cmd != NULL ? cmd : "";
    const char *sep = cmd != NULL ? " " : "";
    const char *name;

    if (code == ':') {
        if (is_long && (name = long_name(longopts, optopt, required_argument)) != NULL)
            return cli_usage_error(cmd, "option '--%s' needs a value; see 'spmd%s%s --help'", name,
                                   sep, where);
        if (is_long)
            return cli_usage_error(cmd, "option '%s' needs a value; see 'spmd%s%s --help'", arg,
                                   sep, where);
        return cli_usage_error(cmd, "option '-%c' needs a value; see 'spmd%s%s --help'", optopt,
                               sep, where);
    }
    if (is_long && optopt != 0 && (name = long_name(longopts, optopt, no_argument)) != NULL)
        return cli_usage_error(cmd, "option '--%s' takes no value; see 'spmd%s%s --help'", name,
                               sep, where);
    if (is_long && strchr(arg, '=') != NULL && is_flag_with_value(longopts, arg))
        return cli_usage_error(cmd, "option '%.*s' takes no value; see 'spmd%s%s --help'",
                               (int)(strchr(arg, '=') - arg), arg, sep, where);
    if (is_long)
        return cli_usage_error(cmd, "unknown or ambiguous option '%s'; see 'spmd%s%s --help'", arg,
                               sep, where);
    if (optopt != 0)
        return cli_usage_error(cmd, "unknown option '-%c'; see 'spmd%s%s --help'", optopt, sep,
                               where);
    return cli_usage_error(cmd, "unknown option '%s'; see 'spmd%s%s --help'", arg, sep, where);
}

/* ------------------------------------------------------------------------------------------ */
/* Argument parsing                                                                             */

static int is_space(char c) { return c == ' ' || c == '\t'; }

/* Trims blanks around text[0..*len). */
static const char *trim(const char *text, size_t *len)
{
    while (*len > 0 && is_space(text[0])) {
        text++;
        (*len)--;
    }
    while (*len > 0 && is_space(text[*len - 1]))
        (*len)--;
    return text;
}

int cli_parse_digits(const char *text, size_t len, uint64_t most, uint64_t *out)
{
    uint64_t v = 0;
    int over = 0;

    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        unsigned digit = (unsigned)(text[i] - '0');
        if (digit > most || v > (most - digit) / 10)
            over = 1; /* read on: a later non-digit makes it no number at all */
        else
            v = v * 10 + digit;
    }
    if (over)
        return 1;
    *out = v;
    return 0;
}

/* Parses text[0..len) as a whole decimal integer, with an optional sign. Returns 0 on success,
 * -1 when it is not an integer, 1 when it is out of range for int64_t. */
static int parse_int64(const char *text, size_t len, int64_t *out)
{
    int negative = len > 0 && text[0] == '-';
    size_t sign = len > 0 && (text[0] == '-' || text[0] == '+');
    uint64_t v = 0;
    int rc = cli_parse_digits(text + sign, len - sign, (uint64_t)INT64_MAX + negative, &v);
    if (rc != 0)
        return rc;
    *out = negative && v ? -(int64_t)(v - 1) - 1 : (int64_t)v; /* INT64_MIN too */
    return 0;
}

/* Calls fn(token, len, index, ctx) for each comma-separated token of text (blanks trimmed).
 * Stops at the first nonzero return, which it passes on. */
typedef int (*token_fn)(const char *token, size_t len, int index, void *ctx);

static int for_each_token(const char *text, token_fn fn, void *ctx)
{
    int index = 0;
    for (const char *p = text;; index++) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        const char *tok = trim(p, &len);
        int rc = fn(tok, len, index, ctx);
        if (rc != 0)
            return rc;
        if (comma == NULL)
            return 0;
        p = comma + 1;
    }
}

/* --mesh name=size,... */
static const char mesh_hint[] = "write name=size pairs separated by commas, e.g. --mesh a=4,b=2";

static int mesh_token(const char *tok, size_t len, int index, void *ctx)
{
    cli_mesh_arg *m = ctx;
    const char *eq = memchr(tok, '=', len);
    int64_t v = 0;

    if (len == 0)
        return cli_usage_error("sharding", "--mesh '%s' has an empty axis at position %d; %s",
                               m->option_text, index + 1, mesh_hint);
    if (index >= SPMD_MAX_MESH_AXES)
        return cli_usage_error("sharding", "--mesh '%s' has more than %d axes; use at most %d",
                               m->option_text, SPMD_MAX_MESH_AXES, SPMD_MAX_MESH_AXES);
    size_t name_len = eq != NULL ? (size_t)(eq - tok) : len;
    size_t size_len = eq != NULL ? len - name_len - 1 : 0;
    const char *name = trim(tok, &name_len);
    const char *size_text = eq != NULL ? trim(eq + 1, &size_len) : "";
    if (size_len == 0)
        return cli_usage_error("sharding", "--mesh axis '%.*s' has no size; %s", (int)len, tok,
                               mesh_hint);
    if (name_len == 0)
        return cli_usage_error("sharding", "--mesh axis '%.*s' has no name; %s", (int)len, tok,
                               mesh_hint);
    int rc = parse_int64(size_text, size_len, &v);
    if (rc < 0)
        return cli_usage_error("sharding", "--mesh axis '%.*s' has size '%.*s', not an integer; %s",
                               (int)name_len, name, (int)size_len, size_text, mesh_hint);
    if (rc > 0 || v > INT_MAX)
        return cli_usage_error("sharding", "--mesh axis '%.*s' has size %.*s, too large",
                               (int)name_len, name, (int)size_len, size_text);
    if (v < 1)
        return cli_usage_error(
            "sharding", "--mesh axis '%.*s' has size %" PRId64 "; axis sizes must be at least 1",
            (int)name_len, name, v);

    /* Terminate the name inside the owned copy. */
    char *name_mut = m->text + (name - m->text);
    name_mut[name_len] = '\0';
    m->names[index] = name_mut;
    m->shape[index] = (int)v;
    m->ndim = index + 1;
    m->size *= v;
    if (m->size > INT_MAX)
        return cli_usage_error("sharding", "--mesh '%s' has more than %d devices", m->option_text,
                               INT_MAX);
    return 0;
}

static int parse_mesh(const char *text, cli_mesh_arg *m)
{
    size_t len = strlen(text);

    memset(m, 0, sizeof *m);
    m->size = 1;
    m->option_text = text;
    trim(text, &len);
    if (len == 0)
        return cli_usage_error("sharding", "--mesh is empty; %s", mesh_hint);
    m->text = malloc(strlen(text) + 1);
    if (m->text == NULL)
        return cli_failure("sharding", "out of memory");
    memcpy(m->text, text, strlen(text) + 1);
    /* Tokens are found in the copy so their names can be NUL-terminated in place. */
    return for_each_token(m->text, mesh_token, m);
}

/* --shape d0,d1,... */
static const char shape_hint[] = "write the extents separated by commas, e.g. --shape 8,8";

static int shape_token(const char *tok, size_t len, int index, void *ctx)
{
    cli_shape_arg *s = ctx;
    int64_t v = 0;

    if (len == 0)
        return cli_usage_error("sharding", "--shape '%s' has an empty extent at position %d; %s",
                               s->option_text, index + 1, shape_hint);
    if (index >= SPMD_MAX_RANK)
        return cli_usage_error("sharding",
                               "--shape '%s' has more than %d dimensions; use at most %d",
                               s->option_text, SPMD_MAX_RANK, SPMD_MAX_RANK);
    int rc = parse_int64(tok, len, &v);
    if (rc < 0)
        return cli_usage_error("sharding", "--shape extent '%.*s' is not an integer; %s", (int)len,
                               tok, shape_hint);
    if (rc > 0)
        return cli_usage_error("sharding", "--shape extent %.*s is too large", (int)len, tok);
    if (v < 1)
        return cli_usage_error("sharding",
                               "--shape extent %" PRId64 " at position %d must be at least 1", v,
                               index + 1);
    s->dims[index] = v;
    s->ndim = index + 1;
    return 0;
}

static int parse_shape(const char *text, cli_shape_arg *s)
{
    size_t len = strlen(text);

    memset(s, 0, sizeof *s);
    s->option_text = text;
    trim(text, &len);
    if (len == 0)
        return cli_usage_error("sharding", "--shape is empty; %s", shape_hint);
    return for_each_token(text, shape_token, s);
}

/* --devices id,id,... */
static const char devices_hint[] =
    "write global device ids (integers >= 0) separated by commas, e.g. --devices 3,1";

static int count_token(const char *tok, size_t len, int index, void *ctx)
{
    (void)tok;
    (void)len;
    (void)index;
    (*(int *)ctx)++;
    return 0;
}

static int devices_token(const char *tok, size_t len, int index, void *ctx)
{
    cli_devices_arg *d = ctx;
    int64_t v = 0;

    if (len == 0)
        return cli_usage_error("sharding", "--devices '%s' has an empty id at position %d; %s",
                               d->option_text, index + 1, devices_hint);
    int rc = parse_int64(tok, len, &v);
    if (rc < 0)
        return cli_usage_error("sharding", "--devices id '%.*s' is not an integer; %s", (int)len,
                               tok, devices_hint);
    if (rc > 0 || v > INT_MAX)
        return cli_usage_error("sharding", "--devices id %.*s is too large", (int)len, tok);
    if (v < 0)
        return cli_usage_error("sharding", "--devices id %" PRId64 " is negative; %s", v,
                               devices_hint);
    d->ids[index] = (int)v;
    if (v > d->max_id)
        d->max_id = (int)v;
    return 0;
}

static int parse_devices(const char *text, cli_devices_arg *d)
{
    size_t len = strlen(text);
    int n = 0;

    memset(d, 0, sizeof *d);
    d->option_text = text;
    d->max_id = -1;
    trim(text, &len);
    if (len == 0)
        return cli_usage_error("sharding", "--devices is empty; %s", devices_hint);
    (void)for_each_token(text, count_token, &n);
    d->ids = malloc((size_t)n * sizeof *d->ids);
    if (d->ids == NULL)
        return cli_failure("sharding", "out of memory");
    d->count = n;
    return for_each_token(text, devices_token, d);
}

/* ------------------------------------------------------------------------------------------ */
/* Commands                                                                                     */

static int unknown_command(const char *name, const char *const *names, int num_names)
{
    FILE *err = error_stream != NULL ? error_stream : stderr;
    fputs("spmd: unknown command '", err);
    put_one_line(err, name);
    fputs("'; the commands are", err);
    for (int i = 0; i < num_names; i++)
        fprintf(err, "%s %s", i == 0 ? "" : ",", names[i]);
    fputs(" (see 'spmd --help')\n", err);
    return CLI_USAGE;
}

static int find_command(const char *name, const char *const *names, int num_names)
{
    for (int i = 0; i < num_names; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

int cli_parse_global(int argc, char **argv, const char *const *names, int num_names,
                     cli_global *out)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;

    memset(out, 0, sizeof *out);
    out->command = -1;
    opterr = 0; /* getopt would prefix its messages with argv[0], a path */
    optind = 0; /* full reset: a previous parse may have left getopt anywhere */
    /* '+': stop at the command name; its options belong to its own parser. */
    while ((c = next_option(argc, argv, "+:hV", longopts)) != -1) {
        switch (c) {
        case 'h':
            out->action = CLI_ACTION_HELP;
            return CLI_OK;
        case 'V':
            out->action = CLI_ACTION_VERSION;
            return CLI_OK;
        default:
            return option_error(NULL, longopts, argc, argv, c);
        }
    }
    if (optind >= argc)
        return cli_usage_error(NULL,
                               "no command given; run 'spmd --help' for the list of commands");

    const char *name = argv[optind];
    if (strcmp(name, "help") == 0) {
        /* "spmd help [command]" reads better than "spmd command --help" to some. */
        if (optind + 1 >= argc) {
            out->action = CLI_ACTION_HELP;
            return CLI_OK;
        }
        out->command = find_command(argv[optind + 1], names, num_names);
        if (out->command < 0)
            return unknown_command(argv[optind + 1], names, num_names);
        out->action = CLI_ACTION_HELP_COMMAND;
        return CLI_OK;
    }
    out->command = find_command(name, names, num_names);
    if (out->command < 0)
        return unknown_command(name, names, num_names);
    out->action = CLI_ACTION_RUN;
    out->sub_argc = argc - optind;
    out->sub_argv = argv + optind;
    return CLI_OK;
}

int cli_parse_info(int argc, char **argv, cli_info_args *out)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    memset(out, 0, sizeof *out);
    opterr = 0;
    optind = 0; /* full reset: the command parses a different vector */
    while ((c = next_option(argc, argv, ":h", longopts)) != -1) {
        switch (c) {
        case 'j':
            out->json = 1;
            break;
        case 'h':
            return CLI_HELP;
        default:
            return option_error("info", longopts, argc, argv, c);
        }
    }
    if (optind < argc)
        return cli_usage_error("info", "unexpected argument '%s'; see 'spmd info --help'",
                               argv[optind]);
    return CLI_OK;
}

static int parse_sharding_options(int argc, char **argv, cli_sharding_args *a)
{
    static const struct option longopts[] = {
        {"mesh", required_argument, NULL, 'm'},
        {"spec", required_argument, NULL, 's'},
        {"shape", required_argument, NULL, 'S'},
        {"devices", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    opterr = 0;
    optind = 0; /* full reset: the command parses a different vector */
    while ((c = next_option(argc, argv, ":h", longopts)) != -1) {
        switch (c) {
        case 'm':
            a->mesh_text = optarg;
            break;
        case 's':
            a->spec_text = optarg;
            break;
        case 'S':
            a->shape_text = optarg;
            break;
        case 'd':
            a->devices_text = optarg;
            break;
        case 'j':
            a->json = 1;
            break;
        case 'h':
            return CLI_HELP;
        default:
            return option_error("sharding", longopts, argc, argv, c);
        }
    }
    if (optind < argc)
        return cli_usage_error("sharding",
                               "unexpected argument '%s'; options take the form "
                               "--mesh a=4,b=2 (see 'spmd sharding --help')",
                               argv[optind]);
    if (a->mesh_text == NULL)
        return cli_usage_error("sharding",
                               "missing --mesh; give the mesh axes, e.g. --mesh a=4,b=2");
    if (a->spec_text == NULL)
        return cli_usage_error("sharding",
                               "missing --spec; give a partition spec, e.g. "
                               "--spec \"'a', None\", or --spec \"\" for a fully replicated array");
    if (a->shape_text == NULL)
        return cli_usage_error("sharding", "missing --shape; give the global array shape, e.g. "
                                           "--shape 8,8");
    return CLI_OK;
}

int cli_parse_sharding(int argc, char **argv, cli_sharding_args *out)
{
    int rc;

    memset(out, 0, sizeof *out);
    rc = parse_sharding_options(argc, argv, out);
    if (rc != CLI_OK)
        return rc;
    /* Everything the user typed is checked before any device starts. */
    if ((rc = parse_mesh(out->mesh_text, &out->mesh)) != CLI_OK ||
        (rc = parse_shape(out->shape_text, &out->shape)) != CLI_OK ||
        (out->devices_text != NULL &&
         (rc = parse_devices(out->devices_text, &out->devices)) != CLI_OK))
        return rc;
    return CLI_OK;
}

void cli_sharding_args_release(cli_sharding_args *a)
{
    free(a->mesh.text);
    free(a->devices.ids);
    a->mesh.text = NULL;
    a->devices.ids = NULL;
}
