/* Device meshes: validation, coordinates, and the per-process subcube rule. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "runtime/base/check.h"
#include "runtime/base/session.h"
#include "sharding/mesh_impl.h"
#include "sharding/spec_impl.h"

spmd_status spmd__mesh_check_math(const spmd_mesh *mesh, const char *fn, const char *arg)
{
    SPMD_CHECK(spmd__mesh_check(mesh, fn, arg));
    return mesh->abstract ? SPMD_OK : spmd__mesh_check_current(mesh, fn, arg);
}

spmd_status spmd__mesh_check(const spmd_mesh *mesh, const char *fn, const char *arg)
{
    SPMD_REQUIRE(mesh != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, arg);
    SPMD_REQUIRE(mesh->magic == SPMD__MAGIC_MESH, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument '%s' is not a live spmd_mesh (destroyed, or another type)", fn, arg);
    return SPMD_OK;
}

spmd_status spmd__mesh_refuse_abstract(const spmd_mesh *mesh, const char *fn, const char *arg)
{
    SPMD_REQUIRE(!mesh->abstract, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument '%s' is on an abstract mesh (spmd_mesh_create_abstract), which "
                 "has no devices: it serves the sharding math only; for arrays, shard_map and "
                 "resharding create the mesh with spmd_mesh_create after spmd_init",
                 fn, arg);
    return SPMD_OK;
}

spmd_status spmd__mesh_check_current(const spmd_mesh *mesh, const char *fn, const char *arg)
{
    SPMD_CHECK(spmd__mesh_check(mesh, fn, arg));
    SPMD_CHECK(spmd__mesh_refuse_abstract(mesh, fn, arg));
    SPMD_REQUIRE(spmd__runtime_get_session(fn, mesh->session) != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument '%s' is a mesh made before the last spmd_finalize (or libspmd is "
                 "not initialized); objects do not outlive the runtime that made them: create "
                 "the mesh again after spmd_init",
                 fn, arg);
    return SPMD_OK;
}

static int valid(const spmd_mesh *m) { return m && m->magic == SPMD__MAGIC_MESH; }

spmd__attachment *spmd__mesh_attach(spmd_mesh *mesh, spmd__attachment *a)
{
    spmd__attachment *kept = NULL;
    return atomic_compare_exchange_strong(&mesh->attachment, &kept, a) ? a : kept;
}

void spmd__mesh_coords(const spmd_mesh *mesh, int flat, int *coords)
{
    for (int a = 0; a < mesh->ndim; a++)
        coords[a] = flat / mesh->strides[a] % mesh->shape[a];
}

static void mesh_free(spmd_mesh *m)
{
    m->magic = SPMD__MAGIC_DEAD;
    spmd__attachment *a = atomic_load(&m->attachment);
    if (a)
        a->destroy(a);
    free(m->device_ids);
    free(m->process_of);
    free(m->processes);
    free(m->position_of);
    free(m->local_ids);
    free(m);
}

static spmd_status check_shape_and_names(int ndim, const int *shape, const char *const *names,
                                         int *size)
{
    SPMD_REQUIRE(ndim >= 0 && ndim <= SPMD_MAX_MESH_AXES, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_mesh_create: ndim is %d; a mesh has 0 to %d axes (SPMD_MAX_MESH_AXES)", ndim,
                 SPMD_MAX_MESH_AXES);
    SPMD_REQUIRE(ndim == 0 || shape != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_mesh_create: argument 'shape' is NULL but ndim is %d", ndim);
    SPMD_REQUIRE(ndim == 0 || names != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_mesh_create: argument 'axis_names' is NULL but ndim is %d", ndim);
    long long product = 1;
    for (int a = 0; a < ndim; a++) {
        char what[64];
        snprintf(what, sizeof what, "spmd_mesh_create: axis %d", a);
        spmd_status st = spmd__check_axis_name(names[a], what);
        if (st != SPMD_OK)
            return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT, "%s", spmd_last_error());
        for (int b = 0; b < a; b++)
            SPMD_REQUIRE(strcmp(names[a], names[b]) != 0, SPMD_ERR_INVALID_ARGUMENT,
                         "spmd_mesh_create: axes %d and %d are both named '%s'; mesh axis names "
                         "must be distinct",
                         b, a, names[a]);
        SPMD_REQUIRE(shape[a] >= 1, SPMD_ERR_INVALID_ARGUMENT,
                     "spmd_mesh_create: axis '%s' has size %d; every mesh axis needs size >= 1",
                     names[a], shape[a]);
        product *= shape[a];
        SPMD_REQUIRE(product <= (1 << 24), SPMD_ERR_INVALID_ARGUMENT,
                     "spmd_mesh_create: the mesh shape multiplies to more than %d devices",
                     1 << 24);
    }
    *size = (int)product;
    return SPMD_OK;
}

/* Lays the ids over the mesh; rt NULL: an abstract mesh, whose ids lie below num_global and
 * all count as process 0's. */
