/* bench_reshard, part: what must move between processes (the bound) and the baselines timed
 * beside spmd_reshard: (a) MPI_Alltoallv, (b) gather-then-scatter, (c) ScaLAPACK pdgemr2d. */
#define _GNU_SOURCE
#include "reshard.h"

/* ---- what must move: per pair of processes, the elements q needs, lacks and p holds ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sorted distinct box edges of both placements along dim. */
static int64_t *edges(const placement *a, const placement *b, int dim, int64_t n, int *count)
{
    int64_t *e = xmalloc((size_t)(2 * a->ndev + 2 * b->ndev + 2) * sizeof *e);
    int k = 0;
    e[k++] = 0;
    e[k++] = n;
    for (int f = 0; f < a->ndev; f++) {
        e[k++] = a->box[f].start[dim];
        e[k++] = a->box[f].stop[dim];
    }
    for (int f = 0; f < b->ndev; f++) {
        e[k++] = b->box[f].start[dim];
        e[k++] = b->box[f].stop[dim];
    }
    qsort(e, (size_t)k, sizeof *e, cmp_i64);
    int u = 0;
    for (int i = 0; i < k; i++)
        if (u == 0 || e[i] != e[u - 1])
            e[u++] = e[i];
    *count = u;
    return e;
}

static int box_covers(const spmd_box *b, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
    return b->start[0] <= r0 && r1 <= b->stop[0] && b->start[1] <= c0 && c1 <= b->stop[1];
}

/* Distance between process indices, cyclic as spmd_reshard measures it. */
static int process_distance(int p, int q, int procs)
{
    int d = abs(p - q);
    return procs - d < d ? procs - d : d;
}

/* Cuts the matrix along every box edge of both layouts; each cell then has one set of holders
 * and one of needers. A needer that holds no copy receives the cell once, from the holder
 * nearest in process index (the lower one on a tie), as spmd_reshard's contract says. */
void bound_make(const placement *src, const placement *dst, int procs, int64_t n, bound *b)
{
    int nr, nc;
    int64_t *re = edges(src, dst, 0, n, &nr), *ce = edges(src, dst, 1, n, &nc);
    char *holds = xmalloc((size_t)procs), *needs = xmalloc((size_t)procs);
    int cap = 64;
    b->procs = procs;
    b->count = calloc((size_t)procs * (size_t)procs, sizeof *b->count);
    b->pieces = xmalloc((size_t)cap * sizeof *b->pieces);
    b->npieces = 0;
    if (!b->count)
        fail("out of memory");
    for (int ri = 0; ri + 1 < nr; ri++) {
        for (int ci = 0; ci + 1 < nc; ci++) {
            int64_t r0 = re[ri], r1 = re[ri + 1], c0 = ce[ci], c1 = ce[ci + 1];
            memset(holds, 0, (size_t)procs);
            memset(needs, 0, (size_t)procs);
            for (int f = 0; f < src->ndev; f++)
                if (box_covers(&src->box[f], r0, r1, c0, c1))
                    holds[src->proc[f]] = 1;
            for (int f = 0; f < dst->ndev; f++)
                if (box_covers(&dst->box[f], r0, r1, c0, c1))
                    needs[dst->proc[f]] = 1;
            for (int q = 0; q < procs; q++) {
                if (!needs[q] || holds[q])
                    continue;
                int p = -1;
                for (int h = 0; h < procs; h++)
                    if (holds[h] &&
                        (p < 0 || process_distance(h, q, procs) < process_distance(p, q, procs)))
                        p = h;
                if (p < 0)
                    fail("internal: a cell of the destination has no holder in the source");
                if (b->npieces == cap) {
                    cap *= 2;
                    b->pieces = realloc(b->pieces, (size_t)cap * sizeof *b->pieces);
                    if (!b->pieces)
                        fail("out of memory");
                }
                b->pieces[b->npieces++] = (piece){p, q, r0, r1, c0, c1};
                b->count[(size_t)p * (size_t)procs + (size_t)q] += (r1 - r0) * (c1 - c0);
            }
        }
    }
    free(re);
    free(ce);
    free(holds);
    free(needs);
}

void bound_free(bound *b)
{
    free(b->count);
    free(b->pieces);
}

int64_t bound_total(const bound *b)
{
    int64_t t = 0;
    for (int k = 0; k < b->procs * b->procs; k++)
        t += b->count[k];
    return t;
}

/* ---- the baselines ---- */

#ifdef SPMD_HAVE_MPI
static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

