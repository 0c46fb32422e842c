/*
 * Private: the order of calls in a process, and what each process is doing.
 *
 * Every call that reaches other processes or the devices runs alone in its process: it takes
 * the process's call lock (first come, first served; a thread may nest calls) and gets the
 * process's next call number. Processes pair the calls on one communicator (a mesh's, a set of
 * processes') by their order there; the program must issue them in the same order everywhere.
 *
 * When a wait between processes lasts (spmd__calls_probe_after_ns), this process tells the
 * process it waits for what it is doing, in a note, and that process answers with its own
 * (notes_mpi.c carries them). From the two, both can tell the waits that never end:
 *   - each is in a call the other must join but cannot reach before its own call ends (the
 *     processes issued their calls in different orders): each process gives up the other's
 *     call, which it has not started, on every process that takes part in it, without its
 *     final agreement (settled). A process never gives up a call it has started on its own
 *     (it may have sent its part, and the others finished with it): only another process
 *     that never started it does;
 *   - both are in the same shard_map call, but one waits in a collective that the other's
 *     device has passed, returned from fn without, or meets with another collective: a
 *     mismatch, which the call's final agreement then reports everywhere.
 * The success path sends no note.
 */
#ifndef SPMD_RUNTIME_CALLS_H
#define SPMD_RUNTIME_CALLS_H

#include <stddef.h>
#include <stdint.h>

#include <spmd/status.h>

#include "runtime/calls/threads.h"

/* ---- the call lock ---- */

typedef struct spmd__call_entry {
    int nested;     /* this thread already held the lock: the outer call goes on */
    int unnumbered; /* spmd__calls_enter_unnumbered */
} spmd__call_entry;

/**
 * Starts a public call that reaches the devices or other processes: refuses it from inside fn
 * (spmd__worker_refuse_nested), or while another thread holds the thread guard; then waits for
 * the calls of other threads in this process to end, first come first served. A thread that
 * already holds the lock (a call made inside another, pmap's shard_map say) goes on.
 */
spmd_status spmd__calls_enter(const char *fn, spmd__call_entry *e);
/**
 * The call lock for a local change that no call may see half done (the trace's start and
 * stop): no number, so a program's calls are numbered alike whether it traces or not.
 */
spmd_status spmd__calls_enter_unnumbered(const char *fn, spmd__call_entry *e);
/** Ends what spmd__calls_enter started (after a failure too), which returned `st`. */
void spmd__calls_exit(const spmd__call_entry *e, spmd_status st);
/** The current call's number in this process (0 outside calls). */
unsigned long spmd__calls_number(void);

/* ---- what the current call is ---- */

typedef struct spmd__call_about {
    uint64_t comm_id;        /* the identity of its communicator, alike on every process */
    unsigned long comm_call; /* its number on that communicator */
    const int *processes;    /* the processes taking part, ascending */
    int num_processes;
    /* writes what the call is, for messages ("spmd_shard_map on Mesh('i': 4, axis_types=(Auto,))
     * ...") */
    void (*describe)(const void *arg, char *text, size_t size);
    const void *arg;
} spmd__call_about;

/**
 * The lock holder says what its call is, once it knows (copied; `processes`, `describe` and
 * `arg` must stay valid until spmd__calls_exit or the next spmd__calls_about; NULL: nothing
 * any more, before they go).
 */
void spmd__calls_about(const spmd__call_about *about);

/**
 * The identity of the n-th communicator made over `key` (a set of processes, a mesh): the
 * same on every process, as they make their communicators in the same order. `taken` counts
 * it (call it once the communicator exists).
 */
uint64_t spmd__calls_identity(uint64_t key, int taken);
/**
 * The number of the next call over a set of processes identified by `key` (alike on every
 * member: each takes part in every call over its set), counted across the set's
 * communicators, made anew after failures: no two calls over the set share a number.
 */
unsigned long spmd__calls_next_call(uint64_t key);
/** The communicator is gone: its calls are no longer this process's past. */
void spmd__calls_comm_forget(uint64_t comm_id);

