/* spmd bench: the benchmark runner and report (bench.c). */
#ifndef SPMD_CLI_BENCH_H
#define SPMD_CLI_BENCH_H

#include <stdio.h>

/* argv[0] is "bench"; returns a CLI_* exit status. */
int bench_command(int argc, char **argv);
void bench_usage(FILE *out);

#endif /* SPMD_CLI_BENCH_H */
