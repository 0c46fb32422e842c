/*
 * Data between two processes of one machine through the wide slots of the shared-memory rings
 * (host_rings.h), for the large reductions: the sender writes each chunk once into the
 * receiver's segment, and the receiver uses it where it lies (adds it into its vector, or
 * copies it to its place) before handing the slot back. Three wide slots per direction (a
 * chunk takes any of them): while the receiver reads one chunk, the sender writes the next. MPI's
 * shared-memory transport copies twice (into its FIFO, out of it into a buffer that the reduction
 * then reads a third time).
 *
 * Both sides decide alike whether to stream (spmd__comm_ring_stream_usable), and take exactly
 * the bytes they expect in the order sent: the chunks of one reduction share its tag, and a
 * ring hands out the oldest matching message first. A chunk goes out only while its reader
 * listens for its round (host_rings.h), and only once its sender agreed to the call: its reader
 * takes it as soon as its own part of the agreement ends (an exchange listens before it), so it
 * never holds for long a slot that another stream between the same two processes needs (a
 * shard_map's groups stream at once), and a round's chunks never mix with the next one's. An
 * exchange's note (where the data lies, for a reader that reads it straight) may go out before
 * its sender agreed (spmd__comm_ring_streams_note_early): it is read only once the reader
 * agreed, and holds one slot. A peer that stops half way (killed, or stuck) leaves this one
 * waiting until the deadline, which names it.
 */
#include <errno.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/check.h"
#include "runtime/calls/calls.h"
#include "runtime/comm/comm_mpi_impl.h"
#include "runtime/comm/host_rings.h"

/* How often a waiting stream asks whether the call was given up, and how long it spins before
 * it gives the core away (as the waits for MPI's data do). */
#define STREAM_CANCEL_EVERY_NS 1000000
#define STREAM_SPIN_NS 100000
/* How long a stream on a crowded machine yields the core, without progress, before it sleeps. */
#define STREAM_YIELD_NS 1000000

/* The chunk a stream sends at a time: a wide slot, in whole 4 KiB (whole elements of any
 * dtype); 0 where the wide slots are narrower (more than 64 processes on the machine). */
static size_t chunk_bytes(void) { return spmd__ring_wide_bytes() / 4096 * 4096; }

/* From this size on, a stream's chunks always go into the slots around the caches
 * (non-temporal stores: host_rings.c says why a peer on another cache wants them); shorter
 * ones go the way the rings measured cheaper for the pair. From 512 KiB, as until stop 76, the
 * near runs lost (2 x 1 on huge pages, ratio to MPI with CMA, medians of 6 runs alternating
 * with the measured way: psum 1-4 MiB 0.62-0.85 against 0.89-1.04), and from 4 MiB the measured
 * way lost far (5 runs, a cache line's round trip 470-520 ns: psum 8-16 MiB 0.73-0.79 measured,
 * 0.89-0.98 around from 512 KiB, 0.86-1.01 from 4 MiB). */
#define AROUND_STREAM_BYTES ((size_t)4 << 20)

/* A long stream: from this size on, on a machine whose processes outnumber its cores, an
 * exchange's message may go as a note (as_note says why). */
#define LONG_STREAM_BYTES (128 * 1024)

/* The chunks of a message of `bytes`: half of it (whole 4 KiB, at least 16 KiB) up to a wide
 * slot's, so that a message of two slots' worth still pipelines, the reader copying one chunk
 * out while the sender writes the next (a 64 KiB message went in one chunk before 2026-12-04:
 * its two copies one after the other), with no more hand-offs of a slot than that takes. Until
 * 2026-12-07 it was a quarter; halves, medians of 4-5 runs alternating with quarters (ratio to
 * MPI, CMA unless said): 2 x 1 far all_gather 128 KiB 0.85 -> 1.06, near 1.45 -> 1.56, without
 * CMA 0.96 -> 1.04; psum 128 KiB 1.89 -> 2.30 far, 2.02 -> 2.25 near; 4 x 1 on the 2 cores
 * all_gather 256-512 KiB 0.79-0.92 -> 0.95-1.17, psum 128-512 KiB 0.85-0.95 -> 1.07-1.23. Both
 * sides find the same from the same length. */
#define CHUNK_LEAST_BYTES (16 * 1024)
static size_t chunk_for(size_t bytes, size_t wide)
{
    size_t half = (bytes - bytes / 2 + 4095) / 4096 * 4096; /* 64 KiB + 1: two, not three */
    half = half > CHUNK_LEAST_BYTES ? half : CHUNK_LEAST_BYTES;
    return half < wide ? half : wide;
}

