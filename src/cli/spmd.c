/* spmd: the libspmd command-line tool. Shows the runtime (processes, devices, build features)
 * and the sharding math (which block of an array each mesh device holds).
 *
 * Exit status: 0 success, 1 the library refused (its message follows), 2 bad usage. Every
 * failure prints exactly one line to stderr, starting with "spmd: ". */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spmd.h"

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

#if defined(__GNUC__) || defined(__clang__)
#define CLI_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define CLI_PRINTF(fmt_idx, arg_idx)
#endif

/* Room for any formatted mesh, spec or sharding: at most 8 axes of 63 characters each. */
#define TEXT_BUF 4096

#define NUM_CPU_ENV "SPMD_NUM_CPU_DEVICES"

/* ------------------------------------------------------------------------------------------ */
/* Error reporting                                                                              */

/* Prints "spmd: [cmd: ]<message>" as one line. */
static void vreport(const char *cmd, const char *fmt, va_list ap)
{
    fputs("spmd: ", stderr);
    if (cmd != NULL)
        fprintf(stderr, "%s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

static int usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
static int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_USAGE;
}

static int cli_failure(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
static int cli_failure(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_FAILED;
}

/* "spmd: cmd: <what>: <library message>", folded onto one line so scripts can grep it. */
static int library_error(const char *cmd, const char *what, spmd_status st)
{
    const char *msg = spmd_last_error();
    if (msg == NULL || msg[0] == '\0')
        msg = spmd_status_string(st);
    fprintf(stderr, "spmd: %s: %s: ", cmd, what);
    for (const char *p = msg; *p != '\0'; p++)
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, stderr);
    fprintf(stderr, " [%s]\n", spmd_status_name(st));
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

/* Reports the option getopt_long just rejected ('?' or ':'). */
static int option_error(const char *cmd, const struct option *longopts, int argc, char **argv,
                        int code)
{
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    int is_long = strncmp(arg, "--", 2) == 0;
    const char *where = cmd != NULL ? cmd : "";
    const char *sep = cmd != NULL ? " " : "";

    if (code == ':') {
        if (is_long)
            return usage_error(cmd, "option '%s' needs a value; see 'spmd%s%s --help'", arg, sep,
                               where);
        return usage_error(cmd, "option '-%c' needs a value; see 'spmd%s%s --help'", optopt, sep,
                           where);
    }
    if (is_long && strchr(arg, '=') != NULL && is_flag_with_value(longopts, arg))
        return usage_error(cmd, "option '%.*s' takes no value; see 'spmd%s%s --help'",
                           (int)(strchr(arg, '=') - arg), arg, sep, where);
    if (is_long)
        return usage_error(cmd, "unknown or ambiguous option '%s'; see 'spmd%s%s --help'", arg, sep,
                           where);
    if (optopt != 0)
        return usage_error(cmd, "unknown option '-%c'; see 'spmd%s%s --help'", optopt, sep, where);
    return usage_error(cmd, "unknown option '%s'; see 'spmd%s%s --help'", arg, sep, where);
}

/* Output goes to a pipe or file as often as to a terminal: a full disk must not look like
 * success. */
static int finish_output(const char *cmd, int rc)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int err = errno;
        return cli_failure(cmd, "cannot write the output: %s", err ? strerror(err) : "I/O error");
    }
    return rc;
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

/* Parses text[0..len) as a whole decimal integer. Returns 0 on success, -1 when it is not an
 * integer, 1 when it is out of range for int64_t. */
static int parse_int64(const char *text, size_t len, int64_t *out)
{
    char buf[32];
    char *end = NULL;
    size_t i = 0;

    if (len == 0)
        return -1;
    if (text[0] == '-' || text[0] == '+')
        i = 1;
    if (i == len)
        return -1;
    for (; i < len; i++)
        if (text[i] < '0' || text[i] > '9')
            return -1;
    if (len >= sizeof buf)
        return 1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno == ERANGE)
        return 1;
    *out = (int64_t)v;
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

/* --mesh name=size,... : names point into `text`, an owned copy. */
typedef struct mesh_arg {
    char *text;
    int ndim;
    int shape[SPMD_MAX_MESH_AXES];
    const char *names[SPMD_MAX_MESH_AXES];
    int64_t size; /* product of shape */
    const char *option_text;
} mesh_arg;

static const char mesh_hint[] = "write name=size pairs separated by commas, e.g. --mesh a=4,b=2";

static int mesh_token(const char *tok, size_t len, int index, void *ctx)
{
    mesh_arg *m = ctx;
    const char *eq = memchr(tok, '=', len);
    int64_t v = 0;

    if (len == 0)
        return usage_error("sharding", "--mesh '%s' has an empty axis at position %d; %s",
                           m->option_text, index + 1, mesh_hint);
    if (index >= SPMD_MAX_MESH_AXES)
        return usage_error("sharding", "--mesh '%s' has more than %d axes; use at most %d",
                           m->option_text, SPMD_MAX_MESH_AXES, SPMD_MAX_MESH_AXES);
    size_t name_len = eq != NULL ? (size_t)(eq - tok) : len;
    size_t size_len = eq != NULL ? len - name_len - 1 : 0;
    const char *name = trim(tok, &name_len);
    const char *size_text = eq != NULL ? trim(eq + 1, &size_len) : "";
    if (size_len == 0)
        return usage_error("sharding", "--mesh axis '%.*s' has no size; %s", (int)len, tok,
                           mesh_hint);
    if (name_len == 0)
        return usage_error("sharding", "--mesh axis '%.*s' has no name; %s", (int)len, tok,
                           mesh_hint);
    int rc = parse_int64(size_text, size_len, &v);
    if (rc < 0)
        return usage_error("sharding", "--mesh axis '%.*s' has size '%.*s', not an integer; %s",
                           (int)name_len, name, (int)size_len, size_text, mesh_hint);
    if (rc > 0 || v > INT_MAX)
        return usage_error("sharding", "--mesh axis '%.*s' has size %.*s, too large", (int)name_len,
                           name, (int)size_len, size_text);
    if (v < 1)
        return usage_error("sharding",
                           "--mesh axis '%.*s' has size %" PRId64 "; axis sizes must be at least 1",
                           (int)name_len, name, v);

    /* Terminate the name inside the owned copy. */
    char *name_mut = m->text + (name - m->text);
    name_mut[name_len] = '\0';
    m->names[index] = name_mut;
    m->shape[index] = (int)v;
    m->ndim = index + 1;
    m->size *= v;
    if (m->size > INT_MAX)
        return usage_error("sharding", "--mesh '%s' has more than %d devices", m->option_text,
                           INT_MAX);
    return 0;
}

static int parse_mesh(const char *text, mesh_arg *m)
{
    size_t len = strlen(text);

    memset(m, 0, sizeof *m);
    m->size = 1;
    m->option_text = text;
    trim(text, &len);
    if (len == 0)
        return usage_error("sharding", "--mesh is empty; %s", mesh_hint);
    m->text = malloc(strlen(text) + 1);
    if (m->text == NULL)
        return cli_failure("sharding", "out of memory");
    memcpy(m->text, text, strlen(text) + 1);
    /* Tokens are found in the copy so their names can be NUL-terminated in place. */
    return for_each_token(m->text, mesh_token, m);
}

/* --shape d0,d1,... */
typedef struct shape_arg {
    int ndim;
    int64_t dims[SPMD_MAX_RANK];
    const char *option_text;
} shape_arg;

static const char shape_hint[] = "write the extents separated by commas, e.g. --shape 8,8";

static int shape_token(const char *tok, size_t len, int index, void *ctx)
{
    shape_arg *s = ctx;
    int64_t v = 0;

    if (len == 0)
        return usage_error("sharding", "--shape '%s' has an empty extent at position %d; %s",
                           s->option_text, index + 1, shape_hint);
    if (index >= SPMD_MAX_RANK)
        return usage_error("sharding", "--shape '%s' has more than %d dimensions; use at most %d",
                           s->option_text, SPMD_MAX_RANK, SPMD_MAX_RANK);
    int rc = parse_int64(tok, len, &v);
    if (rc < 0)
        return usage_error("sharding", "--shape extent '%.*s' is not an integer; %s", (int)len, tok,
                           shape_hint);
    if (rc > 0)
        return usage_error("sharding", "--shape extent %.*s is too large", (int)len, tok);
    if (v < 1)
        return usage_error("sharding",
                           "--shape extent %" PRId64 " at position %d must be at least 1", v,
                           index + 1);
    s->dims[index] = v;
    s->ndim = index + 1;
    return 0;
}

static int parse_shape(const char *text, shape_arg *s)
{
    size_t len = strlen(text);

    memset(s, 0, sizeof *s);
    s->option_text = text;
    trim(text, &len);
    if (len == 0)
        return usage_error("sharding", "--shape is empty; %s", shape_hint);
    return for_each_token(text, shape_token, s);
}

/* --devices id,id,... */
typedef struct devices_arg {
    int count;
    int *ids;
    int max_id;
    const char *option_text;
} devices_arg;

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
    devices_arg *d = ctx;
    int64_t v = 0;

    if (len == 0)
        return usage_error("sharding", "--devices '%s' has an empty id at position %d; %s",
                           d->option_text, index + 1, devices_hint);
    int rc = parse_int64(tok, len, &v);
    if (rc < 0)
        return usage_error("sharding", "--devices id '%.*s' is not an integer; %s", (int)len, tok,
                           devices_hint);
    if (rc > 0 || v > INT_MAX)
        return usage_error("sharding", "--devices id %.*s is too large", (int)len, tok);
    if (v < 0)
        return usage_error("sharding", "--devices id %" PRId64 " is negative; %s", v, devices_hint);
    d->ids[index] = (int)v;
    if (v > d->max_id)
        d->max_id = (int)v;
    return 0;
}

