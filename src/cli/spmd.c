/* spmd: the libspmd command-line tool. Shows the runtime (processes, devices, build features)
 * and the sharding math (which block of an array each mesh device holds).
 *
 * Exit status: 0 success, 1 the library refused (its message follows), 2 bad usage. Every
 * failure prints exactly one line to stderr, starting with "spmd: ". The argument parsing is
 * in cli_args.c, where tests/fuzz/fuzz_cli.c reaches it too. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bench.h"
#include "cli_args.h"
#include "launch.h"
#include "trace_read.h"
#include "spmd.h"

/* Room for any formatted mesh, spec or sharding: at most 8 axes of 63 characters each. */
#define TEXT_BUF 4096

#define NUM_CPU_ENV "SPMD_NUM_CPU_DEVICES"

/* ------------------------------------------------------------------------------------------ */
/* Error reporting                                                                              */

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
    cli_info_args a;
    int rc = cli_parse_info(argc, argv, &a);
    if (rc == CLI_HELP) {
        usage_info(stdout);
        return finish_output("info", CLI_OK);
    }
    if (rc != CLI_OK)
        return rc;
    int json = a.json;

    spmd_init_options opts = SPMD_INIT_OPTIONS_INIT;
    spmd_status st = spmd_init(&opts);
    if (st != SPMD_OK)
        return library_error("info", "cannot start the runtime", st);

    rc = CLI_OK;
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
        "math: runs in one process (no mpirun needed), on an abstract mesh (no devices).\n"
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
        "environment: unset SPMD_NUM_CPU_DEVICES: the mesh is abstract "
        "(spmd_mesh_create_abstract):\n"
        "no device or thread is started, any size up to 2^24 devices, every device on process 0.\n"
        "SPMD_NUM_CPU_DEVICES=N: the mesh is made of N real CPU devices (it must cover the "
        "mesh).\n",
        out);
}

/* Everything cmd_sharding owns, so that one function frees it on every path. */
typedef struct sharding_state {
    cli_sharding_args args; /* the options, with --mesh, --shape and --devices parsed */
    int *mesh_ids;
    spmd_spec *spec;
    spmd_mesh *mesh;
    spmd_sharding *sharding;
    int initialized;
    int abstract; /* no devices: spmd_mesh_create_abstract */
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
    cli_sharding_args_release(&s->args);
    return rc;
}

/* Starts the CPU devices SPMD_NUM_CPU_DEVICES asks for (the caller has checked it is set) and
 * checks that they cover the `needed` ids. */
static int start_cpu_devices(sharding_state *s, int needed, int from_devices)
{
    const char *env = getenv(NUM_CPU_ENV);
    spmd_init_options opts = SPMD_INIT_OPTIONS_INIT;

    if (needed > SPMD_MAX_CPU_DEVICES) {
        if (from_devices)
            return cli_usage_error("sharding",
                                   "--devices names id %d, but one process runs at most %d CPU "
                                   "devices; use ids below %d, or unset %s for an abstract mesh",
                                   needed - 1, SPMD_MAX_CPU_DEVICES, SPMD_MAX_CPU_DEVICES,
                                   NUM_CPU_ENV);
        return cli_usage_error("sharding",
                               "the mesh has %d devices, but one process runs at most %d CPU "
                               "devices; use a smaller mesh, or unset %s for an abstract mesh",
                               needed, SPMD_MAX_CPU_DEVICES, NUM_CPU_ENV);
    }
    opts.num_cpu_devices = 0;          /* 0: the library reads the variable */
    opts.platform = SPMD_PLATFORM_CPU; /* the math is the same on any platform */
    opts.use_mpi = 0;                  /* pure math: never wait for mpirun peers */
    spmd_status st = spmd_init(&opts);
    if (st != SPMD_OK)
        return library_error("sharding", "cannot start the CPU devices", st);
    s->initialized = 1;

    int have = spmd_device_count();
    if (have < needed) {
        if (from_devices)
            return cli_usage_error("sharding",
                                   "%s=%s gives %d CPU devices, but --devices names id %d, which "
                                   "needs %d; set %s=%d or more, or unset it for an abstract mesh",
                                   NUM_CPU_ENV, env, have, needed - 1, needed, NUM_CPU_ENV, needed);
        return cli_usage_error("sharding",
                               "%s=%s gives %d CPU devices, but the mesh needs %d; set %s=%d or "
                               "more, or unset it for an abstract mesh",
                               NUM_CPU_ENV, env, have, needed, NUM_CPU_ENV, needed);
    }
    return CLI_OK;
}

/* Prints `item` unformatted and frees it; -1 when it could not be made or printed. */
static int print_item(cJSON *item)
{
    char *text = item != NULL ? cJSON_PrintUnformatted(item) : NULL;
    cJSON_Delete(item);
    if (text == NULL)
        return -1;
    fputs(text, stdout);
    cJSON_free(text);
    return 0;
}