/* The length of the chunk after `done` of a message of `bytes`. */
static size_t next_chunk(size_t bytes, size_t done, size_t wide)
{
    size_t each = chunk_for(bytes, wide);
    return bytes - done < each ? bytes - done : each;
}

int spmd__comm_ring_stream_usable(const spmd__comm *c, int peer)
{
    int p = c->processes[peer];
    return chunk_bytes() > 0 && spmd__ring_to(p) && spmd__ring_from(p);
}

static uint64_t mix(uint64_t z) /* splitmix64's finaliser */
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The stream's name in the listeners and on its chunks (host_rings.h): its communicator, its
 * exchange (the tag, which comes round again, and the exchange's stamp, which tells the calls
 * apart) and its round; never 0, which is a free listener and a message. */
static uint64_t stream_key(uint64_t wire, uint32_t stamp, int tag, int round)
{
    uint64_t z = mix(wire ^ mix((uint64_t)stamp << 32 | (uint32_t)tag) ^ (uint64_t)(uint32_t)round);
    return z ? z : 1;
}

static uint64_t key_of(const spmd__comm *c, const spmd__stream *s)
{
    /* the exchange's stamp (spmd__comm_exchange_tag), alike on both sides */
    return stream_key(c->wire, c->stamp, s->tag, s->round);
}

/* Beyond SPMD__COMM_STRAIGHT_ABOVE, a message whose buffer stays put goes to a peer that reads
 * this process's memory straight (spmd__ring_direct_to) as a note of where it lies: the peer
 * copies it once into its place, where through the slots it is copied twice, the sender busy
 * with every chunk (2 x 1, medians of 3 runs alternating with the slots alone, ratio to MPI with
 * its own straight reads, CMA: ppermute 128 KiB-4 MiB 0.54-0.68 -> 0.93-1.09, all_to_all
 * 0.71-0.78 -> 0.84-1.13, all_gather 128 KiB-8 MiB 0.69-0.98 -> 0.99-1.33). Beyond
 * SPMD__COMM_CONTESTED_ABOVE (32 KiB) and up to it, the way that took the reader less time
 * lately (spmd__ring_pick_direct): there the winner changes with the machine's state, on the
 * same VM. Such messages went faster read straight in README's stops 59-78, through the slots
 * in stop 79 (2 x 1, libspmd's time: ppermute of 64 KiB 6.2-6.4 against 3.0-3.3 us near,
 * all_gather of 64 KiB 5.6-7.9 against 2.8-3.0), read straight again in stop 82 (ppermute of
 * 64 KiB 5.8 against 12.4 us, both forced). The reader times either way from the message's
 * first arrival to its last byte in place, leaving out the first of a turn
 * (spmd__ring_note_cost).
 * A reduction's rounds choose for themselves (tree_mpi.c).
 * The note's reader answers in a word of the sender's (host_rings.h): the buffer is the
 * caller's again only once it did, or once the sender released the word unanswered. */
/* A stream's note (spmd__ring_send_marked), told from its data by its mark. */
enum { MARK_NOTE = 1 };

typedef struct direct_note {
    uint64_t at, bytes; /* in the sender's memory */
    int64_t word;       /* the sender's word for the answer */
} direct_note;

typedef spmd__stream_state stream_state;

static int stream_open(const spmd__stream *s, const stream_state *t)
{
    return t->sent < s->sbytes || t->got < s->rbytes;
}

/* The sender's choice as the stream begins, which its reader needs not know beforehand: a note
 * comes marked.
 * Where the machine's processes outnumber its cores, an exchange's message goes as a note only
 * from LONG_STREAM_BYTES (a reduction's hand-off from STRAIGHT_ROUND_BYTES, tree_mpi.c): the
 * reader alone then copies while the sender waits for its word. Through the slots both copy
 * every byte, each when the scheduler lets it, and a message longer than the three slots hold
 * (192 KiB up to 16 processes a machine) waits for its reader to empty one, a switch of cores
 * each time on such a machine (4 x 1 on 2 cores, far, medians of 6 runs alternating with notes
 * from 512 KiB, libspmd's time: ppermute of 256 KiB 88 -> 58 us, all_to_all of 1 MiB (256 KiB a
 * message) 178-205 -> 135-140, all_gather of 1 MiB 173 -> 117; of 128 KiB messages, all_to_all of
 * 512 KiB 103-113 -> 96-101; at 2 x 2, ppermute of 128 and 256 KiB 27 -> 21 and 43 -> 34 us, 4
 * runs). Notes from 32 KiB had lost (all_gather of 128 KiB-1 MiB 0.09-0.29 of MPI's speed, ppermute
 * of 64 KiB 0.34, stop 67). */