static spmd_status place_devices(spmd_mesh *m, const spmd__runtime *rt, const int *ids, int n)
{
    const char *fn = rt ? "spmd_mesh_create" : "spmd_mesh_create_abstract";
    if (!ids) {
        SPMD_REQUIRE(!rt || m->size == rt->num_devices, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: the mesh shape holds %d devices but device_ids is NULL, which means all "
                     "%d devices; change the shape or pass device_ids",
                     fn, m->size, rt ? rt->num_devices : 0);
    } else {
        SPMD_REQUIRE(n == m->size, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: the mesh shape holds %d devices but %d device ids were given; the "
                     "product of the axis sizes must equal num_device_ids",
                     fn, m->size, n);
    }
    for (int f = 0; f < m->size; f++) {
        int id = ids ? ids[f] : f;
        if (rt)
            SPMD_REQUIRE(id >= 0 && id < rt->num_devices, SPMD_ERR_INVALID_ARGUMENT,
                         "%s: device_ids[%d] = %d is not a device; this run has devices 0..%d "
                         "(spmd_device_count() = %d)",
                         fn, f, id, rt->num_devices - 1, rt->num_devices);
        else
            SPMD_REQUIRE(id >= 0 && id < m->num_global, SPMD_ERR_INVALID_ARGUMENT,
                         "%s: device_ids[%d] = %d; abstract device ids lie in 0..%d", fn, f, id,
                         m->num_global - 1);
        SPMD_REQUIRE(m->position_of[id] < 0, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: device %d appears twice in device_ids (positions %d and %d); a mesh "
                     "holds each device once",
                     fn, id, m->position_of[id], f);
        m->device_ids[f] = id;
        m->position_of[id] = f;
        m->process_of[f] = rt ? rt->devices[id].process_index : 0;
        if (rt && m->process_of[f] == rt->process_index)
            m->local_ids[m->num_local++] = id;
    }
    return SPMD_OK;
}

/* The processes that own its devices, ascending: whom its collective calls involve. */
static spmd_status list_processes(spmd_mesh *m, int process_count)
{
    char *member = calloc((size_t)process_count, 1);
    m->processes = malloc((size_t)process_count * sizeof(int));
    if (!member || !m->processes) {
        free(member);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_mesh_create: out of memory");
    }
    for (int f = 0; f < m->size; f++)
        member[m->process_of[f]] = 1;
    for (int q = 0; q < process_count; q++)
        if (member[q])
            m->processes[m->num_processes++] = q;
    free(member);
    return SPMD_OK;
}

/* The subcube rule of jax.sharding.Mesh.local_mesh, checked for every process: the bounding
 * box (per-axis coordinate range) of a process's devices must hold only that process's. */