/* One device of the sharding: {"id", "process", "index": [[start, stop], ...], "replica_id"}. */
static int print_device_json(const sharding_state *s, int id)
{
    int ndim = s->args.shape.ndim;
    spmd_device_info info = {0};
    spmd_box box;
    spmd_status st = SPMD_OK;

    if (!s->abstract) /* an abstract mesh's devices all count as process 0's */
        st = spmd_device_get_info(id, &info);
    if (st != SPMD_OK)
        return library_error("sharding", "cannot describe a mesh device", st);
    st = spmd_sharding_device_box(s->sharding, ndim, s->args.shape.dims, id, &box);
    if (st != SPMD_OK)
        return library_error("sharding", "cannot compute a device's index box", st);
    printf("{\"id\":%d,\"process\":%d,\"index\":[", id, info.process_index);
    for (int j = 0; j < ndim; j++)
        printf("%s[%" PRId64 ",%" PRId64 "]", j ? "," : "", box.start[j], box.stop[j]);
    printf("],\"replica_id\":%d}", spmd_sharding_replica_id(s->sharding, id));
    return CLI_OK;
}

/*
 * The --json form, written as it is made: memory stays bounded whatever the number of
 * devices (a mesh of 2^21 devices writes 159 MB). The same text cJSON_PrintUnformatted gives.
 */
static int print_sharding_json(const sharding_state *s, const int64_t *shard_shape)
{
    const spmd_mesh *mesh = s->mesh;
    int ndim = s->args.shape.ndim, size = spmd_mesh_size(mesh);
    char spec_text[TEXT_BUF];
    spmd_status st = spmd_spec_format(spmd_sharding_spec(s->sharding), spec_text, sizeof spec_text);
    if (st != SPMD_OK)
        return library_error("sharding", "cannot format the spec", st);
    cJSON *names = cJSON_CreateArray(), *shape = cJSON_CreateArray();
    int failed = names == NULL || shape == NULL;
    for (int a = 0; a < spmd_mesh_ndim(mesh) && !failed; a++)
        failed = json_add(names, NULL, cJSON_CreateString(spmd_mesh_axis_name(mesh, a))) ||
                 json_add(shape, NULL, json_int(spmd_mesh_axis_size(mesh, a)));
    if (failed) {
        cJSON_Delete(names);
        cJSON_Delete(shape);
        return cli_failure("sharding", "out of memory while building the JSON output");
    }
    fputs("{\"mesh\":{\"axis_names\":", stdout);
    failed |= print_item(names);
    fputs(",\"shape\":", stdout);
    failed |= print_item(shape);
    fputs(",\"device_ids\":[", stdout);
    for (int i = 0; i < size; i++)
        printf("%s%d", i ? "," : "", spmd_mesh_device_id(mesh, i));
    fputs("]},\"spec\":", stdout);
    failed |= print_item(cJSON_CreateString(spec_text));
    fputs(",\"shape\":", stdout);
    failed |= print_item(json_int_array(ndim, s->args.shape.dims));
    fputs(",\"shard_shape\":", stdout);
    failed |= print_item(json_int_array(ndim, shard_shape));
    fputs(",\"devices\":[", stdout);
    if (failed)
        return cli_failure("sharding", "out of memory while building the JSON output");
    for (int i = 0; i < size; i++) {
        if (i)
            fputc(',', stdout);
        int rc = print_device_json(s, spmd_mesh_device_id(mesh, i));
        if (rc != CLI_OK)
            return rc;
    }
    fputs("]}\n", stdout);
    return CLI_OK;
}