static int contested(size_t bytes)
{
    return bytes > SPMD__COMM_CONTESTED_ABOVE && bytes <= SPMD__COMM_STRAIGHT_ABOVE;
}

/* A contested message received into its place, as those its sender may send either way are: a
 * reduction's rounds (added) and a message of pieces (scattered) go through the slots always,
 * and their time would blur the choice (spmd__ring_note_cost). With several peers at once, the
 * time through the slots also holds the other streams' work, which leans the choice toward notes.
 */
static int timed_either_way(const spmd__stream *s) { return s->into && contested(s->rbytes); }

static int as_note(const spmd__stream *s, int p)
{
    if (!s->send_stays || s->fill || !spmd__ring_direct_to(p))
        return 0;
    if (spmd__rings_crowded())
        return s->sbytes >= LONG_STREAM_BYTES;
    return s->sbytes > SPMD__COMM_STRAIGHT_ABOVE ||
           (contested(s->sbytes) && spmd__ring_pick_direct(p));
}

static int sends_direct(const stream_state *t) { return t->as_note && !t->chunked && t->sent == 0; }

/* Reads the data a note from process p points at into its place (s->into, else chunk by chunk
 * through a buffer to take()), then answers in the sender's word: a word released meanwhile
 * means the sender gave up, and what was read may not be its data. */
static spmd_status read_straight(const spmd__stream *s, int p, uint64_t key,
                                 const direct_note *note, size_t chunk, const char *what)
{
    int err = 0;
    int64_t start = timed_either_way(s) ? spmd__now_ns() : 0;
    char *bounce = s->into ? NULL : malloc(chunk);
    if (s->into)
        err = spmd__ring_read_direct(p, s->into, note->at, (size_t)note->bytes);
    else if (!bounce)
        err = ENOMEM;
    for (size_t at = 0; bounce && !err && at < note->bytes; at += chunk) {
        size_t len = note->bytes - at < chunk ? (size_t)note->bytes - at : chunk;
        err = spmd__ring_read_direct(p, bounce, note->at + at, len);
        if (!err)
            s->take(s->arg, at, bounce, len);
    }
    free(bounce);
    int64_t took = start ? spmd__now_ns() - start : 0;
    /* a word released meanwhile: its sender gave up, whatever this read found. Not a timeout
     * here: the sender's own status says whether it timed out, and a call that failed on
     * purpose must not read as one */
    SPMD_REQUIRE(spmd__ring_word_answer(p, (int)note->word, key, !err), SPMD_ERR_DISTRIBUTED,
                 "%s: process %d gave up on it (it timed out, or its call failed) while this "
                 "process read its data from that process's memory; the output is not valid",
                 what, p);
    SPMD_REQUIRE(err != ESRCH, SPMD_ERR_DISTRIBUTED,
                 "%s: process %d ended while this process read its data (killed?)", what, p);
    SPMD_REQUIRE(err != ENOMEM, SPMD_ERR_OUT_OF_MEMORY,
                 "%s: out of memory for a %zu-byte buffer to read the data of process %d", what,
                 chunk, p);
    SPMD_REQUIRE(err == 0, SPMD_ERR_DISTRIBUTED,
                 "%s: reading the data of process %d straight from its memory failed (%s); "
                 "set SPMD_CMA=0 to send it through shared memory instead",
                 what, p, strerror(err));
    if (took)
        spmd__ring_note_cost(p, 1, took, (size_t)note->bytes);
    return SPMD_OK;
}

/* A note of `bytes` (its copy at `data`) that came from process p for stream s: its data read
 * into place. SPMD_OK, or why not (the sender hears of it in its word). */
