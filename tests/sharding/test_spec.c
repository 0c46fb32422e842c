/* Partition specs: the parser of the Python spelling, JAX's printed form, the builder, copies,
 * equivalence, and every malformed string and bad builder call (SEMANTICS.md (b)). Linked with
 * the sharding math alone (src/sharding and the basics): specs need no runtime. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char sentinel_byte;
/* A non-NULL value that a failing constructor must overwrite with NULL. */
#define SENTINEL_SPEC ((spmd_spec *)(void *)&sentinel_byte)

/* ---- helpers ----------------------------------------------------------------------------- */

/*
 * Describes a spec through the entry getters only (independent of spmd_spec_format):
 * entries separated by '|', axes of one entry by ',', None as '-'. P('a', ('b', 'c'), None)
 * is "a|b,c|-" and P() is "". Also checks the getters' out-of-range answers.
 */
static void describe(const spmd_spec *spec, char *out, size_t size)
{
    size_t len = 0;
    int n = spmd_spec_length(spec);
    assert_true(n >= 0);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        int k_max = spmd_spec_entry_size(spec, i);
        assert_true(k_max >= 0);
        if (i)
            len += (size_t)snprintf(out + len, size - len, "|");
        if (k_max == 0)
            len += (size_t)snprintf(out + len, size - len, "-");
        for (int k = 0; k < k_max; k++) {
            const char *name = spmd_spec_entry_axis(spec, i, k);
            assert_non_null(name);
            len += (size_t)snprintf(out + len, size - len, "%s%s", k ? "," : "", name);
        }
        assert_null(spmd_spec_entry_axis(spec, i, k_max));
        assert_null(spmd_spec_entry_axis(spec, i, -1));
        assert_true(len < size);
    }
    assert_int_equal(spmd_spec_entry_size(spec, n), -1);
    assert_int_equal(spmd_spec_entry_size(spec, -1), -1);
    assert_null(spmd_spec_entry_axis(spec, n, 0));
}

static void assert_describes(const spmd_spec *spec, const char *want, const char *context)
{
    char got[1024];
    describe(spec, got, sizeof got);
    if (strcmp(got, want) != 0)
        fail_msg("%s: entries are \"%s\", want \"%s\"", context, got, want);
}

static void assert_formats(const spmd_spec *spec, const char *want, const char *context)
{
    char got[1024];
    assert_ok(spmd_spec_format(spec, got, sizeof got));
    if (strcmp(got, want) != 0)
        fail_msg("%s: spmd_spec_format gives \"%s\", want \"%s\"", context, got, want);
}

/* ---- parsing ----------------------------------------------------------------------------- */

typedef struct parse_case {
    const char *text;
    int length;
    const char *entries; /* see describe() */
    const char *repr;    /* spmd_spec_format, as JAX prints the spec */
} parse_case;

