/* Private to the MPI process layer: the messages of up to 64 KiB between processes on one machine
 * (the control plane's, the small collectives', the chunks a large reduction streams:
 * ring_stream_mpi.c), through shared memory instead of MPI.
 *
 * Every process owns one segment of POSIX shared memory, with one ring of a few slots for each
 * other process on its machine, and three wide slots (64 KiB) beside; a sender writes into its ring
 * in the receiver's segment, and the receiver polls its own. A message carries the identity of
 * its communicator (spmd__comm's wire) and its tag, as MPI's envelope would; the receiver takes
 * the oldest one that matches. A message too long for a wide slot, or one that finds its ring
 * full, goes through MPI instead (a stream's chunk waits for its slot: ring_stream_mpi.c): a
 * receiver that polls a ring also probes MPI now and then. The rings are set up once, at
 * start-up, by every process alike (spmd__rings_link): afterwards whether a peer writes into the
 * rings never changes.
 * An MPI message between the same processes takes Open MPI's shared-memory transport too, but
 * through its progress engine and matching (about 0.6 us on the machines measured), and beyond
 * 4 KiB by a rendezvous (a round trip before the data): a ring is a cache line the receiver polls
 * (about 0.15 us). SPMD_SHM=0 leaves everything to MPI.
 */
#ifndef SPMD_RUNTIME_HOST_RINGS_H
#define SPMD_RUNTIME_HOST_RINGS_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include <spmd/status.h>

#include "runtime/devices/event.h"

/** The largest message a slot holds (a shard_map outcome with its message, and a trailer). */
#define SPMD__RING_BYTES 1344
/** The largest message a wide slot holds: a combined collective's 64 KiB (comm.h) with its
 * header and trailer. Each ring has three; from 16 processes on a machine they are narrower
 * (spmd__ring_capacity), so that all the wide slots of a machine stay within 48 MiB of
 * /dev/shm, and where that leaves no more than a slot (from 110 processes) there are none. */
#define SPMD__RING_WIDE_BYTES (64 * 1024 + 1024)

/**
 * Sets up the rings between this process (`me`, of `count`) and the others on its machine
 * (those with the same hosts[] entry). Each process creates its segment under a random name
 * (O_EXCL, mode 0600), tells the others of its machine that name through `comm` (messages of
 * `tag`), and maps theirs after checking that this user owns them alone (fstat: owner, mode
 * 0600, size) and that their head names `job` (alike on every process, new at each start-up).
 * Collective over `comm` (the names' exchange and a barrier, each bounded by timeout_ns): every
 * process calls it, whether it `want`s rings (SPMD_SHM) or not. A process that cannot map
 * shared memory only goes without (its peers send it everything through MPI), and so does a
 * pair whose segment fails the check (with a warning naming the file); an exchange that times
 * out fails the start-up. It first removes this user's segments whose processes are gone.
 * *machine_cores: the cores this machine's processes may use between them (the union of their
 * affinities, under the quota: spmd__mask_cores).
 */
spmd_status spmd__rings_link(MPI_Comm comm, int me, int count, const uint64_t *hosts, uint64_t job,
                             int want, int tag, int64_t timeout_ns, int *machine_cores);
/** Unmaps the rings (spmd_finalize, or a start-up given up). */
void spmd__rings_unlink(void);

/** 1 when the processes on this machine outnumber its cores: a wait for a ring yields the core
 * (MPI's progress does the same when it finds the machine oversubscribed). */
int spmd__rings_crowded(void);
/** The longest message that spmd__ring_send may put into a ring: alike on every process of a
 * machine. */
size_t spmd__ring_capacity(void);
/** The size of a wide slot: 0 where the machine has none. */
size_t spmd__ring_wide_bytes(void);
/** 1 when this process writes its messages to process `to` into a ring. */
int spmd__ring_to(int to);
/** 1 when process `process` shares this machine, and every process of the machine made its
 * rings' segment: alike on every process of the machine (their names went to all), whichever
 * pairs then failed to map each other's. */
int spmd__ring_on_linked_machine(int process);
/** 1 when process `from` writes its messages to this one into a ring (polled by spmd__ring_take).
 */
int spmd__ring_from(int from);
/**
 * Writes a message of `bytes` to process `to`, with the envelope (wire, tag) and its exchange's
 * stamp (spmd__comm_exchange_tag): 1 when it is in its
 * ring (a slot, or a wide slot when longer); 0 when `to` has no ring from this process, the
 * message is longer than spmd__ring_capacity() or the ring is full (send it through MPI).
 */
int spmd__ring_send(int to, uint64_t wire, int tag, uint32_t stamp, const void *data, size_t bytes);
/** As spmd__ring_send, for a message of two parts one after the other (a payload and its
 * trailer): no copy joins them first. */
