/*
 * The replication check of a call (out_specs that leave mesh axes out claim that every device
 * along them holds the same block): digests of the blocks no collective proved alike, compared
 * in one process or summed over the processes with the outcome, and on failure the search for
 * two replicas that differ; and JAX's refusal by type of an output a collective leaves
 * varying. What the collectives proved comes from spmd__ctx_note (context.c).
 */
#include "shard_map/plan.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/digest.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"
#include "sharding/spec_impl.h"
#include "array/array_impl.h"

static uint64_t digest(const void *data, size_t n)
{
    return spmd__digest(data, n) | 1; /* never 0: 0 marks "not held here" */
}

/* The holders a block's check compares: the devices with its block and, for an unreduced
 * output, the same coordinates on the unreduced axes (those hold partial sums of their own). */
static int64_t block_key(const spmd_sharding *sh, int ndim, int flat)
{
    int64_t key = 0;
    for (int j = 0; j < ndim; j++)
        key = key * spmd__sharding_blocks(sh, j) + spmd__sharding_block(sh, flat, j);
    if (sh->unreduced_mask) {
        int c[SPMD_MAX_MESH_AXES];
        spmd__mesh_coords(sh->mesh, flat, c);
        for (int a = 0; a < sh->mesh->ndim; a++)
            if (sh->unreduced_mask >> a & 1)
                key = key * sh->mesh->shape[a] + c[a];
    }
    return key;
}

/* Whether `flat` is the first of its block's holders (block_key): replica 0 along the axes
 * the spec leaves out, its unreduced axes set aside. */
static int first_holder(const spmd_sharding *sh, int flat)
{
    if (!sh->unreduced_mask)
        return sh->replica[flat] == 0;
    int c[SPMD_MAX_MESH_AXES];
    unsigned used = sh->unreduced_mask;
    spmd__mesh_coords(sh->mesh, flat, c);
    for (int j = 0; j < sh->length; j++)
        for (int k = 0; k < sh->spec->entry_size[j]; k++)
            used |= 1u << sh->entry_mesh_axis[j][k];
    for (int a = 0; a < sh->mesh->ndim; a++)
        if (!(used >> a & 1) && c[a] != 0)
            return 0;
    return 1;
}

/* Whether a collective made output j's block alike along every axis out_spec leaves out. */
static int proven(const spmd_plan *p, const spmd__proof *pr, int j)
{
    unsigned need = (unsigned)p->check_output[j];
    return !p->strict_replication && pr->token && (pr->axes & need) == need;
}

/* The device's part of the check, once fn returned: the digests of its blocks that no
 * collective proved, taken on its own thread (the devices hash in parallel). */
void spmd__replication_take_digests(const spmd_plan *p, const spmd_ctx *ctx, const spmd_block *out)
{
    for (int j = 0; j < p->nout; j++)
        if (p->check_output[j] && !proven(p, &ctx->proofs[j], j))
            ctx->proofs[j].digest = digest(out[j].data, spmd__block_bytes(&out[j]));
}

/* The digest of local slot k's block of output j: the token of the collective that made it
 * alike along every axis out_spec leaves out (no byte read), else its bytes' (proofs NULL:
 * always). Holders of one block were all in that collective's group, so their tokens agree. */
static uint64_t block_digest(const spmd_plan *p, spmd_array **outputs, const spmd__proof *proofs,
                             int use_proofs, int j, int k)
{
    const spmd__proof *pr = proofs ? &proofs[(size_t)k * (size_t)p->nout + (size_t)j] : NULL;
    if (pr && use_proofs && proven(p, pr, j))
        return pr->token | 1;
    if (pr && pr->digest) /* the device took it, in parallel with the others */
        return pr->digest;
    const spmd_array *o = outputs[j];
    return digest(o->shards[k].buffer->data, o->shard_bytes);
}

/* This process's digests of every checked output's blocks, in shard order. */
void spmd__replication_shard_digests(const spmd_plan *p, spmd_array **outputs,
                                     const spmd__proof *proofs, int use_proofs, uint64_t *local)
{
    for (int j = 0, at = 0; j < p->nout; j++)
        for (int k = 0; p->check_output[j] && k < outputs[j]->num_shards; k++)
            local[at++] = block_digest(p, outputs, proofs, use_proofs, j, k);
}