static const parse_case parse_cases[] = {
    /* the spellings the header lists */
    {"'a', None", 2, "a|-", "P('a', None)"},
    {"('a', 'b'), None", 2, "a,b|-", "P(('a', 'b'), None)"},
    {"None, 'b'", 2, "-|b", "P(None, 'b')"},
    {"", 0, "", "P()"},
    /* wrappers */
    {"P('a', None)", 2, "a|-", "P('a', None)"},
    {"PartitionSpec('a')", 1, "a", "P('a',)"},
    {"P()", 0, "", "P()"},
    {"PartitionSpec()", 0, "", "P()"},
    {"P(('x', 'y'),)", 1, "x,y", "P(('x', 'y'),)"},
    {"P('x', ('y', 'z'), None,)", 3, "x|y,z|-", "P('x', ('y', 'z'), None)"},
    /* double quotes and bare names */
    {"\"a\", \"b\"", 2, "a|b", "P('a', 'b')"},
    {"(\"a\", 'b'), None", 2, "a,b|-", "P(('a', 'b'), None)"},
    {"a, None", 2, "a|-", "P('a', None)"},
    {"a", 1, "a", "P('a',)"},
    {"P(a, (b, c))", 2, "a|b,c", "P('a', ('b', 'c'))"},
    {"'data_1', model_2", 2, "data_1|model_2", "P('data_1', 'model_2')"},
    {"'stage.0', 'x-y'", 2, "stage.0|x-y", "P('stage.0', 'x-y')"},
    /* trailing comma */
    {"'a',", 1, "a", "P('a',)"},
    {"'a', 'b',", 2, "a|b", "P('a', 'b')"},
    /* canonicalisation: () is None, ('a',) is 'a' */
    {"()", 1, "-", "P(None,)"},
    {"('a',)", 1, "a", "P('a',)"},
    {"(), 'x'", 2, "-|x", "P(None, 'x')"},
    {"P(('a',), ())", 2, "a|-", "P('a', None)"},
    {"None", 1, "-", "P(None,)"},
    {"None, None", 2, "-|-", "P(None, None)"},
    {"'x', None, None", 3, "x|-|-", "P('x', None, None)"},
    /* whitespace */
    {"   ", 0, "", "P()"},
    {"  (  'a' ,'b'  ) ,None  ", 2, "a,b|-", "P(('a', 'b'), None)"},
    {"P ( 'a' , None )", 2, "a|-", "P('a', None)"},
    {"\t'a',\n'b'\n", 2, "a|b", "P('a', 'b')"},
    {"P(  )", 0, "", "P()"},
    {"( )", 1, "-", "P(None,)"},
    {"('a','b','c')", 1, "a,b,c", "P(('a', 'b', 'c'),)"},
};

static void test_parse(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof parse_cases / sizeof parse_cases[0]; c++) {
        const parse_case *pc = &parse_cases[c];
        char context[128];
        snprintf(context, sizeof context, "spmd_spec_parse(\"%s\")", pc->text);
        spmd_spec *spec = NULL;
        assert_ok(spmd_spec_parse(pc->text, &spec));
        assert_non_null(spec);
        if (spmd_spec_length(spec) != pc->length)
            fail_msg("%s: length %d, want %d", context, spmd_spec_length(spec), pc->length);
        assert_describes(spec, pc->entries, context);
        assert_formats(spec, pc->repr, context);
        spmd_spec_destroy(spec);
    }
}

/* The longest legal things: SPMD_MAX_RANK entries, SPMD_MAX_AXIS_NAME-character names,
 * SPMD_MAX_MESH_AXES axes in one entry. */
static void test_parse_limits(void **state)
{
    (void)state;
    char text[512] = "";
    for (int i = 0; i < SPMD_MAX_RANK; i++)
        strcat(text, i ? ", None" : "None");
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse(text, &spec));
    assert_int_equal(spmd_spec_length(spec), SPMD_MAX_RANK);
    spmd_spec_destroy(spec);

    char name[SPMD_MAX_AXIS_NAME + 1];
    memset(name, 'n', SPMD_MAX_AXIS_NAME);
    name[SPMD_MAX_AXIS_NAME] = '\0';
    snprintf(text, sizeof text, "'%s', None", name);
    assert_ok(spmd_spec_parse(text, &spec));
    assert_int_equal(spmd_spec_length(spec), 2);
    assert_string_equal(spmd_spec_entry_axis(spec, 0, 0), name);
    spmd_spec_destroy(spec);
    snprintf(text, sizeof text, "%s", name); /* bare */
    assert_ok(spmd_spec_parse(text, &spec));
    assert_string_equal(spmd_spec_entry_axis(spec, 0, 0), name);
    spmd_spec_destroy(spec);

    assert_ok(spmd_spec_parse("('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h')", &spec));
    assert_describes(spec, "a,b,c,d,e,f,g,h", "8 axes in one entry");
    spmd_spec_destroy(spec);
    assert_ok(spmd_spec_parse("'a', 'b', 'c', 'd', ('e', 'f'), None, 'g', 'h'", &spec));
    assert_describes(spec, "a|b|c|d|e,f|-|g|h", "8 axes over 8 entries");
    spmd_spec_destroy(spec);
}

