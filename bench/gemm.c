/* bench_gemm: sharded matmul C = A B on the local devices of one process against one library
 * call of the same total shape, measured in the same run.
 *   M-sharded: A P('x', None), B replicated, C P('x', None): each device multiplies its rows.
 *   K-sharded: A P(None, 'x'), B P('x', None): each device multiplies its slice of K, then
 *              psum over 'x' gives the replicated C.
 * Baseline: one cublasGemmEx over the whole shape on GPU 0 (CUDA devices), or one OpenBLAS
 * call (CPU devices). Prints TFLOP/s (2 M N K / median time) and the ratio sharded/baseline;
 * every sharded result is compared with the baseline's (#wrong).
 * Run: SPMD_PLATFORM=cuda SPMD_CUDA_DEVICES_PER_GPU=4 bench_gemm --size 8192 --dtype bf16 */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cblas.h>
#ifdef SPMD_BENCH_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

#include "bench_util.h"

#define PROGRAM "bench_gemm"
#define CHECK(call) BENCH_CHECK(PROGRAM, call)

typedef struct config {
    int64_t m, n, k;
    spmd_dtype dtype;
    int iters, warmup;
    const char *json;
} config;

static void usage(FILE *to)
{
    fprintf(to, "usage: " PROGRAM " [--size S | --m M --n N --k K] [--dtype bf16|f16|f32|f64]\n"
                "                  [--iters I] [--warmup W] [--json FILE]\n"
                "Sharded matmul on every local device (M- and K-sharded) against one\n"
                "cuBLAS (CUDA devices) or OpenBLAS (CPU devices) call of the whole shape.\n");
}

