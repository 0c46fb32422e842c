/* Comparing program outputs (spmd compare, spmd launch --layouts): exactly, byte for byte, or
 * with numbers found inside the text compared within a tolerance. */
#ifndef SPMD_CLI_COMPARE_TEXT_H
#define SPMD_CLI_COMPARE_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* How two outputs are compared. exact: every line byte for byte. Otherwise a number matches
 * when any criterion that is set (>= 0) holds, and every other character must be equal (runs
 * of blanks count as one, blanks at either end of a line are ignored, but a line's final CR
 * must end both lines or neither). A number float64 cannot hold (1e400, 1e-400) is text. */
typedef struct compare_rule {
    int exact;
    double scaled;    /* tolerance=T: |a - b| <= T x max(1, |a|, |b|) */
    double abs;       /* abs=A: |a - b| <= A */
    double rel;       /* rel=R: |a - b| <= R x max(|a|, |b|) */
    long long ulps;   /* ulps=N: at most N float64 steps apart */
    long long ulps32; /* ulps32=N: at most N float32 steps apart, both rounded to float32 */
} compare_rule;

/* A difference, for the summary: where and what. */
typedef struct compare_place {
    long line; /* 0: none */
    char a[200], b[200];
} compare_place;

#define COMPARE_FIRST 3

typedef struct compare_summary {
    long lines;     /* compared: the longer output's */
    long differing; /* lines that do not match */
    long numbers;   /* numbers compared (tolerance rules) */
    double max_abs, max_rel;
    compare_place at_abs, at_rel; /* where the largest differences are (line 0: none) */
    compare_place first[COMPARE_FIRST];
} compare_summary;

/* Parses HOW ("exact", "T", "tolerance=T", or a comma-separated list of tolerance=T, abs=A,
 * rel=R, ulps=N, ulps32=N); 0 on success, else -1 with the reason in why. */
int compare_parse_rule(const char *how, compare_rule *rule, char *why, size_t size);

/* Writes the rule as a user would (e.g. "abs=1e-09,rel=1e-06"). */
void compare_rule_text(const compare_rule *rule, char *text, size_t size);

/* Compares the rest of a with the rest of b, line by line, NUL bytes included, holding one line
 * of each at a time: 1 when they differ, 0 when they match, -1 when reading failed. */
int compare_files(FILE *a, FILE *b, const compare_rule *rule, compare_summary *sum);

/* The summary, a few lines, each starting with `prefix`. */
void compare_print_summary(FILE *out, const char *prefix, const compare_rule *rule,
                           const compare_summary *sum);

#endif