/* parse -> format -> parse gives the same spec, for the table and for random specs. */
static void round_trip(const spmd_spec *spec, const char *context)
{
    char text[1024], before[1024], after[1024];
    assert_ok(spmd_spec_format(spec, text, sizeof text));
    spmd_spec *again = NULL;
    assert_ok(spmd_spec_parse(text, &again));
    describe(spec, before, sizeof before);
    describe(again, after, sizeof after);
    if (strcmp(before, after) != 0 || spmd_spec_length(spec) != spmd_spec_length(again))
        fail_msg("%s: formats as \"%s\", which parses back to \"%s\" instead of \"%s\"", context,
                 text, after, before);
    assert_true(spmd_spec_is_equivalent(spec, again));
    assert_true(spmd_spec_is_equivalent(again, spec));
    char text2[1024];
    assert_ok(spmd_spec_format(again, text2, sizeof text2));
    assert_string_equal(text, text2);
    spmd_spec_destroy(again);
}

static void test_round_trip(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof parse_cases / sizeof parse_cases[0]; c++) {
        spmd_spec *spec = NULL;
        assert_ok(spmd_spec_parse(parse_cases[c].text, &spec));
        round_trip(spec, parse_cases[c].text);
        spmd_spec_destroy(spec);
    }
    /* Random specs from the builder: entries of 0..3 distinct names out of 8. */
    static const char *const pool[] = {"x", "y", "z", "data", "model", "stage_1", "p.q", "r-s"};
    spmd_test_rng rng = {12345};
    for (int trial = 0; trial < 300; trial++) {
        spmd_spec *spec = NULL;
        assert_ok(spmd_spec_create(&spec));
        int used[8] = {0};
        int length = spmd_test_rng_below(&rng, SPMD_MAX_RANK + 1);
        char want[1024] = "";
        size_t wl = 0;
        for (int i = 0; i < length; i++) {
            const char *names[3];
            int n = spmd_test_rng_below(&rng, 4);
            int got = 0;
            for (int k = 0; k < n; k++) {
                int pick = spmd_test_rng_below(&rng, 8);
                if (!used[pick]) {
                    used[pick] = 1;
                    names[got++] = pool[pick];
                }
            }
            assert_ok(spmd_spec_append(spec, got, got ? names : NULL));
            wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s", i ? "|" : "");
            if (got == 0)
                wl += (size_t)snprintf(want + wl, sizeof want - wl, "-");
            for (int k = 0; k < got; k++)
                wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%s", k ? "," : "", names[k]);
        }
        assert_int_equal(spmd_spec_length(spec), length);
        assert_describes(spec, want, "random builder spec");
        round_trip(spec, want);
        spmd_spec_destroy(spec);
    }
}

/* ---- builder, copy, equivalence ---------------------------------------------------------- */

static void assert_same_as_parsed(const spmd_spec *built, const char *text)
{
    spmd_spec *parsed = NULL;
    assert_ok(spmd_spec_parse(text, &parsed));
    char a[1024], b[1024], fa[1024], fb[1024];
    describe(built, a, sizeof a);
    describe(parsed, b, sizeof b);
    if (strcmp(a, b) != 0)
        fail_msg("builder gives \"%s\", parsing \"%s\" gives \"%s\"", a, text, b);
    assert_int_equal(spmd_spec_length(built), spmd_spec_length(parsed));
    assert_ok(spmd_spec_format(built, fa, sizeof fa));
    assert_ok(spmd_spec_format(parsed, fb, sizeof fb));
    assert_string_equal(fa, fb);
    assert_true(spmd_spec_is_equivalent(built, parsed));
    spmd_spec_destroy(parsed);
}

