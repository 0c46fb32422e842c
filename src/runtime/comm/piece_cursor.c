#include "runtime/comm/piece_cursor.h"

#include <string.h>

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

/* Where run k of box p begins. */
static char *run_at(const spmd__piece *p, const runs *r, int64_t k)
{
    int64_t offset = 0, stride = 1;
    for (int j = p->ndim - 1; j >= 0; j--) {
        int64_t index = p->start[j];
        if (j < r->inner) {
            index += k % p->extent[j];
            k /= p->extent[j];
        }
        offset += index * stride;
        stride *= p->shape[j];
    }
    return (char *)p->base + (size_t)offset * p->elem;
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

void spmd__piece_cursor_init(spmd__piece_cursor *c, const spmd__piece *pieces, int n)
{
    *c = (spmd__piece_cursor){pieces, n, 0, 0, 0};
}

/* Copies up to `bytes` between the boxes (from them when `out`, into them otherwise) and buf. */
static void walk(spmd__piece_cursor *c, char *buf, size_t bytes, int out)
{
    while (bytes > 0 && c->at < c->npieces) {
        const spmd__piece *p = &c->pieces[c->at];
        runs r = runs_of(p);
        if (c->row >= r.count) { /* this box is done: the next */
            c->at++;
            c->row = 0;
            c->in_row = 0;
            continue;
        }
        char *at = run_at(p, &r, c->row) + c->in_row;
        size_t len = r.run - c->in_row < bytes ? r.run - c->in_row : bytes;
        if (out)
            memcpy(buf, at, len);
        else
            memcpy(at, buf, len);
        buf += len;
        bytes -= len;
        c->in_row += len;
        if (c->in_row == r.run) {
            c->row++;
            c->in_row = 0;
        }
    }
}

void spmd__piece_cursor_read(spmd__piece_cursor *c, void *dst, size_t bytes)
{
    walk(c, dst, bytes, 1);
}

void spmd__piece_cursor_write(spmd__piece_cursor *c, const void *src, size_t bytes)
{
    walk(c, (char *)src, bytes, 0);
}
