/* libFuzzer harness: the partition-spec parser and formatter.
 *
 * The input is the text given to spmd_spec_parse. Whatever it is, the parser must not crash,
 * leak or read past the text (AddressSanitizer, UBSan), and:
 *   - on failure: *out is NULL, the status is SPMD_ERR_SPEC and spmd_last_error() says why;
 *   - on success: the spec obeys spec.h's limits, and parse(format(spec)) gives the same spec
 *     (entry by entry), whose format is the same text; the text inside P(...) parses to it too,
 *     and so does the same spec rebuilt with spmd_spec_append or copied;
 *   - spmd_spec_format fails cleanly, without writing past the buffer, when the buffer is one
 *     byte short, and succeeds when it is exactly long enough. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "spmd/mesh.h"
#include "spmd/spec.h"
#include "spmd/status.h"

/* Far more than the longest legal spec: 16 entries, 8 distinct axes of 63 characters. */
#define TEXT_CAP 4096

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static int is_name_char(char c)
{
    /* spec.h: names are mesh axis names; spmd_spec_format quotes them with '. */
    return c > ' ' && c < 127 && c != '\'' && c != '"' && c != '(' && c != ')' && c != ',' &&
           c != '=';
}

/* The spec's structure against spec.h: entry sizes, names, no axis used twice. */
static void check_structure(const spmd_spec *spec, const char *text)
{
    int n = spmd_spec_length(spec);
    const char *seen[SPMD_MAX_RANK * SPMD_MAX_MESH_AXES];
    int num_seen = 0;

    FUZZ_CHECK(n >= 0 && n <= SPMD_MAX_RANK, "length %d for \"%s\"", n, text);
    FUZZ_CHECK(spmd_spec_entry_size(spec, n) == -1 && spmd_spec_entry_size(spec, -1) == -1,
               "entry_size out of range is not -1 for \"%s\"", text);
    for (int i = 0; i < n; i++) {
        int k_max = spmd_spec_entry_size(spec, i);
        FUZZ_CHECK(k_max >= 0 && k_max <= SPMD_MAX_MESH_AXES, "entry %d has %d axes for \"%s\"", i,
                   k_max, text);
        FUZZ_CHECK(spmd_spec_entry_axis(spec, i, k_max) == NULL &&
                       spmd_spec_entry_axis(spec, i, -1) == NULL,
                   "entry_axis out of range is not NULL for \"%s\"", text);
        for (int k = 0; k < k_max; k++) {
            const char *name = spmd_spec_entry_axis(spec, i, k);
            FUZZ_CHECK(name != NULL, "entry %d axis %d is NULL for \"%s\"", i, k, text);
            size_t len = strlen(name);
            FUZZ_CHECK(len >= 1 && len <= SPMD_MAX_AXIS_NAME, "axis name of %zu bytes in \"%s\"",
                       len, text);
            FUZZ_CHECK(strcmp(name, "None") != 0, "axis named None in \"%s\"", text);
            for (size_t c = 0; c < len; c++)
                FUZZ_CHECK(is_name_char(name[c]), "axis name \"%s\" has byte 0x%02x (\"%s\")", name,
                           (unsigned char)name[c], text);
            for (int s = 0; s < num_seen; s++)
                FUZZ_CHECK(strcmp(seen[s], name) != 0, "axis '%s' used twice in \"%s\"", name,
                           text);
            seen[num_seen++] = name;
        }
    }
}

/* Same length and, entry by entry, the same axes in the same order. */
static int same_entries(const spmd_spec *a, const spmd_spec *b)
{
    int n = spmd_spec_length(a);
    if (n != spmd_spec_length(b))
        return 0;
    for (int i = 0; i < n; i++) {
        int k_max = spmd_spec_entry_size(a, i);
        if (k_max != spmd_spec_entry_size(b, i))
            return 0;
        for (int k = 0; k < k_max; k++)
            if (strcmp(spmd_spec_entry_axis(a, i, k), spmd_spec_entry_axis(b, i, k)) != 0)
                return 0;
    }
    return 1;
}

/* Parses `text`, which must succeed and give a spec with the same entries as `want`. */
static void check_reparse(const spmd_spec *want, const char *text, const char *what,
                          const char *original)
{
    spmd_spec *got = NULL;
    spmd_status st = spmd_spec_parse(text, &got);
    FUZZ_CHECK(st == SPMD_OK, "%s \"%s\" of \"%s\" does not parse: %s", what, text, original,
               spmd_last_error());
    FUZZ_CHECK(same_entries(want, got), "%s \"%s\" of \"%s\" parses to another spec", what, text,
               original);
    FUZZ_CHECK(spmd_spec_is_equivalent(want, got) && spmd_spec_is_equivalent(got, want),
               "%s \"%s\" of \"%s\" is not equivalent", what, text, original);
    spmd_spec_destroy(got);
}

/* Formats into a heap buffer of exactly `size` bytes, so that ASan sees any write past it. */
static spmd_status format_exact(const spmd_spec *spec, size_t size, char *copy_out)
{
    char *buf = malloc(size);
    if (buf == NULL)
        abort();
    spmd_status st = spmd_spec_format(spec, buf, size);
    FUZZ_CHECK(memchr(buf, '\0', size) != NULL, "format into %zu bytes left no terminator", size);
    if (copy_out != NULL)
        memcpy(copy_out, buf, strlen(buf) + 1);
    free(buf);
    return st;
}

