/* Private to the checked exchanges (check_mpi.c: the engine, recursive doubling with a header
 * on every message; check_exchange_mpi.c: the exchanges that run an agreement beside their
 * data). */
#ifndef SPMD_RUNTIME_CHECK_MPI_IMPL_H
#define SPMD_RUNTIME_CHECK_MPI_IMPL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/comm/comm_mpi_impl.h"

/* Missing ranks a header lists (the lowest); more are only counted as "and others". */
#define LISTED 3
enum { FLAG_MORE_MISSING = 1u, FLAG_SIZE = 2u };

/* What a process that came heard of a missing one (header.waits_for): not heard from, alive
 * and waiting for nobody it named, or exited (seen by a process of its machine: it may have
 * answered a note before); else the runtime process it waits for. */
enum { NOT_HEARD = -1, ALIVE = -2, GONE = -3 };

typedef struct header {
    uint64_t fp_min, fp_max;
    int32_t rank_min, rank_max; /* lowest rank holding each */
    int32_t missing[LISTED];    /* ascending; -1 ends the list */
    int32_t waits_for[LISTED];  /* of each missing rank (NOT_HEARD, ALIVE, GONE, process) */
    uint32_t flags;
    uint32_t unused; /* the padding, set: a sealed header goes on the wire whole */
} header;

/* A note to a rank given up on: which exchange (its tag), and the sender's header. */
typedef struct note {
    header h;
    int32_t tag;
} note;
_Static_assert(sizeof(note) <= sizeof(((spmd__comm *)0)->note_buf), "a note fits note_buf");
/* Descriptions exchanged when fingerprints differ. */
#define TEXT 240

struct pairing; /* the partners of each step (check_mpi.c) */

typedef struct xchg {
    spmd__comm *c;
    spmd__wait *w;
    const spmd__agreement *a;
    spmd__comm_topology t;
    int tag;
    header h;
    int64_t deadline; /* of step 0; step s ends s * stagger later, the last before the caller's */
    int64_t stagger;
    int64_t begun; /* the coarse clock at set-up, or as the wait was made (spmd__wait.begun_ns) */
    int64_t next_cancel_check;
    spmd_status stopped; /* the cancellation status, once cancelled */
    int broken;          /* an MPI call failed: its message is recorded */
    int watch_notes;     /* the communicator's note receive is tested beside each step */
    int late_by;         /* rank whose note says it gave up on this one in this exchange, or -1 */
    uint32_t stamp;      /* its messages' (spmd__comm_exchange_tag) */
    int last_from;       /* the rank of the last message received */
    int skip_missing;    /* a roll call: no wait for a partner the header lists as missing */
    /* The pairing of the running exchange and the first of its later steps, whose partners a
     * lasting wait asks where they are (spmd__comm_track); NULL: none */
    const struct pairing *pairing;
    int ahead_level;
} xchg;

enum { SEAL_COMPACT = 0x5eca1016u, SEAL_FULL = 0x5eca1048u };
typedef struct seal_compact {
    uint64_t fp;
    uint32_t stamp; /* the exchange's (spmd__comm_exchange_tag); the holder of fp: the sender */
    uint32_t kind;
} seal_compact;
typedef struct seal_full {
    header h;
    uint32_t stamp;
    uint32_t kind;
} seal_full;
#define SEAL_MAX ((size_t)sizeof(seal_full))

/* How a step ended: its message came, its partner was given up on, or the exchange stopped. */
enum { GOT, MISSED, STOPPED };

/* The first cancellation check comes after this long a wait, the next ones this far apart:
 * the check may poll MPI for abort records, which the fast path should not pay for. */
#define CANCEL_FIRST_NS 50000
#define CANCEL_EVERY_NS 1000000

/* How long a wait has looked for a message the notes say may never come. */
typedef struct doubt {
    uint64_t suspicion;
    int looks;
} doubt;

/* The engine's pieces that the exchanges beside an agreement reuse; each is explained where
 * check_mpi.c defines it. */
void spmd__xchg_broken(xchg *x, int rc, const char *what);
int spmd__xchg_cancelled(xchg *x, int64_t now);
spmd_status spmd__xchg_check_with_tag(spmd__comm *c, const spmd__agreement *a, spmd__wait *w,
                                      int tag);
int spmd__header_failed(const header *h);
void spmd__header_merge(header *h, const header *in);
int spmd__xchg_is_current(const xchg *x, const void *rbuf, size_t count, size_t rcap);
void spmd__xchg_missed(xchg *x, int rank);
/* Adds to h what this process knows of each missing process (a note, or its end seen on this
 * machine), for the roll call to share: a process that came may have heard only of its own
 * partners, and only one of the missing one's machine sees it gone. */
void spmd__xchg_hear_missing(const spmd__comm *c, header *h);
/* The error naming the missing processes of h, as spmd__xchg_hear_missing left it. */
spmd_status spmd__xchg_missing_error(const spmd__comm *c, const header *h, const spmd__agreement *a,
                                     spmd__wait *w);
size_t spmd__header_seal(const header *h, uint32_t stamp, char *msg, size_t payload);
uint32_t spmd__header_stamp_of(const char *msg, size_t got);
int spmd__xchg_step(xchg *x, int to, const void *sbuf, size_t sbytes, int from, void *rbuf,
                    size_t rcap, int64_t deadline, size_t *got, int *send_open);
int spmd__header_unseal(const char *msg, size_t got, int sender, header *h, size_t *payload);
void spmd__xchg_weigh_doubt(doubt *d, int tracked, uint64_t suspicion, int missing);
const char *spmd__xchg_what_of(const spmd__wait *w, const spmd__agreement *a, char *buf,
                               size_t size);
void spmd__xchg_init(xchg *x, spmd__comm *c, const spmd__agreement *a, spmd__wait *w, int tag,
                     int64_t deadline);
/* An agreement over c, then c->whole made by every member (a second round first when c is a
 * subset whose whole communicator does not exist yet). */
spmd_status spmd__xchg_check_then_whole(spmd__comm *c, const spmd__agreement *a, spmd__wait *w);

#endif /* SPMD_RUNTIME_CHECK_MPI_IMPL_H */
