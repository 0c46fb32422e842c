/* spmd_set_log_callback: messages reach the callback (level, process, text) instead of stderr,
 * NULL restores stderr, the level filter still applies, a call from inside the callback is
 * refused, and a callback replaced from another thread is never called after the swap. */
#define _POSIX_C_SOURCE 200809L /* setenv, fileno */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

typedef struct captured {
    int calls;
    spmd_log_level level;
    int process;
    char text[512];
    spmd_status nested; /* what spmd_set_log_callback said from inside the callback */
} captured;

static void capture(spmd_log_level level, int process, const char *message, void *user)
{
    captured *c = user;
    c->calls++;
    c->level = level;
    c->process = process;
    snprintf(c->text, sizeof c->text, "%s", message);
    c->nested = spmd_set_log_callback(NULL, NULL);
}

/* spmd_init with JAX_NUM_CPU_DEVICES set logs an info note: the message this test routes. */
static void init_with_note(void)
{
    setenv("JAX_NUM_CPU_DEVICES", "2", 1);
    assert_ok(spmd_init(NULL));
    unsetenv("JAX_NUM_CPU_DEVICES");
    assert_int_equal(spmd_local_device_count(), 2);
    assert_ok(spmd_finalize());
}

static void test_callback_receives_messages(void **state)
{
    (void)state;
    captured c = {0};
    assert_ok(spmd_set_log_callback(capture, &c));
    init_with_note();
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.level, SPMD_LOG_INFO);
    assert_true(c.process == -1 || c.process == 0);
    assert_non_null(strstr(c.text, "JAX_NUM_CPU_DEVICES=2"));
    assert_non_null(strstr(c.text, "SPMD_NUM_CPU_DEVICES"));
    assert_null(strchr(c.text, '\n'));
    /* from inside the callback: refused, and the callback stays */
    assert_int_equal(c.nested, SPMD_ERR_INVALID_ARGUMENT);
    init_with_note();
    assert_int_equal(c.calls, 2);
    assert_ok(spmd_set_log_callback(NULL, NULL));
}

/* NULL restores the stderr logger and its line format. */
static void test_null_restores_stderr(void **state)
{
    (void)state;
    captured c = {0};
    assert_ok(spmd_set_log_callback(capture, &c));
    assert_ok(spmd_set_log_callback(NULL, NULL));
    char path[] = "/tmp/spmd_test_log_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(fileno(stderr));
    dup2(fd, fileno(stderr));
    init_with_note();
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    char text[1024] = "";
    FILE *f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    size_t got = fread(text, 1, sizeof text - 1, f);
    text[got] = '\0';
    fclose(f);
    unlink(path);
    assert_int_equal(c.calls, 0);
    assert_non_null(strstr(text, "] info: using JAX_NUM_CPU_DEVICES=2"));
    assert_non_null(strstr(text, "[spmd p"));
}

/* SPMD_NUM_CPU_DEVICES, when set, wins over JAX's variable, which is then not even noted. */
static void test_spmd_variable_wins(void **state)
{
    (void)state;
    captured c = {0};
    assert_ok(spmd_set_log_callback(capture, &c));
    setenv("SPMD_NUM_CPU_DEVICES", "2", 1);
    setenv("JAX_NUM_CPU_DEVICES", "5", 1);
    assert_ok(spmd_init(NULL));
    assert_int_equal(spmd_local_device_count(), 2);
    assert_ok(spmd_finalize());
    unsetenv("SPMD_NUM_CPU_DEVICES");
    unsetenv("JAX_NUM_CPU_DEVICES");
    assert_int_equal(c.calls, 0);
    assert_ok(spmd_set_log_callback(NULL, NULL));
}

/* Under SPMD_LOG_LEVEL=warning (the default) the info note never reaches the callback. The
 * level is read once per process, so this runs as its own ctest (argument --warning-level). */
static void test_level_filter(void **state)
{
    (void)state;
    captured c = {0};
    assert_ok(spmd_set_log_callback(capture, &c));
    init_with_note();
    assert_int_equal(c.calls, 0);
    assert_ok(spmd_set_log_callback(NULL, NULL));
}

/* Swapping callbacks while another thread logs: once spmd_set_log_callback(B) has returned, A
 * is never called again (its user data may be freed). */
static atomic_int a_retired, a_after_retire, a_calls, b_calls;
static void sink_a(spmd_log_level l, int p, const char *m, void *u)
{
    (void)l, (void)p, (void)m, (void)u;
    atomic_fetch_add(&a_calls, 1);
    if (atomic_load(&a_retired))
        atomic_fetch_add(&a_after_retire, 1);
}
static void sink_b(spmd_log_level l, int p, const char *m, void *u)
{
    (void)l, (void)p, (void)m, (void)u;
    atomic_fetch_add(&b_calls, 1);
}

static void *logging_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 40; i++)
        if (spmd_init(NULL) == SPMD_OK) /* each logs the note on JAX_NUM_CPU_DEVICES */
            (void)spmd_finalize();
    return NULL;
}

static void test_swap_while_logging(void **state)
{
    (void)state;
    assert_ok(spmd_set_log_callback(sink_a, NULL));
    setenv("JAX_NUM_CPU_DEVICES", "1", 1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, logging_thread, NULL), 0);
    while (atomic_load(&a_calls) < 5)
        sched_yield();
    assert_ok(spmd_set_log_callback(sink_b, NULL));
    atomic_store(&a_retired, 1);
    pthread_join(t, NULL);
    unsetenv("JAX_NUM_CPU_DEVICES");
    assert_int_equal(atomic_load(&a_after_retire), 0);
    assert_int_equal(atomic_load(&a_calls) + atomic_load(&b_calls), 40);
    assert_ok(spmd_set_log_callback(NULL, NULL));
}

int main(int argc, char **argv)
{
    unsetenv("SPMD_NUM_CPU_DEVICES");
    unsetenv("JAX_NUM_CPU_DEVICES");
    unsetenv("JAX_PLATFORMS");
    /* The routed message comes from JAX_NUM_CPU_DEVICES, which sizes CPU devices (ctest sets
     * SPMD_PLATFORM=cuda on a GPU run). */
    setenv("SPMD_PLATFORM", "cpu", 1);
    if (argc > 1 && strcmp(argv[1], "--warning-level") == 0) {
        setenv("SPMD_LOG_LEVEL", "warning", 1);
        const struct CMUnitTest filtered[] = {cmocka_unit_test(test_level_filter)};
        return cmocka_run_group_tests(filtered, NULL, NULL) ? 1 : 0;
    }
    setenv("SPMD_LOG_LEVEL", "info", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_callback_receives_messages),
        cmocka_unit_test(test_null_restores_stderr),
        cmocka_unit_test(test_spmd_variable_wins),
        cmocka_unit_test(test_swap_while_logging),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
