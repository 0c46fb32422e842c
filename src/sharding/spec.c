/* Partition specs: builder, parser for the Python spelling, formatting, equivalence. */
#include <ctype.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "runtime/base/check.h"
#include "sharding/spec_impl.h"

spmd_status spmd__check_axis_name(const char *name, const char *what)
{
    SPMD_REQUIRE(name != NULL, SPMD_ERR_SPEC, "%s: axis name is NULL", what);
    size_t len = strlen(name);
    SPMD_REQUIRE(len > 0, SPMD_ERR_SPEC,
                 "%s: empty axis name; name a mesh axis, or write None for an unsharded dimension",
                 what);
    SPMD_REQUIRE(len <= SPMD_MAX_AXIS_NAME, SPMD_ERR_SPEC,
                 "%s: axis name \"%.20s...\" is %zu characters long; the limit is %d", what, name,
                 len, SPMD_MAX_AXIS_NAME);
    SPMD_REQUIRE(strcmp(name, "None") != 0, SPMD_ERR_SPEC,
                 "%s: \"None\" cannot be an axis name (it means an unsharded dimension)", what);
    for (const char *c = name; *c; c++)
        SPMD_REQUIRE(isgraph((unsigned char)*c) && !strchr("'\"(),=", *c), SPMD_ERR_SPEC,
                     "%s: axis name \"%s\" contains '%c'; use letters, digits and _.-", what, name,
                     *c);
    return SPMD_OK;
}

spmd_status spmd__spec_check(const spmd_spec *spec, const char *fn, const char *arg)
{
    SPMD_REQUIRE(spec != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, arg);
    SPMD_REQUIRE(spec->magic == SPMD__MAGIC_SPEC, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument '%s' is not a live spmd_spec (destroyed, or another type)", fn, arg);
    return SPMD_OK;
}

spmd_status spmd_spec_create(spmd_spec **out)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_spec_create");
    *out = NULL;
    spmd_spec *s = calloc(1, sizeof *s);
    SPMD_REQUIRE(s != NULL, SPMD_ERR_OUT_OF_MEMORY, "spmd_spec_create: out of memory");
    s->magic = SPMD__MAGIC_SPEC;
    *out = s;
    return SPMD_OK;
}

void spmd_spec_destroy(spmd_spec *spec)
{
    if (!spec || spec->magic != SPMD__MAGIC_SPEC)
        return;
    spec->magic = SPMD__MAGIC_DEAD;
    free(spec);
}

spmd_status spmd_spec_copy(const spmd_spec *spec, spmd_spec **out)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_spec_copy");
    *out = NULL;
    SPMD_CHECK(spmd__spec_check(spec, "spmd_spec_copy", "spec"));
    spmd_spec *s = malloc(sizeof *s);
    SPMD_REQUIRE(s != NULL, SPMD_ERR_OUT_OF_MEMORY, "spmd_spec_copy: out of memory");
    *s = *spec;
    *out = s;
    return SPMD_OK;
}

static int find_name(const spmd_spec *s, const char *name)
{
    for (int i = 0; i < s->num_names; i++)
        if (strcmp(s->names[i], name) == 0)
            return i;
    return -1;
}

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

static int find_unreduced(const spmd_spec *s, const char *name)
{
    for (int i = 0; i < s->num_unreduced; i++)
        if (strcmp(s->unreduced[i], name) == 0)
            return i;
    return -1;
}

/* JAX's refusal of an axis both partitioning a dimension and unreduced. */
static spmd_status overlap_error(const spmd_spec *spec, const char *axis)
{
    char text[SPMD__SPEC_TEXT];
    spmd__ignore(spmd_spec_format(spec, text, sizeof text));
    return SPMD_ERROR(SPMD_ERR_SPEC,
                      "partitions cannot overlap with unreduced axes passed to PartitionSpec: "
                      "axis `%s` would be both in %s",
                      axis, text);
}

