/* Private: choosing between two ways of moving the same bytes by what each cost lately. Pure
 * (no clock, no shared memory): the rings (host_rings.c) keep the counts and the costs, this
 * decides, and tests/runtime/comm/test_way_choice.c checks the policy alone. */
#ifndef SPMD_RUNTIME_WAY_CHOICE_H
#define SPMD_RUNTIME_WAY_CHOICE_H

#include <stddef.h>
#include <stdint.h>

/**
 * The way (0 or 1) that choice number k takes, given each way's cost lately (0: not measured
 * yet). Until both are measured: `run` choices way 0, then `run` way 1, in turn. Then the
 * cheaper (way 0 where they tie), save one choice in every `explore_every`, which goes the other
 * way: a way's cost rises while it meets fresh buffers or a busy peer, and only a choice that
 * goes the other way tells whether that one still costs more. run and explore_every: at least 1
 * and 2.
 */
int spmd__pick_way(uint32_t k, uint64_t cost0, uint64_t cost1, uint32_t run,
                   uint32_t explore_every);

/**
 * A moving average of costs in ns per KiB (`average`; 0: none yet) after a sample of `ns` over
 * `bytes`: it moves by 1 / 2^up of the difference toward a dearer sample and by 1 / 2^down
 * toward a cheaper one, so that a way can be made to forget a bad copy sooner than a good one.
 * A sample counts at most four times the average (one preempted midway moves it little); none
 * counts where the clock did not move or nothing moved. The result stays within 1..UINT32_MAX.
 */
uint32_t spmd__cost_average(uint32_t average, int64_t ns, size_t bytes, int up, int down);

#endif /* SPMD_RUNTIME_WAY_CHOICE_H */