/* Digest of every local device's block of each checked output, at [output][mesh position]:
 * the check of a mesh in one process. */
void spmd__replication_local_digests(const spmd_plan *p, spmd_array **outputs,
                                     const spmd__proof *proofs, int use_proofs, uint64_t *digests)
{
    int size = p->mesh->size, checked = 0;
    for (int j = 0; j < p->nout; j++) {
        if (!p->check_output[j])
            continue;
        uint64_t *row = digests + (size_t)checked++ * (size_t)size;
        const spmd_array *o = outputs[j];
        for (int s = 0; s < o->num_shards; s++)
            row[o->shards[s].flat] = block_digest(p, outputs, proofs, use_proofs, j, s);
    }
}

static spmd_status replication_error(const spmd_plan *p, int j, int fa, int fb)
{
    const spmd_mesh *m = p->mesh;
    const spmd_sharding *sh = p->out_shardings[j];
    int ca[SPMD_MAX_MESH_AXES], cb[SPMD_MAX_MESH_AXES];
    spmd__mesh_coords(m, fa, ca);
    spmd__mesh_coords(m, fb, cb);
    char axes[256], spec[SPMD__SPEC_TEXT];
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, axes, sizeof axes);
    int n = 0;
    for (int a = 0; a < m->ndim; a++)
        if (ca[a] != cb[a])
            spmd__strbuf_printf(&sb, "%s'%s'", n++ ? ", " : "", m->names[a]);
    spmd__ignore(spmd_spec_format(sh->spec, spec, sizeof spec));
    return SPMD_ERROR(SPMD_ERR_SPEC,
                      "spmd_shard_map: output %d: out_specs[%d] = %s claims the output is "
                      "replicated over mesh axis %s, but devices %d and %d (which differ only "
                      "along it) hold different values; reduce over %s in fn (spmd_psum), or name "
                      "%s in out_specs[%d]",
                      j, j, spec, axes, m->device_ids[fa], m->device_ids[fb], axes, axes, j);
}

void spmd__plan_check_by_value(spmd_plan *p) { p->by_value = 1; }

/* "'x', 'y'": the mesh axes in `mask`. */
static void axis_list(const spmd_mesh *m, unsigned mask, char *text, size_t size)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    for (int a = 0, n = 0; a < m->ndim; a++)
        if (mask >> a & 1)
            spmd__strbuf_printf(&sb, "%s'%s'", n++ ? ", " : "", m->names[a]);
}

/* JAX's check by type: an output whose out_spec claims replication along an axis that the
 * collective writing it last leaves varying (an all_gather, not all_gather_invariant) is
 * refused whatever its values. Every process decides alike, from its own devices. */
spmd_status spmd__replication_refuse_varying(const spmd_plan *p, const spmd__proof *proofs)
{
    if (!proofs || p->by_value)
        return SPMD_OK;
    for (int j = 0; j < p->nout; j++) {
        for (int k = 0; p->typed_output[j] && k < p->num_local; k++) {
            const spmd__proof *pr = &proofs[(size_t)k * (size_t)p->nout + (size_t)j];
            unsigned bad = pr->varying & (unsigned)p->typed_output[j];
            if (!bad)
                continue;
            const spmd_mesh *m = p->mesh;
            char refused[256], over[256], spec[SPMD__SPEC_TEXT], mesh[SPMD__MESH_TEXT];
            axis_list(m, bad, refused, sizeof refused);
            axis_list(m, pr->varying, over, sizeof over);
            spmd__ignore(spmd_spec_format(p->out_shardings[j]->spec, spec, sizeof spec));
            spmd__ignore(spmd_mesh_format(m, mesh, sizeof mesh));
            const char *by = pr->varying_by, *hint = "its result differs between devices by design";
            if (!strcmp(by, "all_gather") || !strcmp(by, "all_gather_many"))
                hint =
                    "gather with spmd_all_gather_invariant (its result is invariant; one block a "
                    "call)";
            else if (!strcmp(by, "pbroadcast"))
                hint = "make it a spmd_psum to which only the source adds its block (invariant)";
            else if (!strncmp(by, "psum_scatter", 12))
                hint = "psum instead of psum_scatter (invariant)";
            int several = (bad & (bad - 1)) != 0;
            return SPMD_ERROR(
                SPMD_ERR_SPEC,
                "spmd_shard_map: output %d: out_specs[%d] = %s claims the output is replicated "
                "over mesh %s %s of %s, but fn wrote it last (device %d) with spmd_%s over %s, "
                "whose result varies along %s by type; JAX refuses this whatever the values. "
                "Either %s, name %s in out_specs[%d], or set options.check_replication = 0 (JAX's "
                "check_vma=False). (A block fn rewrote by hand after it keeps that record: "
                "write the last value with spmd_op_copy.)",
                j, j, spec, several ? "axes" : "axis", refused, mesh,
                m->device_ids[p->local_flat[k]], by, over, refused, hint, refused, j);
        }
    }
    return SPMD_OK;
}