static void test_builder(void **state)
{
    (void)state;
    spmd_spec *spec = SENTINEL_SPEC;
    assert_ok(spmd_spec_create(&spec));
    assert_non_null(spec);
    assert_int_equal(spmd_spec_length(spec), 0);
    assert_same_as_parsed(spec, "");
    assert_formats(spec, "P()", "empty builder");

    assert_ok(spmd_spec_append(spec, 0, NULL)); /* None */
    assert_same_as_parsed(spec, "None");
    assert_formats(spec, "P(None,)", "P(None,)");
    const char *one[] = {"a"};
    assert_ok(spmd_spec_append(spec, 1, one));
    assert_same_as_parsed(spec, "None, 'a'");
    const char *two[] = {"b", "c"};
    assert_ok(spmd_spec_append(spec, 2, two));
    assert_same_as_parsed(spec, "None, 'a', ('b', 'c')");
    assert_ok(spmd_spec_append_axis(spec, NULL)); /* None */
    assert_ok(spmd_spec_append_axis(spec, "d"));
    assert_same_as_parsed(spec, "P(None, 'a', ('b', 'c'), None, 'd')");
    assert_formats(spec, "P(None, 'a', ('b', 'c'), None, 'd')", "builder");
    const char *zero_with_names[] = {"ignored"};
    assert_ok(spmd_spec_append(spec, 0, zero_with_names)); /* naxes 0 is None whatever names */
    assert_same_as_parsed(spec, "None, 'a', ('b', 'c'), None, 'd', None");
    spmd_spec_destroy(spec);

    /* The two spellings of a single-axis entry agree. */
    spmd_spec *s1 = NULL, *s2 = NULL;
    assert_ok(spmd_spec_create(&s1));
    assert_ok(spmd_spec_create(&s2));
    assert_ok(spmd_spec_append(s1, 1, one));
    assert_ok(spmd_spec_append_axis(s2, "a"));
    assert_same_as_parsed(s1, "P('a')");
    assert_same_as_parsed(s2, "P('a')");
    assert_formats(s1, "P('a',)", "one entry");
    spmd_spec_destroy(s1);
    spmd_spec_destroy(s2);

    /* The builder copies the names: the caller's strings may change afterwards. */
    char mutable_name[8] = "m";
    const char *mp[] = {mutable_name};
    assert_ok(spmd_spec_create(&s1));
    assert_ok(spmd_spec_append(s1, 1, mp));
    strcpy(mutable_name, "q");
    assert_string_equal(spmd_spec_entry_axis(s1, 0, 0), "m");
    spmd_spec_destroy(s1);

    /* SPMD_MAX_RANK entries fit. */
    assert_ok(spmd_spec_create(&s1));
    for (int i = 0; i < SPMD_MAX_RANK; i++)
        assert_ok(spmd_spec_append_axis(s1, NULL));
    assert_int_equal(spmd_spec_length(s1), SPMD_MAX_RANK);
    spmd_spec_destroy(s1);
}

static void test_copy(void **state)
{
    (void)state;
    spmd_spec *orig = NULL, *copy = SENTINEL_SPEC;
    assert_ok(spmd_spec_parse("('x', 'y'), None, 'z'", &orig));
    assert_ok(spmd_spec_copy(orig, &copy));
    assert_non_null(copy);
    assert_ptr_not_equal(copy, orig);
    assert_describes(copy, "x,y|-|z", "copy");
    assert_true(spmd_spec_is_equivalent(orig, copy));
    /* Independent: extending the copy leaves the original alone, and the copy outlives it. */
    assert_ok(spmd_spec_append_axis(copy, "w"));
    assert_describes(orig, "x,y|-|z", "original after the copy grew");
    assert_int_equal(spmd_spec_length(orig), 3);
    spmd_spec_destroy(orig);
    assert_describes(copy, "x,y|-|z|w", "copy after the original died");
    assert_formats(copy, "P(('x', 'y'), None, 'z', 'w')", "copy");
    spmd_spec_destroy(copy);

    spmd_spec *empty = NULL;
    assert_ok(spmd_spec_create(&empty));
    assert_ok(spmd_spec_copy(empty, &copy));
    assert_int_equal(spmd_spec_length(copy), 0);
    spmd_spec_destroy(copy);
    spmd_spec_destroy(empty);
}

