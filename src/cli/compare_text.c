/* Comparing program outputs: see compare_text.h. */
#define _POSIX_C_SOURCE 200809L /* getline */
#include "compare_text.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <sys/types.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the rule ---- */

static int parse_value(const char *text, size_t len, int integer, double *value)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *end = NULL;
    errno = 0;
    if (integer) {
        long long n = strtoll(buf, &end, 10);
        *value = (double)n;
        return errno || end != buf + len || n < 0 ? -1 : 0;
    }
    double v = strtod(buf, &end);
    *value = v;
    /* decimal only: strtod also reads hex, infinities and NaN */
    int decimal = strspn(buf, "0123456789.eE+-") == len;
    return errno || end != buf + len || !decimal || !(v >= 0) || isinf(v) ? -1 : 0;
}

int compare_parse_rule(const char *how, compare_rule *rule, char *why, size_t size)
{
    *rule = (compare_rule){0, -1, -1, -1, -1, -1};
    if (strcmp(how, "exact") == 0) {
        rule->exact = 1;
        return 0;
    }
    static const char *const keys[] = {"tolerance", "abs", "rel", "ulps", "ulps32"};
    int items = 0;
    for (const char *item = how;; items++) {
        size_t len = strcspn(item, ",");
        const char *eq = memchr(item, '=', len);
        int key = 0; /* a bare number is a tolerance */
        const char *value = item;
        if (eq) {
            key = -1;
            for (int k = 0; k < 5; k++)
                if ((size_t)(eq - item) == strlen(keys[k]) && !strncmp(item, keys[k], eq - item))
                    key = k;
            value = eq + 1;
        }
        double v = 0;
        size_t vlen = len - (size_t)(value - item);
        if (key < 0 || parse_value(value, vlen, key >= 3, &v) != 0) {
            snprintf(why, size,
                     "comparison \"%s\": \"%.*s\" is not T, tolerance=T, abs=A, rel=R (T, A, R "
                     "decimal numbers >= 0) or ulps=N, ulps32=N (N an integer >= 0); or give "
                     "\"exact\"",
                     how, (int)len, item);
            return -1;
        }
        if (key == 0)
            rule->scaled = v;
        else if (key == 1)
            rule->abs = v;
        else if (key == 2)
            rule->rel = v;
        else if (key == 3)
            rule->ulps = (long long)v;
        else
            rule->ulps32 = (long long)v;
        if (item[len] == '\0')
            break;
        item += len + 1;
    }
    return 0;
}

void compare_rule_text(const compare_rule *rule, char *text, size_t size)
{
    if (rule->exact) {
        snprintf(text, size, "exact");
        return;
    }
    size_t at = 0;
    text[0] = '\0';
#define ADD(cond, ...)                                                                             \
    if ((cond) && at < size)                                                                       \
        at += (size_t)snprintf(text + at, size - at, __VA_ARGS__);
    ADD(rule->scaled >= 0, "%stolerance=%g", at ? "," : "", rule->scaled)
    ADD(rule->abs >= 0, "%sabs=%g", at ? "," : "", rule->abs)
    ADD(rule->rel >= 0, "%srel=%g", at ? "," : "", rule->rel)
    ADD(rule->ulps >= 0, "%sulps=%lld", at ? "," : "", rule->ulps)
    ADD(rule->ulps32 >= 0, "%sulps32=%lld", at ? "," : "", rule->ulps32)
#undef ADD
}

/* ---- numbers inside text ---- */

static int word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }
static int blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/*
 * The length of the decimal number (or inf, infinity, nan) that starts at s[i], 0 when none:
 * a number stands apart from words (not after a letter, digit, '_' or '.', nor followed by a
 * letter, digit or '_'), so "float32", "2x4", "0x10" and "v1.2.3"'s tail are text.
 */
