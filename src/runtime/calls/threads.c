/* Who is calling: a number, a name and a tag for each thread that calls libspmd, and the array
 * op it runs (threads.h). The call lock (calls.c) and the trace's records (trace.c) both read
 * them. */
#include "runtime/calls/threads.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <spmd/runtime.h>

#include "runtime/base/check.h"

static atomic_int threads_seen;
static _Thread_local int thread_no;
static _Thread_local char thread_name[32];
static _Thread_local uint64_t thread_tag;
static _Thread_local char thread_text[48]; /* "thread 2 'loader'", made once per name */
static atomic_uint names_version; /* spmd_thread_set_name calls: the call lock holder's text */

int spmd__thread_number(void)
{
    if (!thread_no)
        thread_no = atomic_fetch_add(&threads_seen, 1) + 1;
    return thread_no;
}

static void thread_text_of(int number, const char *name, char *text, size_t size)
{
    if (name[0])
        snprintf(text, size, "thread %d '%s'", number, name);
    else
        snprintf(text, size, "thread %d", number);
}

void spmd__thread_text(char *text, size_t size)
{
    char *mine = thread_text; /* one look-up of the thread's storage, not one per byte */
    if (!mine[0])
        thread_text_of(spmd__thread_number(), thread_name, mine, sizeof thread_text);
    if (!size)
        return;
    size_t n = strnlen(mine, sizeof thread_text - 1);
    n = n < size - 1 ? n : size - 1;
    memcpy(text, mine, n);
    text[n] = '\0';
}

uint64_t spmd__thread_tag(void) { return thread_tag; }

/* the array op whose calls this thread makes (spmd/array_ops.h), if any */
static _Thread_local const char *op_text;
static _Thread_local uint64_t op_tag;

void spmd__calls_set_op(const char *text, uint64_t tag)
{
    op_text = text;
    op_tag = tag;
}

uint64_t spmd__calls_op_tag(void) { return op_tag; }

const char *spmd__calls_op_text(void) { return op_text; }

static spmd_status spmd_thread_set_name_checked(const char *name)
{
    spmd__thread_number();
    if (!name || !name[0]) {
        thread_name[0] = thread_text[0] = '\0';
        atomic_fetch_add(&names_version, 1);
        thread_tag = 0;
        return SPMD_OK;
    }
    size_t len = strlen(name);
    SPMD_REQUIRE(len < sizeof thread_name, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_thread_set_name: name \"%.40s...\" has %zu characters; use at most %zu",
                 name, len, sizeof thread_name - 1);
    for (size_t i = 0; i < len; i++)
        SPMD_REQUIRE(name[i] >= 0x20 && name[i] < 0x7f && name[i] != '\'',
                     SPMD_ERR_INVALID_ARGUMENT,
                     "spmd_thread_set_name: name has character %d at position %zu; use printable "
                     "ASCII without quotes",
                     (int)(unsigned char)name[i], i);
    memcpy(thread_name, name, len + 1);
    thread_tag = spmd__fnv1a(SPMD__FNV1A_SEED, name, len) | 1;
    thread_text[0] = '\0';
    atomic_fetch_add(&names_version, 1);
    return SPMD_OK;
}

spmd_status spmd_thread_set_name(const char *name) { return spmd_thread_set_name_checked(name); }

unsigned spmd__thread_names_version(void)
{
    return atomic_load_explicit(&names_version, memory_order_relaxed);
}
