#include "runtime/comm/piece_cursor.h"

#include <string.h>

#include "runtime/base/stream_copy.h"

/* A box as runs of contiguous bytes: the dimensions from `inner` on are whole (or the last), so
 * a run spans them; the dimensions before it count the runs. */
typedef struct runs {
    int inner;
    size_t run;
    int64_t count;
} runs;

static runs runs_of(const spmd__piece *p)
{
    runs r = {p->ndim, p->elem, 1};
    for (int j = p->ndim - 1; j >= 0; j--) {
        r.run *= (size_t)p->extent[j];
        r.inner = j;
        if (p->extent[j] != p->shape[j])
            break;
    }
    for (int j = 0; j < r.inner; j++)
        r.count *= p->extent[j];
    for (int j = 0; j < p->ndim; j++)
        if (p->extent[j] == 0)
            r.count = 0;
    return r;
}

size_t spmd__pieces_bytes(const spmd__piece *pieces, int n)
{
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        runs r = runs_of(&pieces[i]);
        bytes += r.run * (size_t)r.count;
    }
    return bytes;
}

/* Where the run at c->index of box p begins. */
static char *run_start(const spmd__piece *p, const spmd__piece_cursor *c)
{
    int64_t offset = 0;
    for (int j = 0; j < p->ndim; j++)
        offset = offset * p->shape[j] + p->start[j] + (j < c->inner ? c->index[j] : 0);
    return (char *)p->base + (size_t)offset * p->elem;
}

/* The cursor at the first run of box c->at (or past the last box). */
static void enter_box(spmd__piece_cursor *c)
{
    c->row = 0;
    c->in_row = 0;
    c->runs = 0;
    if (c->at >= c->npieces)
        return;
    const spmd__piece *p = &c->pieces[c->at];
    runs r = runs_of(p);
    c->inner = r.inner;
    c->run = r.run;
    c->runs = r.count;
    memset(c->index, 0, sizeof c->index);
    c->row_at = run_start(p, c);
}

/* The next run of the box: its index stepped as an odometer (no division per run). */
static void next_run(spmd__piece_cursor *c)
{
    const spmd__piece *p = &c->pieces[c->at];
    c->in_row = 0;
    if (++c->row >= c->runs)
        return;
    for (int j = c->inner - 1; j >= 0; j--) {
        if (++c->index[j] < p->extent[j])
            break;
        c->index[j] = 0;
    }
    c->row_at = run_start(p, c);
}

void spmd__piece_cursor_init(spmd__piece_cursor *c, const spmd__piece *pieces, int n)
{
    c->pieces = pieces;
    c->npieces = n;
    c->at = 0;
    enter_box(c);
}

void *spmd__piece_cursor_one_run(const spmd__piece_cursor *c)
{
    return c->npieces == 1 && c->runs == 1 ? c->row_at : NULL;
}

/* Copies up to `bytes` between the boxes (from them when `out`, into them otherwise) and buf,
 * with non-temporal stores where `streaming`. */
static void walk(spmd__piece_cursor *c, char *buf, size_t bytes, int out, int streaming)
{
    while (bytes > 0 && c->at < c->npieces) {
        if (c->row >= c->runs) { /* this box is done: the next */
            c->at++;
            enter_box(c);
            continue;
        }
        char *at = c->row_at + c->in_row;
        size_t len = c->run - c->in_row < bytes ? c->run - c->in_row : bytes;
        if (out)
            spmd__copy_either(buf, at, len, streaming);
        else
            memcpy(at, buf, len);
        buf += len;
        bytes -= len;
        c->in_row += len;
        if (c->in_row == c->run)
            next_run(c);
    }
}

void spmd__piece_cursor_read(spmd__piece_cursor *c, void *dst, size_t bytes, int streaming)
{
    walk(c, dst, bytes, 1, streaming);
}

void spmd__piece_cursor_write(spmd__piece_cursor *c, const void *src, size_t bytes)
{
    walk(c, (char *)src, bytes, 0, 0);
}
