/* Status strings and the thread-local last error. */
#include <pthread.h>

#include "testutil.h"

static void test_every_status_has_text(void **state)
{
    (void)state;
#define SPMD_X_(name, value, text)                                                                 \
    assert_string_equal(spmd_status_string(SPMD_##name), text);                                    \
    assert_string_equal(spmd_status_name(SPMD_##name), "SPMD_" #name);
    SPMD_STATUS_LIST(SPMD_X_)
#undef SPMD_X_
    assert_string_equal(spmd_status_string((spmd_status)-12345), "unknown status");
    assert_string_equal(spmd_status_name((spmd_status)17), "SPMD_UNKNOWN_STATUS");
    assert_int_equal(SPMD_OK, 0);
    assert_true(SPMD_ERR_INVALID_ARGUMENT < 0 && SPMD_ERR_TIMEOUT < 0 && SPMD_ERR_INTERNAL < 0);
}

static void test_last_error_set_and_cleared(void **state)
{
    (void)state;
    spmd_clear_error();
    assert_non_null(spmd_last_error());
    assert_string_equal(spmd_last_error(), "");
    spmd_mesh *mesh = NULL;
    assert_status(spmd_mesh_create(1, NULL, NULL, NULL, 0, &mesh), SPMD_ERR_INVALID_ARGUMENT,
                  "spmd_init");
    assert_null(mesh);
    /* the message says no source location; the accessor for developers does */
    assert_null(strstr(spmd_last_error(), "src/"));
    assert_null(strstr(spmd_last_error(), ".c:"));
    assert_non_null(strstr(spmd_last_error_location(), "src/"));
    assert_non_null(strstr(spmd_last_error_location(), ".c:"));
    spmd_clear_error();
    assert_string_equal(spmd_last_error(), "");
    assert_string_equal(spmd_last_error_location(), "");
}

typedef struct thread_result {
    char seen_before[64];
    spmd_status status;
    char seen_after[256];
} thread_result;

static void *other_thread(void *p)
{
    thread_result *r = p;
    snprintf(r->seen_before, sizeof r->seen_before, "%s", spmd_last_error());
    spmd_spec *spec = NULL;
    r->status = spmd_spec_parse("('a'", &spec);
    snprintf(r->seen_after, sizeof r->seen_after, "%s", spmd_last_error());
    return NULL;
}

/* Errors on one thread are invisible to another (libgit2's model, not NCCL's global buffer). */
static void test_last_error_is_per_thread(void **state)
{
    (void)state;
    spmd_spec *spec = NULL;
    assert_status(spmd_spec_parse("'x', 'x'", &spec), SPMD_ERR_SPEC, "duplicate");
    char mine[256];
    snprintf(mine, sizeof mine, "%s", spmd_last_error());

    thread_result r;
    memset(&r, 0, sizeof r);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &r), 0);
    assert_int_equal(pthread_join(t, NULL), 0);

    assert_string_equal(r.seen_before, "");
    assert_int_equal(r.status, SPMD_ERR_SPEC);
    assert_non_null(strstr(r.seen_after, "unbalanced"));
    assert_string_equal(spmd_last_error(), mine);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_status_has_text),
        cmocka_unit_test(test_last_error_set_and_cleared),
        cmocka_unit_test(test_last_error_is_per_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