static size_t number_at(const char *s, size_t len, size_t i)
{
    if (i > 0 && (word_char(s[i - 1]) || s[i - 1] == '.'))
        return 0;
    size_t j = i;
    if (j < len && (s[j] == '+' || s[j] == '-'))
        j++;
    static const char *const words[] = {"infinity", "inf", "nan"};
    for (int w = 0; w < 3; w++) {
        size_t n = strlen(words[w]);
        if (len - j >= n && strncasecmp(s + j, words[w], n) == 0 &&
            (j + n == len || !word_char(s[j + n])))
            return j + n - i;
    }
    size_t digits = 0;
    while (j < len && isdigit((unsigned char)s[j]))
        j++, digits++;
    if (j < len && s[j] == '.')
        for (j++; j < len && isdigit((unsigned char)s[j]); j++)
            digits++;
    if (!digits)
        return 0;
    if (j < len && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < len && (s[k] == '+' || s[k] == '-'))
            k++;
        if (k < len && isdigit((unsigned char)s[k])) {
            while (k < len && isdigit((unsigned char)s[k]))
                k++;
            j = k;
        }
    }
    return j < len && word_char(s[j]) ? 0 : j - i;
}

/* The value of the number s[0..n) in *value; -1 when float64 cannot hold it (1e400 would read
 * as an infinity, 1e-400 as 0): such a number is compared as text. */
static int number_value(const char *s, size_t n, double *value)
{
    char buf[128];
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    *value = strtod(buf, NULL);
    return errno == ERANGE && (isinf(*value) || *value == 0) ? -1 : 0;
}

static uint64_t steps64(double x, double y)
{
    int64_t a, b;
    memcpy(&a, &x, sizeof a);
    memcpy(&b, &y, sizeof b);
    if (a < 0) /* ordered like the values: -0.0 next to +0.0 */
        a = INT64_MIN - a;
    if (b < 0)
        b = INT64_MIN - b;
    return a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
}

static uint64_t steps32(float x, float y)
{
    int32_t a, b;
    memcpy(&a, &x, sizeof a);
    memcpy(&b, &y, sizeof b);
    if (a < 0)
        a = INT32_MIN - a;
    if (b < 0)
        b = INT32_MIN - b;
    return a > b ? (uint64_t)((int64_t)a - b) : (uint64_t)((int64_t)b - a);
}

/* Whether x and y match under the rule: NaN matches only NaN, an infinity only itself. */
static int numbers_match(double x, double y, const compare_rule *r)
{
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y);
    if (isinf(x) || isinf(y) || x == y)
        return x == y;
    double d = fabs(x - y), m = fmax(fabs(x), fabs(y));
    return (r->scaled >= 0 && d <= r->scaled * fmax(1.0, m)) || (r->abs >= 0 && d <= r->abs) ||
           (r->rel >= 0 && d <= r->rel * m) ||
           (r->ulps >= 0 && steps64(x, y) <= (uint64_t)r->ulps) ||
           (r->ulps32 >= 0 && steps32((float)x, (float)y) <= (uint64_t)r->ulps32);
}

/* n bytes of text for a message, NUL and other control bytes shown as \xNN, cut to fit. */
static void quote(char *out, size_t size, const char *in, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n && at + 5 < size; i++) {
        if ((unsigned char)in[i] < 0x20 && in[i] != '\t')
            at += (size_t)snprintf(out + at, size - at, "\\x%02x", (unsigned char)in[i]);
        else
            out[at++] = in[i];
    }
    out[at] = '\0';
}

static void place(compare_place *p, long line, const char *a, size_t na, const char *b, size_t nb)
{
    p->line = line;
    quote(p->a, sizeof p->a, a, na);
    quote(p->b, sizeof p->b, b, nb);
}

/* Notes the difference of two finite numbers in the summary's largest ones. */
static void note_difference(compare_summary *s, long line, double x, double y, const char *a,
                            size_t na, const char *b, size_t nb)
{
    if (!isfinite(x) || !isfinite(y))
        return;
    double d = fabs(x - y), m = fmax(fabs(x), fabs(y)), rel = m > 0 ? d / m : 0;
    if (d > s->max_abs) {
        s->max_abs = d;
        place(&s->at_abs, line, a, na, b, nb);
    }
    if (rel > s->max_rel) {
        s->max_rel = rel;
        place(&s->at_rel, line, a, na, b, nb);
    }
}

static size_t skip_blanks(const char *s, size_t len, size_t i)
{
    while (i < len && blank(s[i]))
        i++;
    return i;
}