static int parse_devices(const char *text, devices_arg *d)
{
    size_t len = strlen(text);
    int n = 0;

    memset(d, 0, sizeof *d);
    d->option_text = text;
    d->max_id = -1;
    trim(text, &len);
    if (len == 0)
        return usage_error("sharding", "--devices is empty; %s", devices_hint);
    (void)for_each_token(text, count_token, &n);
    d->ids = malloc((size_t)n * sizeof *d->ids);
    if (d->ids == NULL)
        return cli_failure("sharding", "out of memory");
    d->count = n;
    return for_each_token(text, devices_token, d);
}

/* ------------------------------------------------------------------------------------------ */
/* JSON helpers (cJSON)                                                                         */

/* Integers go out as raw text so that int64 extents print exactly (cJSON stores doubles). */
static cJSON *json_int(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return cJSON_CreateRaw(buf);
}

/* Adds `item` to an object (key != NULL) or array; frees it and returns -1 on failure. */
static int json_add(cJSON *parent, const char *key, cJSON *item)
{
    if (item == NULL)
        return -1;
    cJSON_bool ok =
        key != NULL ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item);
    if (!ok) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

/* Appends a new array to `parent` under `key`; NULL when allocation fails. */
static cJSON *json_add_array(cJSON *parent, const char *key)
{
    cJSON *arr = cJSON_CreateArray();
    return json_add(parent, key, arr) == 0 ? arr : NULL;
}