static int equivalent_texts(const char *a, const char *b)
{
    spmd_spec *sa = NULL, *sb = NULL;
    assert_ok(spmd_spec_parse(a, &sa));
    assert_ok(spmd_spec_parse(b, &sb));
    int ab = spmd_spec_is_equivalent(sa, sb);
    int ba = spmd_spec_is_equivalent(sb, sa);
    assert_true(spmd_spec_is_equivalent(sa, sa));
    spmd_spec_destroy(sa);
    spmd_spec_destroy(sb);
    if (ab != ba)
        fail_msg("spmd_spec_is_equivalent is not symmetric for \"%s\" and \"%s\"", a, b);
    return ab;
}

static void test_equivalence(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b;
        int equivalent;
    } cases[] = {
        {"'x'", "'x', None", 1},
        {"'x'", "'x', None, None", 1},
        {"", "None", 1},
        {"", "None, None, None", 1},
        {"P()", "P(())", 1},
        {"('x',)", "'x'", 1},
        {"(), 'x'", "None, 'x'", 1},
        {"('x', 'y'), None", "P(('x', 'y'))", 1},
        {"'x'", "None, 'x'", 0},
        {"'x'", "'y'", 0},
        {"'x'", "", 0},
        {"'x', 'y'", "'y', 'x'", 0},
        {"('x', 'y')", "('y', 'x')", 0},
        {"('x', 'y')", "'x', 'y'", 0},
        {"('x', 'y')", "'x'", 0},
        {"'x', None, 'y'", "'x', None", 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        if (equivalent_texts(cases[c].a, cases[c].b) != cases[c].equivalent)
            fail_msg("spmd_spec_is_equivalent(P(%s), P(%s)) should be %d", cases[c].a, cases[c].b,
                     cases[c].equivalent);
    /* Different spellings stay different in length and print differently. */
    spmd_spec *a = NULL, *b = NULL;
    assert_ok(spmd_spec_parse("'x'", &a));
    assert_ok(spmd_spec_parse("'x', None", &b));
    assert_int_not_equal(spmd_spec_length(a), spmd_spec_length(b));
    assert_formats(a, "P('x',)", "P('x')");
    assert_formats(b, "P('x', None)", "P('x', None)");
    assert_false(spmd_spec_is_equivalent(a, NULL));
    assert_false(spmd_spec_is_equivalent(NULL, a));
    assert_false(spmd_spec_is_equivalent(NULL, NULL));
    spmd_spec_destroy(a);
    spmd_spec_destroy(b);
}

static void test_format_buffer(void **state)
{
    (void)state;
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'a', None", &spec));
    const char *want = "P('a', None)"; /* 12 characters */
    char buf[32];
    assert_ok(spmd_spec_format(spec, buf, strlen(want) + 1));
    assert_string_equal(buf, want);
    memset(buf, 'z', sizeof buf);
    assert_status(spmd_spec_format(spec, buf, strlen(want)), SPMD_ERR_INVALID_ARGUMENT, "too small",
                  "13");
    /* truncated, but terminated */
    assert_int_equal(buf[strlen(want) - 1], '\0');
    assert_int_equal(strncmp(buf, want, strlen(want) - 1), 0);
    memset(buf, 'z', sizeof buf);
    assert_status(spmd_spec_format(spec, buf, 1), SPMD_ERR_INVALID_ARGUMENT, "too small");
    assert_int_equal(buf[0], '\0');
    assert_status(spmd_spec_format(spec, buf, 0), SPMD_ERR_INVALID_ARGUMENT, "size is 0");
    assert_status(spmd_spec_format(spec, NULL, 16), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    spmd_spec_destroy(spec);
}

/* ---- malformed strings ------------------------------------------------------------------- */

typedef struct bad_case {
    const char *text;
    const char *fragment1; /* the problem */
    const char *fragment2; /* where */
} bad_case;

static void expect_parse_error(const char *text, const char *f1, const char *f2)
{
    spmd_spec *spec = SENTINEL_SPEC;
    spmd_status st = spmd_spec_parse(text, &spec);
    const char *msg = spmd_last_error();
    if (st != SPMD_ERR_SPEC)
        fail_msg("spmd_spec_parse(\"%s\") returned %s, want SPMD_ERR_SPEC (message: %s)", text,
                 spmd_status_name(st), msg);
    if (spec != NULL)
        fail_msg("spmd_spec_parse(\"%s\") failed but left *out = %p", text, (void *)spec);
    if (!strstr(msg, f1) || (f2 && !strstr(msg, f2)))
        fail_msg("spmd_spec_parse(\"%s\"): message lacks \"%s\"%s%s%s: %s", text, f1,
                 f2 ? " or \"" : "", f2 ? f2 : "", f2 ? "\"" : "", msg);
}

static void test_malformed(void **state)
{
    (void)state;
    static const bad_case cases[] = {
        /* unbalanced parentheses */
        {"('a', 'b'", "unbalanced parentheses", "position 0"},
        {"'a')", "unbalanced parentheses", "position 3"},
        {"P('a'", "unbalanced parentheses", "position 0"},
        {"P(", "unbalanced parentheses", "position 0"},
        {"(", "unbalanced parentheses", "position 0"},
        {"None, ('x'", "unbalanced parentheses", "position 6"},
        {"P('a'))", "unexpected text after the closing ')'", "position 6"},
        /* empty names */
        {"''", "empty axis name", "position 0"},
        {"'a', ''", "empty axis name", "position 5"},
        {"('a', '')", "empty axis name", "position 6"},
        {"\"\"", "empty axis name", "position 0"},
        /* empty entries */
        {"'a',,'b'", "empty entry", "position 4"},
        {"'a', , 'b'", "empty entry", "position 5"},
        {",'a'", "empty entry", "position 0"},
        {"P(,)", "empty entry", "position 2"},
        /* nested tuples and None inside a tuple */
        {"(('a','b'),)", "nested tuple", "position 1"},
        {"('a', ('b',))", "nested tuple", "position 6"},
        {"('a', None)", "None inside a tuple", "position 10"},
        /* an axis used twice */
        {"'x', 'x'", "duplicate entries for `x`", "entry 1"},
        {"'x', ('y', 'x')", "duplicate entries for `x`", "entry 1"},
        {"('x', 'x')", "duplicate entries for `x`", "entry 0"},
        {"None, 'y', None, 'y'", "duplicate entries for `y`", "entry 3"},
        /* unterminated quotes */
        {"'a", "unterminated", "position 2"},
        {"'a', \"b", "unterminated", "position 7"},
        {"('a", "unterminated", "position 3"},
        /* missing separators, stray characters */
        {"'a' 'b'", "expected ','", "position 4"},
        {"('a' 'b')", "expected ',' or ')'", "position 5"},
        {"'a', 3", "expected an axis name", "position 5"},
        {"P('a') x", "unexpected text", "position 7"},
        /* names that cannot be axis names */
        {"'None'", "\"None\" cannot be an axis name", NULL},
        {"'a b'", "contains ' '", NULL},
        {"('a', 'b c')", "contains ' '", NULL},
        /* more than SPMD_MAX_MESH_AXES axes in one entry */
        {"('a','b','c','d','e','f','g','h','i')", "more than SPMD_MAX_MESH_AXES axes", "position"},
        /* more than SPMD_MAX_MESH_AXES distinct axes in the spec */
        {"'a','b','c','d','e','f','g','h','i'", "at most 8 mesh axes", NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        expect_parse_error(cases[c].text, cases[c].fragment1, cases[c].fragment2);

    /* More than SPMD_MAX_RANK entries. */
    char text[1024] = "";
    for (int i = 0; i <= SPMD_MAX_RANK; i++)
        strcat(text, i ? ", None" : "None");
    expect_parse_error(text, "16 entries", "SPMD_MAX_RANK");
    /* An over-long name, quoted and bare: the limit is SPMD_MAX_AXIS_NAME characters. */
    char name[SPMD_MAX_AXIS_NAME + 2];
    memset(name, 'n', SPMD_MAX_AXIS_NAME + 1);
    name[SPMD_MAX_AXIS_NAME + 1] = '\0';
    snprintf(text, sizeof text, "'%s'", name);
    expect_parse_error(text, "longer than SPMD_MAX_AXIS_NAME", "position");
    snprintf(text, sizeof text, "None, %s", name);
    expect_parse_error(text, "longer than SPMD_MAX_AXIS_NAME", "position");
}

/* ---- builder errors ---------------------------------------------------------------------- */

/* A failing append must leave the spec exactly as it was. */
static void expect_append_error(spmd_spec *spec, spmd_status status, int naxes,
                                const char *const *names, const char *fragment)
{
    char before[1024], after[1024], fb[1024], fa[1024];
    describe(spec, before, sizeof before);
    assert_ok(spmd_spec_format(spec, fb, sizeof fb));
    int length = spmd_spec_length(spec);
    assert_status(spmd_spec_append(spec, naxes, names), status, fragment);
    describe(spec, after, sizeof after);
    assert_ok(spmd_spec_format(spec, fa, sizeof fa));
    if (strcmp(before, after) != 0 || strcmp(fb, fa) != 0 || spmd_spec_length(spec) != length)
        fail_msg("a failed spmd_spec_append changed the spec from %s to %s", fb, fa);
}

static void test_builder_errors(void **state)
{
    (void)state;
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_create(&spec));
    assert_ok(spmd_spec_append_axis(spec, "x"));
    assert_ok(spmd_spec_append_axis(spec, NULL));

    const char *x[] = {"x"};
    expect_append_error(spec, SPMD_ERR_SPEC, 1, x, "duplicate entries for `x`");
    const char *yy[] = {"y", "y"};
    expect_append_error(spec, SPMD_ERR_SPEC, 2, yy, "duplicate entries for `y`");
    /* The new name 'z' comes before the duplicate: it must not be kept either. */
    const char *zx[] = {"z", "x"};
    expect_append_error(spec, SPMD_ERR_SPEC, 2, zx, "duplicate entries for `x`");
    const char *empty[] = {""};
    expect_append_error(spec, SPMD_ERR_SPEC, 1, empty, "empty axis name");
    const char *z_empty[] = {"z", ""};
    expect_append_error(spec, SPMD_ERR_SPEC, 2, z_empty, "empty axis name");
    const char *null_name[] = {NULL};
    expect_append_error(spec, SPMD_ERR_SPEC, 1, null_name, "NULL");
    expect_append_error(spec, SPMD_ERR_INVALID_ARGUMENT, 1, NULL, "NULL");
    expect_append_error(spec, SPMD_ERR_INVALID_ARGUMENT, 2, NULL, "NULL");
    expect_append_error(spec, SPMD_ERR_SPEC, -1, x, "naxes is -1");
    expect_append_error(spec, SPMD_ERR_SPEC, SPMD_MAX_MESH_AXES + 1, x, "naxes is 9");
    const char *none[] = {"None"};
    expect_append_error(spec, SPMD_ERR_SPEC, 1, none, "None");
    const char *quote[] = {"a'b"};
    expect_append_error(spec, SPMD_ERR_SPEC, 1, quote, "contains");
    char long_name[SPMD_MAX_AXIS_NAME + 2];
    memset(long_name, 'l', SPMD_MAX_AXIS_NAME + 1);
    long_name[SPMD_MAX_AXIS_NAME + 1] = '\0';
    const char *longp[] = {long_name};
    expect_append_error(spec, SPMD_ERR_SPEC, 1, longp, "64 characters");
    /* append_axis goes through the same checks */
    assert_status(spmd_spec_append_axis(spec, "x"), SPMD_ERR_SPEC, "duplicate entries for `x`");
    assert_status(spmd_spec_append_axis(spec, ""), SPMD_ERR_SPEC, "empty axis name");
    assert_describes(spec, "x|-", "after failed appends");

    /* Still usable, and 'z' really was not kept by the failed append. */
    assert_ok(spmd_spec_append_axis(spec, "z"));
    assert_same_as_parsed(spec, "'x', None, 'z'");

    /* A full spec refuses one more entry and stays full. */
    while (spmd_spec_length(spec) < SPMD_MAX_RANK)
        assert_ok(spmd_spec_append_axis(spec, NULL));
    const char *w[] = {"w"};
    expect_append_error(spec, SPMD_ERR_SPEC, 1, w, "16 entries");
    expect_append_error(spec, SPMD_ERR_SPEC, 0, NULL, "16 entries");
    spmd_spec_destroy(spec);

    /* More than SPMD_MAX_MESH_AXES distinct axes over several entries. */
    assert_ok(spmd_spec_create(&spec));
    static const char *const eight[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
    assert_ok(spmd_spec_append(spec, 4, eight));
    assert_ok(spmd_spec_append(spec, 4, eight + 4));
    const char *ninth[] = {"i"};
    expect_append_error(spec, SPMD_ERR_SPEC, 1, ninth, "at most 8 mesh axes");
    spmd_spec_destroy(spec);
}

/* ---- NULL arguments ---------------------------------------------------------------------- */

static void test_null_arguments(void **state)
{
    (void)state;
    spmd_spec *out = SENTINEL_SPEC;
    assert_status(spmd_spec_parse(NULL, &out), SPMD_ERR_INVALID_ARGUMENT, "text", "NULL");
    assert_null(out);
    assert_status(spmd_spec_parse("'a'", NULL), SPMD_ERR_INVALID_ARGUMENT, "out", "NULL");
    assert_status(spmd_spec_create(NULL), SPMD_ERR_INVALID_ARGUMENT, "out", "NULL");
    out = SENTINEL_SPEC;
    assert_status(spmd_spec_copy(NULL, &out), SPMD_ERR_INVALID_ARGUMENT, "spec", "NULL");
    assert_null(out);
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'a'", &spec));
    assert_status(spmd_spec_copy(spec, NULL), SPMD_ERR_INVALID_ARGUMENT, "out", "NULL");
    const char *b[] = {"b"};
    assert_status(spmd_spec_append(NULL, 1, b), SPMD_ERR_INVALID_ARGUMENT, "spec", "NULL");
    assert_status(spmd_spec_append_axis(NULL, "b"), SPMD_ERR_INVALID_ARGUMENT, "spec", "NULL");
    char buf[32];
    assert_status(spmd_spec_format(NULL, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT, "spec",
                  "NULL");
    assert_int_equal(spmd_spec_length(NULL), -1);
    assert_int_equal(spmd_spec_entry_size(NULL, 0), -1);
    assert_null(spmd_spec_entry_axis(NULL, 0, 0));
    assert_false(spmd_spec_is_equivalent(NULL, spec));
    spmd_spec_destroy(NULL);
    assert_int_equal(spmd_spec_length(spec), 1); /* untouched by all of the above */
    spmd_spec_destroy(spec);
}

int main(void)
{
    spmd_test_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),          cmocka_unit_test(test_parse_limits),
        cmocka_unit_test(test_round_trip),     cmocka_unit_test(test_builder),
        cmocka_unit_test(test_copy),           cmocka_unit_test(test_equivalence),
        cmocka_unit_test(test_format_buffer),  cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_builder_errors), cmocka_unit_test(test_null_arguments),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures);
}