static int parse(int argc, char **argv, config *c)
{
    *c = (config){
        .m = 1024, .n = 1024, .k = 1024, .dtype = SPMD_DTYPE_F32, .iters = 10, .warmup = 2};
    static const struct option opts[] = {
        {"size", 1, 0, 's'},  {"m", 1, 0, 'm'},     {"n", 1, 0, 'n'},      {"k", 1, 0, 'k'},
        {"dtype", 1, 0, 'd'}, {"iters", 1, 0, 'i'}, {"warmup", 1, 0, 'w'}, {"json", 1, 0, 'j'},
        {"help", 0, 0, 'h'},  {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            c->m = c->n = c->k = atoll(optarg);
            break;
        case 'm':
            c->m = atoll(optarg);
            break;
        case 'n':
            c->n = atoll(optarg);
            break;
        case 'k':
            c->k = atoll(optarg);
            break;
        case 'd':
            c->dtype = spmd_dtype_from_name(optarg);
            if (c->dtype != SPMD_DTYPE_F32 && c->dtype != SPMD_DTYPE_F64 &&
                c->dtype != SPMD_DTYPE_F16 && c->dtype != SPMD_DTYPE_BF16) {
                fprintf(stderr, PROGRAM ": --dtype %s: use bf16, f16, f32 or f64\n", optarg);
                return 2;
            }
            break;
        case 'i':
            c->iters = atoi(optarg);
            break;
        case 'w':
            c->warmup = atoi(optarg);
            break;
        case 'j':
            c->json = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return 2;
        }
    }
    if (c->m < 1 || c->n < 1 || c->k < 1 || c->iters < 1 || c->warmup < 0 || optind < argc) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* Uniform values in [-1, 1), rounded to the dtype, stored as the dtype. */
static void *random_matrix(spmd_dtype t, int64_t count, uint64_t seed)
{
    size_t elem = spmd_dtype_size(t);
    char *p = malloc((size_t)count * elem);
    if (!p) {
        fprintf(stderr, PROGRAM ": out of host memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < count; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        float v = (float)((double)(seed >> 40) / (double)(1ull << 23) - 1.0);
        if (t == SPMD_DTYPE_F32)
            ((float *)p)[i] = v;
        else if (t == SPMD_DTYPE_F64)
            ((double *)p)[i] = v;
        else if (t == SPMD_DTYPE_F16)
            ((uint16_t *)p)[i] = spmd_f32_to_f16(v);
        else
            ((uint16_t *)p)[i] = spmd_f32_to_bf16(v);
    }
    return p;
}

static double element(spmd_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        return ((const float *)p)[i];
    case SPMD_DTYPE_F64:
        return ((const double *)p)[i];
    case SPMD_DTYPE_F16:
        return spmd_f16_to_f32(((const uint16_t *)p)[i]);
    default:
        return spmd_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

/* ---- the sharded versions ---- */

static spmd_status m_sharded(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_op_gemm(ctx, 0, 0, 1.0, &in[0], &in[1], 0.0, &out[0]);
}

static spmd_status k_sharded(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_block partial;
    spmd_status st = spmd_ctx_alloc(ctx, out[0].ndim, out[0].shape, out[0].dtype, &partial);
    if (st == SPMD_OK)
        st = spmd_op_gemm(ctx, 0, 0, 1.0, &in[0], &in[1], 0.0, &partial);
    return st == SPMD_OK ? spmd_psum(ctx, &partial, &out[0], "x") : st;
}

typedef struct timing {
    double median_s, tflops;
    int64_t wrong;
} timing;

static double flops(const config *c) { return 2.0 * (double)c->m * (double)c->n * (double)c->k; }

/* Median time of the plan on (a, b), and the elements of C that differ from `reference`. */
static timing run_sharded(const config *c, spmd_mesh *mesh, spmd_fn fn, const char *a_spec,
                          const char *b_spec, const char *c_spec, const void *a_host,
                          const void *b_host, const void *reference)
{
    int64_t ashape[2] = {c->m, c->k}, bshape[2] = {c->k, c->n};
    spmd_sharding *as = NULL, *bs = NULL;
    CHECK(spmd_sharding_create_parse(mesh, a_spec, &as));
    CHECK(spmd_sharding_create_parse(mesh, b_spec, &bs));
    spmd_array *in[2] = {NULL, NULL};
    CHECK(spmd_device_put(a_host, 2, ashape, c->dtype, as, &in[0]));
    CHECK(spmd_device_put(b_host, 2, bshape, c->dtype, bs, &in[1]));
    spmd_spec *specs[3] = {NULL, NULL, NULL};
    CHECK(spmd_spec_parse(a_spec, &specs[0]));
    CHECK(spmd_spec_parse(b_spec, &specs[1]));
    CHECK(spmd_spec_parse(c_spec, &specs[2]));
    spmd_in_desc in_descs[2] = {{.ndim = 2, .shape = {c->m, c->k}, .dtype = c->dtype},
                                {.ndim = 2, .shape = {c->k, c->n}, .dtype = c->dtype}};
    spmd_out_desc out_desc = {.ndim = 2, .shape = {c->m, c->n}, .dtype = c->dtype};
    const spmd_spec *in_specs[2] = {specs[0], specs[1]}, *out_specs[1] = {specs[2]};
    spmd_shard_map_options opts = SPMD_SHARD_MAP_OPTIONS_INIT;
    opts.check_replication = 0; /* psum makes C replicated; checking it would be timed too */
    spmd_plan *plan = NULL;
    CHECK(spmd_plan_create(mesh, fn, NULL, 2, in_descs, in_specs, 1, &out_desc, out_specs, &opts,
                           &plan));
    double *t = malloc((size_t)c->iters * sizeof *t);
    spmd_array *out = NULL;
    for (int i = -c->warmup; i < c->iters; i++) {
        spmd_array_destroy(out);
        out = NULL;
        double t0 = bench_now_s();
        CHECK(spmd_plan_execute(plan, in, &out));
        if (i >= 0)
            t[i] = bench_now_s() - t0;
    }
    timing r = {.median_s = bench_quantile(t, c->iters, 0.5)};
    r.tflops = flops(c) / r.median_s * 1e-12;
    size_t bytes = (size_t)(c->m * c->n) * spmd_dtype_size(c->dtype);
    void *got = malloc(bytes);
    CHECK(spmd_array_to_host(out, got, bytes));
    /* The sums differ in order (and, K-sharded, each device's partial sum is rounded to the
     * dtype before the psum): allow a few roundings of the dtype at the scale of the entries. */
    double eps = c->dtype == SPMD_DTYPE_F64   ? 0x1p-52
                 : c->dtype == SPMD_DTYPE_F32 ? 0x1p-23
                 : c->dtype == SPMD_DTYPE_F16 ? 0x1p-10
                                              : 0x1p-7;
    double rms = 0;
    for (int64_t i = 0; i < c->m * c->n; i++)
        rms += element(c->dtype, reference, i) * element(c->dtype, reference, i);
    rms = sqrt(rms / (double)(c->m * c->n));
    int nd = spmd_mesh_size(mesh);
    double tol =
        eps * (nd + 2) *
        (c->dtype == SPMD_DTYPE_F64 || c->dtype == SPMD_DTYPE_F32 ? sqrt((double)c->k) : 1.0);
    for (int64_t i = 0; i < c->m * c->n; i++) {
        double g = element(c->dtype, got, i), w = element(c->dtype, reference, i);
        r.wrong += !(fabs(g - w) <= tol * (fabs(w) + rms));
    }
    free(got);
    free(t);
    spmd_array_destroy(out);
    spmd_plan_destroy(plan);
    for (int j = 0; j < 3; j++)
        spmd_spec_destroy(specs[j]);
    spmd_array_destroy(in[0]);
    spmd_array_destroy(in[1]);
    spmd_sharding_destroy(as);
    spmd_sharding_destroy(bs);
    return r;
}

/* ---- the baseline: one call over the whole shape ---- */

#ifdef SPMD_BENCH_HAVE_CUDA
#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            fprintf(stderr, PROGRAM ": %s failed\n", #call);                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static timing run_cublas(const config *c, const void *a_host, const void *b_host, void *c_host)
{
    size_t elem = spmd_dtype_size(c->dtype);
    size_t abytes = (size_t)(c->m * c->k) * elem, bbytes = (size_t)(c->k * c->n) * elem,
           cbytes = (size_t)(c->m * c->n) * elem;
    void *a, *b, *cc;
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaMalloc(&a, abytes));
    CUDA_CHECK(cudaMalloc(&b, bbytes));
    CUDA_CHECK(cudaMalloc(&cc, cbytes));
    CUDA_CHECK(cudaMemcpy(a, a_host, abytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b, b_host, bbytes, cudaMemcpyHostToDevice));
    cublasHandle_t h;
    CUDA_CHECK(cublasCreate(&h));
    cudaDataType type = c->dtype == SPMD_DTYPE_F64   ? CUDA_R_64F
                        : c->dtype == SPMD_DTYPE_F32 ? CUDA_R_32F
                        : c->dtype == SPMD_DTYPE_F16 ? CUDA_R_16F
                                                     : CUDA_R_16BF;
    cublasComputeType_t compute =
        c->dtype == SPMD_DTYPE_F64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    double one64 = 1, zero64 = 0;
    float one32 = 1, zero32 = 0;
    const void *one = c->dtype == SPMD_DTYPE_F64 ? (const void *)&one64 : (const void *)&one32;
    const void *zero = c->dtype == SPMD_DTYPE_F64 ? (const void *)&zero64 : (const void *)&zero32;
    double *t = malloc((size_t)c->iters * sizeof *t);
    for (int i = -c->warmup; i < c->iters; i++) {
        double t0 = bench_now_s();
        /* row-major C = A B as column-major C^T = B^T A^T */
        CUDA_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)c->n, (int)c->m, (int)c->k, one,
                                b, type, (int)c->n, a, type, (int)c->k, zero, cc, type, (int)c->n,
                                compute, CUBLAS_GEMM_DEFAULT));
        CUDA_CHECK(cudaDeviceSynchronize());
        if (i >= 0)
            t[i] = bench_now_s() - t0;
    }
    CUDA_CHECK(cudaMemcpy(c_host, cc, cbytes, cudaMemcpyDeviceToHost));
    timing r = {.median_s = bench_quantile(t, c->iters, 0.5)};
    r.tflops = flops(c) / r.median_s * 1e-12;
    free(t);
    cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(cc);
    return r;
}
#endif

