/*
 * Data between two processes of one machine through the wide slots of the shared-memory rings
 * (host_rings.h), for the large reductions: the sender writes each chunk once into the
 * receiver's segment, and the receiver uses it where it lies (adds it into its vector, or
 * copies it to its place) before handing the slot back. Two wide slots per direction: while
 * the receiver reads one chunk, the sender writes the next. MPI's shared-memory transport copies
 * twice (into its FIFO, out of it into a buffer that the reduction then reads a third time).
 *
 * Both sides decide alike whether to stream (spmd__comm_ring_stream_usable), and take exactly
 * the bytes they expect in the order sent: the chunks of one reduction share its tag, and a
 * ring hands out the oldest matching message first. A peer that stops half way (killed, or
 * stuck) leaves this one waiting until the deadline, which names it.
 */
#include <mpi.h>
#include <string.h>

#include "runtime/base/check.h"
#include "runtime/calls/calls.h"
#include "runtime/comm/comm_mpi_impl.h"
#include "runtime/comm/host_rings.h"

/* How often a waiting stream asks whether the call was given up, and how long it spins before
 * it gives the core away (as the waits for MPI's data do). */
#define STREAM_CANCEL_EVERY_NS 1000000
#define STREAM_SPIN_NS 100000

/* The chunk a stream sends at a time: a wide slot, in whole 4 KiB (whole elements of any
 * dtype); 0 where the wide slots are narrower (more than 64 processes on the machine). */
static size_t chunk_bytes(void) { return spmd__ring_wide_bytes() / 4096 * 4096; }

int spmd__comm_ring_stream_usable(const spmd__comm *c, int peer)
{
    int p = c->processes[peer];
    /* Not for the subsets that run at once (lanes: a shard_map's groups): their streams between
     * the same two processes would share the two wide slots, each holding chunks whose reader
     * waits for another's, which cannot get in. One stream at a time per pair waits only for
     * messages that their readers take without waiting for it. */
    return !c->lanes && chunk_bytes() > 0 && spmd__ring_to(p) && spmd__ring_from(p);
}

spmd_status spmd__comm_ring_stream(spmd__comm *c, int peer, int tag, const void *send,
                                   size_t sbytes, size_t rbytes, spmd__chunk_fn take, void *arg,
                                   const char *what, int64_t deadline, const spmd__wait *cancel)
{
    int p = c->processes[peer];
    size_t chunk = chunk_bytes(), sent = 0, got = 0;
    SPMD_REQUIRE(chunk > 0, SPMD_ERR_INTERNAL, "%s: no wide ring slots to stream through", what);
    int64_t start = 0, now = 0, next_cancel_check = 0, probe_after = 0;
    int tracked = -1;
    spmd__pause pause;
    spmd_status st = SPMD_OK;
    while (sent < sbytes || got < rbytes) {
        int moved = 0;
        if (sent < sbytes) {
            size_t len = sbytes - sent < chunk ? sbytes - sent : chunk;
            if (spmd__ring_send(p, c->wire, tag, 0, (const char *)send + sent, len)) {
                sent += len;
                moved = 1;
            }
        }
        spmd__ring_message m;
        if (got < rbytes && spmd__ring_claim(p, c->wire, tag, &m)) {
            size_t want = rbytes - got < chunk ? rbytes - got : chunk, came = m.bytes;
            if (came == want)
                take(arg, got, m.data, came);
            spmd__ring_release(&m);
            if (came != want) { /* the two sides disagree on the message: never guessed at */
                st = SPMD_ERROR(SPMD_ERR_INTERNAL,
                                "%s: a chunk of %zu bytes came from process %d where %zu were "
                                "expected; the processes disagree on the data",
                                what, came, p, want);
                break;
            }
            got += want;
            moved = 1;
        }
        if (moved)
            continue;
        now = spmd__now_ns();
        if (!start) {
            start = now;
            next_cancel_check = now + STREAM_CANCEL_EVERY_NS;
            probe_after = spmd__calls_probe_after_ns();
            spmd__pause_begin(&pause, now);
        }
        if (now > deadline) {
            st = got < rbytes
                     ? SPMD_ERROR(SPMD_ERR_TIMEOUT,
                                  "%s did not complete within the collective timeout "
                                  "(SPMD_COLLECTIVE_TIMEOUT): no data came from process(es) "
                                  "%d, which had agreed to it (killed or stuck?)",
                                  what, p)
                     : SPMD_ERROR(SPMD_ERR_TIMEOUT,
                                  "%s did not complete within the collective timeout "
                                  "(SPMD_COLLECTIVE_TIMEOUT): process %d, which had agreed to "
                                  "it, stopped taking its data (killed or stuck?)",
                                  what, p);
            break;
        }
        if (cancel && cancel->cancelled && now > next_cancel_check) {
            next_cancel_check = now + STREAM_CANCEL_EVERY_NS;
            if ((st = cancel->cancelled(cancel->arg)) != SPMD_OK)
                break;
        }
        if (now - start > probe_after) { /* as spmd__comm_wait_data_until: the notes answered */
            if (tracked < 0) {
                spmd__wait w = {.what = what};
                tracked = spmd__comm_track(c, NULL, &w, peer);
            }
            spmd__calls_poll_notes();
        }
        spmd__pause_step(&pause, now, STREAM_SPIN_NS);
    }
    spmd__calls_wait_end(tracked);
    return st;
}