static spmd_status spmd_spec_set_unreduced_checked(spmd_spec *spec, int naxes,
                                                   const char *const *axis_names)
{
    SPMD_CHECK(spmd__spec_check(spec, "spmd_spec_set_unreduced", "spec"));
    SPMD_REQUIRE(naxes >= 0 && naxes <= SPMD_MAX_MESH_AXES, SPMD_ERR_SPEC,
                 "spmd_spec_set_unreduced: naxes is %d; use 0 (none) to %d", naxes,
                 SPMD_MAX_MESH_AXES);
    SPMD_REQUIRE(naxes == 0 || axis_names != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_spec_set_unreduced: axis_names is NULL but naxes is %d", naxes);
    spmd_spec next = *spec; /* built aside so that a failure leaves the spec unchanged */
    next.num_unreduced = 0;
    for (int k = 0; k < naxes; k++) {
        SPMD_CHECK(spmd__check_axis_name(axis_names[k], "spmd_spec_set_unreduced"));
        if (find_name(&next, axis_names[k]) >= 0)
            return overlap_error(spec, axis_names[k]);
        SPMD_REQUIRE(find_unreduced(&next, axis_names[k]) < 0, SPMD_ERR_SPEC,
                     "spmd_spec_set_unreduced: axis `%s` is listed twice", axis_names[k]);
        snprintf(next.unreduced[next.num_unreduced++], sizeof next.unreduced[0], "%s",
                 axis_names[k]);
    }
    /* a set: kept by name, so that every process prints and hashes it alike */
    qsort(next.unreduced, (size_t)next.num_unreduced, sizeof next.unreduced[0], by_name);
    *spec = next;
    return SPMD_OK;
}

int spmd_spec_unreduced_size(const spmd_spec *spec)
{
    return spec && spec->magic == SPMD__MAGIC_SPEC ? spec->num_unreduced : -1;
}

const char *spmd_spec_unreduced_axis(const spmd_spec *spec, int k)
{
    int n = spmd_spec_unreduced_size(spec);
    return n < 0 || k < 0 || k >= n ? NULL : spec->unreduced[k];
}

static spmd_status spmd_spec_append_checked(spmd_spec *spec, int naxes,
                                            const char *const *axis_names)
{
    SPMD_CHECK(spmd__spec_check(spec, "spmd_spec_append", "spec"));
    SPMD_REQUIRE(spec->length < SPMD_MAX_RANK, SPMD_ERR_SPEC,
                 "spmd_spec_append: the spec already has %d entries, the most an array rank "
                 "allows (SPMD_MAX_RANK)",
                 SPMD_MAX_RANK);
    SPMD_REQUIRE(naxes >= 0 && naxes <= SPMD_MAX_MESH_AXES, SPMD_ERR_SPEC,
                 "spmd_spec_append: naxes is %d; use 0 (None) to %d", naxes, SPMD_MAX_MESH_AXES);
    SPMD_REQUIRE(naxes == 0 || axis_names != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_spec_append: axis_names is NULL but naxes is %d", naxes);
    spmd_spec next = *spec; /* built aside so that a failure leaves the spec unchanged */
    int e = next.length;
    for (int k = 0; k < naxes; k++) {
        SPMD_CHECK(spmd__check_axis_name(axis_names[k], "spmd_spec_append"));
        if (find_unreduced(&next, axis_names[k]) >= 0)
            return overlap_error(spec, axis_names[k]);
        if (find_name(&next, axis_names[k]) >= 0) {
            char text[SPMD__SPEC_TEXT];
            spmd__ignore(spmd_spec_format(spec, text, sizeof text));
            return SPMD_ERROR(SPMD_ERR_SPEC,
                              "a partition spec can map every mesh axis to at most one dimension, "
                              "but appending entry %d to %s gives duplicate entries for `%s`",
                              e, text, axis_names[k]);
        }
        SPMD_REQUIRE(next.num_names < SPMD_MAX_MESH_AXES, SPMD_ERR_SPEC,
                     "spmd_spec_append: a spec can use at most %d mesh axes (SPMD_MAX_MESH_AXES)",
                     SPMD_MAX_MESH_AXES);
        snprintf(next.names[next.num_names], sizeof next.names[0], "%s", axis_names[k]);
        next.entry_axis[e][k] = next.num_names++;
    }
    next.entry_size[e] = naxes;
    next.length++;
    *spec = next;
    return SPMD_OK;
}

static spmd_status spmd_spec_append_axis_checked(spmd_spec *spec, const char *axis_name)
{
    return spmd_spec_append_checked(spec, axis_name ? 1 : 0, &axis_name);
}

int spmd_spec_length(const spmd_spec *spec)
{
    return spec && spec->magic == SPMD__MAGIC_SPEC ? spec->length : -1;
}

int spmd_spec_entry_size(const spmd_spec *spec, int i)
{
    if (spmd_spec_length(spec) < 0 || i < 0 || i >= spec->length)
        return -1;
    return spec->entry_size[i];
}

const char *spmd_spec_entry_axis(const spmd_spec *spec, int i, int k)
{
    int n = spmd_spec_entry_size(spec, i);
    if (n < 0 || k < 0 || k >= n)
        return NULL;
    return spec->names[spec->entry_axis[i][k]];
}

int spmd_spec_is_equivalent(const spmd_spec *a, const spmd_spec *b)
{
    if (spmd_spec_length(a) < 0 || spmd_spec_length(b) < 0)
        return 0;
    int n = a->length > b->length ? a->length : b->length;
    for (int i = 0; i < n; i++) {
        int na = i < a->length ? a->entry_size[i] : 0;
        int nb = i < b->length ? b->entry_size[i] : 0;
        if (na != nb)
            return 0;
        for (int k = 0; k < na; k++)
            if (strcmp(a->names[a->entry_axis[i][k]], b->names[b->entry_axis[i][k]]) != 0)
                return 0;
    }
    if (a->num_unreduced != b->num_unreduced)
        return 0;
    for (int k = 0; k < a->num_unreduced; k++)
        if (find_unreduced(b, a->unreduced[k]) < 0)
            return 0;
    return 1;
}

spmd_status spmd_spec_format(const spmd_spec *spec, char *buf, size_t size)
{
    SPMD_CHECK(spmd__spec_check(spec, "spmd_spec_format", "spec"));
    spmd__strbuf sb;
    SPMD_CHECK(spmd__strbuf_start(&sb, buf, size, "spmd_spec_format"));
    spmd__strbuf_printf(&sb, "P(");
    for (int i = 0; i < spec->length; i++) {
        int n = spec->entry_size[i];
        spmd__strbuf_printf(&sb, i ? ", " : "");
        if (n == 0)
            spmd__strbuf_printf(&sb, "None");
        else if (n == 1)
            spmd__strbuf_printf(&sb, "'%s'", spec->names[spec->entry_axis[i][0]]);
        else
            for (int k = 0; k < n; k++)
                spmd__strbuf_printf(&sb, "%s'%s'%s", k ? ", " : "(",
                                    spec->names[spec->entry_axis[i][k]], k == n - 1 ? ")" : "");
    }
    if (spec->num_unreduced) { /* JAX: "P('a', unreduced={'b'})", "P(unreduced={'b'})" */
        spmd__strbuf_printf(&sb, spec->length ? ", unreduced={" : "unreduced={");
        for (int k = 0; k < spec->num_unreduced; k++)
            spmd__strbuf_printf(&sb, "%s'%s'", k ? ", " : "", spec->unreduced[k]);
        spmd__strbuf_printf(&sb, "})");
    } else {
        spmd__strbuf_printf(&sb, spec->length == 1 ? ",)" : ")");
    }
    return spmd__strbuf_finish(&sb, "spmd_spec_format");
}

/* ---- parser for the Python spelling ---- */

typedef struct parser {
    const char *text;
    const char *p;
} parser;

static void skip_space(parser *ps)
{
    while (isspace((unsigned char)*ps->p))
        ps->p++;
}

static int is_ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static int is_ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-';
}

static spmd_status parse_error(const parser *ps, const char *what)
{
    return SPMD_ERROR(SPMD_ERR_SPEC, "spmd_spec_parse: %s at position %d of \"%s\"", what,
                      (int)(ps->p - ps->text), ps->text);
}

/* Reads one name (quoted, or a bare identifier) into `name`; *is_none for a bare None. */
static spmd_status parse_name(parser *ps, char *name, int *is_none)
{
    *is_none = 0;
    char quote = *ps->p;
    const char *start;
    size_t len;
    if (quote == '\'' || quote == '"') {
        start = ++ps->p;
        while (*ps->p && *ps->p != quote)
            ps->p++;
        if (!*ps->p)
            return parse_error(ps, "unterminated quoted axis name");
        len = (size_t)(ps->p - start);
        ps->p++;
        if (len == 0) {
            ps->p -= 2;
            return parse_error(ps, "empty axis name ''; write None for an unsharded dimension");
        }
    } else if (is_ident_start(*ps->p)) {
        start = ps->p;
        while (is_ident_char(*ps->p))
            ps->p++;
        len = (size_t)(ps->p - start);
        if (len == 4 && strncmp(start, "None", 4) == 0) {
            *is_none = 1;
            return SPMD_OK;
        }
    } else if (*ps->p == ',' || *ps->p == ')' || *ps->p == '\0') {
        return parse_error(ps, "empty entry; write None for an unsharded dimension");
    } else {
        return parse_error(ps, "expected an axis name, None or a tuple");
    }
    if (len > SPMD_MAX_AXIS_NAME)
        return parse_error(ps, "axis name longer than SPMD_MAX_AXIS_NAME characters");
    memcpy(name, start, len);
    name[len] = '\0';
    return spmd__check_axis_name(name, "spmd_spec_parse");
}

/* A builder error (an axis used twice, too many entries) reported with the position of what
 * was parsed in the text. */
static spmd_status at_position(parser *ps, const char *start, spmd_status st, const char *builder)
{
    if (st == SPMD_OK)
        return st;
    char detail[SPMD__MESSAGE_CAPACITY];
    snprintf(detail, sizeof detail, "%s", spmd_last_error());
    size_t skip = strlen(builder);
    const char *what = strncmp(detail, builder, skip) == 0 && strncmp(detail + skip, ": ", 2) == 0
                           ? detail + skip + 2
                           : detail;
    return SPMD_ERROR(st, "spmd_spec_parse: %s, at position %d of \"%s\"", what,
                      (int)(start - ps->text), ps->text);
}

/* names := [name (',' name)* [','] ] close, after the opening character at ps->p - 1; `what`
 * says in messages what the list is ("tuple", "unreduced set"). */
static spmd_status parse_names(parser *ps, char close, const char *what,
                               char (*names)[SPMD_MAX_AXIS_NAME + 1], const char **ptrs, int *n)
{
    const char *open = ps->p - 1;
    int is_none = 0;
    char text[96];
    for (*n = 0;;) {
        skip_space(ps);
        if (*ps->p == close)
            break;
        if (*ps->p == '(' && close == ')')
            return parse_error(ps, "a tuple inside a partition spec cannot contain a nested tuple");
        if (*ps->p == '\0') {
            ps->p = open;
            snprintf(text, sizeof text, "unbalanced parentheses: this '%c' is never closed", *open);
            return parse_error(ps, text);
        }
        if (*n == SPMD_MAX_MESH_AXES) {
            snprintf(text, sizeof text, "more than SPMD_MAX_MESH_AXES axes in one %s", what);
            return parse_error(ps, text);
        }
        SPMD_CHECK(parse_name(ps, names[*n], &is_none));
        if (is_none) {
            snprintf(text, sizeof text, "None inside a %s; list mesh axis names only", what);
            return parse_error(ps, text);
        }
        ptrs[*n] = names[*n];
        ++*n;
        skip_space(ps);
        if (*ps->p == ',')
            ps->p++;
        else if (*ps->p != close && *ps->p != '\0') {
            snprintf(text, sizeof text, "expected ',' or '%c' after an axis name", close);
            return parse_error(ps, text);
        }
    }
    ps->p++;
    return SPMD_OK;
}

/* entry := None | name | '(' names ')' */
static spmd_status parse_entry(parser *ps, spmd_spec *spec)
{
    char names[SPMD_MAX_MESH_AXES][SPMD_MAX_AXIS_NAME + 1];
    const char *ptrs[SPMD_MAX_MESH_AXES];
    int n = 0, is_none = 0;
    skip_space(ps);
    const char *entry_start = ps->p;
    if (*ps->p != '(') {
        SPMD_CHECK(parse_name(ps, names[0], &is_none));
        ptrs[0] = names[0];
        n = is_none ? 0 : 1;
    } else {
        ps->p++;
        SPMD_CHECK(parse_names(ps, ')', "tuple", names, ptrs, &n));
    }
    return at_position(ps, entry_start, spmd_spec_append_checked(spec, n, ptrs),
                       "spmd_spec_append");
}

/* Accepts P( / PartitionSpec( and returns 1 when a wrapper was consumed. */
static int parse_wrapper(parser *ps)
{
    static const char *const wrappers[] = {"PartitionSpec", "P"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(wrappers[i]);
        if (strncmp(ps->p, wrappers[i], n) == 0) {
            const char *q = ps->p + n;
            while (isspace((unsigned char)*q))
                q++;
            if (*q == '(') {
                ps->p = q + 1;
                return 1;
            }
        }
    }
    return 0;
}

/* At "unreduced=": 1 (and moves past the '='), else 0. */
static int at_unreduced(parser *ps)
{
    static const char kw[] = "unreduced";
    if (strncmp(ps->p, kw, sizeof kw - 1) != 0)
        return 0;
    const char *q = ps->p + sizeof kw - 1;
    while (isspace((unsigned char)*q))
        q++;
    if (*q != '=')
        return 0;
    ps->p = q + 1;
    return 1;
}

/* unreduced := '{' names '}' | '(' names ')' | '[' names ']' | set() */
static spmd_status parse_unreduced(parser *ps, spmd_spec *spec)
{
    char names[SPMD_MAX_MESH_AXES][SPMD_MAX_AXIS_NAME + 1];
    const char *ptrs[SPMD_MAX_MESH_AXES];
    int n = 0;
    skip_space(ps);
    const char *start = ps->p;
    if (strncmp(ps->p, "set()", 5) == 0 || strncmp(ps->p, "frozenset()", 11) == 0) {
        ps->p += *ps->p == 's' ? 5 : 11;
        return SPMD_OK;
    }
    char close = *ps->p == '{' ? '}' : *ps->p == '(' ? ')' : *ps->p == '[' ? ']' : 0;
    if (!close)
        return parse_error(ps, "unreduced= takes a set of mesh axis names, such as {'y'}");
    ps->p++;
    SPMD_CHECK(parse_names(ps, close, "unreduced set", names, ptrs, &n));
    return at_position(ps, start, spmd_spec_set_unreduced_checked(spec, n, ptrs),
                       "spmd_spec_set_unreduced");
}

static spmd_status parse_spec(parser *ps, spmd_spec *spec)
{
    skip_space(ps);
    const char *wrapper_open = ps->p;
    int wrapped = parse_wrapper(ps);
    for (;;) {
        skip_space(ps);
        if (*ps->p == '\0' || (wrapped && *ps->p == ')'))
            break;
        if (at_unreduced(ps)) { /* a keyword argument: after the entries, once */
            SPMD_CHECK(parse_unreduced(ps, spec));
            skip_space(ps);
            if (*ps->p == ',')
                ps->p++;
            skip_space(ps);
            if (*ps->p != '\0' && !(wrapped && *ps->p == ')'))
                return parse_error(ps, "unreduced= must come after the entries, once");
            continue;
        }
        SPMD_CHECK(parse_entry(ps, spec));
        skip_space(ps);
        if (*ps->p == ',') {
            ps->p++;
            skip_space(ps);
            if (*ps->p == ',')
                return parse_error(ps, "empty entry; write None for an unsharded dimension");
        } else if (*ps->p != '\0' && !(wrapped && *ps->p == ')')) {
            return parse_error(ps, *ps->p == ')' ? "unbalanced parentheses: unexpected ')'"
                                                 : "expected ',' between entries");
        }
    }
    if (wrapped) {
        if (*ps->p != ')') {
            ps->p = wrapper_open;
            return parse_error(ps, "unbalanced parentheses: P( is never closed");
        }
        ps->p++;
        skip_space(ps);
        if (*ps->p != '\0')
            return parse_error(ps, "unexpected text after the closing ')'");
    }
    return SPMD_OK;
}

spmd_status spmd_spec_parse(const char *text, spmd_spec **out)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_spec_parse");
    *out = NULL;
    SPMD_REQUIRE_NOT_NULL(text, "spmd_spec_parse");
    spmd_spec *spec = NULL;
    SPMD_CHECK(spmd_spec_create(&spec));
    parser ps = {text, text};
    spmd_status st = parse_spec(&ps, spec);
    if (st != SPMD_OK) {
        spmd_spec_destroy(spec);
        return st;
    }
    *out = spec;
    return SPMD_OK;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_spec_append(spmd_spec *spec, int naxes, const char *const *axis_names)
{
    return spmd__error_in(spmd_spec_append_checked(spec, naxes, axis_names), "spmd_spec_append");
}

spmd_status spmd_spec_set_unreduced(spmd_spec *spec, int naxes, const char *const *axis_names)
{
    return spmd__error_in(spmd_spec_set_unreduced_checked(spec, naxes, axis_names),
                          "spmd_spec_set_unreduced");
}

spmd_status spmd_spec_append_axis(spmd_spec *spec, const char *axis_name)
{
    return spmd__error_in(spmd_spec_append_axis_checked(spec, axis_name), "spmd_spec_append_axis");
}