static void check_format(const spmd_spec *spec, const char *original)
{
    char text[TEXT_CAP], again[TEXT_CAP];
    spmd_status st = spmd_spec_format(spec, text, sizeof text);
    FUZZ_CHECK(st == SPMD_OK, "format of \"%s\" failed: %s", original, spmd_last_error());
    size_t len = strlen(text);
    FUZZ_CHECK(len >= 3 && strncmp(text, "P(", 2) == 0 && text[len - 1] == ')',
               "format of \"%s\" is \"%s\"", original, text);

    /* Exactly long enough, and one byte short. */
    st = format_exact(spec, len + 1, again);
    FUZZ_CHECK(st == SPMD_OK && strcmp(again, text) == 0,
               "format into %zu bytes gave \"%s\" (status %d) instead of \"%s\"", len + 1, again,
               (int)st, text);
    st = format_exact(spec, len, NULL);
    FUZZ_CHECK(st == SPMD_ERR_INVALID_ARGUMENT && spmd_last_error()[0] != '\0',
               "format of \"%s\" into %zu bytes returned %d", text, len, (int)st);
    FUZZ_CHECK(spmd_spec_format(spec, NULL, 0) == SPMD_ERR_INVALID_ARGUMENT,
               "format into no buffer did not fail");

    /* parse(format(spec)) is the same spec, and formats to the same text. */
    check_reparse(spec, text, "the formatted text", original);
    spmd_spec *again_spec = NULL;
    FUZZ_CHECK(spmd_spec_parse(text, &again_spec) == SPMD_OK, "reparse failed");
    FUZZ_CHECK(spmd_spec_format(again_spec, again, sizeof again) == SPMD_OK &&
                   strcmp(again, text) == 0,
               "format is not stable: \"%s\" then \"%s\" (from \"%s\")", text, again, original);
    spmd_spec_destroy(again_spec);

    /* The text inside P( ... ) is the same spec without the wrapper. */
    memcpy(again, text + 2, len - 3);
    again[len - 3] = '\0';
    check_reparse(spec, again, "the unwrapped text", original);
}

/* The same spec through the builder, and through spmd_spec_copy. */
static void check_rebuild(const spmd_spec *spec, const char *original)
{
    spmd_spec *built = NULL, *copy = NULL;
    FUZZ_CHECK(spmd_spec_create(&built) == SPMD_OK, "spmd_spec_create failed");
    for (int i = 0; i < spmd_spec_length(spec); i++) {
        const char *names[SPMD_MAX_MESH_AXES];
        int k_max = spmd_spec_entry_size(spec, i);
        for (int k = 0; k < k_max; k++)
            names[k] = spmd_spec_entry_axis(spec, i, k);
        spmd_status st = spmd_spec_append(built, k_max, names);
        FUZZ_CHECK(st == SPMD_OK, "rebuilding entry %d of \"%s\" failed: %s", i, original,
                   spmd_last_error());
    }
    FUZZ_CHECK(same_entries(spec, built), "the rebuilt \"%s\" differs", original);
    FUZZ_CHECK(spmd_spec_copy(spec, &copy) == SPMD_OK && same_entries(spec, copy),
               "the copy of \"%s\" differs", original);

    /* A trailing None changes the spelling, not the layout. */
    if (spmd_spec_length(built) < SPMD_MAX_RANK) {
        FUZZ_CHECK(spmd_spec_append_axis(built, NULL) == SPMD_OK, "appending None failed: %s",
                   spmd_last_error());
        FUZZ_CHECK(spmd_spec_is_equivalent(spec, built) && spmd_spec_is_equivalent(built, spec),
                   "\"%s\" plus None is not equivalent to it", original);
        FUZZ_CHECK(spmd_spec_length(built) == spmd_spec_length(spec) + 1, "length after None");
    } else {
        FUZZ_CHECK(spmd_spec_append_axis(built, NULL) == SPMD_ERR_SPEC,
                   "a 17th entry was accepted");
        FUZZ_CHECK(same_entries(spec, built), "a failed append changed the spec");
    }
    spmd_spec_destroy(copy);
    spmd_spec_destroy(built);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_reader r = {data, size, 0};
    char *text = fuzz_rest(&r);        /* exactly size + 1 bytes: ASan sees any read past the NUL */
    spmd_spec *spec = (spmd_spec *)&r; /* must be overwritten with NULL on failure */

    spmd_clear_error();
    spmd_status st = spmd_spec_parse(text, &spec);
    if (st != SPMD_OK) {
        FUZZ_CHECK(spec == NULL, "failed parse of \"%s\" left *out set", text);
        FUZZ_CHECK(st == SPMD_ERR_SPEC, "parse of \"%s\" returned %s", text, spmd_status_name(st));
        FUZZ_CHECK(spmd_last_error()[0] != '\0', "parse of \"%s\" failed without a message", text);
        free(text);
        return 0;
    }
    FUZZ_CHECK(spec != NULL, "successful parse of \"%s\" gave NULL", text);
    check_structure(spec, text);
    check_format(spec, text);
    check_rebuild(spec, text);
    spmd_spec_destroy(spec);
    free(text);
    return 0;
}