static void compute_contiguity(spmd_mesh *m, int process_count, int me)
{
    int lo[SPMD_MAX_MESH_AXES], hi[SPMD_MAX_MESH_AXES], c[SPMD_MAX_MESH_AXES];
    m->contiguous = 1;
    for (int p = 0; p < process_count; p++) {
        int any = 0;
        for (int f = 0; f < m->size; f++) {
            if (m->process_of[f] != p)
                continue;
            spmd__mesh_coords(m, f, c);
            for (int a = 0; a < m->ndim; a++) {
                lo[a] = any && lo[a] < c[a] ? lo[a] : c[a];
                hi[a] = any && hi[a] > c[a] ? hi[a] : c[a];
            }
            any = 1;
        }
        if (!any)
            continue;
        for (int f = 0; f < m->size; f++) {
            spmd__mesh_coords(m, f, c);
            int inside = 1;
            for (int a = 0; a < m->ndim; a++)
                inside &= c[a] >= lo[a] && c[a] <= hi[a];
            if (inside && m->process_of[f] != p) {
                m->contiguous = 0;
                snprintf(m->why_not_contiguous, sizeof m->why_not_contiguous,
                         "the devices of process %d do not form a contiguous subcube of the mesh: "
                         "device %d (process %d) lies inside the box spanned by process %d's "
                         "devices",
                         p, m->device_ids[f], m->process_of[f], p);
                return;
            }
        }
        if (p == me)
            for (int a = 0; a < m->ndim; a++) {
                m->local_origin[a] = lo[a];
                m->local_shape[a] = hi[a] - lo[a] + 1;
            }
    }
}

/* A mesh over the runtime's devices, or (rt NULL) an abstract one of `num_global` ids. */
static spmd_status mesh_build(const spmd__runtime *rt, int num_global, int ndim, const int *shape,
                              const char *const *axis_names, const int *device_ids,
                              int num_device_ids, int size, spmd_mesh **out)
{
    spmd_mesh *m = calloc(1, sizeof *m);
    SPMD_REQUIRE(m != NULL, SPMD_ERR_OUT_OF_MEMORY, "spmd_mesh_create: out of memory");
    m->magic = SPMD__MAGIC_MESH;
    atomic_init(&m->refs, 1);
    atomic_init(&m->attachment, NULL);
    m->ndim = ndim;
    m->size = size;
    for (int a = ndim - 1, stride = 1; a >= 0; a--) {
        m->shape[a] = shape[a];
        m->strides[a] = stride;
        stride *= shape[a];
        snprintf(m->names[a], sizeof m->names[a], "%s", axis_names[a]);
    }
    m->abstract = rt == NULL;
    m->num_global = rt ? rt->num_devices : num_global;
    m->session = rt ? rt->session : 0;
    m->device_ids = malloc((size_t)size * sizeof(int));
    m->process_of = malloc((size_t)size * sizeof(int));
    m->local_ids = malloc((size_t)size * sizeof(int));
    m->position_of = malloc((size_t)m->num_global * sizeof(int));
    if (!m->device_ids || !m->process_of || !m->local_ids || !m->position_of) {
        mesh_free(m);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_mesh_create: out of memory");
    }
    for (int i = 0; i < m->num_global; i++)
        m->position_of[i] = -1;
    spmd_status st = place_devices(m, rt, device_ids, num_device_ids);
    if (st == SPMD_OK)
        st = list_processes(m, rt ? rt->process_count : 1);
    if (st != SPMD_OK) {
        mesh_free(m);
        return st;
    }
    compute_contiguity(m, rt ? rt->process_count : 1, rt ? rt->process_index : -1);
    *out = m;
    return SPMD_OK;
}

spmd_status spmd_mesh_create(int ndim, const int *shape, const char *const *axis_names,
                             const int *device_ids, int num_device_ids, spmd_mesh **out)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_mesh_create");
    *out = NULL;
    const spmd__runtime *rt = spmd__runtime_get("spmd_mesh_create");
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    int size = 0;
    SPMD_CHECK(check_shape_and_names(ndim, shape, axis_names, &size));
    SPMD_REQUIRE(ndim > 0 || device_ids != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_mesh_create: a mesh with no axes holds exactly one device; pass it in "
                 "device_ids");
    return mesh_build(rt, 0, ndim, shape, axis_names, device_ids, num_device_ids, size, out);
}

/* Abstract device ids stay below this, so that a mesh's id-to-position table stays small. */
#define MAX_ABSTRACT_ID (1 << 24)