static spmd_status take_note(const spmd__stream *s, const stream_state *t, int p, uint64_t key,
                             const void *data, size_t bytes, size_t chunk, const char *what)
{
    direct_note note = {0, 0, -1};
    if (bytes == sizeof note)
        memcpy(&note, data, sizeof note);
    if (note.word < 0 || note.word >= SPMD__RING_WORDS)
        note.word = -1; /* no word of the sender's: answered nowhere */
    if (bytes != sizeof note || t->got != 0 || note.bytes != s->rbytes) {
        spmd__ring_word_answer(p, (int)note.word, key, 0);
        return SPMD_ERROR(SPMD_ERR_INTERNAL,
                          "%s: process %d sent a note of %llu bytes of data where this process "
                          "expected %zu; the processes disagree on the data",
                          what, p, (unsigned long long)note.bytes, s->rbytes - t->got);
    }
    if (!spmd__ring_direct_from(p)) {
        spmd__ring_word_answer(p, (int)note.word, key, 0);
        return SPMD_ERROR(SPMD_ERR_INTERNAL,
                          "%s: process %d sent a note of where its data lies, but this process "
                          "cannot read its memory (they disagree on what start-up found)",
                          what, p);
    }
    return read_straight(s, p, key, &note, chunk, what);
}

/* The sender's side of a stream it sends as a note: a word for the answer (none free: through
 * the slots), the note once the peer listens, then the answer. 1 when something moved; -2 when
 * the peer could not read the data (*failed says so). */
static int send_note(const spmd__comm *c, const spmd__stream *s, stream_state *t, int p,
                     spmd_status *failed, const char *what)
{
    uint64_t key = t->key;
    if (!t->noted) {
        if (t->word < 0 && (t->word = spmd__ring_word_claim(p, key)) < 0) {
            t->chunked = 1; /* never a wait for a word: its holders may wait for this one */
            return 0;
        }
        direct_note note = {(uint64_t)(uintptr_t)s->send, s->sbytes, t->word};
        if (!spmd__ring_send_marked(p, c->wire, s->tag, key, MARK_NOTE, &note, sizeof note))
            return 0;
        t->noted = 1;
        return 1;
    }
    int answer = spmd__ring_word_look(p, t->word, key);
    if (answer == SPMD__WORD_WAITING)
        return 0;
    spmd__ring_word_release(p, t->word);
    t->word = -1;
    if (answer == SPMD__WORD_FAILED) {
        *failed = SPMD_ERROR(SPMD_ERR_DISTRIBUTED,
                             "%s: process %d could not read this process's data straight from "
                             "its memory (its own error says why)",
                             what, p);
        return -2;
    }
    t->sent = s->sbytes;
    return 1;
}

/* Moves what it can of stream s (with process p): 1 when something moved, -1 when a chunk of
 * another size came (the processes disagree: *came says its size), -2 when a note failed
 * (*failed says why). */
static int stream_step(const spmd__comm *c, const spmd__stream *s, stream_state *t, int p,
                       size_t chunk, size_t *came, spmd_status *failed, const char *what)
{
    uint64_t key = t->key;
    int moved = 0;
    if (t->got < s->rbytes && t->listener < 0 && (t->listener = spmd__ring_listen(p, key)) >= 0)
        moved = 1;
    if (t->sent < s->sbytes && (t->noted || sends_direct(t))) {
        int step = send_note(c, s, t, p, failed, what); /* may turn to chunks instead */
        if (step < 0)
            return step;
        moved |= step;
    }
    if (t->sent < s->sbytes && !t->noted && !sends_direct(t)) {
        /* a chunk only while the peer listens (send_chunk looks) */
        size_t len = next_chunk(s->sbytes, t->sent, chunk);
        const char *from = s->fill ? NULL : (const char *)s->send + t->sent;
        if (spmd__ring_send_chunk(p, c->wire, s->tag, key, from, len, s->fill, s->fill_arg,
                                  s->sbytes >= AROUND_STREAM_BYTES)) {
            t->sent += len;
            moved = 1;
        }
    }
    spmd__ring_message m;
    int claimed = t->listener >= 0 && t->got < s->rbytes &&
                  spmd__ring_claim_chunk(p, c->wire, s->tag, key, &m);
    if (claimed && m.mark == MARK_NOTE) {
        /* the note out of its slot first: the slot is the sender's again during the read */
        char note[sizeof(direct_note)];
        size_t bytes = m.bytes;
        memcpy(note, m.data, bytes < sizeof note ? bytes : sizeof note);
        spmd__ring_release(&m);
        *failed = take_note(s, t, p, key, note, bytes, chunk, what);
        if (*failed != SPMD_OK)
            return -2;
        t->got = s->rbytes;
        spmd__ring_unlisten(p, t->listener);
        t->listener = -1;
        moved = 1;
    } else if (claimed) {
        if (t->got == 0 && timed_either_way(s))
            t->first_ns = spmd__now_ns();
        size_t want = next_chunk(s->rbytes, t->got, chunk);
        *came = m.bytes;
        if (m.bytes == want)
            s->take(s->arg, t->got, m.data, want);
        spmd__ring_release(&m);
        if (*came != want) /* the two sides disagree on the message: never guessed at */
            return -1;
        t->got += want;
        moved = 1;
        if (t->got == s->rbytes) { /* all of it: no more chunks may take this one's slots */
            if (timed_either_way(s))
                spmd__ring_note_cost(p, 0, spmd__now_ns() - t->first_ns, s->rbytes);
            spmd__ring_unlisten(p, t->listener);
            t->listener = -1;
        }
    }
    return moved;
}

