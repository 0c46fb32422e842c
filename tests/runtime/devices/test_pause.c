/* A polling wait's pause (src/runtime/devices/event.c): nothing during its spin, then the
 * measure of whether its thread shares its core; where start-up set a polling stretch
 * (spmd__pause_set_polling: the job's device threads have a core each), nothing until that
 * stretch ends either, crowded or not, so that a wait never hands someone else's work its core. */
#include "runtime/devices/event.h"
#include "testutil.h"

#define MS 1000000LL

/* The pause's own marks: the crowd's measure begun, a nap taken. */
static int measuring(const spmd__pause *p) { return p->cpu_start_ns >= 0; }
static int napped(const spmd__pause *p) { return p->nap_ns >= 0; }

static void test_spin_then_measure(void **state)
{
    (void)state;
    spmd__pause_set_polling(0);
    spmd__pause p;
    int64_t t0 = spmd__now_ns();
    spmd__pause_begin(&p, t0);
    spmd__pause_step(&p, t0 + MS / 2, MS); /* within the spin */
    assert_false(measuring(&p));
    spmd__pause_step(&p, t0 + MS + 1, MS); /* past it: the measure begins */
    assert_true(measuring(&p));
}

static void test_polling_holds_off(void **state)
{
    (void)state;
    spmd__pause_set_polling(10 * MS);
    spmd__pause p;
    int64_t t0 = spmd__now_ns();
    spmd__pause_begin(&p, t0);
    spmd__pause_step(&p, t0 + 5 * MS, 0); /* past the spin, within the polling */
    assert_false(measuring(&p));
    assert_false(napped(&p));
    spmd__pause_step(&p, t0 + 10 * MS + 1, 0);
    assert_true(measuring(&p));
    spmd__pause_set_polling(0);
}

/* A crowd measured earlier (a wait of this thread found its core shared) naps at every step of
 * a wait for shared memory; within the polling stretch it does not. */
static void test_crowded_polls_first(void **state)
{
    (void)state;
    spmd__pause p;
    int64_t t0 = spmd__now_ns();
    spmd__pause_set_polling(10 * MS);
    spmd__pause_begin(&p, t0);
    p.crowded = 1;
    p.holds_core = 0;
    spmd__pause_step(&p, t0 + 9 * MS, 0);
    assert_false(napped(&p));
    spmd__pause_step(&p, t0 + 10 * MS + 1, 0);
    assert_true(napped(&p));

    spmd__pause_set_polling(0); /* without the stretch: a nap right after the spin */
    spmd__pause_begin(&p, t0);
    p.crowded = 1;
    p.holds_core = 0;
    spmd__pause_step(&p, t0 + 1, 0);
    assert_true(napped(&p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spin_then_measure),
        cmocka_unit_test(test_polling_holds_off),
        cmocka_unit_test(test_crowded_polls_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