/* Appends a new object to `parent` under `key`; NULL when allocation fails. */
static cJSON *json_add_object(cJSON *parent, const char *key)
{
    cJSON *obj = cJSON_CreateObject();
    return json_add(parent, key, obj) == 0 ? obj : NULL;
}

static cJSON *json_int_array(int n, const int64_t *values)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr != NULL && i < n; i++) {
        if (json_add(arr, NULL, json_int(values[i])) != 0) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* Prints `root` unformatted plus a newline and frees it; NULL root means allocation failed. */
static int json_print(const char *cmd, cJSON *root)
{
    char *text = root != NULL ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (text == NULL)
        return cli_failure(cmd, "out of memory while building the JSON output");
    fputs(text, stdout);
    fputc('\n', stdout);
    cJSON_free(text);
    return CLI_OK;
}

/* Writes "(2, 8)" or "(8,)" as Python prints a shape. */
static void print_tuple(FILE *out, int n, const int64_t *v)
{
    fputc('(', out);
    for (int i = 0; i < n; i++)
        fprintf(out, i == 0 ? "%" PRId64 : ", %" PRId64, v[i]);
    fputs(n == 1 ? ",)" : ")", out);
}

/* ------------------------------------------------------------------------------------------ */
/* spmd info                                                                                    */

static void usage_info(FILE *out)
{
    fputs("usage: spmd info [--json]\n"
          "\n"
          "Starts the libspmd runtime and shows the library version, the build features (mpi,\n"
          "cuda, nccl), the processes and every global device (id, owning process, local\n"
          "ordinal, platform). Under mpirun every process starts the runtime and process 0\n"
          "prints the whole picture once.\n"
          "\n"
          "options:\n"
          "  --json      print one JSON object instead of text\n"
          "  -h, --help  show this help\n"
          "\n"
          "environment: SPMD_PLATFORM=cpu|cuda, SPMD_NUM_CPU_DEVICES=N (CPU devices per process)\n",
          out);
}

static const char *yes_no(unsigned int features, unsigned int bit)
{
    return (features & bit) != 0 ? "yes" : "no";
}

static cJSON *info_json(unsigned int features, int nproc, int ndev, const spmd_device_info *devs)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *feat = NULL, *list = NULL;

    /* Every node is attached as soon as it exists: deleting root frees all of it. */
    if (root == NULL || json_add(root, "version", cJSON_CreateString(spmd_version_string())) ||
        (feat = json_add_object(root, "features")) == NULL ||
        json_add(feat, "mpi", cJSON_CreateBool((features & SPMD_FEATURE_MPI) != 0)) ||
        json_add(feat, "cuda", cJSON_CreateBool((features & SPMD_FEATURE_CUDA) != 0)) ||
        json_add(feat, "nccl", cJSON_CreateBool((features & SPMD_FEATURE_NCCL) != 0)) ||
        json_add(root, "platform",
                 cJSON_CreateString(spmd_platform_name(spmd_runtime_platform()))) ||
        json_add(root, "process_count", json_int(nproc)) ||
        json_add(root, "device_count", json_int(ndev)) ||
        (list = json_add_array(root, "devices")) == NULL)
        goto oom;
    for (int i = 0; i < ndev; i++) {
        cJSON *d = json_add_object(list, NULL);
        if (d == NULL || json_add(d, "id", json_int(devs[i].id)) ||
            json_add(d, "process", json_int(devs[i].process_index)) ||
            json_add(d, "local_ordinal", json_int(devs[i].local_ordinal)) ||
            json_add(d, "platform", cJSON_CreateString(spmd_platform_name(devs[i].platform))) ||
            json_add(d, "hardware_ordinal", json_int(devs[i].hardware_ordinal)))
            goto oom;
    }
    return root;
oom:
    cJSON_Delete(root);
    return NULL;
}