void a2a_setup(const bound *b, int me, int64_t n, a2a *x)
{
    int procs = b->procs;
    memset(x, 0, sizeof *x);
    x->sc = xmalloc((size_t)procs * sizeof(int));
    x->sd = xmalloc((size_t)procs * sizeof(int));
    x->rc = xmalloc((size_t)procs * sizeof(int));
    x->rd = xmalloc((size_t)procs * sizeof(int));
    x->ok = 1;
    for (int q = 0; q < procs; q++) {
        int64_t s = b->count[(size_t)me * (size_t)procs + (size_t)q];
        int64_t r = b->count[(size_t)q * (size_t)procs + (size_t)me];
        x->ok &= fits_int(s) && fits_int(r) && fits_int(x->nsend) && fits_int(x->nrecv);
        x->sc[q] = (int)s;
        x->sd[q] = (int)x->nsend;
        x->rc[q] = (int)r;
        x->rd[q] = (int)x->nrecv;
        x->nsend += s;
        x->nrecv += r;
    }
    x->ok &= fits_int(x->nsend) && fits_int(x->nrecv);
    x->send = xmalloc((size_t)x->nsend * sizeof(double));
    x->recv = xmalloc((size_t)x->nrecv * sizeof(double));
    /* pieces are in one global order, so each destination's run is in piece order */
    int64_t *at = xmalloc((size_t)procs * sizeof *at);
    for (int q = 0; q < procs; q++)
        at[q] = x->sd[q];
    for (int k = 0; k < b->npieces; k++) {
        const piece *pc = &b->pieces[k];
        if (pc->src != me)
            continue;
        for (int64_t i = pc->r0; i < pc->r1; i++)
            for (int64_t j = pc->c0; j < pc->c1; j++)
                x->send[at[pc->dst]++] = value_at(n, i, j);
    }
    free(at);
}

/* Wrong received elements (the counts are right by construction; the values prove that each
 * element came from the right place). */
int64_t a2a_verify(const bound *b, int me, int64_t n, const a2a *x)
{
    int procs = b->procs;
    int64_t wrong = 0;
    int64_t *at = xmalloc((size_t)procs * sizeof *at);
    for (int p = 0; p < procs; p++)
        at[p] = x->rd[p];
    for (int k = 0; k < b->npieces; k++) {
        const piece *pc = &b->pieces[k];
        if (pc->dst != me)
            continue;
        for (int64_t i = pc->r0; i < pc->r1; i++)
            for (int64_t j = pc->c0; j < pc->c1; j++)
                wrong += x->recv[at[pc->src]++] != value_at(n, i, j);
    }
    for (int p = 0; p < procs; p++)
        wrong += at[p] != x->rd[p] + x->rc[p]; /* received counts from the plan */
    free(at);
    return wrong;
}

/* x plus a self-message of `self` elements: the same call with this process's local
 * rearrangement included, as a hand-written MPI redistribution would make it. */
void a2a_with_self(const a2a *x, int procs, int me, int64_t self, a2a *y)
{
    memset(y, 0, sizeof *y);
    y->sc = xmalloc((size_t)procs * sizeof(int));
    y->sd = xmalloc((size_t)procs * sizeof(int));
    y->rc = xmalloc((size_t)procs * sizeof(int));
    y->rd = xmalloc((size_t)procs * sizeof(int));
    y->ok = x->ok && fits_int(self) && fits_int(x->nsend + self) && fits_int(x->nrecv + self);
    for (int q = 0; q < procs; q++) {
        y->sc[q] = q == me ? (int)self : x->sc[q];
        y->rc[q] = q == me ? (int)self : x->rc[q];
        y->sd[q] = (int)y->nsend;
        y->rd[q] = (int)y->nrecv;
        y->nsend += y->sc[q];
        y->nrecv += y->rc[q];
    }
    y->send = xmalloc((size_t)y->nsend * sizeof(double));
    y->recv = xmalloc((size_t)y->nrecv * sizeof(double));
    memset(y->send, 0, (size_t)y->nsend * sizeof(double));
    memset(y->recv, 0, (size_t)y->nrecv * sizeof(double));
}

double a2a_run(const a2a *x, MPI_Comm comm)
{
    MPI_Barrier(comm);
    double t0 = bench_now_s();
    MPI_Alltoallv(x->send, x->sc, x->sd, MPI_DOUBLE, x->recv, x->rc, x->rd, MPI_DOUBLE, comm);
    return bench_now_s() - t0;
}

void a2a_free(a2a *x)
{
    free(x->sc);
    free(x->sd);
    free(x->rc);
    free(x->rd);
    free(x->send);
    free(x->recv);
}

