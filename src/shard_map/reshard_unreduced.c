/*
 * spmd_reshard (reshard.h): an unreduced source (spec.h) has its partial sums added up first,
 * on its own mesh, by a shard_map whose fn runs one psum over the axes it drops, or one tiled
 * psum_scatter when the new spec shards a dimension over them; the array layer then places the
 * result. Every other reshard goes straight to the array layer.
 */
#include <stdio.h>
#include <string.h>

#include <spmd/shard_map.h>

#include "runtime/base/check.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"
#include "sharding/spec_impl.h"
#include "array/array_impl.h"

typedef struct reduction {
    char axes[SPMD_MAX_MESH_AXES * (SPMD_MAX_AXIS_NAME + 1)]; /* "y,z" */
    int scatter_dim;                                          /* -1: psum */
} reduction;

static spmd_status reduce_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    const reduction *r = user;
    return r->scatter_dim < 0 ? spmd_psum(ctx, &in[0], &out[0], r->axes)
                              : spmd_psum_scatter(ctx, &in[0], &out[0], r->axes, r->scatter_dim, 1);
}

/* Entry j of a spec (None beyond its length) as mesh axes of `sh`. */
static int entry_axes(const spmd_sharding *sh, int j, int *axes)
{
    if (j >= sh->length)
        return 0;
    memcpy(axes, sh->entry_mesh_axis[j], (size_t)sh->spec->entry_size[j] * sizeof(int));
    return sh->spec->entry_size[j];
}

/*
 * The dimension d where `to` (on x's mesh) shards over x's entry followed by exactly the
 * unreduced axes, every other dimension as x has it: a psum_scatter along d gives `to`'s blocks
 * at once. -1 when there is none. `order` gets the unreduced axes in `to`'s order.
 */
static int scatter_dimension(const spmd_sharding *x, const spmd_sharding *to, int ndim, int *order)
{
    if (to->mesh != x->mesh && !spmd_mesh_equal(to->mesh, x->mesh))
        return -1;
    int found = -1;
    for (int j = 0; j < ndim; j++) {
        int a[SPMD_MAX_MESH_AXES], b[SPMD_MAX_MESH_AXES];
        int na = entry_axes(x, j, a), nb = entry_axes(to, j, b);
        if (na == nb && memcmp(a, b, (size_t)na * sizeof(int)) == 0)
            continue;
        if (found >= 0 || nb <= na || memcmp(a, b, (size_t)na * sizeof(int)) != 0)
            return -1;
        unsigned tail = 0;
        for (int k = na; k < nb; k++)
            tail |= 1u << b[k];
        if (tail != x->unreduced_mask)
            return -1;
        for (int k = na; k < nb; k++)
            order[k - na] = b[k];
        found = j;
    }
    return found;
}

static spmd_status reduce_then_reshard(spmd_array *x, const spmd_sharding *to,
                                       const spmd_reshard_options *options, spmd_array **out)
{
    const spmd_sharding *from = x->sharding;
    spmd_mesh *mesh = from->mesh;
    SPMD_CHECK(spmd_sharding_check_shape(to, x->ndim, x->shape));
    reduction r = {"", -1};
    int order[SPMD_MAX_MESH_AXES], n = 0;
    r.scatter_dim = scatter_dimension(from, to, x->ndim, order);
    if (r.scatter_dim < 0) /* psum over every unreduced axis, in mesh order */
        for (int a = 0; a < mesh->ndim; a++)
            if (from->unreduced_mask >> a & 1)
                order[n++] = a;
    if (r.scatter_dim >= 0)
        n = __builtin_popcount(from->unreduced_mask);
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, r.axes, sizeof r.axes);
    for (int k = 0; k < n; k++)
        spmd__strbuf_printf(&sb, "%s%s", k ? "," : "", mesh->names[order[k]]);
    /* the shard_map's out_spec: to's (scatter) or x's without the unreduced axes (psum) */
    spmd_spec *reduced = NULL;
    spmd_status st = spmd_spec_copy(r.scatter_dim >= 0 ? to->spec : from->spec, &reduced);
    if (st == SPMD_OK)
        st = spmd_spec_set_unreduced(reduced, 0, NULL);
    spmd_out_desc desc = {x->ndim, {0}, x->dtype};
    memcpy(desc.shape, x->shape, (size_t)x->ndim * sizeof x->shape[0]);
    spmd_shard_map_options opts;
    if (st == SPMD_OK)
        st = spmd_shard_map_options_init(&opts, SPMD_SHARD_MAP_OPTIONS_VERSION);
    /* the new replicated axes hold a psum's result; the others were replicated in x */
    opts.check_replication = 0;
    int donate[1] = {options && options->donate ? SPMD_DONATE : 0};
    opts.donate = donate;
    spmd_array *sum = NULL;
    const spmd_spec *in_spec = from->spec, *out_spec = reduced;
    if (st == SPMD_OK && mesh->num_local > 0) {
        st = spmd_shard_map(mesh, reduce_body, &r, 1, &x, &in_spec, 1, &desc, &out_spec, &opts,
                            &sum);
    } else if (st == SPMD_OK) { /* a process of the new mesh alone: its part of the move */
        spmd_sharding *sh = NULL;
        st = spmd_sharding_create(mesh, reduced, &sh);
        if (st == SPMD_OK)
            st = spmd__array_create_empty(sh, x->ndim, x->shape, x->dtype, "spmd_reshard", &sum);
        spmd_sharding_destroy(sh);
    }
    spmd_spec_destroy(reduced);
    if (st != SPMD_OK)
        return st;
    spmd_reshard_options place = SPMD_RESHARD_OPTIONS_INIT;
    place.donate = 1; /* the sum is this call's own */
    place.stats = options ? options->stats : NULL;
    st = spmd__reshard(sum, to, &place, out);
    spmd_array_destroy(sum);
    return st;
}

spmd_status spmd_reshard(spmd_array *x, const spmd_sharding *new_sharding,
                         const spmd_reshard_options *options, spmd_array **out)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_reshard");
    *out = NULL;
    SPMD_CHECK(spmd__array_check(x, "spmd_reshard", "x"));
    SPMD_CHECK(spmd__sharding_check(new_sharding, "spmd_reshard", "new_sharding"));
    SPMD_REQUIRE(!options || options->version == SPMD_RESHARD_OPTIONS_VERSION,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_reshard: options->version is %u, not SPMD_RESHARD_OPTIONS_VERSION (%u); "
                 "initialize the options with SPMD_RESHARD_OPTIONS_INIT",
                 options ? options->version : 0u, SPMD_RESHARD_OPTIONS_VERSION);
    if (!x->sharding->unreduced_mask || new_sharding->unreduced_mask)
        return spmd__reshard(x, new_sharding, options, out);
    return spmd__error_in(reduce_then_reshard(x, new_sharding, options, out), "spmd_reshard");
}
