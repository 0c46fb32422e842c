/* The choice between two ways by their recent costs (src/runtime/comm/way_choice.c), checked
 * against a plain restatement of the policy, choice by choice: how both ways are first tried,
 * which one wins once both are measured, how often the other is tried again, and how a moving
 * average follows dearer and cheaper samples. */
#include <stdint.h>
#include <string.h>

#include "testutil.h"

#include "runtime/comm/way_choice.h"

/* The runs before both ways are measured: run choices of way 0, then run of way 1, and so on. */
static void test_unmeasured_ways_take_turns(void **state)
{
    (void)state;
    static const uint32_t runs[] = {1, 2, 3, 8};
    static const uint64_t costs[][2] = {{0, 0}, {5, 0}, {0, 5}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++)
        for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++) {
            uint32_t zeros = 0, ones = 0;
            for (uint32_t k = 0; k < 8 * runs[r]; k++) {
                int want = (int)((k / runs[r]) & 1);
                int got = spmd__pick_way(k, costs[c][0], costs[c][1], runs[r], 32);
                if (got != want)
                    fail_msg("costs %llu and %llu (a way unmeasured), run %u: choice %u took "
                             "way %d, expected %d",
                             (unsigned long long)costs[c][0], (unsigned long long)costs[c][1],
                             runs[r], k, got, want);
                got ? ones++ : zeros++;
            }
            assert_int_equal(zeros, ones); /* both ways measured alike */
        }
}

/* Once both are measured: the cheaper, and the other one in every explore_every choices. */
static void test_cheaper_way_with_exploration(void **state)
{
    (void)state;
    static const uint64_t costs[][2] = {{100, 200}, {200, 100}, {7, 7}, {1, UINT64_MAX}};
    static const uint32_t every[] = {2, 32, 64};
    for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++)
        for (size_t e = 0; e < sizeof every / sizeof every[0]; e++) {
            int best = costs[c][1] < costs[c][0]; /* a tie: way 0 */
            uint32_t other = 0;
            for (uint32_t k = 0; k < 4 * every[e]; k++) {
                int got = spmd__pick_way(k, costs[c][0], costs[c][1], 3, every[e]);
                int want = k % every[e] == every[e] - 1 ? !best : best;
                if (got != want)
                    fail_msg("costs %llu and %llu, one in %u explores: choice %u took way %d, "
                             "expected %d",
                             (unsigned long long)costs[c][0], (unsigned long long)costs[c][1],
                             every[e], k, got, want);
                other += got != best;
            }
            assert_int_equal(other, 4); /* once per explore_every, never more */
        }
    /* the counter wraps: the choice stays the cheaper way's, save the exploring one */
    assert_int_equal(spmd__pick_way(UINT32_MAX - 1, 100, 200, 3, 32), 0);
    assert_int_equal(spmd__pick_way(UINT32_MAX, 100, 200, 3, 32), 1); /* 2^32 - 1 = 31 mod 32 */
}

/* The moving average, restated: the first sample as it is, then 1 / 2^up of the way toward a
 * dearer sample (at most four times the average) and 1 / 2^down toward a cheaper one. */
static void test_moving_average(void **state)
{
    (void)state;
    /* ns per KiB: 2048 ns over 2 KiB is 1024 */
    assert_int_equal(spmd__cost_average(0, 2048, 2048, 3, 1), 1024);
    /* dearer: 1024 + (2048 - 1024) / 8 */
    assert_int_equal(spmd__cost_average(1024, 2048, 1024, 3, 1), 1152);
    /* cheaper: 1024 - (1024 - 512) / 2 */
    assert_int_equal(spmd__cost_average(1024, 512, 1024, 3, 1), 768);
    /* a preempted sample counts as four times the average: 1000 + (4000 - 1000) / 4 */
    assert_int_equal(spmd__cost_average(1000, 1000000, 1024, 2, 2), 1750);
    assert_int_equal(spmd__cost_average(1000, 6000, 1024, 2, 2), 1750);
    assert_int_equal(spmd__cost_average(1000, 4000, 1024, 2, 2), 1750); /* just at the cap */
    /* no time or no bytes: unchanged, measured or not */
    assert_int_equal(spmd__cost_average(1000, 0, 1024, 2, 2), 1000);
    assert_int_equal(spmd__cost_average(1000, -5, 1024, 2, 2), 1000);
    assert_int_equal(spmd__cost_average(0, 100, 0, 2, 2), 0);
    /* a sample below 1 ns per KiB still measures the way: a measured way is never 0 */
    assert_int_equal(spmd__cost_average(0, 1, 1 << 20, 2, 2), 1);
    /* a huge first sample is capped, never wrapped */
    assert_int_equal(spmd__cost_average(0, INT64_MAX, 1, 2, 2), UINT32_MAX);
    /* against a plain loop over a run of samples */
    uint32_t average = 0;
    int64_t want = 0;
    for (int i = 0; i < 200; i++) {
        int64_t ns = 1000 + (i * 7919) % 5000, sample = ns * 1024 / 4096;
        if (want && sample > 4 * want)
            sample = 4 * want;
        want = !want ? sample : want + (sample - want) / (sample > want ? 8 : 2);
        if (want < 1)
            want = 1;
        average = spmd__cost_average(average, ns, 4096, 3, 1);
        if (average != want)
            fail_msg("sample %d (%lld ns over 4 KiB): average %u, expected %lld", i, (long long)ns,
                     average, (long long)want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unmeasured_ways_take_turns),
        cmocka_unit_test(test_cheaper_way_with_exploration),
        cmocka_unit_test(test_moving_average),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
