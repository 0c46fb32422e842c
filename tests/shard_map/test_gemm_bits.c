/* spmd_op_gemm gives the same bits whatever the layout and the process binding: every device
 * multiplies the same 192 x 192 float32 matrices (C = A B + C), and process 0 prints one digest
 * of the result after checking that every device of the run got the same one. check_gemm_bits.sh
 * runs it at 1 x 8, 2 x 4 and 4 x 2, bound to cores and not, and compares the digests; each
 * device's result is also compared with a plain triple loop in double (within float32 rounding),
 * so a wrong product cannot pass by being wrong alike everywhere. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>

#define N 192

static float a[N * N], b[N * N], c0[N * N];

static float value(uint64_t i, uint64_t salt)
{
    uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ salt * 0xc2b2ae3d27d4eb4full;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (float)((double)(h >> 40) / (double)(1ull << 24) - 0.5);
}

static uint64_t digest(const float *x, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof *x; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Each device: C = A B + C0 with spmd_op_gemm; out[0] its digest (two 32-bit words). */
static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    spmd_block ab = {a, SPMD_DTYPE_F32, 2, {N, N}}, bb = {b, SPMD_DTYPE_F32, 2, {N, N}}, cb;
    int64_t shape[2] = {N, N};
    spmd_status st = spmd_ctx_alloc(ctx, 2, shape, SPMD_DTYPE_F32, &cb);
    if (st == SPMD_OK) {
        memcpy(cb.data, c0, sizeof c0);
        st = spmd_op_gemm(ctx, 0, 0, 1.0, &ab, &bb, 1.0, &cb);
    }
    if (st != SPMD_OK)
        return st;
    const float *c = cb.data;
    for (int i = 0; i < N; i += 17) /* a sample of rows against the definition */
        for (int j = 0; j < N; j++) {
            double s = c0[i * N + j];
            for (int k = 0; k < N; k++)
                s += (double)a[i * N + k] * b[k * N + j];
            if (fabs(c[i * N + j] - s) > 1e-4 * (1 + fabs(s)))
                return SPMD_ERR_INTERNAL;
        }
    uint64_t d = digest(c, (size_t)N * N);
    uint32_t *o = out[0].data;
    o[0] = (uint32_t)d, o[1] = (uint32_t)(d >> 32);
    return SPMD_OK;
}

int main(void)
{
    for (uint64_t i = 0; i < (uint64_t)N * N; i++)
        a[i] = value(i, 1), b[i] = value(i, 2), c0[i] = value(i, 3);
    if (spmd_init(NULL) != SPMD_OK) {
        fprintf(stderr, "spmd_init: %s\n", spmd_last_error());
        return 1;
    }
    int n = spmd_device_count();
    const char *name = "d";
    spmd_mesh *mesh = NULL;
    spmd_spec *spec = NULL;
    spmd_array *digests = NULL;
    spmd_status st = spmd_mesh_create(1, &n, &name, NULL, 0, &mesh);
    if (st == SPMD_OK)
        st = spmd_spec_parse("'d'", &spec);
    spmd_out_desc desc = {1, {2 * (int64_t)n}, SPMD_DTYPE_I32};
    const spmd_spec *specs[1] = {spec};
    if (st == SPMD_OK)
        st = spmd_shard_map(mesh, body, NULL, 0, NULL, NULL, 1, &desc, specs, NULL, &digests);
    uint32_t *all = malloc(2 * (size_t)n * sizeof *all);
    if (st == SPMD_OK)
        st = spmd_process_allgather(digests, 1, all, 2 * (size_t)n * sizeof *all);
    int rc = st == SPMD_OK ? 0 : 1;
    if (st != SPMD_OK)
        fprintf(stderr, "test_gemm_bits: %s\n", spmd_last_error());
    for (int d = 1; rc == 0 && d < n; d++)
        if (all[2 * d] != all[0] || all[2 * d + 1] != all[1]) {
            fprintf(stderr, "device %d's product differs from device 0's\n", d);
            rc = 1;
        }
    if (rc == 0 && spmd_process_index() == 0)
        printf("gemm digest %08x%08x\n", all[1], all[0]);
    free(all);
    spmd_array_destroy(digests);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
    if (spmd_finalize() != SPMD_OK)
        rc = 1;
    return rc;
}
