/*
 * The collective trace: what every call and every collective of this process did, kept in a
 * file per process, for `spmd trace show DIR` (where each process is: which call, which
 * collective, how long it waited) and `spmd trace diff A B` (the first call and collective that
 * differ between two runs: two layouts, two versions, two processes).
 *
 * Turned on by SPMD_TRACE=DIR at spmd_init (SPMD_TRACE_RECORDS=N, SPMD_TRACE_DIGESTS=1), or by
 * spmd_trace_start. Each process writes DIR/trace.<process>.spmd: a header and a ring of the
 * last N records, mapped into memory as it is written, so the records are in the file even when
 * the process is killed (SIGKILL included); the header says how it ended (spmd_finalize or
 * spmd_trace_stop, exit, a fatal signal). With tracing off no record is made: one test of a
 * flag per call and per collective.
 */
#ifndef SPMD_TRACE_H
#define SPMD_TRACE_H

#include <stdint.h>

#include "spmd/export.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

typedef struct spmd_trace_options {
    unsigned int version; /**< SPMD_TRACE_OPTIONS_VERSION */
    long records;         /**< the ring's length, 64..(1 << 24); 0: $SPMD_TRACE_RECORDS, else
                               SPMD_TRACE_DEFAULT_RECORDS */
    int digests;          /**< 1: a digest of each device's input and output blocks (fn's and
                               each collective's; host memory only); 0: none; SPMD_AUTO (-1):
                               $SPMD_TRACE_DIGESTS, else none */
} spmd_trace_options;

#define SPMD_TRACE_DEFAULT_RECORDS 4096
#define SPMD_TRACE_OPTIONS_VERSION 1
#define SPMD_TRACE_OPTIONS_INIT                                                                    \
    {                                                                                              \
        SPMD_TRACE_OPTIONS_VERSION, 0, -1                                                          \
    }

/**
 * Starts tracing this process into directory `dir` (made if missing; its parent must exist):
 * DIR/trace.<process>.spmd, replaced if there. Local to the process: no communication. Needs
 * spmd_init first; refused while a trace runs (stop it first). `options` may be NULL.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_trace_start(const char *dir,
                                                     const spmd_trace_options *options);

/** Stops tracing and closes the file (SPMD_OK when none runs). spmd_finalize stops it too. */
SPMD_API spmd_status spmd_trace_stop(void);

/** 1 while this process traces. */
SPMD_API int spmd_trace_active(void);

/* ---- the file: a header, then `capacity` records; little-endian, as the machine wrote it ---- */

#define SPMD_TRACE_MAGIC "SPMDTRC1"
#define SPMD_TRACE_FORMAT_VERSION 1
#define SPMD_TRACE_HEADER_BYTES 4096
#define SPMD_TRACE_TEXT 168

/** How the trace ended (spmd_trace_header.state). */
enum {
    SPMD_TRACE_RUNNING = 0,  /**< nothing said it ended: still running, or killed (SIGKILL) */
    SPMD_TRACE_STOPPED = 1,  /**< spmd_trace_stop or spmd_finalize */
    SPMD_TRACE_EXITED = 2,   /**< the process exited without stopping it */
    SPMD_TRACE_SIGNALLED = 3 /**< a fatal signal (header.signal) */
};

/** What a record is (spmd_trace_record.kind). */
enum {
    SPMD_TRACE_CALL = 1,      /**< a public call that reaches the devices or other processes */
    SPMD_TRACE_FN = 2,        /**< fn on one device, within a shard_map call */
    SPMD_TRACE_COLLECTIVE = 3 /**< a collective of one device, within fn */
};

/** Status of a record that has not ended. */
#define SPMD_TRACE_OPEN (-1)

typedef struct spmd_trace_header {
    char magic[8]; /* SPMD_TRACE_MAGIC */
    uint32_t format_version, header_bytes, record_bytes, capacity;
    int32_t process, num_processes, num_local_devices, first_local_device;
    int32_t pid, digests, state, signal;
    uint64_t next;             /* records claimed so far; record i is at i % capacity */
    int64_t start_realtime_ns; /* CLOCK_REALTIME when the trace started */
    int64_t alive_ns;          /* the last turn of a wait (records carry their own times) */
    int64_t end_ns;            /* when state was set */
    char host[64];
    char program[256];
    char last_error[1024]; /* the message of the last call that failed */
} spmd_trace_header;

typedef struct spmd_trace_record {
    uint64_t stamp;                 /* its number + 1 once written; 0 while being written */
    uint32_t kind;                  /* SPMD_TRACE_CALL, _FN, _COLLECTIVE */
    int32_t status;                 /* spmd_status once it ended; SPMD_TRACE_OPEN before */
    uint64_t call;                  /* the process's call number (1, 2, ...) */
    uint64_t mesh_call;             /* shard_map: the call's number on its mesh; 0 otherwise */
    int64_t start_ns, end_ns;       /* since the trace started (end_ns 0: not ended) */
    uint64_t fingerprint;           /* what must match between processes, alike in every layout */
    uint64_t digest_in, digest_out; /* digests of the blocks (0: not taken) */
    int32_t device;                 /* the device's global id; -1 for a call */
    uint32_t seq;                   /* a collective's number on its device in the call */
    int32_t thread;                 /* the calling thread's number */
    int32_t nested;                 /* a call made inside another (pmap's shard_map) */
    char what[SPMD_TRACE_TEXT];     /* "spmd_shard_map on Mesh('i': 8, ...) ...", "psum float32[4]
                                       over ('i') #1" */
} spmd_trace_record;

SPMD_END_DECLS

#endif /* SPMD_TRACE_H */
