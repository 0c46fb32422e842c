/* Types of global arrays in JAX's explicit mode, and the plans of ops over them. */
#include "array_ops/types.h"

#include <stdio.h>
#include <string.h>

#include "array/array_impl.h"
#include "runtime/base/check.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"
#include "sharding/spec_impl.h"

void spmd__xtype_of(const spmd_array *x, spmd__xtype *t)
{
    const spmd_sharding *sh = x->sharding;
    memset(t, 0, sizeof *t);
    t->mesh = sh->mesh;
    t->dtype = x->dtype;
    t->ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) {
        t->shape[d] = x->shape[d];
        if (d < sh->length) {
            t->naxes[d] = sh->spec->entry_size[d];
            for (int k = 0; k < t->naxes[d]; k++)
                t->axes[d][k] = sh->entry_mesh_axis[d][k];
        }
    }
    t->unreduced = sh->unreduced_mask;
}

void spmd__xtype_replicated(spmd_mesh *mesh, int ndim, const int64_t *shape, spmd_dtype dtype,
                            spmd__xtype *t)
{
    memset(t, 0, sizeof *t);
    t->mesh = mesh;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
}

void spmd__xtype_with_sharding(const spmd__xtype *like, const spmd_sharding *sh, spmd__xtype *t)
{
    spmd__xtype_replicated(like->mesh, like->ndim, like->shape, like->dtype, t);
    for (int d = 0; d < t->ndim && d < sh->length; d++) {
        t->naxes[d] = sh->spec->entry_size[d];
        for (int k = 0; k < t->naxes[d]; k++)
            t->axes[d][k] = sh->entry_mesh_axis[d][k];
    }
    t->unreduced = sh->unreduced_mask;
}

unsigned spmd__xtype_dim_mask(const spmd__xtype *t, int d)
{
    unsigned m = 0;
    for (int k = 0; k < t->naxes[d]; k++)
        m |= 1u << t->axes[d][k];
    return m;
}

unsigned spmd__xtype_used(const spmd__xtype *t)
{
    unsigned m = t->unreduced;
    for (int d = 0; d < t->ndim; d++)
        m |= spmd__xtype_dim_mask(t, d);
    return m;
}

int64_t spmd__xtype_shards(const spmd__xtype *t, int d)
{
    int64_t n = 1;
    for (int k = 0; k < t->naxes[d]; k++)
        n *= t->mesh->shape[t->axes[d][k]];
    return n;
}

void spmd__xtype_block_shape(const spmd__xtype *t, int64_t *block)
{
    for (int d = 0; d < t->ndim; d++)
        block[d] = t->shape[d] / spmd__xtype_shards(t, d);
}

int64_t spmd__xtype_block_bytes(const spmd__xtype *t)
{
    int64_t block[SPMD_MAX_RANK], n = (int64_t)spmd_dtype_size(t->dtype);
    spmd__xtype_block_shape(t, block);
    for (int d = 0; d < t->ndim; d++)
        n *= block[d];
    return n;
}

int spmd__xtype_dims_alike(const spmd__xtype *a, int d, const spmd__xtype *b, int e)
{
    if (a->naxes[d] != b->naxes[e])
        return 0;
    for (int k = 0; k < a->naxes[d]; k++)
        if (a->axes[d][k] != b->axes[e][k])
            return 0;
    return 1;
}

int spmd__xtype_same_layout(const spmd__xtype *a, const spmd__xtype *b)
{
    if (a->ndim != b->ndim || a->unreduced != b->unreduced)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (!spmd__xtype_dims_alike(a, d, b, d))
            return 0;
    return 1;
}

void spmd__xtype_copy_dim(spmd__xtype *t, int dst, const spmd__xtype *from, int src)
{
    t->naxes[dst] = from->naxes[src];
    for (int k = 0; k < from->naxes[src]; k++)
        t->axes[dst][k] = from->axes[src][k];
}

void spmd__xtype_dim_text(const spmd__xtype *t, int d, char *buf, size_t size)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, buf, size);
    if (t->naxes[d] > 1)
        spmd__strbuf_printf(&sb, "(");
    for (int k = 0; k < t->naxes[d]; k++)
        spmd__strbuf_printf(&sb, k ? ",%s" : "%s", t->mesh->names[t->axes[d][k]]);
    if (t->naxes[d] > 1)
        spmd__strbuf_printf(&sb, ")");
}