void gs_setup(const placement *src, const placement *dst, const spmd_array *x, int me, int procs,
              int64_t n, gs *g)
{
    memset(g, 0, sizeof *g);
    g->ok = 1;
    g->gc = xmalloc((size_t)procs * sizeof(int));
    g->gd = xmalloc((size_t)procs * sizeof(int));
    g->sc = xmalloc((size_t)procs * sizeof(int));
    g->sd = xmalloc((size_t)procs * sizeof(int));
    int64_t gtot = 0, stot = 0;
    for (int p = 0; p < procs; p++) {
        int64_t gp = 0, sp = 0;
        for (int f = 0; f < src->ndev; f++)
            gp += src->proc[f] == p ? box_elems(&src->box[f]) : 0;
        for (int f = 0; f < dst->ndev; f++)
            sp += dst->proc[f] == p ? box_elems(&dst->box[f]) : 0;
        g->ok &= fits_int(gp) && fits_int(sp) && fits_int(gtot) && fits_int(stot);
        g->gc[p] = (int)gp;
        g->gd[p] = (int)gtot;
        g->sc[p] = (int)sp;
        g->sd[p] = (int)stot;
        gtot += gp;
        stot += sp;
        if (p == me) {
            g->nsend = gp;
            g->nrecv = sp;
        }
    }
    g->ok &= fits_int(gtot) && fits_int(stot);
    /* the array's shards come in mesh flat order, as the placement lists them */
    int k = 0;
    for (int f = 0; f < src->ndev; f++) {
        if (src->proc[f] != me)
            continue;
        spmd_shard sh;
        CHECK(spmd_array_shard(x, k, &sh));
        if (sh.device_id != src->dev[f])
            fail("internal: source shards are not in mesh flat order");
        k++;
    }
    g->send = xmalloc((size_t)g->nsend * sizeof(double));
    g->recv = xmalloc((size_t)g->nrecv * sizeof(double));
    g->nout = placement_local(dst, me);
    g->out = xmalloc((size_t)(g->nout ? g->nout : 1) * sizeof *g->out);
    k = 0;
    for (int f = 0; f < dst->ndev; f++)
        if (dst->proc[f] == me)
            g->out[k++] = xmalloc((size_t)box_elems(&dst->box[f]) * sizeof(double));
    if (me == 0) {
        g->gathered = xmalloc((size_t)gtot * sizeof(double));
        g->global = xmalloc((size_t)(n * n) * sizeof(double));
        g->scattered = xmalloc((size_t)stot * sizeof(double));
    }
}

/* Copies box b between a dense row-major box buffer and the global matrix. */
static void box_copy(double *global, double *boxbuf, const spmd_box *b, int64_t n, int to_global)
{
    int64_t w = b->stop[1] - b->start[1];
    for (int64_t i = b->start[0]; i < b->stop[0]; i++) {
        double *row = global + i * n + b->start[1], *part = boxbuf + (i - b->start[0]) * w;
        if (to_global)
            memcpy(row, part, (size_t)w * sizeof(double));
        else
            memcpy(part, row, (size_t)w * sizeof(double));
    }
}

double gs_run(const placement *src, const placement *dst, const spmd_array *x, int me, int procs,
              int64_t n, gs *g, MPI_Comm comm)
{
    MPI_Barrier(comm);
    double t0 = bench_now_s();
    int64_t off = 0;
    for (int k = 0; k < spmd_array_num_shards(x); k++) {
        spmd_shard sh;
        CHECK(spmd_array_shard(x, k, &sh));
        CHECK(spmd_array_shard_to_host(x, k, g->send + off, sh.nbytes));
        off += (int64_t)(sh.nbytes / sizeof(double));
    }
    MPI_Gatherv(g->send, (int)g->nsend, MPI_DOUBLE, g->gathered, g->gc, g->gd, MPI_DOUBLE, 0, comm);
    if (me == 0) {
        double *at = g->gathered;
        for (int p = 0; p < procs; p++)
            for (int f = 0; f < src->ndev; f++)
                if (src->proc[f] == p) {
                    box_copy(g->global, at, &src->box[f], n, 1);
                    at += box_elems(&src->box[f]);
                }
        at = g->scattered;
        for (int q = 0; q < procs; q++)
            for (int f = 0; f < dst->ndev; f++)
                if (dst->proc[f] == q) {
                    box_copy(g->global, at, &dst->box[f], n, 0);
                    at += box_elems(&dst->box[f]);
                }
    }
    MPI_Scatterv(g->scattered, g->sc, g->sd, MPI_DOUBLE, g->recv, (int)g->nrecv, MPI_DOUBLE, 0,
                 comm);
    off = 0;
    int k = 0;
    for (int f = 0; f < dst->ndev; f++)
        if (dst->proc[f] == me) {
            int64_t e = box_elems(&dst->box[f]);
            memcpy(g->out[k++], g->recv + off, (size_t)e * sizeof(double));
            off += e;
        }
    return bench_now_s() - t0;
}