static void info_text(unsigned int features, int nproc, int ndev, const spmd_device_info *devs)
{
    printf("version:   libspmd %s\n", spmd_version_string());
    printf("features:  mpi=%s cuda=%s nccl=%s\n", yes_no(features, SPMD_FEATURE_MPI),
           yes_no(features, SPMD_FEATURE_CUDA), yes_no(features, SPMD_FEATURE_NCCL));
    printf("platform:  %s\n", spmd_platform_name(spmd_runtime_platform()));
    printf("processes: %d\n", nproc);
    printf("devices:   %d\n", ndev);
    printf("  %6s  %7s  %5s  %-8s  %8s\n", "id", "process", "local", "platform", "hardware");
    for (int i = 0; i < ndev; i++)
        printf("  %6d  %7d  %5d  %-8s  %8d\n", devs[i].id, devs[i].process_index,
               devs[i].local_ordinal, spmd_platform_name(devs[i].platform),
               devs[i].hardware_ordinal);
}

static int cmd_info(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0;
    int c;

    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            json = 1;
            break;
        case 'h':
            usage_info(stdout);
            return finish_output("info", CLI_OK);
        default:
            return option_error("info", longopts, argc, argv, c);
        }
    }
    if (optind < argc)
        return usage_error("info", "unexpected argument '%s'; see 'spmd info --help'",
                           argv[optind]);

    spmd_init_options opts = SPMD_INIT_OPTIONS_INIT;
    spmd_status st = spmd_init(&opts);
    if (st != SPMD_OK)
        return library_error("info", "cannot start the runtime", st);

    int rc = CLI_OK;
    int ndev = spmd_device_count();
    int nproc = spmd_process_count();
    spmd_device_info *devs = calloc(ndev > 0 ? (size_t)ndev : 1, sizeof *devs);
    if (devs == NULL)
        rc = cli_failure("info", "out of memory");
    for (int i = 0; rc == CLI_OK && i < ndev; i++) {
        st = spmd_device_get_info(i, &devs[i]);
        if (st != SPMD_OK)
            rc = library_error("info", "cannot describe a device", st);
    }
    /* Every process sees the same global list; one copy of it is enough. */
    if (rc == CLI_OK && spmd_process_index() == 0) {
        unsigned int features = spmd_build_features();
        if (json)
            rc = json_print("info", info_json(features, nproc, ndev, devs));
        else
            info_text(features, nproc, ndev, devs);
        rc = finish_output("info", rc);
    }
    free(devs);
    /* Collective: every process finalizes, whatever happened above. */
    st = spmd_finalize();
    if (st != SPMD_OK && rc == CLI_OK)
        rc = library_error("info", "cannot shut the runtime down", st);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* spmd sharding                                                                                */

