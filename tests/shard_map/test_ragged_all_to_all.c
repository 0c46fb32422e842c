/*
 * spmd_ragged_all_to_all (JAX's lax.ragged_all_to_all): every member sends slices of different
 * lengths (empty ones too, overlapping ones from the same operand) to every other, each landing
 * at the offset its receiver's layout gives it; rank-2 f32 rows with int32 counts into a
 * separate out, and rank-1 int64 rows with int64 counts in place. Every output element is
 * checked against a reference loop, rows nobody writes keep the output's values. Refusals: a
 * recv_sizes that differs from its sender's send_sizes and a slice outside the operand fail the
 * call on every process.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { MAX_DEV = 64, ROWS = 5, COLS = 3 };

typedef enum { CHECK, MISMATCH, OUTSIDE } mode;

/* rows member h sends to member j, and from where in h's operand */
static int64_t size_of(int h, int j) { return (h + 2 * j + 1) % 4; }
static int64_t in_offset(int h, int j) { return (h * 3 + j) % (ROWS - size_of(h, j) + 1); }
/* where h's rows land in j's output: after those of the members before h, past row 0 */
static int64_t out_offset(int h, int j)
{
    int64_t at = 1;
    for (int k = 0; k < h; k++)
        at += size_of(k, j);
    return at;
}
static int64_t out_rows(int n) { return 3 * (int64_t)n + 2; }
static double operand_value(int h, int64_t r, int c) { return h * 1000 + (double)r * 10 + c; }
static double output_value(int p, int64_t r, int c) { return -(p * 1000 + (double)r * 10 + c) - 1; }

/* The reference: member p's out at row r, column c. */
static double want(int p, int n, int64_t r, int c)
{
    for (int h = 0; h < n; h++) {
        int64_t at = out_offset(h, p);
        if (r >= at && r < at + size_of(h, p))
            return operand_value(h, in_offset(h, p) + (r - at), c);
    }
    return output_value(p, r, c);
}

#define TRY SPMD_TEST_TRY

/* One exchange: wide (rank 2, f32, int32 counts, separate out) or narrow (rank 1, int64, int64
 * counts, in place). *ok keeps whether out matched the reference. */
static spmd_status exchange(spmd_ctx *ctx, int p, int n, int wide, mode m, int *ok)
{
    spmd_dtype t = wide ? SPMD_DTYPE_F32 : SPMD_DTYPE_I64;
    spmd_dtype ct = wide ? SPMD_DTYPE_I32 : SPMD_DTYPE_I64;
    int cols = wide ? COLS : 1;
    int64_t in_shape[2] = {ROWS, COLS}, o_shape[2] = {out_rows(n), COLS}, c_shape[1] = {n};
    spmd_block operand, output, out, counts[4];
    TRY(spmd_ctx_alloc(ctx, wide ? 2 : 1, in_shape, t, &operand));
    TRY(spmd_ctx_alloc(ctx, wide ? 2 : 1, o_shape, t, &output));
    if (wide)
        TRY(spmd_ctx_alloc(ctx, 2, o_shape, t, &out));
    else
        out = output;
    for (int k = 0; k < 4; k++)
        TRY(spmd_ctx_alloc(ctx, 1, c_shape, ct, &counts[k]));
    for (int64_t r = 0; r < ROWS; r++)
        for (int c = 0; c < cols; c++) {
            double v = operand_value(p, r, c);
            if (wide)
                ((float *)operand.data)[r * cols + c] = (float)v;
            else
                ((int64_t *)operand.data)[r] = (int64_t)v;
        }
    for (int64_t r = 0; r < out_rows(n); r++)
        for (int c = 0; c < cols; c++) {
            double v = output_value(p, r, c);
            if (wide) {
                ((float *)output.data)[r * cols + c] = (float)v;
                ((float *)out.data)[r * cols + c] = 12345.0f; /* to be overwritten */
            } else {
                ((int64_t *)output.data)[r] = (int64_t)v;
            }
        }
    for (int j = 0; j < n; j++) {
        int64_t v[4] = {in_offset(p, j), size_of(p, j), out_offset(p, j), size_of(j, p)};
        if (m == MISMATCH && p == n - 1 && j == 0)
            v[3] += 1; /* expects one row more than member 0 sends */
        if (m == OUTSIDE && p == n - 1 && j == 0)
            v[0] = ROWS + 1; /* a slice past the operand's end, even an empty one */
        for (int k = 0; k < 4; k++) {
            if (wide)
                ((int32_t *)counts[k].data)[j] = (int32_t)v[k];
            else
                ((int64_t *)counts[k].data)[j] = v[k];
        }
    }
    TRY(spmd_ragged_all_to_all(ctx, &operand, &output, &counts[0], &counts[1], &counts[2],
                               &counts[3], &out, "i"));
    for (int64_t r = 0; r < out_rows(n); r++)
        for (int c = 0; c < cols; c++) {
            double got = wide ? ((const float *)out.data)[r * cols + c]
                              : (double)((const int64_t *)out.data)[r];
            if (got != want(p, n, r, c)) {
                if (*ok)
                    printf("member %d (%s): row %lld column %d is %g, want %g\n", p,
                           wide ? "wide" : "narrow", (long long)r, c, got, want(p, n, r, c));
                *ok = 0;
            }
            if (!wide) /* in place: output is out */
                continue;
            if (((const float *)output.data)[r * cols + c] != (float)output_value(p, r, c))
                *ok = 0; /* output itself is left alone */
        }
    return SPMD_OK;
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    mode m = *(const mode *)user;
    int p = 0, n = 0, ok = 1;
    TRY(spmd_axis_index(ctx, "i", &p));
    TRY(spmd_axis_size(ctx, "i", &n));
    TRY(exchange(ctx, p, n, 1, m, &ok));
    TRY(exchange(ctx, p, n, 0, m, &ok));
    ((float *)out[0].data)[0] = (float)ok;
    return SPMD_OK;
}