int64_t gs_verify(const placement *dst, int me, int64_t n, const gs *g)
{
    int64_t wrong = 0;
    int k = 0;
    for (int f = 0; f < dst->ndev; f++)
        if (dst->proc[f] == me)
            wrong += count_wrong(n, &dst->box[f], g->out[k++]);
    return wrong;
}

void gs_clear(const placement *dst, int me, gs *g)
{
    int k = 0;
    for (int f = 0; f < dst->ndev; f++)
        if (dst->proc[f] == me)
            memset(g->out[k++], 0xff, (size_t)box_elems(&dst->box[f]) * sizeof(double));
}

void gs_free(gs *g)
{
    free(g->gc);
    free(g->gd);
    free(g->sc);
    free(g->sd);
    free(g->send);
    free(g->recv);
    for (int k = 0; k < g->nout; k++)
        free(g->out[k]);
    free(g->out);
    free(g->gathered);
    free(g->global);
    free(g->scattered);
}
#endif /* SPMD_HAVE_MPI */

#ifdef SPMD_BENCH_HAVE_SCALAPACK
/* 1 when the layout is one block per device, every device on its own process. */
int sl_expressible(const spmd_sharding *s, const placement *pl, int procs)
{
    int blocks = spmd_sharding_num_blocks(s, 0) * spmd_sharding_num_blocks(s, 1);
    if (blocks != pl->ndev)
        return 0;
    char *seen = calloc((size_t)procs, 1);
    int ok = seen != NULL;
    for (int f = 0; ok && f < pl->ndev; f++) {
        ok = !seen[pl->proc[f]];
        seen[pl->proc[f]] = 1;
    }
    free(seen);
    return ok;
}

void sl_grid_make(int sys, const spmd_sharding *s, const placement *pl, int me, int64_t n,
                  sl_grid *g)
{
    int b0 = spmd_sharding_num_blocks(s, 0), b1 = spmd_sharding_num_blocks(s, 1);
    int bs0 = (int)(n / b0), bs1 = (int)(n / b1);
    int nprow = b1, npcol = b0; /* A^T: rows are A's columns */
    int *map = xmalloc((size_t)pl->ndev * sizeof *map);
    g->mine = -1;
    for (int f = 0; f < pl->ndev; f++) {
        int prow = (int)(pl->box[f].start[1] / bs1), pcol = (int)(pl->box[f].start[0] / bs0);
        map[prow + pcol * nprow] = pl->proc[f];
        if (pl->proc[f] == me)
            g->mine = f;
    }
    g->ctxt = sys;
    Cblacs_gridmap(&g->ctxt, map, nprow, nprow, npcol); /* collective over every process */
    free(map);
    memset(g->desc, 0, sizeof g->desc);
    g->desc[0] = 1;
    g->desc[1] = -1;
    g->local = xmalloc(g->mine >= 0 ? (size_t)bs0 * (size_t)bs1 * sizeof(double) : sizeof(double));
    if (g->mine < 0) {
        g->ctxt = -1;
        return;
    }
    int pr, pc, myr, myc;
    Cblacs_gridinfo(g->ctxt, &pr, &pc, &myr, &myc);
    if (myr < 0 || myc < 0)
        fail("internal: BLACS left this process out of its grid");
    int m = (int)n, zero = 0, info = 0, lld = bs1;
    descinit_(g->desc, &m, &m, &bs1, &bs0, &zero, &zero, &g->ctxt, &lld, &info);
    if (info != 0)
        fail("descinit_ failed");
}

void sl_grid_free(sl_grid *g)
{
    if (g->ctxt >= 0)
        Cblacs_gridexit(g->ctxt);
    free(g->local);
}

double sl_run(const sl_grid *a, sl_grid *b, int all, int64_t n, MPI_Comm comm)
{
    int m = (int)n, one = 1;
    MPI_Barrier(comm);
    double t0 = bench_now_s();
    pdgemr2d_(&m, &m, a->local, &one, &one, a->desc, b->local, &one, &one, b->desc, &all);
    return bench_now_s() - t0;
}
#endif /* SPMD_BENCH_HAVE_SCALAPACK */