static void usage_sharding(FILE *out)
{
    fputs(
        "usage: spmd sharding --mesh NAME=SIZE,... --spec SPEC --shape D0,D1,...\n"
        "                     [--devices ID,...] [--json]\n"
        "\n"
        "Shows which block of a global array each device of a mesh holds under\n"
        "NamedSharding(mesh, P(SPEC)), as jax.debug.visualize_array_sharding does. Pure index\n"
        "math: runs in one process (no mpirun needed) on CPU devices.\n"
        "\n"
        "options:\n"
        "  --mesh NAME=SIZE,...  mesh axes, major first, e.g. a=4,b=2\n"
        "  --spec SPEC           partition spec in Python spelling, e.g. \"'a', None\",\n"
        "                        \"('a','b'), None\" or \"\" (fully replicated)\n"
        "  --shape D0,D1,...     global array shape, e.g. 8,8\n"
        "  --devices ID,...      global device ids laid over the mesh in row-major order\n"
        "                        (default: 0, 1, ..., mesh size - 1)\n"
        "  --json                print one JSON object: the mesh, the spec, the shape, the\n"
        "                        shard shape and, per mesh device in flat order, its id,\n"
        "                        process, index box ([start, stop) per dimension) and replica id\n"
        "  -h, --help            show this help\n"
        "\n"
        "Without --json it prints the NamedSharding, the shard shape and the picture (rank 1\n"
        "or 2), or one line per device for higher ranks.\n"
        "\n"
        "environment: SPMD_NUM_CPU_DEVICES=N runs on N CPU devices (it must cover the mesh);\n"
        "when unset, exactly as many devices as the mesh needs are started.\n",
        out);
}

typedef struct sharding_args {
    const char *mesh_text;
    const char *spec_text;
    const char *shape_text;
    const char *devices_text;
    int json;
} sharding_args;

/* Everything cmd_sharding owns, so that one function frees it on every path. */
typedef struct sharding_state {
    mesh_arg mesh_in;
    shape_arg shape;
    devices_arg devices;
    int *mesh_ids;
    spmd_spec *spec;
    spmd_mesh *mesh;
    spmd_sharding *sharding;
    int initialized;
} sharding_state;

static int sharding_release(sharding_state *s, int rc)
{
    spmd_sharding_destroy(s->sharding);
    spmd_mesh_destroy(s->mesh);
    spmd_spec_destroy(s->spec);
    if (s->initialized) {
        spmd_status st = spmd_finalize();
        if (st != SPMD_OK && rc == CLI_OK)
            rc = library_error("sharding", "cannot shut the runtime down", st);
    }
    free(s->mesh_ids);
    free(s->devices.ids);
    free(s->mesh_in.text);
    return rc;
}

/* Starts exactly `needed` CPU devices, or checks that SPMD_NUM_CPU_DEVICES provides them. */
static int start_cpu_devices(sharding_state *s, int needed, int from_devices)
{
    const char *env = getenv(NUM_CPU_ENV);
    int from_env = env != NULL && env[0] != '\0';
    spmd_init_options opts = SPMD_INIT_OPTIONS_INIT;

    if (needed > SPMD_MAX_CPU_DEVICES) {
        if (from_devices)
            return usage_error("sharding",
                               "--devices names id %d, but one process runs at most %d CPU "
                               "devices; use ids below %d",
                               needed - 1, SPMD_MAX_CPU_DEVICES, SPMD_MAX_CPU_DEVICES);
        return usage_error("sharding",
                           "the mesh has %d devices, but one process runs at most %d CPU "
                           "devices; use a smaller mesh",
                           needed, SPMD_MAX_CPU_DEVICES);
    }
    opts.num_cpu_devices = from_env ? 0 : needed; /* 0: the library reads the variable */
    opts.platform = SPMD_PLATFORM_CPU;            /* the math is the same on any platform */
    opts.use_mpi = 0;                             /* pure math: never wait for mpirun peers */
    spmd_status st = spmd_init(&opts);
    if (st != SPMD_OK)
        return library_error("sharding", "cannot start the CPU devices", st);
    s->initialized = 1;

    int have = spmd_device_count();
    if (have < needed && !from_env)
        return cli_failure("sharding", "libspmd started %d CPU devices where %d were asked for",
                           have, needed);
    if (have < needed) {
        if (from_devices)
            return usage_error("sharding",
                               "%s=%s gives %d CPU devices, but --devices names id %d, which "
                               "needs %d; set %s=%d or more, or unset it to size the run "
                               "automatically",
                               NUM_CPU_ENV, env, have, needed - 1, needed, NUM_CPU_ENV, needed);
        return usage_error("sharding",
                           "%s=%s gives %d CPU devices, but the mesh needs %d; set %s=%d or "
                           "more, or unset it to size the run automatically",
                           NUM_CPU_ENV, env, have, needed, NUM_CPU_ENV, needed);
    }
    return CLI_OK;
}

