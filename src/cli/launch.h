/* spmd launch (run a program as P processes x L devices, or several layouts and compare their
 * outputs) and spmd compare (compare saved outputs). */
#ifndef SPMD_CLI_LAUNCH_H
#define SPMD_CLI_LAUNCH_H

#include <stddef.h>
#include <stdio.h>

int spmd_cli_launch(int argc, char **argv);
void spmd_cli_launch_usage(FILE *out);
int spmd_cli_compare(int argc, char **argv);
/**
 * What a run of processes x devices on one machine needs from Open MPI, set in the environment
 * where the user has not set it: root allowed, more processes than slots, no single-copy path
 * (containers forbid it), yielding when the cores are oversubscribed.
 */
void spmd_cli_mpi_settings(int processes, int devices);
void spmd_cli_compare_usage(FILE *out);

#endif /* SPMD_CLI_LAUNCH_H */