static spmd_status run(spmd_test_line *line, mode m, int n, float *got)
{
    const spmd_out_desc desc = {1, {(int64_t)n}, SPMD_DTYPE_F32};
    spmd_array *y = NULL;
    spmd_status st =
        spmd_shard_map(line->mesh, body, &m, 1, &line->x, (const spmd_spec *[]){line->split}, 1,
                       &desc, (const spmd_spec *[]){line->split}, NULL, &y);
    if (st == SPMD_OK)
        st = spmd_process_allgather(y, 1, got, sizeof(float) * (size_t)n);
    else
        SPMD_TEST_CHECK(y == NULL, "a failed call left an array");
    spmd_array_destroy(y);
    return st;
}

int main(void)
{
    int n = spmd_test_init_devices(MAX_DEV);
    float zeros[MAX_DEV] = {0}, got[MAX_DEV];
    spmd_test_line line = spmd_test_line_create(1, zeros);
    spmd_status st = run(&line, CHECK, n, got);
    SPMD_TEST_CHECK(st == SPMD_OK, "ragged_all_to_all: %s", spmd_last_error());
    for (int d = 0; st == SPMD_OK && d < n; d++)
        SPMD_TEST_CHECK(got[d] == 1.0f, "position %d: an output differs from the reference", d);
    st = run(&line, MISMATCH, n, got);
    SPMD_TEST_CHECK(st == SPMD_ERR_INVALID_ARGUMENT && strstr(spmd_last_error(), "recv_sizes[0]"),
                    "recv_sizes unlike the sender's send_sizes: %s (%s)", spmd_status_name(st),
                    spmd_last_error());
    st = run(&line, OUTSIDE, n, got);
    SPMD_TEST_CHECK(
        st == SPMD_ERR_INVALID_ARGUMENT && strstr(spmd_last_error(), "input_offsets[0]"),
        "a slice outside the operand: %s (%s)", spmd_status_name(st), spmd_last_error());
    st = run(&line, CHECK, n, got); /* the runtime is still usable */
    SPMD_TEST_CHECK(st == SPMD_OK, "after the refusals: %s", spmd_last_error());
    spmd_test_line_destroy(&line);
    return spmd_test_finish(spmd_test_failed_checks());
}