spmd_status spmd_mesh_create_abstract(int ndim, const int *shape, const char *const *axis_names,
                                      const int *device_ids, int num_device_ids, spmd_mesh **out)
{
    const char *fn = "spmd_mesh_create_abstract";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    int size = 0;
    spmd_status st = check_shape_and_names(ndim, shape, axis_names, &size);
    if (st != SPMD_OK) /* its messages name spmd_mesh_create */
        return SPMD_ERROR(st, "%s: %s", fn, spmd_last_error());
    SPMD_REQUIRE(ndim > 0 || device_ids != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: a mesh with no axes holds exactly one device; pass it in device_ids", fn);
    int num_global = size;
    if (device_ids) {
        SPMD_REQUIRE(num_device_ids == size, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: the mesh shape holds %d devices but %d device ids were given; the "
                     "product of the axis sizes must equal num_device_ids",
                     fn, size, num_device_ids);
        for (int f = 0; f < size; f++) {
            SPMD_REQUIRE(device_ids[f] >= 0 && device_ids[f] < MAX_ABSTRACT_ID,
                         SPMD_ERR_INVALID_ARGUMENT,
                         "%s: device_ids[%d] = %d; abstract device ids lie in 0..%d", fn, f,
                         device_ids[f], MAX_ABSTRACT_ID - 1);
            num_global = device_ids[f] >= num_global ? device_ids[f] + 1 : num_global;
        }
    }
    return mesh_build(NULL, num_global, ndim, shape, axis_names, device_ids, num_device_ids, size,
                      out);
}

int spmd_mesh_is_abstract(const spmd_mesh *mesh) { return valid(mesh) && mesh->abstract; }

/* ---- mesh_utils.create_hybrid_device_mesh ---- */

/* "(1, 2)" for a shape given as ints. */
static void format_shape(char *buf, size_t size, const int *shape, int ndim)
{
    int64_t wide[SPMD_MAX_MESH_AXES];
    for (int a = 0; a < ndim; a++)
        wide[a] = shape[a];
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, buf, size);
    spmd__strbuf_shape(&sb, wide, ndim);
}