/* One line under a tolerance rule; every number pair is counted in the summary. */
static int line_within(const char *a, size_t la, const char *b, size_t lb, const compare_rule *r,
                       compare_summary *s, long line)
{
    /* a CR ending (CRLF) on one side only is a difference, not a blank at the end */
    if ((la > 0 && a[la - 1] == '\r') != (lb > 0 && b[lb - 1] == '\r'))
        return 0;
    while (la > 0 && blank(a[la - 1]))
        la--;
    while (lb > 0 && blank(b[lb - 1]))
        lb--;
    size_t i = skip_blanks(a, la, 0), j = skip_blanks(b, lb, 0);
    int ok = 1;
    while (i < la && j < lb) {
        if (blank(a[i]) || blank(b[j])) {
            if (!blank(a[i]) || !blank(b[j]))
                return 0;
            i = skip_blanks(a, la, i);
            j = skip_blanks(b, lb, j);
            continue;
        }
        size_t na = number_at(a, la, i), nb = number_at(b, lb, j);
        if (na >= 128 || nb >= 128) /* past any float's digits: compared as text */
            na = nb = 0;
        double x = 0, y = 0;
        if (na && number_value(a + i, na, &x) != 0)
            na = 0;
        if (nb && number_value(b + j, nb, &y) != 0)
            nb = 0;
        if (na && nb) {
            s->numbers++;
            note_difference(s, line, x, y, a + i, na, b + j, nb);
            ok &= numbers_match(x, y, r);
            i += na;
            j += nb;
            continue;
        }
        if (na || nb || a[i] != b[j])
            return 0;
        i++;
        j++;
    }
    return ok && i == la && j == lb;
}

/* The next line of f, its newline left out, in *line (*cap bytes, grown as needed); its
 * length, or -1 at the end. */
static ssize_t next_line(FILE *f, char **line, size_t *cap)
{
    ssize_t n = getline(line, cap, f);
    if (n > 0 && (*line)[n - 1] == '\n')
        n--;
    return n;
}

int compare_files(FILE *a, FILE *b, const compare_rule *rule, compare_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    char *la = NULL, *lb = NULL;
    size_t cap_a = 0, cap_b = 0;
    for (long line = 1;; line++) {
        /* a missing last newline is no difference: the line ends there all the same */
        ssize_t na = next_line(a, &la, &cap_a), nb = next_line(b, &lb, &cap_b);
        if (na < 0 && nb < 0)
            break;
        sum->lines++;
        int same = na >= 0 && nb >= 0 &&
                   (rule->exact ? na == nb && memcmp(la, lb, (size_t)na) == 0
                                : line_within(la, (size_t)na, lb, (size_t)nb, rule, sum, line));
        if (!same) {
            if (sum->differing < COMPARE_FIRST)
                place(&sum->first[sum->differing], line, na < 0 ? "(no line)" : la,
                      na < 0 ? 9 : (size_t)na, nb < 0 ? "(no line)" : lb, nb < 0 ? 9 : (size_t)nb);
            sum->differing++;
        }
    }
    free(la);
    free(lb);
    return ferror(a) || ferror(b) ? -1 : sum->differing > 0;
}

void compare_print_summary(FILE *out, const char *prefix, const compare_rule *rule,
                           const compare_summary *sum)
{
    char how[128];
    compare_rule_text(rule, how, sizeof how);
    fprintf(out, "%s%ld line(s) compared (%s), %ld differ", prefix, sum->lines, how,
            sum->differing);
    if (!rule->exact) {
        fprintf(out, "; %ld number(s) compared", sum->numbers);
        if (sum->at_abs.line)
            fprintf(out, ", largest difference %.3g at line %ld (%s against %s)", sum->max_abs,
                    sum->at_abs.line, sum->at_abs.a, sum->at_abs.b);
        if (sum->at_rel.line)
            fprintf(out, ", largest relative difference %.3g at line %ld (%s against %s)",
                    sum->max_rel, sum->at_rel.line, sum->at_rel.a, sum->at_rel.b);
    }
    fprintf(out, "\n");
    for (long k = 0; k < sum->differing && k < COMPARE_FIRST; k++)
        fprintf(out, "%sline %ld: \"%s\" against \"%s\"\n", prefix, sum->first[k].line,
                sum->first[k].a, sum->first[k].b);
}
