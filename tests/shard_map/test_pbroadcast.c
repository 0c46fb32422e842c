/*
 * spmd_pbroadcast (JAX's lax.pbroadcast): every member of a group gets the block of the member
 * at position `source`, over one axis, the other, and both, for every source; checked against
 * a host reference of the same indices. Members that name different sources fail alike; the
 * result varies by type (JAX): out_specs P() refuses it unless the check is off.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { PER = 3, MAX_DEV = 64 };

typedef struct job {
    const char *axes;
    int source;
    int odd_source; /* >= 0: the device at mesh position 0 names this source instead */
} job;

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)nout;
    const job *j = user;
    int flat = 0;
    spmd_status st = spmd_axis_index(ctx, "a,b", &flat);
    if (st != SPMD_OK)
        return st;
    int source = j->odd_source >= 0 && flat == 0 ? j->odd_source : j->source;
    return spmd_pbroadcast(ctx, &in[0], &out[0], j->axes, source);
}

static float value(int flat, int k) { return (float)(flat * 100 + k) + 0.5f; }

/* The mesh position whose block position `flat` receives when broadcasting over `axes` from
 * `source`, on a mesh of shape (na, nb). */
static int source_of(int flat, const char *axes, int source, int nb)
{
    int a = flat / nb, b = flat % nb;
    if (strcmp(axes, "a") == 0)
        return source * nb + b;
    if (strcmp(axes, "b") == 0)
        return a * nb + source;
    return source; /* both: positions over (a, b) are the flat positions */
}

int main(void)
{
    int n = spmd_test_init_devices(MAX_DEV);
    int nb = n % 2 == 0 ? 2 : 1, na = n / nb;
    int shape[2] = {na, nb};
    const char *names[2] = {"a", "b"};
    spmd_mesh *mesh = NULL;
    spmd_spec *split = NULL;
    spmd_sharding *sh = NULL;
    spmd_array *x = NULL;
    assert_ok(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    assert_ok(spmd_spec_parse("('a', 'b')", &split));
    assert_ok(spmd_sharding_create(mesh, split, &sh));
    float host[PER * MAX_DEV], got[PER * MAX_DEV];
    for (int f = 0; f < n; f++)
        for (int k = 0; k < PER; k++)
            host[f * PER + k] = value(f, k);
    const int64_t gshape[1] = {(int64_t)PER * n};
    assert_ok(spmd_device_put(host, 1, gshape, SPMD_DTYPE_F32, sh, &x));
    const spmd_out_desc desc = {1, {(int64_t)PER * n}, SPMD_DTYPE_F32};
    const char *axes_list[3] = {"a", "b", "a,b"};
    int cases = 0;
    for (int t = 0; t < 3; t++) {
        int size = t == 0 ? na : t == 1 ? nb : n;
        for (int s = 0; s < size; s++) {
            job j = {axes_list[t], s, -1};
            spmd_array *y = NULL;
            spmd_status st = spmd_shard_map(mesh, body, &j, 1, &x, (const spmd_spec *[]){split}, 1,
                                            &desc, (const spmd_spec *[]){split}, NULL, &y);
            SPMD_TEST_CHECK(st == SPMD_OK, "pbroadcast over %s from %d: %s", j.axes, s,
                            spmd_last_error());
            if (st == SPMD_OK)
                st = spmd_process_allgather(y, 1, got, sizeof(float) * PER * (size_t)n);
            for (int f = 0; st == SPMD_OK && f < n; f++)
                for (int k = 0; k < PER; k++) {
                    float want = value(source_of(f, j.axes, s, nb), k);
                    SPMD_TEST_CHECK(got[f * PER + k] == want,
                                    "over %s from %d: position %d element %d is %g, want %g",
                                    j.axes, s, f, k, got[f * PER + k], want);
                }
            spmd_array_destroy(y);
            cases++;
        }
    }
    /* As in JAX, the result varies by type: out_specs P() refuses it whatever the values,
     * with the check off it takes one copy */
    spmd_spec *rep = NULL;
    assert_ok(spmd_spec_parse("", &rep));
    const spmd_out_desc one = {1, {PER}, SPMD_DTYPE_F32};
    job all = {"a,b", n - 1, -1};
    spmd_array *y = NULL;
    spmd_status st = spmd_shard_map(mesh, body, &all, 1, &x, (const spmd_spec *[]){split}, 1, &one,
                                    (const spmd_spec *[]){rep}, NULL, &y);
    SPMD_TEST_CHECK(st == SPMD_ERR_SPEC && y == NULL &&
                        strstr(spmd_last_error(), "spmd_pbroadcast over") &&
                        strstr(spmd_last_error(), "by type"),
                    "pbroadcast into P(): %s (%s)", spmd_status_name(st), spmd_last_error());
    spmd_array_destroy(y);
    y = NULL;
    spmd_shard_map_options unchecked = SPMD_SHARD_MAP_OPTIONS_INIT;
    unchecked.check_replication = 0;
    st = spmd_shard_map(mesh, body, &all, 1, &x, (const spmd_spec *[]){split}, 1, &one,
                        (const spmd_spec *[]){rep}, &unchecked, &y);
    SPMD_TEST_CHECK(st == SPMD_OK, "pbroadcast into P(), unchecked: %s", spmd_last_error());
    if (st == SPMD_OK)
        st = spmd_array_shard_to_host(y, 0, got, sizeof(float) * PER);
    for (int k = 0; st == SPMD_OK && k < PER; k++)
        SPMD_TEST_CHECK(got[k] == value(n - 1, k), "P() element %d is %g", k, got[k]);
    spmd_array_destroy(y);
    /* one device names another source: every process fails, none returns wrong data */
    if (n > 1) {
        job odd = {"a,b", 0, 1};
        y = NULL;
        st = spmd_shard_map(mesh, body, &odd, 1, &x, (const spmd_spec *[]){split}, 1, &desc,
                            (const spmd_spec *[]){split}, NULL, &y);
        SPMD_TEST_CHECK(st == SPMD_ERR_COLLECTIVE_MISMATCH && y == NULL,
                        "different sources: %s (%s)", spmd_status_name(st), spmd_last_error());
        spmd_array_destroy(y);
    }
    if (spmd_process_index() == 0)
        printf("pbroadcast: %d cases on a (%d, %d) mesh\n", cases, na, nb);
    spmd_spec_destroy(rep);
    spmd_array_destroy(x);
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(split);
    spmd_mesh_destroy(mesh);
    return spmd_test_finish(spmd_test_failed_checks());
}