void spmd__xtype_format(const spmd__xtype *t, char *buf, size_t size)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, buf, size);
    spmd__strbuf_printf(&sb, "%s[", spmd_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim; d++) {
        char axes[160];
        spmd__xtype_dim_text(t, d, axes, sizeof axes);
        spmd__strbuf_printf(&sb, "%s%lld%s%s", d ? "," : "", (long long)t->shape[d],
                            axes[0] ? "@" : "", axes);
    }
    spmd__strbuf_printf(&sb, "]");
    if (t->unreduced) {
        spmd__strbuf_printf(&sb, "{U:");
        int first = 1;
        for (int a = 0; a < t->mesh->ndim; a++)
            if (t->unreduced >> a & 1) {
                spmd__strbuf_printf(&sb, first ? "%s" : ",%s", t->mesh->names[a]);
                first = 0;
            }
        spmd__strbuf_printf(&sb, "}");
    }
}

void spmd__axes_text_mask(const spmd_mesh *mesh, unsigned m, char *list, size_t lsize)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, list, lsize);
    int first = 1;
    for (int a = 0; a < mesh->ndim; a++)
        if (m >> a & 1) {
            spmd__strbuf_printf(&sb, first ? "%s" : ",%s", mesh->names[a]);
            first = 0;
        }
}

void spmd__axes_text_dim(const spmd__xtype *t, int d, char *list, size_t lsize)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, list, lsize);
    for (int k = 0; k < t->naxes[d]; k++)
        spmd__strbuf_printf(&sb, k ? ",%s" : "%s", t->mesh->names[t->axes[d][k]]);
}

spmd_status spmd__xtype_sharding(const spmd__xtype *t, spmd_sharding **out)
{
    spmd_spec *spec = NULL;
    SPMD_CHECK(spmd_spec_create(&spec));
    spmd_status st = SPMD_OK;
    int last = t->ndim; /* trailing unsharded entries are left out, as JAX prints them */
    while (last > 0 && t->naxes[last - 1] == 0)
        last--;
    for (int d = 0; d < last && st == SPMD_OK; d++) {
        const char *names[SPMD_MAX_MESH_AXES];
        for (int k = 0; k < t->naxes[d]; k++)
            names[k] = t->mesh->names[t->axes[d][k]];
        st = spmd_spec_append(spec, t->naxes[d], names);
    }
    if (st == SPMD_OK && t->unreduced) {
        const char *names[SPMD_MAX_MESH_AXES];
        int n = 0;
        for (int a = 0; a < t->mesh->ndim; a++)
            if (t->unreduced >> a & 1)
                names[n++] = t->mesh->names[a];
        st = spmd_spec_set_unreduced(spec, n, names);
    }
    if (st == SPMD_OK)
        st = spmd_sharding_create(t->mesh, spec, out);
    spmd_spec_destroy(spec);
    return st;
}

spmd_status spmd__xtype_check_divisible(const spmd__xtype *t, const char *fn, const char *what)
{
    for (int d = 0; d < t->ndim; d++) {
        int64_t n = spmd__xtype_shards(t, d);
        if (t->shape[d] % n) {
            char type[192], axes[SPMD__AXES_TEXT];
            spmd__xtype_format(t, type, sizeof type);
            spmd__xtype_dim_text(t, d, axes, sizeof axes);
            return SPMD_ERROR(SPMD_ERR_SHAPE,
                              "%s: %s would be %s, but dimension %d (extent %lld) does not split "
                              "evenly over %s (%lld shards); uneven extents are refused, never "
                              "replicated silently: choose extents that %lld divides, or an "
                              "out_sharding that leaves dimension %d unsharded",
                              fn, what, type, d, (long long)t->shape[d], axes, (long long)n,
                              (long long)n, d);
        }
    }
    return SPMD_OK;
}

int64_t spmd__xshape_elements(int ndim, const int64_t *shape, spmd_dtype dtype)
{
    size_t n = 1, bytes;
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 1 || spmd__mul_overflows(n, (size_t)shape[d], &n))
            return -1;
    if (spmd__mul_overflows(n, spmd_dtype_size(dtype), &bytes) || bytes > (size_t)INT64_MAX)
        return -1;
    return (int64_t)n;
}

