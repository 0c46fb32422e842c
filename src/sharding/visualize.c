/* spmd_visualize_sharding: the box picture of jax.debug.visualize_array_sharding. */
#include <stdlib.h>
#include <string.h>

#include <spmd/runtime.h>

#include "runtime/base/check.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"

typedef struct cell {
    char label[256];
    size_t len; /* characters wanted; the label is cut short past its buffer */
} cell;

static void put_repeat(FILE *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fputs(s, out);
}

static void rule(FILE *out, const char *left, const char *mid, const char *right, int cols,
                 size_t width)
{
    fputs(left, out);
    for (int c = 0; c < cols; c++) {
        put_repeat(out, "─", width);
        fputs(c == cols - 1 ? right : mid, out);
    }
    fputc('\n', out);
}

static void text_line(FILE *out, const cell *row, int cols, size_t width, int with_label)
{
    fputs("│", out);
    for (int c = 0; c < cols; c++) {
        size_t len = strlen(row[c].label);
        size_t left = (width - len) / 2;
        if (with_label) {
            put_repeat(out, " ", left);
            fputs(row[c].label, out);
            put_repeat(out, " ", width - len - left);
        } else {
            put_repeat(out, " ", width);
        }
        fputs("│", out);
    }
    fputc('\n', out);
}

spmd_status spmd_visualize_sharding(FILE *out, const spmd_sharding *sharding, int ndim,
                                    const int64_t *shape)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_visualize_sharding");
    SPMD_CHECK(spmd__sharding_check(sharding, "spmd_visualize_sharding", "sharding"));
    SPMD_REQUIRE(ndim == 1 || ndim == 2, SPMD_ERR_UNSUPPORTED,
                 "spmd_visualize_sharding: can only draw 1-D and 2-D arrays, got rank %d; print "
                 "the boxes with spmd_sharding_device_box (or `spmd sharding --json`) instead",
                 ndim);
    SPMD_CHECK(
        spmd__sharding_check_shape(sharding, ndim, shape, "spmd_visualize_sharding", "the array"));
    /* A 1-D array is drawn as one row of blocks, as JAX does. */
    int rows = ndim == 2 ? spmd__sharding_blocks(sharding, 0) : 1;
    int cols = spmd__sharding_blocks(sharding, ndim - 1);
    cell *cells = calloc((size_t)rows * (size_t)cols, sizeof *cells);
    SPMD_REQUIRE(cells != NULL, SPMD_ERR_OUT_OF_MEMORY, "spmd_visualize_sharding: out of memory");

    const char *platform = spmd_runtime_platform() == SPMD_PLATFORM_CUDA ? "GPU" : "CPU";
    const spmd_mesh *mesh = sharding->mesh;
    for (int f = 0; f < mesh->size; f++) {
        int r = ndim == 2 ? spmd__sharding_block(sharding, f, 0) : 0;
        cell *c = &cells[r * cols + spmd__sharding_block(sharding, f, ndim - 1)];
        spmd__strbuf sb = {c->label, sizeof c->label, c->len};
        if (c->len)
            spmd__strbuf_printf(&sb, ",%d", mesh->device_ids[f]);
        else
            spmd__strbuf_printf(&sb, "%s %d", platform, mesh->device_ids[f]);
        c->len = sb.len;
    }
    size_t width = 0;
    for (int i = 0; i < rows * cols; i++) {
        size_t len = strlen(cells[i].label);
        width = len > width ? len : width;
    }
    width += 4;
    for (int r = 0; r < rows; r++) {
        if (r == 0)
            rule(out, "┌", "┬", "┐", cols, width);
        else
            rule(out, "├", "┼", "┤", cols, width);
        text_line(out, &cells[r * cols], cols, width, 0);
        text_line(out, &cells[r * cols], cols, width, 1);
        text_line(out, &cells[r * cols], cols, width, 0);
    }
    rule(out, "└", "┴", "┘", cols, width);
    free(cells);
    return SPMD_OK;
}