/* One device of the sharding: {"id", "process", "index": [[start, stop], ...], "replica_id"}. */
static int device_json(const sharding_state *s, int id, cJSON *devices)
{
    int ndim = s->shape.ndim;
    spmd_device_info info;
    spmd_box box;
    spmd_status st;

    st = spmd_device_get_info(id, &info);
    if (st != SPMD_OK)
        return library_error("sharding", "cannot describe a mesh device", st);
    st = spmd_sharding_device_box(s->sharding, ndim, s->shape.dims, id, &box);
    if (st != SPMD_OK)
        return library_error("sharding", "cannot compute a device's index box", st);

    cJSON *d = json_add_object(devices, NULL);
    cJSON *index = NULL;
    if (d == NULL || json_add(d, "id", json_int(id)) ||
        json_add(d, "process", json_int(info.process_index)) ||
        (index = json_add_array(d, "index")) == NULL)
        goto oom;
    for (int j = 0; j < ndim; j++) {
        int64_t range[2] = {box.start[j], box.stop[j]};
        if (json_add(index, NULL, json_int_array(2, range)))
            goto oom;
    }
    if (json_add(d, "replica_id", json_int(spmd_sharding_replica_id(s->sharding, id))))
        goto oom;
    return CLI_OK;
oom:
    return cli_failure("sharding", "out of memory while building the JSON output");
}

/* The --json form; NULL (with *rc set and the error reported) on failure. */
static cJSON *sharding_json(const sharding_state *s, const int64_t *shard_shape, int *rc)
{
    const spmd_mesh *mesh = s->mesh;
    int ndim = s->shape.ndim;
    int size = spmd_mesh_size(mesh);
    char spec_text[TEXT_BUF];
    cJSON *root = NULL, *jmesh = NULL, *arr = NULL;

    spmd_status st = spmd_spec_format(spmd_sharding_spec(s->sharding), spec_text, sizeof spec_text);
    if (st != SPMD_OK) {
        *rc = library_error("sharding", "cannot format the spec", st);
        return NULL;
    }

    /* Every node is attached as soon as it exists: deleting root frees all of it. */
    root = cJSON_CreateObject();
    if (root == NULL || (jmesh = json_add_object(root, "mesh")) == NULL)
        goto oom;
    if ((arr = json_add_array(jmesh, "axis_names")) == NULL)
        goto oom;
    for (int a = 0; a < spmd_mesh_ndim(mesh); a++)
        if (json_add(arr, NULL, cJSON_CreateString(spmd_mesh_axis_name(mesh, a))))
            goto oom;
    if ((arr = json_add_array(jmesh, "shape")) == NULL)
        goto oom;
    for (int a = 0; a < spmd_mesh_ndim(mesh); a++)
        if (json_add(arr, NULL, json_int(spmd_mesh_axis_size(mesh, a))))
            goto oom;
    if ((arr = json_add_array(jmesh, "device_ids")) == NULL)
        goto oom;
    for (int i = 0; i < size; i++)
        if (json_add(arr, NULL, json_int(spmd_mesh_device_id(mesh, i))))
            goto oom;

    if (json_add(root, "spec", cJSON_CreateString(spec_text)) ||
        json_add(root, "shape", json_int_array(ndim, s->shape.dims)) ||
        json_add(root, "shard_shape", json_int_array(ndim, shard_shape)) ||
        (arr = json_add_array(root, "devices")) == NULL)
        goto oom;
    for (int i = 0; i < size; i++) {
        *rc = device_json(s, spmd_mesh_device_id(mesh, i), arr);
        if (*rc != CLI_OK) {
            cJSON_Delete(root);
            return NULL;
        }
    }
    return root;

oom:
    cJSON_Delete(root);
    *rc = cli_failure("sharding", "out of memory while building the JSON output");
    return NULL;
}

