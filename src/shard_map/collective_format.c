/*
 * How a collective reads in messages and the trace: its op, its blocks, its axes and its
 * axis_index_groups. Apart from the frame (collectives.c) because the executor writes a
 * device's last collective too: both call this file, which calls neither.
 */
#include "shard_map/collective_frame.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

const char *const spmd__coll_op_names[OP_PBROADCAST + 1] = {
    "",           "psum",         "pmean",    "pmax",       "pmin",
    "all_gather", "psum_scatter", "ppermute", "all_to_all", "pbroadcast"};

/* Appends "[[0, 2], [1, 3]]", cut with "..." once past `budget` characters. */
static void grouping_text(spmd__strbuf *sb, const spmd__grouping *g, size_t budget)
{
    size_t start = sb->len;
    spmd__strbuf_printf(sb, "[");
    for (int k = 0, i = 0; k < g->num_groups; k++) {
        int size = g->sizes ? g->sizes[k] : g->total / g->num_groups;
        spmd__strbuf_printf(sb, k ? ", [" : "[");
        for (int m = 0; m < size; m++, i++) {
            if (sb->len - start > budget) {
                spmd__strbuf_printf(sb, "%s...]]", m ? ", " : "");
                return;
            }
            spmd__strbuf_printf(sb, m ? ", %d" : "%d", g->positions[i]);
        }
        spmd__strbuf_printf(sb, "]");
    }
    spmd__strbuf_printf(sb, "]");
}

/* The grouping of this process's current call with hash `hash`: its table is in use by the
 * call, so it is neither freed nor changed while the call lasts; NULL when none. */
static const spmd__grouping *find_grouping(const spmd__call *call, uint64_t hash)
{
    for (unsigned k = 1u << SPMD_MAX_MESH_AXES; k < SPMD__NUM_TABLES; k++) {
        const spmd__group_table *t = atomic_load(&call->state->tables[k]);
        if (t && t->grouping.hash == hash)
            return &t->grouping;
    }
    return NULL;
}

/* "psum float32[4,3] over ('i') #2": what a device called. */
void spmd__coll_describe_op(const coll *c, spmd__strbuf *sb)
{
    if (c->nblocks)
        spmd__strbuf_printf(sb, "%s of %d blocks (the first %s[", spmd__coll_op_names[c->op],
                            c->nblocks, spmd_dtype_name(c->dtype));
    else
        spmd__strbuf_printf(sb, "%s %s[", spmd__coll_op_names[c->op], spmd_dtype_name(c->dtype));
    for (int j = 0; j < c->ndim; j++)
        spmd__strbuf_printf(sb, j ? ",%lld" : "%lld", (long long)c->shape[j]);
    spmd__strbuf_printf(sb, c->nblocks ? "]) over (" : "] over (");
    for (int k = 0; k < c->naxes; k++)
        spmd__strbuf_printf(sb, "%s'%s'", k ? ", " : "", c->mesh->names[c->axes[k]]);
    if (c->grouping) {
        spmd__strbuf_printf(sb, ") in axis_index_groups ");
        grouping_text(sb, c->grouping, 120);
        spmd__strbuf_printf(sb, " #%u", c->seq);
    } else
        spmd__strbuf_printf(sb, ") #%u", c->seq);
}

/* ... with the call, for messages. */
void spmd__coll_describe_into(const void *arg, char *text, size_t size)
{
    const coll *c = arg;
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    spmd__coll_describe_op(c, &sb);
    /* which call: processes whose threads' calls crossed differ here */
    spmd__strbuf_printf(&sb, " (call #%lu on this mesh; its call #%lu, %s)", c->call->seq,
                        c->call->number, c->call->thread_text);
}

const char *spmd__coll_describe(coll *c)
{
    if (!c->description[0])
        spmd__coll_describe_into(c, c->description, sizeof c->description);
    return c->description;
}

void spmd__collective_format(const void *arg, const uint64_t *what, char *text, size_t size)
{
    const spmd__call *call = arg;
    unsigned op = (unsigned)(what[0] & 0xff), naxes = (unsigned)(what[0] >> 8 & 0xff);
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    spmd__strbuf_printf(&sb, "%s over (",
                        op < sizeof spmd__coll_op_names / sizeof spmd__coll_op_names[0]
                            ? spmd__coll_op_names[op]
                            : "a collective");
    for (unsigned k = 0; k < naxes && k < SPMD_MAX_MESH_AXES; k++) {
        int a = (int)(what[0] >> (16 + 4 * k) & 0xf);
        spmd__strbuf_printf(&sb, "%s'%s'", k ? ", " : "",
                            a < call->mesh->ndim ? call->mesh->names[a] : "?");
    }
    spmd__strbuf_printf(&sb, ")");
    if (what[1]) {
        const spmd__grouping *g = find_grouping(call, what[1]);
        spmd__strbuf_printf(&sb, " in axis_index_groups ");
        if (g)
            grouping_text(&sb, g, 40);
        else
            spmd__strbuf_printf(&sb, "%04x", (unsigned)(what[1] >> 48));
    }
}