/* ---- plans ---- */

void spmd__plan_begin(spmd_op_plan *plan, const char *op)
{
    memset(plan, 0, sizeof *plan);
    snprintf(plan->op, sizeof plan->op, "%s", op);
}

static spmd_op_step *next_step(spmd_op_plan *plan)
{
    if (plan->nsteps >= SPMD_OP_PLAN_MAX_STEPS)
        return NULL; /* the ops run at most a handful */
    spmd_op_step *s = &plan->steps[plan->nsteps++];
    memset(s, 0, sizeof *s);
    return s;
}

void spmd__plan_collective(spmd_op_plan *plan, const char *kind, const char *axes, spmd_dtype dtype,
                           int ndim, const int64_t *block, int n)
{
    spmd_op_step *s = next_step(plan);
    if (!s)
        return;
    snprintf(s->kind, sizeof s->kind, "%s", kind);
    snprintf(s->axes, sizeof s->axes, "%s", axes);
    s->dtype = dtype;
    int64_t bytes = (int64_t)spmd_dtype_size(dtype);
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, s->text, sizeof s->text);
    spmd__strbuf_printf(&sb, "%s %s[", kind, spmd_dtype_name(dtype));
    for (int d = 0; d < ndim; d++) {
        spmd__strbuf_printf(&sb, d ? ",%lld" : "%lld", (long long)block[d]);
        bytes *= block[d];
    }
    spmd__strbuf_printf(&sb, "] over (");
    const char *p = axes;
    for (int k = 0; *p; k++) {
        size_t len = strcspn(p, ",");
        spmd__strbuf_printf(&sb, "%s'%.*s'", k ? ", " : "", (int)len, p);
        p += len + (p[len] == ',');
    }
    spmd__strbuf_printf(&sb, ")");
    if (!strcmp(kind, "all_gather"))
        s->bytes_per_device = (int64_t)(n - 1) * bytes;
    else if (!strcmp(kind, "psum_scatter"))
        s->bytes_per_device = (int64_t)(n - 1) * bytes / n;
    else
        s->bytes_per_device = 2 * (int64_t)(n - 1) * bytes / n;
    plan->bytes_per_device += s->bytes_per_device;
}

/* The box of the mesh's first device (every coordinate 0): each dimension's first block. */
int64_t spmd__reshard_bytes(const spmd__xtype *from, const spmd__xtype *to)
{
    int64_t need = (int64_t)spmd_dtype_size(to->dtype), have = need;
    for (int d = 0; d < to->ndim; d++) {
        int64_t want = to->shape[d] / spmd__xtype_shards(to, d);
        int64_t held = from->shape[d] / spmd__xtype_shards(from, d);
        need *= want;
        have *= want < held ? want : held;
    }
    if (from->unreduced) { /* the partial sums are added up: a psum's traffic */
        int64_t n = 1;
        for (int a = 0; a < from->mesh->ndim; a++)
            if (from->unreduced >> a & 1)
                n *= from->mesh->shape[a];
        return 2 * (n - 1) * need / n;
    }
    return need - have;
}

void spmd__plan_reshard(spmd_op_plan *plan, const spmd__xtype *from, const spmd__xtype *to)
{
    spmd_op_step *s = next_step(plan);
    if (!s)
        return;
    char a[160], b[160];
    spmd__xtype_format(from, a, sizeof a);
    spmd__xtype_format(to, b, sizeof b);
    snprintf(s->kind, sizeof s->kind, "reshard");
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, s->text, sizeof s->text);
    spmd__strbuf_printf(&sb, "reshard %s -> %s", a, b);
    s->dtype = to->dtype;
    s->bytes_per_device = spmd__reshard_bytes(from, to);
    plan->bytes_per_device += s->bytes_per_device;
}

void spmd__plan_finish(spmd_op_plan *plan, const spmd__xtype *out)
{
    spmd__xtype_format(out, plan->out_type, sizeof plan->out_type);
}

