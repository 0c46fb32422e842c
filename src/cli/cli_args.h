/* The spmd CLI's argument parsing, apart from main() so that a test or a fuzzer
 * (tests/fuzz/fuzz_cli.c) can run it without starting devices or exiting the process.
 *
 * Every parser returns a CLI_* code. A failure has been reported as exactly one line starting
 * with "spmd: " on the error stream (stderr unless cli_set_error_stream says otherwise); help
 * is never printed here: CLI_HELP asks the caller to print it. The parsers use getopt_long,
 * so they are not reentrant, and each restarts getopt (optind = 0) on its own vector. */
#ifndef SPMD_CLI_ARGS_H
#define SPMD_CLI_ARGS_H

#include <stdint.h>
#include <stdio.h>

#include "spmd/mesh.h"
#include "spmd/spec.h"

/* Exit statuses: 0 success, 1 the library refused (its message is printed), 2 bad usage. */
enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };
/* Returned by a parser that met --help: print the usage and exit with CLI_OK. */
#define CLI_HELP (-1)

#if defined(__GNUC__) || defined(__clang__)
#define CLI_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define CLI_PRINTF(fmt_idx, arg_idx)
#endif

/* Where failures are reported; NULL restores stderr. */
void cli_set_error_stream(FILE *err);

/* Report "spmd: [cmd: ]<message>" as one line and return CLI_USAGE or CLI_FAILED. */
int cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
int cli_failure(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/* Parses text[0..len) as decimal digits alone (no sign, no blanks): 0 with *out set, -1 when
 * it is anything else (empty included), 1 when it is larger than `most`. */
int cli_parse_digits(const char *text, size_t len, uint64_t most, uint64_t *out);

/* ---- spmd [--help] [--version] <command> [<options>] --------------------------------------- */

typedef enum cli_action {
    CLI_ACTION_HELP,         /* print the main usage */
    CLI_ACTION_VERSION,      /* print the version */
    CLI_ACTION_HELP_COMMAND, /* "spmd help <command>": print that command's usage */
    CLI_ACTION_RUN           /* run the command with sub_argc/sub_argv */
} cli_action;

typedef struct cli_global {
    cli_action action;
    int command;     /* index into the command names (HELP_COMMAND, RUN); -1 otherwise */
    int sub_argc;    /* RUN: the command's own vector, sub_argv[0] being its name */
    char **sub_argv; /* points into argv */
} cli_global;

/* Parses the options before the command and the command name, which must be one of
 * names[0..num_names). Returns CLI_OK or CLI_USAGE (reported). */
int cli_parse_global(int argc, char **argv, const char *const *names, int num_names,
                     cli_global *out);

/* ---- spmd info [--json] ---------------------------------------------------------------------- */

typedef struct cli_info_args {
    int json;
} cli_info_args;

/* argv[0] is "info". Returns CLI_OK, CLI_HELP or CLI_USAGE (reported). */
int cli_parse_info(int argc, char **argv, cli_info_args *out);

/* ---- spmd sharding --mesh ... --spec ... --shape ... [--devices ...] [--json] ---------------- */

/* --mesh name=size,...: names point into `text`, an owned copy of the option's value. */
typedef struct cli_mesh_arg {
    char *text;
    int ndim;
    int shape[SPMD_MAX_MESH_AXES];
    const char *names[SPMD_MAX_MESH_AXES];
    int64_t size; /* product of shape */
    const char *option_text;
} cli_mesh_arg;

/* --shape d0,d1,... */
typedef struct cli_shape_arg {
    int ndim;
    int64_t dims[SPMD_MAX_RANK];
    const char *option_text;
} cli_shape_arg;

/* --devices id,id,...: ids is owned (malloc). */
typedef struct cli_devices_arg {
    int count;
    int *ids;
    int max_id;
    const char *option_text;
} cli_devices_arg;

typedef struct cli_sharding_args {
    const char *mesh_text; /* the option values as given; point into argv */
    const char *spec_text;
    const char *shape_text;
    const char *devices_text; /* NULL when --devices was not given */
    int json;
    cli_mesh_arg mesh; /* parsed from the texts above; the spec is left to spmd_spec_parse */
    cli_shape_arg shape;
    cli_devices_arg devices;
} cli_sharding_args;

/* argv[0] is "sharding". Parses the options, then the values of --mesh, --shape and --devices
 * (every check that needs no device). Returns CLI_OK, CLI_HELP, CLI_USAGE or CLI_FAILED (out of
 * memory; reported). Call cli_sharding_args_release afterwards whatever it returned. */
int cli_parse_sharding(int argc, char **argv, cli_sharding_args *out);
/* Frees what cli_parse_sharding allocated; safe on a zeroed or partly filled struct. */
void cli_sharding_args_release(cli_sharding_args *a);

#endif /* SPMD_CLI_ARGS_H */