/* Higher ranks have no picture: one line per device with its box, as Python slices. */
static int print_device_boxes(const sharding_state *s)
{
    int ndim = s->shape.ndim;
    for (int i = 0; i < spmd_mesh_size(s->mesh); i++) {
        int id = spmd_mesh_device_id(s->mesh, i);
        spmd_box box;
        spmd_status st = spmd_sharding_device_box(s->sharding, ndim, s->shape.dims, id, &box);
        if (st != SPMD_OK)
            return library_error("sharding", "cannot compute a device's index box", st);
        printf("device %d: [", id);
        for (int j = 0; j < ndim; j++)
            printf(j == 0 ? "%" PRId64 ":%" PRId64 : ", %" PRId64 ":%" PRId64, box.start[j],
                   box.stop[j]);
        printf("] replica %d\n", spmd_sharding_replica_id(s->sharding, id));
    }
    return CLI_OK;
}

static int sharding_picture(const sharding_state *s, const int64_t *shard_shape)
{
    char text[TEXT_BUF];
    spmd_status st = spmd_sharding_format(s->sharding, text, sizeof text);
    if (st != SPMD_OK)
        return library_error("sharding", "cannot format the sharding", st);
    printf("%s\n", text);
    fputs("shape: ", stdout);
    print_tuple(stdout, s->shape.ndim, s->shape.dims);
    fputs("  shard shape: ", stdout);
    print_tuple(stdout, s->shape.ndim, shard_shape);
    fputc('\n', stdout);
    if (s->shape.ndim > 2)
        return print_device_boxes(s);
    fflush(stdout); /* the picture may be written through another buffer */
    st = spmd_visualize_sharding(stdout, s->sharding, s->shape.ndim, s->shape.dims);
    if (st != SPMD_OK)
        return library_error("sharding", "cannot draw the sharding", st);
    return CLI_OK;
}

static int parse_sharding_options(int argc, char **argv, sharding_args *a)
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

    memset(a, 0, sizeof *a);
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
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
            usage_sharding(stdout);
            return -1;
        default:
            return option_error("sharding", longopts, argc, argv, c);
        }
    }
    if (optind < argc)
        return usage_error("sharding",
                           "unexpected argument '%s'; options take the form "
                           "--mesh a=4,b=2 (see 'spmd sharding --help')",
                           argv[optind]);
    if (a->mesh_text == NULL)
        return usage_error("sharding", "missing --mesh; give the mesh axes, e.g. --mesh a=4,b=2");
    if (a->spec_text == NULL)
        return usage_error("sharding",
                           "missing --spec; give a partition spec, e.g. "
                           "--spec \"'a', None\", or --spec \"\" for a fully replicated array");
    if (a->shape_text == NULL)
        return usage_error("sharding", "missing --shape; give the global array shape, e.g. "
                                       "--shape 8,8");
    return CLI_OK;
}

static int cmd_sharding(int argc, char **argv)
{
    sharding_args a;
    sharding_state s;
    int64_t shard_shape[SPMD_MAX_RANK];
    spmd_status st;
    int rc;

    memset(&s, 0, sizeof s);
    rc = parse_sharding_options(argc, argv, &a);
    if (rc < 0)
        return finish_output("sharding", CLI_OK); /* --help */
    if (rc != CLI_OK)
        return rc;

    /* Everything the user typed is checked before any device starts. */
    if ((rc = parse_mesh(a.mesh_text, &s.mesh_in)) != CLI_OK ||
        (rc = parse_shape(a.shape_text, &s.shape)) != CLI_OK ||
        (a.devices_text != NULL && (rc = parse_devices(a.devices_text, &s.devices)) != CLI_OK))
        return sharding_release(&s, rc);
    st = spmd_spec_parse(a.spec_text, &s.spec);
    if (st != SPMD_OK)
        return sharding_release(&s, library_error("sharding", "invalid --spec", st));

    /* The mesh's own ids, or 0..size-1: devices beyond them may exist when the env asks. */
    int n_ids = a.devices_text != NULL ? s.devices.count : (int)s.mesh_in.size;
    int needed = a.devices_text != NULL ? s.devices.max_id + 1 : (int)s.mesh_in.size;
    if (a.devices_text != NULL) {
        s.mesh_ids = s.devices.ids;
        s.devices.ids = NULL;
    } else {
        s.mesh_ids = malloc((size_t)n_ids * sizeof *s.mesh_ids);
        if (s.mesh_ids == NULL)
            return sharding_release(&s, cli_failure("sharding", "out of memory"));
        for (int i = 0; i < n_ids; i++)
            s.mesh_ids[i] = i;
    }

    rc = start_cpu_devices(&s, needed, a.devices_text != NULL);
    if (rc != CLI_OK)
        return sharding_release(&s, rc);

    st = spmd_mesh_create(s.mesh_in.ndim, s.mesh_in.shape, s.mesh_in.names, s.mesh_ids, n_ids,
                          &s.mesh);
    if (st != SPMD_OK)
        return sharding_release(&s, library_error("sharding", "cannot create the mesh", st));
    st = spmd_sharding_create(s.mesh, s.spec, &s.sharding);
    if (st != SPMD_OK)
        return sharding_release(&s,
                                library_error("sharding", "the spec does not fit the mesh", st));
    st = spmd_sharding_check_shape(s.sharding, s.shape.ndim, s.shape.dims);
    if (st == SPMD_OK)
        st = spmd_sharding_shard_shape(s.sharding, s.shape.ndim, s.shape.dims, shard_shape);
    if (st != SPMD_OK)
        return sharding_release(&s,
                                library_error("sharding", "the sharding does not fit --shape", st));

    if (a.json) {
        rc = CLI_OK;
        cJSON *root = sharding_json(&s, shard_shape, &rc);
        if (rc == CLI_OK)
            rc = json_print("sharding", root);
    } else {
        rc = sharding_picture(&s, shard_shape);
    }
    return sharding_release(&s, finish_output("sharding", rc));
}