void spmd__plan_steps_text(const spmd_op_plan *plan, char *buf, size_t size)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, buf, size);
    if (!plan->nsteps)
        spmd__strbuf_printf(&sb, "no communication");
    for (int i = 0; i < plan->nsteps; i++)
        spmd__strbuf_printf(&sb, "%s%.*s %lld B", i ? "; " : "", (int)sizeof plan->steps[i].text,
                            plan->steps[i].text, (long long)plan->steps[i].bytes_per_device);
}

/* ---- the public texts ---- */

spmd_status spmd_array_type_format(const spmd_array *x, char *buf, size_t size)
{
    const char *fn = "spmd_array_type_format";
    SPMD_CHECK(spmd__array_check(x, fn, "x"));
    spmd__strbuf sb;
    SPMD_CHECK(spmd__strbuf_start(&sb, buf, size, fn));
    spmd__xtype t;
    char text[512];
    spmd__xtype_of(x, &t);
    spmd__xtype_format(&t, text, sizeof text);
    spmd__strbuf_printf(&sb, "%s", text);
    return spmd__strbuf_finish(&sb, fn);
}

static spmd_status check_plan(const spmd_op_plan *plan, const char *fn)
{
    SPMD_REQUIRE_NOT_NULL(plan, fn);
    SPMD_REQUIRE(plan->nsteps >= 0 && plan->nsteps <= SPMD_OP_PLAN_MAX_STEPS,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: plan->nsteps is %d; a plan filled by an op has 0 .. %d steps", fn,
                 plan->nsteps, SPMD_OP_PLAN_MAX_STEPS);
    return SPMD_OK;
}

spmd_status spmd_op_plan_format(const spmd_op_plan *plan, char *buf, size_t size)
{
    const char *fn = "spmd_op_plan_format";
    SPMD_CHECK(check_plan(plan, fn));
    spmd__strbuf sb;
    SPMD_CHECK(spmd__strbuf_start(&sb, buf, size, fn));
    char steps[SPMD_OP_PLAN_MAX_STEPS * 192];
    spmd__plan_steps_text(plan, steps, sizeof steps);
    spmd__strbuf_printf(&sb, "%.32s -> %.160s: %s", plan->op, plan->out_type, steps);
    return spmd__strbuf_finish(&sb, fn);
}

/* a JSON string of text that holds no control characters (names, types) */
static void json_string(spmd__strbuf *sb, const char *s, size_t max)
{
    spmd__strbuf_printf(sb, "\"");
    for (size_t i = 0; i < max && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            spmd__strbuf_printf(sb, "\\%c", c);
        else if (c < 0x20)
            spmd__strbuf_printf(sb, "\\u%04x", c);
        else
            spmd__strbuf_printf(sb, "%c", c);
    }
    spmd__strbuf_printf(sb, "\"");
}

spmd_status spmd_op_plan_json(const spmd_op_plan *plan, char *buf, size_t size)
{
    const char *fn = "spmd_op_plan_json";
    SPMD_CHECK(check_plan(plan, fn));
    spmd__strbuf sb;
    SPMD_CHECK(spmd__strbuf_start(&sb, buf, size, fn));
    spmd__strbuf_printf(&sb, "{\"op\":");
    json_string(&sb, plan->op, sizeof plan->op);
    spmd__strbuf_printf(&sb, ",\"out_type\":");
    json_string(&sb, plan->out_type, sizeof plan->out_type);
    spmd__strbuf_printf(&sb, ",\"bytes_per_device\":%lld,\"steps\":[",
                        (long long)plan->bytes_per_device);
    for (int i = 0; i < plan->nsteps; i++) {
        const spmd_op_step *s = &plan->steps[i];
        spmd__strbuf_printf(&sb, "%s{\"kind\":", i ? "," : "");
        json_string(&sb, s->kind, sizeof s->kind);
        spmd__strbuf_printf(&sb, ",\"axes\":");
        json_string(&sb, s->axes, sizeof s->axes);
        spmd__strbuf_printf(&sb, ",\"dtype\":\"%s\",\"bytes_per_device\":%lld,\"text\":",
                            spmd_dtype_name(s->dtype), (long long)s->bytes_per_device);
        json_string(&sb, s->text, sizeof s->text);
        spmd__strbuf_printf(&sb, "}");
    }
    spmd__strbuf_printf(&sb, "]}");
    return spmd__strbuf_finish(&sb, fn);
}
