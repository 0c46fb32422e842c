/* Private: agreements and communicators over sets of processes, for the calls that make one
 * (shard_map's set-up, reshard, device_put's check, the multihost collectives). */
#ifndef SPMD_PROCESS_SETS_H
#define SPMD_PROCESS_SETS_H

#include <pthread.h>
#include <stdint.h>

#include "runtime/comm/comm.h"

/** Serializes agreements over process views: their messages share the views' tags. */
extern pthread_mutex_t spmd__setup_lock;

/**
 * Agreement (spmd__comm_agree) over a view of `processes`, for a set that has no communicator
 * (a roll call after a failure). The caller holds spmd__setup_lock (views share the set-up
 * tags). A creation follows spmd__agree_to_create instead.
 */
spmd_status spmd__agree_on_view(const int *processes, int n, uint64_t fingerprint,
                                const char *description, spmd__wait *w);

/**
 * The agreement that must precede the creation of a communicator over `processes` (which
 * blocks until every member calls it, with no deadline): spmd__agree_on_view, then a second
 * round in which a member takes part only once it means to create the communicator. It ends
 * SPMD_OK on a member only when every member sent its part of that round, so never where
 * another member gave the call up (its own timeout, or a mismatch in the order of calls found
 * by the notes, calls.h). The caller holds spmd__setup_lock.
 */
spmd_status spmd__agree_to_create(const int *processes, int n, uint64_t fingerprint,
                                  const char *description, spmd__wait *w);

/*
 * Communicators over sets of processes for the collectives outside shard_map (reshard,
 * device_put's check): made by the first call over a set, kept until an exchange on one fails
 * or the next spmd_init. Each user keeps its own list, under a lock of its own.
 */
typedef struct spmd__set_comm {
    struct spmd__set_comm *next;
    unsigned session;
    int n;
    int *processes;
    spmd__comm *comm;
} spmd__set_comm;

/**
 * Starts a call over the set (*e: its entry, or NULL before the first): says what the call is
 * for the notes between processes (calls.h; `description` must live until the call's
 * agreement ends, then spmd__calls_about(NULL)), and refuses it, SPMD_ERR_COLLECTIVE_MISMATCH,
 * when another process abandoned it; the set's communicator is then forgotten (*e NULL), as
 * the others forget theirs.
 */
spmd_status spmd__set_comm_call(spmd__set_comm **list, spmd__set_comm **e, const int *processes,
                                int n, int tag, const char *fn, const char *description,
                                unsigned long *call);

/** The entry of `processes` in *list, or NULL; entries of an earlier session are dropped. */
spmd__set_comm *spmd__set_comm_find(spmd__set_comm **list, const int *processes, int n,
                                    unsigned session);
/** Drops an entry whose communicator a failed exchange may have left messages in. */
void spmd__set_comm_forget(spmd__set_comm **list, spmd__set_comm *gone);
/**
 * The first call over a set (`call`, from spmd__set_comm_call): agrees over a view of
 * `processes` (fingerprint, description, within w), then creates their communicator with `tag`
 * and adds it to *list.
 */
spmd_status spmd__set_comm_create(spmd__set_comm **list, const int *processes, int n,
                                  unsigned session, int tag, unsigned long call,
                                  uint64_t fingerprint, const char *description, spmd__wait *w,
                                  spmd__set_comm **out);

#endif /* SPMD_PROCESS_SETS_H */