/**
 * A call starts: this process has started call about->comm_call on communicator
 * about->comm_id (kept per identity), and says so (spmd__calls_about). Returns 1, with the
 * reason in `reason`, when another process abandoned that call (it had issued its calls in
 * another order): this process abandons it too.
 */
int spmd__calls_start(const spmd__call_about *about, char *reason, size_t size);

/**
 * SPMD_OK, or the status with which the notes ended the current call (its message becomes the
 * thread's last error); *settled says the call is abandoned without its final agreement. A
 * wait that stops with it calls this: from then on the call is given up here, and (settled)
 * every other process taking part is told.
 */
spmd_status spmd__calls_verdict(int *settled);
/** As spmd__calls_verdict, cheaply and leaving the last error alone: 0 when there is none,
 * 1 for a mismatch, 2 for a call abandoned without its final agreement. */
int spmd__calls_has_verdict(void);

/* ---- waits between processes ---- */

#define SPMD__PHASE_END (-1) /* a shard_map call's final agreement */

#define SPMD__WAIT_AHEAD 16 /* the steps of an exchange over 2^16 processes */

/** A wait that lasted: whom it waits for, and where. */
typedef struct spmd__wait_info {
    int peer;             /* the runtime process waited for; -1: several (data) */
    int phase;            /* shard_map: the collective's number on its device; PHASE_END */
    int device;           /* shard_map: this process's device that waits (-1: none) */
    int peer_device;      /* shard_map: the global id of the device expected there (-1) */
    uint64_t fingerprint; /* of the agreement waited in */
    void (*describe)(const void *arg, char *text, size_t size);
    const void *arg;
    /* The processes this wait's exchange meets in its later steps: asked where they are too,
     * so that a verdict naming one of them missing can say it is alive and waits for another
     * (a partner of a later step is not waited for yet: its answers are never weighed). */
    int ahead[SPMD__WAIT_AHEAD];
    int num_ahead;
} spmd__wait_info;

/** How long a wait lasts before this process asks the one it waits for what it is doing. */
int64_t spmd__calls_probe_after_ns(void);

/** Registers a wait that has lasted (a slot; -1 when the table is full). */
int spmd__calls_wait_begin(const spmd__wait_info *info);
/** Unregisters it. */
void spmd__calls_wait_end(int slot);
/**
 * A note may say that the device a wait expects went past it, which is a mismatch only if
 * the wait's message has not come: the wait's thread reads the suspicion (0: none) before it
 * tests its requests, and confirms it when the message it waits for is still missing after.
 */
uint64_t spmd__calls_wait_suspicion(int slot);
void spmd__calls_wait_confirm(int slot, uint64_t suspicion);

/* ---- the devices of a shard_map call ---- */

enum { SPMD__DEVICE_RUNNING = 1, SPMD__DEVICE_WAITING, SPMD__DEVICE_RETURNED };
/**
 * Local device `ordinal` (global id `device`) of the current call: in fn, waiting in its
 * collective number `seq` (of fingerprint `fp`; `what`: two words that say which, for
 * spmd__calls_set_formatter; NULL: the last ones), or returned from fn.
 */
void spmd__calls_device(int ordinal, int device, int state, unsigned seq, uint64_t fp,
                        const uint64_t *what);
/**
 * The layer above says how to write a device's collective (its two words) for a note, given
 * the current call's `arg` (spmd__call_about):
 * "psum over ('i') in axis_index_groups [[0, 1], [2, 3]]".
 */
void spmd__calls_set_formatter(void (*format)(const void *arg, const uint64_t *what, char *text,
                                              size_t size));

/* ---- notes (the transport, notes_mpi.c, carries them as bytes) ---- */

#define SPMD__NOTE_WAITS 8
#define SPMD__NOTE_DEVICES 16
#define SPMD__NOTE_TEXT 384 /* a call's text, or an abandon's reason up to both calls' numbers */
#define SPMD__NOTE_WHAT 200
enum { SPMD__NOTE_PROBE = 1, SPMD__NOTE_REPLY, SPMD__NOTE_ABANDON };

typedef struct spmd__note_wait {
    int32_t peer, phase, device, peer_device;
    uint64_t fingerprint;
    char what[SPMD__NOTE_WHAT];
} spmd__note_wait;