int spmd__ring_send_parts(int to, uint64_t wire, int tag, uint32_t stamp, const void *head,
                          size_t head_bytes, const void *tail, size_t tail_bytes);
/** Writes a chunk's `bytes` at dst (into the slot: gathered there without a copy first), with
 * non-temporal stores where `streaming` (spmd__copy_either). */
typedef void (*spmd__ring_fill_fn)(void *arg, char *dst, size_t bytes, int streaming);
/**
 * A chunk of stream `key` (ring_stream_mpi.c) to process `to`: as spmd__ring_send, into either
 * wide slot (a message takes only the first); its bytes from data, or written by fill (not
 * NULL). Only while `to` listens for the stream (spmd__ring_listened, looked at first: 0 when
 * it does not): a chunk in a wide slot has a reader that takes it soon, and one that its reader
 * gave up on is emptied by that reader's next look. A chunk sent `always_around` (a long stream's)
 * is written around the caches (non-temporal stores, fenced before the reader may see it); any
 * other message of 4 KiB or more into a wide slot (spmd__ring_send's too) goes through the
 * caches or around them, whichever cost the pair less to write and read lately (host_rings.c
 * says why).
 */
int spmd__ring_send_chunk(int to, uint64_t wire, int tag, uint64_t key, const void *data,
                          size_t bytes, spmd__ring_fill_fn fill, void *fill_arg, int always_around);
/** As spmd__ring_send_chunk, a chunk that its reader tells apart by a nonzero `mark` (a plain
 * chunk's is 0): a note about the stream rather than its data. */
int spmd__ring_send_marked(int to, uint64_t wire, int tag, uint64_t key, uint32_t mark,
                           const void *data, size_t bytes);
/** Says that this process reads the stream `key` (nonzero, alike on both sides) from process
 * `from` now or once it finished what it does first (an exchange's agreement): the listener to pass
 * to spmd__ring_unlisten once it has all of it, or -1 when it reads too many streams from `from`
 * already (try again). */
int spmd__ring_listen(int from, uint64_t key);
/** The stream's reader is done (or gave up): no more of its chunks may come. */
void spmd__ring_unlisten(int from, int listener);
/** 1 when process `to` (spmd__ring_to) reads the stream `key` from this process now. */
int spmd__ring_listened(int to, uint64_t key);
/** 1 when a message from process `from` with the envelope (wire, tag) and the exchange's stamp
 * waits in its ring (a look, which may miss one being taken). */
int spmd__ring_ready(int from, uint64_t wire, int tag, uint32_t stamp);
/** A message claimed in a ring: read where it lies until spmd__ring_release. */
typedef struct spmd__ring_message {
    const char *data;
    size_t bytes;
    void *slot;
    int sender;    /* on this machine */
    uint32_t mark; /* a chunk's (spmd__ring_send_marked; 0: data), a message's exchange stamp */
    int way;       /* how it was written, when timed (host_rings.c), and when it was claimed */
    int64_t claimed_ns;
} spmd__ring_message;
/** Claims the oldest message from process `from` with the envelope (wire, tag): 1 when one had
 * come (*out filled; release it soon: its slot is the sender's again only then), else 0. */
int spmd__ring_claim(int from, uint64_t wire, int tag, spmd__ring_message *out);
/** As spmd__ring_claim, for the oldest chunk of stream `key` (spmd__ring_send_chunk). */
int spmd__ring_claim_chunk(int from, uint64_t wire, int tag, uint64_t key, spmd__ring_message *out);
/** Gives a claimed message's slot back to its sender. */
void spmd__ring_release(spmd__ring_message *m);
/**
 * Takes the oldest message from process `from` with the envelope (wire, tag) into buf (at most
 * cap bytes): its length, cap + 1 when it was longer (cut to cap, as MPI truncates); -1 when none
 * has come.
 */
long spmd__ring_take(int from, uint64_t wire, int tag, void *buf, size_t cap);
/** Tells process `to` (when it has a ring from this one) that this one gave up waiting for it in
 * the exchange with `token`: the note check_mpi.c sends through MPI too. */
void spmd__ring_give_up(int to, uint64_t token);
/** 1 when process `from` (spmd__ring_from) said it gave up on this one in the exchange with
 * `token`. */
int spmd__ring_gave_up(int from, uint64_t token);
/** Drops the messages for communicator `wire` left in this process's rings (it is gone). */
void spmd__ring_forget(uint64_t wire);
/** 1 when process `process`, on this machine and linked at start-up, has exited since: its
 * memory no longer reads (or, without straight reads, its pid is gone); 0 otherwise, and for a
 * process of another machine. For failure messages: a process that answered a note and then
 * died is not alive. */