/* A stream past its deadline, waiting for process p: for its data (receiving), or to send
 * while p does not read (listening: it took part, then stopped taking it). */
static spmd_status stream_timeout(const char *what, int p, int receiving, int listening)
{
    if (receiving)
        return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                          "%s did not complete within the collective timeout "
                          "(SPMD_COLLECTIVE_TIMEOUT): no data came from process(es) %d, which "
                          "had agreed to it (killed or stuck?)",
                          what, p);
    if (!listening)
        return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                          "%s did not complete within the collective timeout "
                          "(SPMD_COLLECTIVE_TIMEOUT): process %d, which had agreed to it, is not "
                          "reading its data (it gave up, or was killed or stuck?)",
                          what, p);
    return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                      "%s did not complete within the collective timeout "
                      "(SPMD_COLLECTIVE_TIMEOUT): process %d, which had agreed to it, stopped "
                      "taking its data (killed or stuck?)",
                      what, p);
}

/* A stream as it begins: its key, its way (as_note), and no listener yet. */
static stream_state state_at_start(const spmd__comm *c, const spmd__stream *s)
{
    stream_state t = {key_of(c, s), 0, 0, -1, -1, 0, 0, 0, 0};
    t.as_note = as_note(s, c->processes[s->peer]);
    return t;
}

int spmd__comm_ring_streams_begin(spmd__comm *c, int n, const spmd__stream *streams,
                                  spmd__stream_state *state)
{
    for (int i = 0; i < n; i++) {
        state[i] = state_at_start(c, &streams[i]);
        if (streams[i].rbytes > 0)
            state[i].listener = spmd__ring_listen(c->processes[streams[i].peer], state[i].key);
    }
    return spmd__comm_ring_streams_note_early(c, n, streams, state);
}

int spmd__comm_ring_streams_note_early(spmd__comm *c, int n, const spmd__stream *streams,
                                       spmd__stream_state *state)
{
    int left = 0;
    for (int i = 0; i < n; i++) {
        stream_state *t = &state[i];
        if (!sends_direct(t) || t->noted)
            continue;
        spmd_status unused = SPMD_OK; /* only an answer fails, and none is looked at here */
        send_note(c, &streams[i], t, c->processes[streams[i].peer], &unused, NULL);
        left += sends_direct(t) && !t->noted;
    }
    return left > 0;
}

void spmd__comm_ring_streams_end(spmd__comm *c, int n, const spmd__stream *streams,
                                 spmd__stream_state *state)
{
    for (int i = 0; i < n; i++) {
        int p = c->processes[streams[i].peer];
        if (state[i].word >= 0) /* a note's reader, finding the word released, fails */
            spmd__ring_word_release(p, state[i].word);
        spmd__ring_unlisten(p, state[i].listener);
    }
}

