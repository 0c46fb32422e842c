/* What every benchmark program shares: failing loudly, a monotonic clock, medians, JSON out. */
#ifndef SPMD_BENCH_UTIL_H
#define SPMD_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <spmd.h>

/* `program` names the benchmark in the message; a failed call ends it. */
#define BENCH_CHECK(program, call)                                                                 \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "%s: %s failed: %s\n", (program), #call, spmd_last_error());           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns the value at quantile q (0.5: the median). */
static inline double bench_quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    int i = (int)(q * n);
    return v[i < n ? i : n - 1];
}

/* Writes root as JSON to path (NULL: nothing). */
static inline void bench_write_json(const cJSON *root, const char *path)
{
    if (!path)
        return;
    FILE *f = fopen(path, "w");
    char *text = cJSON_Print(root);
    if (f && text)
        fprintf(f, "%s\n", text);
    if (f)
        fclose(f);
    free(text);
}

#endif /* SPMD_BENCH_UTIL_H */