int spmd__ring_process_gone(int process);

/**
 * Straight reads of a peer's memory (Linux's cross-memory attach, process_vm_readv): one copy,
 * by the reader, from the sender's own buffer, where the rings copy twice (into a slot, out of
 * it). At start-up each process tries a read of each peer's segment head in that peer's memory
 * (spmd__rings_link, unless SPMD_CMA=0); the kernel allows it only to the same user (the
 * ptrace rules: never another user's processes, and nobody's where Yama or a container forbids
 * it). Each reader then tells its peer in the peer's attached flags, so both sides of a pair
 * know alike whether the pair reads straight.
 */
/** 1 when process `to` reads this process's memory straight. */
int spmd__ring_direct_to(int to);
/** 1 when this process reads process `from`'s memory straight. */
int spmd__ring_direct_from(int from);
/** For a message to process `to` that may go either way (SPMD__COMM_CONTESTED_ABOVE in comm.h):
 * 1 to send it as a note to be read straight, 0 through the slots. The way whose such messages
 * took their reader less time lately (spmd__ring_note_cost), in turns of 8 messages one way, one
 * turn in 64 the other way so that both stay measured; the two in turn until both are. 0 where
 * `to` does not read this process's memory straight. */
int spmd__ring_pick_direct(int to);
/** What a contested message of `bytes` from process `from` took this process to receive, read
 * straight (`direct`: the note's read) or through the slots (its first chunk claimed to its last
 * one taken), for its sender's next spmd__ring_pick_direct: counted only where the message
 * before it came the same way (the first of a turn finds the caches as the other way left them). */
void spmd__ring_note_cost(int from, int direct, int64_t ns, size_t bytes);
/** Reads `bytes` at address `src` in process `from`'s memory into dst: 0, else the errno
 * (ESRCH: the process is gone; EFAULT: nothing is mapped there any more). */
int spmd__ring_read_direct(int from, void *dst, uint64_t src, size_t bytes);
/**
 * The words through which a reader answers a note (its data read straight, or not): a few per
 * pair and direction, in the note's sender's segment. The sender claims one for its note's
 * `key` (-1: none free; send the data through the slots instead), looks at it until it is
 * answered, and releases it before its buffer is its own again, also when it gives up: a reader
 * answers only a word that still waits for that key, so a read whose answer finds it released
 * is one the sender gave up on (the reader must fail). Each change is one atomic exchange, in
 * that order against the buffer's reuse on any processor.
 */
#define SPMD__RING_WORDS 16
enum { SPMD__WORD_WAITING = 1, SPMD__WORD_READ = 2, SPMD__WORD_FAILED = 3 };
int spmd__ring_word_claim(int reader, uint64_t key);
/** SPMD__WORD_WAITING, _READ or _FAILED. */
int spmd__ring_word_look(int reader, int word, uint64_t key);
/** Frees the word: an answer not yet given will find it gone. */
void spmd__ring_word_release(int reader, int word);
/** The reader's answer to `sender`'s note with `key` in its word `word` (read: the data was read
 * whole): 1 when the sender still waited for it, 0 when it had given up (or the word is not
 * one). */
int spmd__ring_word_answer(int sender, int word, uint64_t key, int read);

/** A doze's longest sleep: what comes another way than the rings (a message that found its ring
 * full and went through MPI, a note) is looked for at least this often. */
#define SPMD__RING_DOZE_NS 200000
/**
 * A polling wait's pause (spmd__pause_step) for what comes through the rings. Where the pause
 * would nap (it measured that its thread shares its core), waits for the rings alone
 * (!p->holds_core) and the machine is crowded (spmd__rings_crowded), it dozes instead: it asks
 * every writer to ring this process's bell (a futex) after each event (a message into its rings,
 * a slot of its freed, a reader listening to it, a peer giving up on it) and returns for one more
 * look; the next pause sleeps until the bell rang since, or SPMD__RING_DOZE_NS. So it wakes when
 * its writer rang, not a timer's slack later. Until a crowd is measured it yields as before: on a
 * machine crowded by its own processes alone, their short waits are cheaper handed round by
 * yields than by sleeps and wake-ups (a 4-byte psum at 4 x 1 on 2 cores: 6-8 against 70-140 us).
 * A wait that paused this way calls spmd__ring_pause_end when it ends, so that writers stop
 * ringing.
 */
void spmd__ring_pause(spmd__pause *p, int64_t now_ns, int64_t spin_ns);
void spmd__ring_pause_end(void);

#endif /* SPMD_RUNTIME_HOST_RINGS_H */