spmd_status spmd__comm_ring_streams(spmd__comm *c, int n, const spmd__stream *streams,
                                    spmd__stream_state *begun, const char *what, int64_t deadline,
                                    const spmd__wait *cancel, int mpi_beside)
{
    size_t chunk = chunk_bytes();
    stream_state one, *state = begun ? begun : n == 1 ? &one : calloc((size_t)n, sizeof *state);
    if (chunk == 0 || !state) {
        if (begun)
            spmd__comm_ring_streams_end(c, n, streams, begun);
        else if (state != &one)
            free(state);
        return chunk == 0
                   ? SPMD_ERROR(SPMD_ERR_INTERNAL, "%s: no wide ring slots to stream through", what)
                   : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; !begun && i < n; i++)
        state[i] = state_at_start(c, &streams[i]);
    int64_t start = 0, now = 0, next_cancel_check = 0, probe_after = 0, idle_since = 0;
    int tracked = -1, open = n;
    spmd__pause pause;
    spmd_status st = SPMD_OK;
    while (open > 0) {
        int moved = 0;
        open = 0;
        for (int i = 0; i < n && st == SPMD_OK; i++) {
            const spmd__stream *s = &streams[i];
            stream_state *t = &state[i];
            if (!stream_open(s, t))
                continue;
            size_t came = 0;
            spmd_status failed = SPMD_OK;
            int step = stream_step(c, s, t, c->processes[s->peer], chunk, &came, &failed, what);
            if (step == -2)
                st = failed;
            else if (step < 0)
                st = SPMD_ERROR(SPMD_ERR_INTERNAL,
                                "%s: a chunk of %zu bytes came from process %d where %zu were "
                                "expected; the processes disagree on the data",
                                what, came, c->processes[s->peer],
                                next_chunk(s->rbytes, t->got, chunk));
            moved |= step > 0;
            open += stream_open(s, t);
        }
        if (st != SPMD_OK)
            break;
        if (moved)
            idle_since = 0;
        if (moved || !open)
            continue;
        int waiting = 0; /* the first stream still open: whom this waits for */
        while (!stream_open(&streams[waiting], &state[waiting]))
            waiting++;
        int p = c->processes[streams[waiting].peer];
        now = spmd__now_ns();
        if (!idle_since)
            idle_since = now;
        if (!start) {
            start = now;
            next_cancel_check = now + STREAM_CANCEL_EVERY_NS;
            probe_after = spmd__calls_probe_after_ns();
            spmd__pause_begin(&pause, now);
            pause.holds_core = 0; /* the chunks come through the rings */
        }
        if (now > deadline) {
            const stream_state *t = &state[waiting];
            st = t->noted && t->sent < streams[waiting].sbytes && t->got == streams[waiting].rbytes
                     ? SPMD_ERROR(SPMD_ERR_TIMEOUT,
                                  "%s did not complete within the collective timeout "
                                  "(SPMD_COLLECTIVE_TIMEOUT): process %d, which had agreed to "
                                  "it, did not say that it read its data from this process's "
                                  "memory (killed or stuck?)",
                                  what, p)
                     : stream_timeout(what, p, t->got < streams[waiting].rbytes,
                                      spmd__ring_listened(p, state[waiting].key));
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
                tracked = spmd__comm_track(c, NULL, &w, streams[waiting].peer, NULL, 0);
            }
            spmd__calls_poll_notes();
        }
        /* On a machine with more of the job's processes than cores, the threads that want a
         * core are mostly its own, each waiting in turn: a yield hands the core round at once,
         * where a nap or a doze lost tens of microseconds a chunk (4 x 1 on 2 cores, medians of
         * 3-5 runs, ratio to MPI: psum 0.58-0.73 -> 1.14-1.66 at 512 KiB-2 MiB, ppermute
         * 0.36-0.75 -> 0.85-1.15 at 256 KiB-4 MiB, all_to_all 0.46-0.48 -> 0.68-0.72 at
         * 0.5-1 MiB). Only for a while without progress: a peer that stopped is waited for
         * asleep. */
        if (spmd__rings_crowded() && now - idle_since < STREAM_YIELD_NS) {
            sched_yield();
            continue;
        }
        /* Past that, one peer's stream (a reduction's round) dozes where the processes
         * outnumber the cores (spmd__ring_pause; elsewhere it waits as spmd__pause_step does):
         * what rings is what it waits for. With several, each peer's events would wake it for
         * the others' sake (at 4 x 1 on 2 cores all_gather and all_to_all lost 10-15 % to those
         * wake-ups); with MPI's transfers beside it (an exchange's other messages), a doze would
         * hold up their progress. The other waits for rings (agreements, small exchanges) nap
         * for the same reason. */
        if (n == 1 && !mpi_beside)
            spmd__ring_pause(&pause, now, spmd__rings_crowded() ? 0 : STREAM_SPIN_NS);
        else
            spmd__pause_step(&pause, now, spmd__rings_crowded() ? 0 : STREAM_SPIN_NS);
    }
    spmd__ring_pause_end();
    spmd__comm_ring_streams_end(c, n, streams, state); /* a note not yet answered: released */
    spmd__calls_wait_end(tracked);
    if (!begun && state != &one)
        free(state);
    return st;
}