static timing run_openblas(const config *c, const void *a_host, const void *b_host, void *c_host)
{
    double *t = malloc((size_t)c->iters * sizeof *t);
    int m = (int)c->m, n = (int)c->n, k = (int)c->k;
    for (int i = -c->warmup; i < c->iters; i++) {
        double t0 = bench_now_s();
        if (c->dtype == SPMD_DTYPE_F64)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a_host, k, b_host, n,
                        0, c_host, n);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a_host, k, b_host, n,
                        0, c_host, n);
        if (i >= 0)
            t[i] = bench_now_s() - t0;
    }
    timing r = {.median_s = bench_quantile(t, c->iters, 0.5)};
    r.tflops = flops(c) / r.median_s * 1e-12;
    free(t);
    return r;
}

int main(int argc, char **argv)
{
    config c;
    int rc = parse(argc, argv, &c);
    if (rc)
        return rc;
    CHECK(spmd_init(NULL));
    int nd = spmd_local_device_count();
    spmd_device_info info;
    CHECK(spmd_device_get_info(spmd_local_device_id(0), &info));
    int cuda = info.platform == SPMD_PLATFORM_CUDA;
    if (!cuda && c.dtype != SPMD_DTYPE_F32 && c.dtype != SPMD_DTYPE_F64) {
        fprintf(stderr, PROGRAM ": on CPU devices the OpenBLAS baseline takes f32 or f64 only\n");
        return 2;
    }
    if (c.m % nd || c.k % nd) {
        fprintf(stderr, PROGRAM ": M (%lld) and K (%lld) must divide by the %d devices\n",
                (long long)c.m, (long long)c.k, nd);
        return 2;
    }
    void *a = random_matrix(c.dtype, c.m * c.k, 1), *b = random_matrix(c.dtype, c.k * c.n, 2);
    void *reference = malloc((size_t)(c.m * c.n) * spmd_dtype_size(c.dtype));
    timing base;
#ifdef SPMD_BENCH_HAVE_CUDA
    base = cuda ? run_cublas(&c, a, b, reference) : run_openblas(&c, a, b, reference);
#else
    base = run_openblas(&c, a, b, reference);
#endif
    int ids[1024];
    for (int d = 0; d < nd && d < 1024; d++)
        ids[d] = spmd_local_device_id(d);
    const char *axis = "x";
    spmd_mesh *mesh = NULL;
    CHECK(spmd_mesh_create(1, &nd, &axis, ids, nd, &mesh));
    timing ms = run_sharded(&c, mesh, m_sharded, "'x', None", "", "'x', None", a, b, reference);
    timing ks = run_sharded(&c, mesh, k_sharded, "None, 'x'", "'x', None", "", a, b, reference);
    const char *lib = cuda ? "cuBLAS" : "OpenBLAS";
    printf("# %s: %lld x %lld x %lld %s on %d %s devices; baseline: one %s call\n", PROGRAM,
           (long long)c.m, (long long)c.n, (long long)c.k, spmd_dtype_name(c.dtype), nd,
           spmd_platform_name(info.platform), lib);
    printf("%-12s %12s %10s %10s %8s\n", "variant", "time_ms", "TFLOP/s", "vs_base", "#wrong");
    printf("%-12s %12.3f %10.2f %10s %8s\n", lib, base.median_s * 1e3, base.tflops, "1.00", "-");
    printf("%-12s %12.3f %10.2f %10.2f %8lld\n", "M-sharded", ms.median_s * 1e3, ms.tflops,
           ms.tflops / base.tflops, (long long)ms.wrong);
    printf("%-12s %12.3f %10.2f %10.2f %8lld\n", "K-sharded", ks.median_s * 1e3, ks.tflops,
           ks.tflops / base.tflops, (long long)ks.wrong);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "m", (double)c.m);
    cJSON_AddNumberToObject(root, "n", (double)c.n);
    cJSON_AddNumberToObject(root, "k", (double)c.k);
    cJSON_AddStringToObject(root, "dtype", spmd_dtype_name(c.dtype));
    cJSON_AddNumberToObject(root, "devices", nd);
    cJSON_AddStringToObject(root, "baseline", lib);
    cJSON_AddNumberToObject(root, "baseline_tflops", base.tflops);
    cJSON_AddNumberToObject(root, "m_sharded_tflops", ms.tflops);
    cJSON_AddNumberToObject(root, "k_sharded_tflops", ks.tflops);
    cJSON_AddNumberToObject(root, "wrong", (double)(ms.wrong + ks.wrong));
    bench_write_json(root, c.json);
    cJSON_Delete(root);
    spmd_mesh_destroy(mesh);
    free(a);
    free(b);
    free(reference);
    CHECK(spmd_finalize());
    return ms.wrong || ks.wrong ? 1 : 0;
}