typedef struct spmd__note_device {
    int32_t device, state;
    uint32_t seq, pad;
    uint64_t fingerprint;
    char what[80]; /* its collective number seq */
} spmd__note_device;

typedef struct spmd__note {
    uint32_t magic, kind;
    int32_t process;        /* the sender */
    int32_t peer_is_member; /* the recipient takes part in the sender's call */
    uint64_t probe;         /* PROBE: its number; REPLY: the number of the probe answered */
    int32_t started_yours;  /* REPLY: the sender has started the prober's call (it took part) */
    int32_t told_all;       /* ABANDON: every process of the call was told */
    uint64_t number;        /* the sender's call number in its process (0: in none) */
    uint64_t comm_id, comm_call;
    int32_t num_waits, num_devices;
    char call[SPMD__NOTE_TEXT]; /* the call, with its number and thread; ABANDON: the reason */
    spmd__note_wait waits[SPMD__NOTE_WAITS];
    spmd__note_device devices[SPMD__NOTE_DEVICES];
} spmd__note;

#define SPMD__NOTE_MAGIC 0x4e4f5445u /* "NOTE" */

/** Fills `n` with what this process is doing, for process `recipient` (kind PROBE or REPLY;
 * `probe`: the probe's number, or the number of the probe a REPLY answers; `asked`: that
 * probe, whose call the REPLY says whether this process has started). */
void spmd__calls_fill_note(spmd__note *n, int kind, int recipient, uint64_t probe,
                           const spmd__note *asked);
/**
 * Takes a note that arrived (checked: magic, sizes) and weighs it against this process's
 * waits and call; may end the current call (spmd__calls_verdict). Returns 1 when the sender
 * asked for an answer.
 */
int spmd__calls_take_note(const spmd__note *n);
/** Appends what the latest note of `process` said, for a message ("" when none came). */
void spmd__calls_peer_text(int process, char *text, size_t size);
/** 1 when `process` said, during this call, that it is alive and inside a call. */
int spmd__calls_heard_from(int process);
/**
 * The processes (runtime indices) whose notes say they wait for a process that sent no note
 * since this call began, when `missing` itself is alive: the one a timeout should name first.
 * Returns -1 when none is known.
 */
int spmd__calls_blocking_process(int missing);
/** The due probes: fills `to` with up to `cap` processes to ask now, and `ids` with the
 * probes' numbers; returns how many. */
int spmd__calls_due_probes(int *to, uint64_t *ids, int cap);

/**
 * The news of a settled verdict, once, for the transport to send: 1 with the processes (a new
 * array the caller frees), the call and the reason; 0 when there is none.
 */
int spmd__calls_pending_abandon(int **processes, int *n, uint64_t *comm_id,
                                unsigned long *comm_call, int *told_all, char *reason, size_t size);

/* ---- the transport of the notes ----
 * comm/notes_mpi.c carries them between processes and registers itself here at spmd_init: the
 * waits below this room's callers poll through calls.c, which never calls the transport's file
 * by name. Nothing is registered in a single process. */
typedef struct spmd__notes_transport {
    /** Reads the notes that arrived, answers the ones that ask, sends the due probes (cheap
     * when called often: it runs at most once a millisecond). */
    void (*poll)(void);
    /** Sends the news of an abandoned call now (spmd__calls_exit: no wait will poll for it). */
    void (*flush)(void);
} spmd__notes_transport;

/** Registers the transport (NULL: none); the pointer stays valid until spmd_finalize. */
void spmd__calls_set_transport(const spmd__notes_transport *transport);
/** The waits that last call this: the transport's poll, or nothing when none is registered. */
void spmd__calls_poll_notes(void);

/* calls.c's own start-up and end (spmd_init / spmd_finalize) */
void spmd__calls_open(int num_local, int process_index, int64_t timeout_ns);
void spmd__calls_close(void);
/** How many calls failed in this process so far (never reset): from when a communicator was
 * made, any failure may have left messages of the other processes still coming to it (a call
 * that failed here alone, one abandoned before this process started it, one that ended well
 * here and timed out elsewhere). */
unsigned long spmd__calls_failures(void);

#endif /* SPMD_RUNTIME_CALLS_H */