/* Higher ranks have no picture: one line per device with its box, as Python slices. */
static int print_device_boxes(const sharding_state *s)
{
    int ndim = s->args.shape.ndim;
    for (int i = 0; i < spmd_mesh_size(s->mesh); i++) {
        int id = spmd_mesh_device_id(s->mesh, i);
        spmd_box box;
        spmd_status st = spmd_sharding_device_box(s->sharding, ndim, s->args.shape.dims, id, &box);
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
    print_tuple(stdout, s->args.shape.ndim, s->args.shape.dims);
    fputs("  shard shape: ", stdout);
    print_tuple(stdout, s->args.shape.ndim, shard_shape);
    fputc('\n', stdout);
    if (s->args.shape.ndim > 2)
        return print_device_boxes(s);
    fflush(stdout); /* the picture may be written through another buffer */
    st = spmd_visualize_sharding(stdout, s->sharding, s->args.shape.ndim, s->args.shape.dims);
    if (st != SPMD_OK)
        return library_error("sharding", "cannot draw the sharding", st);
    return CLI_OK;
}

static int cmd_sharding(int argc, char **argv)
{
    sharding_state s;
    int64_t shard_shape[SPMD_MAX_RANK];
    spmd_status st;
    int rc;

    memset(&s, 0, sizeof s);
    /* Everything the user typed, but the spec, is checked before any device starts. */
    rc = cli_parse_sharding(argc, argv, &s.args);
    if (rc == CLI_HELP) {
        usage_sharding(stdout);
        return sharding_release(&s, finish_output("sharding", CLI_OK));
    }
    if (rc != CLI_OK)
        return sharding_release(&s, rc);
    const cli_sharding_args *a = &s.args;
    st = spmd_spec_parse(a->spec_text, &s.spec);
    if (st != SPMD_OK)
        return sharding_release(&s, library_error("sharding", "invalid --spec", st));

    /* The mesh's own ids, or 0..size-1: devices beyond them may exist when the env asks. */
    int n_ids = a->devices_text != NULL ? s.args.devices.count : (int)s.args.mesh.size;
    int needed = a->devices_text != NULL ? s.args.devices.max_id + 1 : (int)s.args.mesh.size;
    if (a->devices_text != NULL) {
        s.mesh_ids = s.args.devices.ids;
        s.args.devices.ids = NULL;
    } else {
        s.mesh_ids = malloc((size_t)n_ids * sizeof *s.mesh_ids);
        if (s.mesh_ids == NULL)
            return sharding_release(&s, cli_failure("sharding", "out of memory"));
        for (int i = 0; i < n_ids; i++)
            s.mesh_ids[i] = i;
    }

    const char *env = getenv(NUM_CPU_ENV);
    s.abstract = env == NULL || env[0] == '\0';
    if (s.abstract) {
        st = spmd_mesh_create_abstract(s.args.mesh.ndim, s.args.mesh.shape, s.args.mesh.names,
                                       s.mesh_ids, n_ids, &s.mesh);
    } else {
        rc = start_cpu_devices(&s, needed, a->devices_text != NULL);
        if (rc != CLI_OK)
            return sharding_release(&s, rc);
        st = spmd_mesh_create(s.args.mesh.ndim, s.args.mesh.shape, s.args.mesh.names, s.mesh_ids,
                              n_ids, &s.mesh);
    }
    if (st != SPMD_OK)
        return sharding_release(&s, library_error("sharding", "cannot create the mesh", st));
    st = spmd_sharding_create(s.mesh, s.spec, &s.sharding);
    if (st != SPMD_OK)
        return sharding_release(&s,
                                library_error("sharding", "the spec does not fit the mesh", st));
    st = spmd_sharding_check_shape(s.sharding, s.args.shape.ndim, s.args.shape.dims);
    if (st == SPMD_OK)
        st = spmd_sharding_shard_shape(s.sharding, s.args.shape.ndim, s.args.shape.dims,
                                       shard_shape);
    if (st != SPMD_OK)
        return sharding_release(&s,
                                library_error("sharding", "the sharding does not fit --shape", st));

    if (a->json) {
        rc = print_sharding_json(&s, shard_shape);
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
    {"bench", "run the benchmarks against their baselines and write a report", bench_command,
     bench_usage},
    {"sharding", "show which block of an array each mesh device holds", cmd_sharding,
     usage_sharding},
    {"launch", "run a program as P processes x L devices here, or compare layouts", spmd_cli_launch,
     spmd_cli_launch_usage},
    {"compare", "compare saved outputs of several layouts", spmd_cli_compare,
     spmd_cli_compare_usage},
    {"trace", "show where each process was, or the first difference between two traces",
     spmd_cli_trace, spmd_cli_trace_usage},
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

static void print_version(void)
{
    printf("spmd %s\n", spmd_version_string());
    /* A stale shared library shows up here instead of as odd behaviour later. */
    if (strcmp(spmd_version_string(), SPMD_VERSION_STRING) != 0)
        printf("warning: built against libspmd headers %s\n", SPMD_VERSION_STRING);
}

int main(int argc, char **argv)
{
    const char *names[NUM_COMMANDS];
    cli_global g;

    for (int i = 0; i < NUM_COMMANDS; i++)
        names[i] = commands[i].name;
    int rc = cli_parse_global(argc, argv, names, NUM_COMMANDS, &g);
    if (rc != CLI_OK)
        return rc;
    switch (g.action) {
    case CLI_ACTION_HELP:
        usage_main(stdout);
        return finish_output(NULL, CLI_OK);
    case CLI_ACTION_VERSION:
        print_version();
        return finish_output(NULL, CLI_OK);
    case CLI_ACTION_HELP_COMMAND:
        commands[g.command].usage(stdout);
        return finish_output(NULL, CLI_OK);
    case CLI_ACTION_RUN:
        break;
    }
    return commands[g.command].run(g.sub_argc, g.sub_argv);
}
