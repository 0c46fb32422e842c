/* spmd trace show / spmd trace diff: reading the collective traces (spmd/trace.h). */
#ifndef SPMD_CLI_TRACE_READ_H
#define SPMD_CLI_TRACE_READ_H

#include <stdio.h>

int spmd_cli_trace(int argc, char **argv);
void spmd_cli_trace_usage(FILE *out);

#endif /* SPMD_CLI_TRACE_READ_H */