/* Checks one of the two shapes; *product gets the product of its sizes. */
static spmd_status check_hybrid_shape(const int *shape, int ndim, const char *arg,
                                      long long *product)
{
    const char *fn = "spmd_mesh_create_hybrid";
    SPMD_REQUIRE(shape != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, arg);
    *product = 1;
    for (int a = 0; a < ndim; a++) {
        SPMD_REQUIRE(shape[a] >= 1, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: %s[%d] is %d; every size must be >= 1", fn, arg, a, shape[a]);
        *product *= shape[a];
        SPMD_REQUIRE(*product <= (1 << 24), SPMD_ERR_INVALID_ARGUMENT,
                     "%s: %s multiplies to more than %d devices", fn, arg, 1 << 24);
    }
    return SPMD_OK;
}

spmd_status spmd_mesh_create_hybrid(int ndim, const int *per_process_shape,
                                    const int *across_process_shape, const char *const *axis_names,
                                    spmd_mesh **out)
{
    const char *fn = "spmd_mesh_create_hybrid";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    SPMD_REQUIRE(ndim >= 1 && ndim <= SPMD_MAX_MESH_AXES, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: ndim is %d; a hybrid mesh has 1 to %d axes (SPMD_MAX_MESH_AXES)", fn, ndim,
                 SPMD_MAX_MESH_AXES);
    SPMD_REQUIRE(axis_names != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument 'axis_names' is NULL",
                 fn);
    long long per = 0, across = 0;
    SPMD_CHECK(check_hybrid_shape(per_process_shape, ndim, "per_process_shape", &per));
    SPMD_CHECK(check_hybrid_shape(across_process_shape, ndim, "across_process_shape", &across));
    char per_text[128], across_text[128];
    format_shape(per_text, sizeof per_text, per_process_shape, ndim);
    format_shape(across_text, sizeof across_text, across_process_shape, ndim);
    /* Every process must have as many devices as one block holds (the runtime knows them all). */
    int *count = calloc((size_t)rt->process_count, sizeof *count);
    SPMD_REQUIRE(count != NULL, SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    for (int id = 0; id < rt->num_devices; id++)
        count[rt->devices[id].process_index]++;
    spmd_status st = SPMD_OK;
    for (int p = 1; p < rt->process_count && st == SPMD_OK; p++)
        if (count[p] != count[0])
            st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                            "%s: process %d has %d devices but process 0 has %d; a hybrid mesh "
                            "needs the same number of devices on every process (build the mesh "
                            "with spmd_mesh_create and explicit device_ids instead)",
                            fn, p, count[p], count[0]);
    if (st == SPMD_OK && count[0] != per)
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "%s: Number of devices %d (on each process) must equal the product of "
                        "mesh_shape: per_process_shape %s holds %lld; it lays out each process's "
                        "devices, and across_process_shape %s the %d processes",
                        fn, count[0], per_text, per, across_text, rt->process_count);
    free(count);
    SPMD_CHECK(st);
    SPMD_REQUIRE(across == rt->process_count, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: Number of slices %d (processes) must equal the product of dcn_mesh_shape: "
                 "across_process_shape %s holds %lld; it lays out the processes, and "
                 "per_process_shape %s each process's %lld devices",
                 fn, rt->process_count, across_text, across, per_text, per);

    /* Global coordinate c = q * per + r: q (row-major in across_process_shape) picks the
     * process, r (row-major in per_process_shape) its local device, in ascending id order. */
    int shape[SPMD_MAX_MESH_AXES], n = (int)(per * across);
    int *by_process = malloc((size_t)n * sizeof *by_process),
        *ids = malloc((size_t)n * sizeof *ids);
    int *filled = calloc((size_t)rt->process_count, sizeof *filled);
    if (!by_process || !ids || !filled) {
        free(by_process);
        free(ids);
        free(filled);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    for (int id = 0; id < rt->num_devices; id++) {
        int p = rt->devices[id].process_index;
        by_process[p * per + filled[p]++] = id;
    }
    for (int a = 0; a < ndim; a++)
        shape[a] = per_process_shape[a] * across_process_shape[a];
    for (int f = 0; f < n; f++) {
        int process = 0, local = 0;
        for (int a = 0, rest = f, stride = n; a < ndim; a++) {
            stride /= shape[a];
            int c = rest / stride;
            rest %= stride;
            process = process * across_process_shape[a] + c / per_process_shape[a];
            local = local * per_process_shape[a] + c % per_process_shape[a];
        }
        ids[f] = by_process[process * per + local];
    }
    st = spmd__error_in(spmd_mesh_create(ndim, shape, axis_names, ids, n, out), fn);
    free(by_process);
    free(ids);
    free(filled);
    return st;
}

spmd_mesh *spmd_mesh_retain(spmd_mesh *mesh)
{
    if (valid(mesh))
        atomic_fetch_add(&mesh->refs, 1);
    return mesh;
}

void spmd_mesh_destroy(spmd_mesh *mesh)
{
    if (valid(mesh) && atomic_fetch_sub(&mesh->refs, 1) == 1)
        mesh_free(mesh);
}

int spmd_mesh_ndim(const spmd_mesh *mesh) { return valid(mesh) ? mesh->ndim : -1; }
int spmd_mesh_size(const spmd_mesh *mesh) { return valid(mesh) ? mesh->size : 0; }

int spmd_mesh_is_current(const spmd_mesh *mesh)
{
    if (!valid(mesh) || !spmd_is_initialized())
        return 0;
    const spmd__runtime *rt = spmd__runtime_get("spmd_mesh_is_current");
    return rt && rt->session == mesh->session;
}

int spmd_mesh_axis_size(const spmd_mesh *mesh, int axis)
{
    return valid(mesh) && axis >= 0 && axis < mesh->ndim ? mesh->shape[axis] : -1;
}

const char *spmd_mesh_axis_name(const spmd_mesh *mesh, int axis)
{
    return valid(mesh) && axis >= 0 && axis < mesh->ndim ? mesh->names[axis] : NULL;
}

int spmd_mesh_axis_index(const spmd_mesh *mesh, const char *name)
{
    if (!valid(mesh) || !name)
        return -1;
    for (int a = 0; a < mesh->ndim; a++)
        if (strcmp(mesh->names[a], name) == 0)
            return a;
    return -1;
}

int spmd_mesh_device_id(const spmd_mesh *mesh, int flat)
{
    return valid(mesh) && flat >= 0 && flat < mesh->size ? mesh->device_ids[flat] : -1;
}

int spmd_mesh_device_position(const spmd_mesh *mesh, int device_id)
{
    if (!valid(mesh) || device_id < 0 || device_id >= mesh->num_global)
        return -1;
    return mesh->position_of[device_id];
}

spmd_status spmd_mesh_device_coords(const spmd_mesh *mesh, int device_id, int *coords)
{
    SPMD_CHECK(spmd__mesh_check(mesh, "spmd_mesh_device_coords", "mesh"));
    SPMD_REQUIRE(mesh->ndim == 0 || coords != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_mesh_device_coords: argument 'coords' is NULL");
    int f = spmd_mesh_device_position(mesh, device_id);
    SPMD_REQUIRE(f >= 0, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_mesh_device_coords: device %d is not in this mesh", device_id);
    spmd__mesh_coords(mesh, f, coords);
    return SPMD_OK;
}

int spmd_mesh_num_local_devices(const spmd_mesh *mesh) { return valid(mesh) ? mesh->num_local : 0; }

int spmd_mesh_local_device_id(const spmd_mesh *mesh, int i)
{
    return valid(mesh) && i >= 0 && i < mesh->num_local ? mesh->local_ids[i] : -1;
}

int spmd_mesh_has_process(const spmd_mesh *mesh, int process)
{
    if (!valid(mesh))
        return 0;
    for (int f = 0; f < mesh->size; f++)
        if (mesh->process_of[f] == process)
            return 1;
    return 0;
}

int spmd_mesh_is_contiguous(const spmd_mesh *mesh) { return valid(mesh) && mesh->contiguous; }

spmd_status spmd_mesh_check_contiguous(const spmd_mesh *mesh)
{
    SPMD_CHECK(spmd__mesh_check(mesh, "spmd_mesh_check_contiguous", "mesh"));
    SPMD_REQUIRE(mesh->contiguous, SPMD_ERR_INVALID_ARGUMENT,
                 "%s; host-local conversions need each process's devices to form a subcube: order "
                 "device_ids process by process, or build the array with "
                 "spmd_array_from_single_device_arrays",
                 mesh->why_not_contiguous);
    return SPMD_OK;
}

spmd_status spmd_mesh_local_shape(const spmd_mesh *mesh, int *shape)
{
    SPMD_CHECK(spmd__mesh_check(mesh, "spmd_mesh_local_shape", "mesh"));
    SPMD_CHECK(spmd_mesh_check_contiguous(mesh));
    SPMD_REQUIRE(mesh->ndim == 0 || shape != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_mesh_local_shape: argument 'shape' is NULL");
    SPMD_REQUIRE(mesh->num_local > 0, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_mesh_local_shape: this process owns no device of the mesh, so it has no "
                 "local mesh");
    for (int a = 0; a < mesh->ndim; a++)
        shape[a] = mesh->local_shape[a];
    return SPMD_OK;
}

int spmd_mesh_equal(const spmd_mesh *a, const spmd_mesh *b)
{
    if (!valid(a) || !valid(b))
        return 0;
    if (a == b)
        return 1;
    if (a->ndim != b->ndim || a->size != b->size)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i] || strcmp(a->names[i], b->names[i]) != 0)
            return 0;
    return memcmp(a->device_ids, b->device_ids, (size_t)a->size * sizeof(int)) == 0;
}

spmd_status spmd_mesh_format(const spmd_mesh *mesh, char *buf, size_t size)
{
    SPMD_CHECK(spmd__mesh_check(mesh, "spmd_mesh_format", "mesh"));
    spmd__strbuf sb;
    SPMD_CHECK(spmd__strbuf_start(&sb, buf, size, "spmd_mesh_format"));
    spmd__strbuf_printf(&sb, "Mesh(");
    for (int a = 0; a < mesh->ndim; a++)
        spmd__strbuf_printf(&sb, "%s'%s': %d", a ? ", " : "", mesh->names[a], mesh->shape[a]);
    /* JAX's str(Mesh): every axis of a jax.sharding.Mesh is Auto by default, and a one-axis
     * tuple keeps Python's trailing comma */
    if (mesh->ndim > 0) /* JAX: an empty mesh is "Mesh()" */
        spmd__strbuf_printf(&sb, ", axis_types=(");
    for (int a = 0; a < mesh->ndim; a++)
        spmd__strbuf_printf(&sb, a ? ", Auto" : "Auto");
    spmd__strbuf_printf(&sb, mesh->ndim == 0 ? ")" : mesh->ndim == 1 ? ",))" : "))");
    return spmd__strbuf_finish(&sb, "spmd_mesh_format");
}
