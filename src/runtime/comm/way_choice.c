/* Choosing between two ways by their recent costs (way_choice.h). */
#include "runtime/comm/way_choice.h"

int spmd__pick_way(uint32_t k, uint64_t cost0, uint64_t cost1, uint32_t run, uint32_t explore_every)
{
    if (!cost0 || !cost1)
        return (int)(k / run % 2);
    int best = cost1 < cost0;
    return k % explore_every == explore_every - 1 ? !best : best;
}

uint32_t spmd__cost_average(uint32_t average, int64_t ns, size_t bytes, int up, int down)
{
    if (ns <= 0 || bytes == 0)
        return average;
    if (ns > INT64_MAX / 1024)
        ns = INT64_MAX / 1024;
    int64_t sample = ns * 1024 / (int64_t)bytes;
    int64_t old = average;
    if (old && sample > 4 * old)
        sample = 4 * old;
    int64_t now = !old ? sample : old + (sample - old) / (1 << (sample > old ? up : down));
    return now < 1 ? 1 : now > UINT32_MAX ? UINT32_MAX : (uint32_t)now;
}