/* Every device holding the same block of a checked output must hold the same bytes (a mesh in
 * one process: every block is here). */
spmd_status spmd__replication_check(const spmd_plan *p, const uint64_t *digests)
{
    int size = p->mesh->size, checked = 0;
    int64_t *first = malloc((size_t)size * sizeof *first);
    SPMD_REQUIRE(first != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory checking replication");
    spmd_status st = SPMD_OK;
    for (int j = 0; j < p->nout && st == SPMD_OK; j++) {
        if (!p->check_output[j])
            continue;
        const uint64_t *row = digests + (size_t)checked++ * (size_t)size;
        const spmd_sharding *sh = p->out_shardings[j];
        for (int f = 0; f < size; f++)
            first[f] = -1;
        /* keys are < mesh size: the blocks of a sharding number at most its devices */
        for (int f = 0; f < size && st == SPMD_OK; f++) {
            int64_t key = block_key(sh, p->out_descs[j].ndim, f);
            if (first[key] < 0)
                first[key] = f;
            else if (row[f] != row[first[key]])
                st = replication_error(p, j, (int)first[key], f);
        }
    }
    free(first);
    return st;
}

/*
 * Across processes the check is one number, added up with the outcome of the call: each
 * device's block of a checked output hashes (with the output and the block) to h; every device
 * counts -h, and the first holder of each block (replica 0) counts h once per holder. The sum
 * over a block's holders is 0 when they all hold the same bytes, and (but for a 2^-64 chance)
 * not otherwise; so is the sum over the mesh.
 */

/* The blocks a checked output's holders compare, numbered over every checked output. */
static int64_t block_index(const spmd_plan *p, int checked_index, int j, int flat)
{
    return (int64_t)checked_index * p->mesh->size +
           block_key(p->out_shardings[j], p->out_descs[j].ndim, flat);
}

/* The sum of this process's terms for the blocks numbered [lo, hi). */
uint64_t spmd__replication_sum(const spmd_plan *p, spmd_array **outputs, const uint64_t *local,
                               int64_t lo, int64_t hi)
{
    uint64_t sum = 0;
    int checked = 0, at = 0;
    for (int j = 0; j < p->nout; j++) {
        if (!p->check_output[j])
            continue;
        const spmd_array *o = outputs[j];
        const spmd_sharding *sh = p->out_shardings[j];
        uint64_t holders = 1;
        for (int a = 0; a < p->mesh->ndim; a++)
            holders *= (uint64_t)p->mesh->shape[a];
        for (int d = 0; d < sh->length; d++)
            holders /= (uint64_t)sh->nblocks[d];
        for (int a = 0; a < p->mesh->ndim; a++)
            if (sh->unreduced_mask >> a & 1)
                holders /= (uint64_t)p->mesh->shape[a];
        for (int s = 0; s < o->num_shards; s++, at++) {
            int flat = o->shards[s].flat;
            int64_t b = block_index(p, checked, j, flat);
            if (b < lo || b >= hi)
                continue;
            uint64_t h = mix64(local[at] ^ mix64((uint64_t)b + 0x9E3779B97F4A7C15ull));
            sum += (first_holder(sh, flat) ? holders * h : 0) - h;
        }
        checked++;
    }
    return sum;
}

/* A record reduced over the processes on the failure path of the check. */
typedef struct search_record {
    uint64_t sum; /* of the terms in the range searched */
    int32_t flat; /* lowest holder found (-1: none) */
    int32_t pad;
    uint64_t digest; /* its digest */
} search_record;

static void merge_search(void *mine, const void *theirs, size_t bytes, void *arg)
{
    (void)arg;
    search_record *m = mine;
    const search_record *t = theirs;
    if (bytes < sizeof *t)
        return;
    m->sum += t->sum;
    if (t->flat >= 0 && (m->flat < 0 || t->flat < m->flat)) {
        m->flat = t->flat;
        m->digest = t->digest;
    }
}

static void describe_search(const void *arg, char *text, size_t size)
{
    snprintf(text, size, "the search for differing replicas of call #%lu",
             *(const unsigned long *)arg);
}

/* One reduction of the search, keyed by the call and the round. */
static spmd_status search_round(spmd__call *call, int round, search_record *r)
{
    spmd__agreement a = {call->seq, describe_search, &call->seq, NULL};
    static const spmd__wait_where end = {SPMD__PHASE_END, -1, NULL};
    spmd__wait w = {.deadline_ns = spmd__now_ns() + call->timeout_ns,
                    .what = "spmd_shard_map (finding the replicas that differ)",
                    .key = call->seq * 1024 + 300 + (unsigned long)round,
                    .where = &end,
                    .settled_only = 1};
    size_t bytes = sizeof *r;
    return spmd__comm_reduce_record(call->state->control, &a, r, &bytes, sizeof *r, merge_search,
                                    NULL, &w);
}

/* The lowest holder of block b (among those whose digest differs from `unlike`, when
 * `use_unlike`), over every process. */
static spmd_status lowest_holder(const spmd_plan *p, spmd__call *call, spmd_array **outputs,
                                 const uint64_t *local, int64_t b, int use_unlike, uint64_t unlike,
                                 int round, search_record *r)
{
    memset(r, 0, sizeof *r);
    r->flat = -1;
    int checked = 0, at = 0;
    for (int j = 0; j < p->nout; j++) {
        if (!p->check_output[j])
            continue;
        const spmd_array *o = outputs[j];
        for (int s = 0; s < o->num_shards; s++, at++) {
            int flat = o->shards[s].flat;
            if (block_index(p, checked, j, flat) != b || (use_unlike && local[at] == unlike))
                continue;
            if (r->flat < 0 || flat < r->flat) {
                r->flat = flat;
                r->digest = local[at];
            }
        }
        checked++;
    }
    return search_round(call, round, r);
}

/* The failure path: halves the block range until one block is left whose holders differ, then
 * names its first holder and the first holder that differs from it. Every process computes the
 * same, from the same sums. */
spmd_status spmd__replication_find_differing(const spmd_plan *p, spmd__call *call,
                                             spmd_array **outputs, const uint64_t *local,
                                             int checked)
{
    int64_t lo = 0, hi = (int64_t)checked * p->mesh->size;
    int round = 0;
    /* by their bytes, the blocks may all agree: only a proof differed from another's bytes */
    search_record all = {spmd__replication_sum(p, outputs, local, lo, hi), -1, 0, 0};
    spmd_status st = search_round(call, round++, &all);
    if (st == SPMD_OK && all.sum == 0)
        return SPMD_OK;
    while (hi - lo > 1 && st == SPMD_OK) {
        int64_t mid = lo + (hi - lo) / 2;
        search_record r = {spmd__replication_sum(p, outputs, local, lo, mid), -1, 0, 0};
        st = search_round(call, round++, &r);
        if (r.sum != 0)
            hi = mid;
        else
            lo = mid;
    }
    search_record first, other;
    if (st == SPMD_OK)
        st = lowest_holder(p, call, outputs, local, lo, 0, 0, round++, &first);
    if (st == SPMD_OK)
        st = lowest_holder(p, call, outputs, local, lo, 1, first.digest, round++, &other);
    if (st != SPMD_OK)
        return st;
    int j = 0, index = (int)(lo / p->mesh->size);
    for (int k = 0; j < p->nout; j++)
        if (p->check_output[j] && k++ == index)
            break;
    if (first.flat < 0 || other.flat < 0 || j == p->nout) /* the sums collided: nothing found */
        return SPMD_ERROR(SPMD_ERR_SPEC,
                          "spmd_shard_map: an output that out_specs claims is replicated holds "
                          "different values on devices that should hold the same block; reduce "
                          "over the axes it leaves out (spmd_psum), or name them in out_specs");
    return replication_error(p, j, first.flat, other.flat);
}