/* ------------------------------------------------------------------------------------------ */
/* Dispatch                                                                                     */

typedef struct command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
    void (*usage)(FILE *out);
} command;

/* A new subcommand is one entry here. */
static const command commands[] = {
    {"info", "show the version, build features, processes and devices", cmd_info, usage_info},
    {"sharding", "show which block of an array each mesh device holds", cmd_sharding,
     usage_sharding},
};
#define NUM_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void usage_main(FILE *out)
{
    fputs("usage: spmd [--help] [--version] <command> [<options>]\n"
          "\n"
          "The libspmd command-line tool.\n"
          "\n"
          "commands:\n",
          out);
    for (int i = 0; i < NUM_COMMANDS; i++)
        fprintf(out, "  %-10s  %s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "options:\n"
          "  -h, --help     show this help\n"
          "  -V, --version  show the library version\n"
          "\n"
          "Run 'spmd <command> --help' or 'spmd help <command>' for the options of a command.\n"
          "Exit status: 0 success, 1 the library refused (its message is printed), 2 bad usage.\n",
          out);
}

static const command *find_command(const char *name)
{
    for (int i = 0; i < NUM_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static int unknown_command(const char *name)
{
    fprintf(stderr, "spmd: unknown command '%s'; the commands are", name);
    for (int i = 0; i < NUM_COMMANDS; i++)
        fprintf(stderr, "%s %s", i == 0 ? "" : ",", commands[i].name);
    fputs(" (see 'spmd --help')\n", stderr);
    return CLI_USAGE;
}

static void print_version(void)
{
    printf("spmd %s\n", spmd_version_string());
    /* A stale shared library shows up here instead of as odd behaviour later. */
    if (strcmp(spmd_version_string(), SPMD_VERSION_STRING) != 0)
        printf("warning: built against libspmd headers %s\n", SPMD_VERSION_STRING);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;

    opterr = 0; /* getopt would prefix its messages with argv[0], a path */
    /* '+': stop at the command name; its options belong to its own parser. */
    while ((c = getopt_long(argc, argv, "+:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            usage_main(stdout);
            return finish_output(NULL, CLI_OK);
        case 'V':
            print_version();
            return finish_output(NULL, CLI_OK);
        default:
            return option_error(NULL, longopts, argc, argv, c);
        }
    }
    if (optind >= argc)
        return usage_error(NULL, "no command given; run 'spmd --help' for the list of commands");

    const char *name = argv[optind];
    if (strcmp(name, "help") == 0) {
        /* "spmd help [command]" reads better than "spmd command --help" to some. */
        const command *cmd = optind + 1 < argc ? find_command(argv[optind + 1]) : NULL;
        if (optind + 1 < argc && cmd == NULL)
            return unknown_command(argv[optind + 1]);
        if (cmd != NULL)
            cmd->usage(stdout);
        else
            usage_main(stdout);
        return finish_output(NULL, CLI_OK);
    }
    const command *cmd = find_command(name);
    if (cmd == NULL)
        return unknown_command(name);

    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    optind = 0; /* full reset: the subcommand parses a different vector */
    return cmd->run(sub_argc, sub_argv);
}
