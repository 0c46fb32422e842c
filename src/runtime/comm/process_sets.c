/* Agreements and communicators over sets of processes. */
#include "runtime/comm/process_sets.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"

/* One set-up at a time in this process, so that communicator creations (collective over
 * overlapping process sets) happen in the same order everywhere. */
pthread_mutex_t spmd__setup_lock = PTHREAD_MUTEX_INITIALIZER;

spmd_status spmd__agree_on_view(const int *processes, int n, uint64_t fingerprint,
                                const char *description, spmd__wait *w)
{
    spmd__comm *view = NULL;
    SPMD_CHECK(spmd__comm_view(processes, n, &view));
    spmd_status st = spmd__comm_agree(view, fingerprint, description, w);
    if (st == SPMD_OK)
        spmd__comm_destroy(view);
    else
        spmd__comm_abandon(view); /* it may hold unfinished messages */
    return st;
}

/* Salts the key of the second round of an agreement that precedes a communicator's creation. */
#define COMMIT_SALT 0xc0a117edc0a117edull

/*
 * The second round: a process sends its part only once it has agreed and means to create the
 * communicator, and from then on gives the call up only when another member does (an abandon
 * note from a process that never sent its part) or when a whole fresh timeout passes. So no
 * member can finish this round while another has given the call up, whatever the timing: the
 * first round alone could end here and be abandoned elsewhere (a process that sent its part
 * may learn afterwards that the processes issued their calls in different orders).
 */
static spmd_status commit(spmd__comm *view, uint64_t fingerprint, const char *description,
                          const spmd__wait *w, int64_t budget_ns)
{
    spmd__calls_poll_notes(); /* news that came during the first round: before anything is sent */
    if (spmd__calls_has_verdict() == 2)
        return spmd__calls_verdict(NULL);
    spmd__wait round = spmd__second_round_wait(
        w, budget_ns, spmd__fnv1a(w->key ^ COMMIT_SALT, &fingerprint, sizeof fingerprint) | 1);
    round.settled_only = 1;
    return spmd__comm_agree(view, fingerprint, description, &round);
}

spmd_status spmd__agree_to_create(const int *processes, int n, uint64_t fingerprint,
                                  const char *description, spmd__wait *w)
{
    int64_t budget = w->deadline_ns - spmd__now_ns();
    spmd__comm *view = NULL;
    SPMD_CHECK(spmd__comm_view(processes, n, &view));
    spmd_status st = spmd__comm_agree(view, fingerprint, description, w);
    if (st == SPMD_OK)
        st = commit(view, fingerprint, description, w, budget);
    if (st == SPMD_OK)
        spmd__comm_destroy(view);
    else
        spmd__comm_abandon(view); /* it may hold unfinished messages */
    return st;
}

/* Salts the key of an attempt to make a communicator: each has tags of its own. */
#define ATTEMPT_SALT 0x5e7a77e3b7c0ffeeull

/* What identifies a set's communicators: the set and the user's tag. */
static uint64_t set_key(const int *processes, int n, int tag)
{
    uint64_t h = spmd__fnv1a(SPMD__FNV1A_SEED, &tag, sizeof tag);
    return spmd__fnv1a(h, processes, (size_t)n * sizeof *processes);
}

static void set_comm_free(spmd__set_comm *e)
{
    spmd__comm_abandon(e->comm); /* it may hold unfinished messages */
    free(e->processes);
    free(e);
}

spmd__set_comm *spmd__set_comm_find(spmd__set_comm **list, const int *processes, int n,
                                    unsigned session)
{
    for (spmd__set_comm **at = list; *at;) {
        spmd__set_comm *e = *at;
        if (e->session != session) { /* made before the last spmd_finalize */
            *at = e->next;
            set_comm_free(e);
            continue;
        }
        if (e->n == n && memcmp(e->processes, processes, (size_t)n * sizeof(int)) == 0)
            return e;
        at = &e->next;
    }
    return NULL;
}

void spmd__set_comm_forget(spmd__set_comm **list, spmd__set_comm *gone)
{
    for (spmd__set_comm **at = list; *at; at = &(*at)->next)
        if (*at == gone) {
            *at = gone->next;
            set_comm_free(gone);
            return;
        }
}

static void describe_text(const void *arg, char *text, size_t size)
{
    spmd__copy_text(text, size, arg);
}

spmd_status spmd__set_comm_call(spmd__set_comm **list, spmd__set_comm **e, const int *processes,
                                int n, int tag, const char *fn, const char *description,
                                unsigned long *call)
{
    /* the set's calls are numbered across its communicators: every member makes them all */
    uint64_t id = set_key(processes, n, tag);
    *call = spmd__calls_next_call(id);
    spmd__call_about about = {id, *call, processes, n, describe_text, description};
    char reason[SPMD__NOTE_TEXT];
    if (!spmd__calls_start(&about, reason, sizeof reason))
        return SPMD_OK;
    /* another process gave this call up (the processes issued their calls in different
     * orders): drop it alike, with the communicator the others dropped */
    if (*e) {
        spmd__set_comm_forget(list, *e);
        *e = NULL;
    }
    spmd__calls_about(NULL);
    return SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH, "%s: %s", fn, reason);
}

spmd_status spmd__set_comm_create(spmd__set_comm **list, const int *processes, int n,
                                  unsigned session, int tag, unsigned long call,
                                  uint64_t fingerprint, const char *description, spmd__wait *w,
                                  spmd__set_comm **out)
{
    *out = NULL;
    uint64_t key = set_key(processes, n, tag);
    /* each attempt has tags of its own: an abandoned one leaves nothing the next could take */
    w->key = spmd__fnv1a(key ^ ATTEMPT_SALT, &call, sizeof call) | 1;
    /* allocated first: after the agreement, every member must go on to the creation */
    spmd__set_comm *e = calloc(1, sizeof *e);
    if (e)
        e->processes = malloc((size_t)n * sizeof(int));
    if (!e || !e->processes) {
        free(e);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory for a communicator's record");
    }
    pthread_mutex_lock(&spmd__setup_lock);
    spmd_status st = spmd__agree_to_create(processes, n, fingerprint, description, w);
    pthread_mutex_unlock(&spmd__setup_lock);
    if (st != SPMD_OK) {
        free(e->processes);
        free(e);
        return st;
    }
    memcpy(e->processes, processes, (size_t)n * sizeof(int));
    e->n = n;
    e->session = session;
    /* every member agreed, and no other call of this process comes between (calls.h) */
    st = spmd__comm_create(processes, n, tag, &e->comm);
    if (st != SPMD_OK) {
        free(e->processes);
        free(e);
        return st;
    }

    e->next = *list;
    *list = e;
    *out = e;
    return SPMD_OK;
}
