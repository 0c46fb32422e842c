/* What the sources of bench_reshard share (reshard.c: the driver; reshard_baselines.c: the bound
 * and the baselines): placements of blocks, the bound, the baselines' state. */
#ifndef SPMD_BENCH_RESHARD_H
#define SPMD_BENCH_RESHARD_H

#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_util.h"
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#else
#undef SPMD_BENCH_HAVE_SCALAPACK
#endif

#define CHECK(call) BENCH_CHECK("bench_reshard", call)

/* ---- reshard.c ---- */

void fail(const char *what);
void *xmalloc(size_t bytes);
/* The global value: exact in float64 for N up to 2^26. */
double value_at(int64_t n, int64_t i, int64_t j);
int64_t box_elems(const spmd_box *b);
/* Wrong elements of a dense row-major buffer holding box b. */
int64_t count_wrong(int64_t n, const spmd_box *b, const double *d);

/* The devices of a sharding in mesh flat order, with their process and box. */
typedef struct placement {
    int ndev;
    int *dev, *proc;
    spmd_box *box;
} placement;

/* Number of this process's devices in the placement. */
int placement_local(const placement *pl, int me);

/* ---- reshard_baselines.c: what must move ---- */

/* A rectangle [r0, r1) x [c0, c1) that process src sends process dst. */
typedef struct piece {
    int src, dst;
    int64_t r0, r1, c0, c1;
} piece;

typedef struct bound {
    int procs;
    int64_t *count; /* count[p * procs + q]: elements p sends q */
    piece *pieces;  /* in one global order that sender and receiver share */
    int npieces;
} bound;

/* Per pair of processes, the elements q needs, lacks and p holds (spmd_reshard's contract). */
void bound_make(const placement *src, const placement *dst, int procs, int64_t n, bound *b);
void bound_free(bound *b);
int64_t bound_total(const bound *b);

/* ---- reshard_baselines.c: the baselines ---- */

#ifdef SPMD_HAVE_MPI
/* (a) MPI_Alltoallv of exactly the elements that move, pre-packed. */
typedef struct a2a {
    int ok;
    int *sc, *sd, *rc, *rd;
    double *send, *recv;
    int64_t nsend, nrecv;
} a2a;

void a2a_setup(const bound *b, int me, int64_t n, a2a *x);
/* Wrong received elements. */
int64_t a2a_verify(const bound *b, int me, int64_t n, const a2a *x);
/* x plus a self-message of `self` elements. */
void a2a_with_self(const a2a *x, int procs, int me, int64_t self, a2a *y);
double a2a_run(const a2a *x, MPI_Comm comm);
void a2a_free(a2a *x);

/* (b) gather everything on rank 0, scatter every destination shard from there. */
typedef struct gs {
    int ok;
    int *gc, *gd, *sc, *sd; /* rank 0: gathered / scattered counts and displacements */
    double *send, *recv;    /* this process's packed source / destination shards */
    double *gathered, *global, *scattered; /* rank 0 only */
    double **out;                          /* one dense buffer per local destination device */
    int64_t nsend, nrecv;
    int nout;
} gs;

void gs_setup(const placement *src, const placement *dst, const spmd_array *x, int me, int procs,
              int64_t n, gs *g);
double gs_run(const placement *src, const placement *dst, const spmd_array *x, int me, int procs,
              int64_t n, gs *g, MPI_Comm comm);
int64_t gs_verify(const placement *dst, int me, int64_t n, const gs *g);
void gs_clear(const placement *dst, int me, gs *g);
void gs_free(gs *g);
#endif /* SPMD_HAVE_MPI */

#ifdef SPMD_BENCH_HAVE_SCALAPACK
/* (c) ScaLAPACK: BLACS and the redistribution routine, as Debian's libscalapack-openmpi
 * exports them (no header ships with it). */
void Cblacs_pinfo(int *mypnum, int *nprocs);
int Csys2blacs_handle(MPI_Comm comm);
void Cfree_blacs_system_handle(int handle);
void Cblacs_gridmap(int *context, int *usermap, int ldumap, int nprow, int npcol);
void Cblacs_gridinit(int *context, char *order, int nprow, int npcol);
void Cblacs_gridinfo(int context, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int context);
void Cblacs_exit(int error_code);
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb,
               const int *irsrc, const int *icsrc, const int *ictxt, const int *lld, int *info);
void pdgemr2d_(const int *m, const int *n, const double *a, const int *ia, const int *ja,
               const int *desca, double *b, const int *ib, const int *jb, const int *descb,
               const int *ictxt);

/* One layout as a BLACS grid holding A^T (column-major): grid row = block of A's columns,
 * grid column = block of A's rows, one block per process. */
typedef struct sl_grid {
    int ctxt; /* -1 on processes outside the grid */
    int desc[9];
    double *local; /* this process's block (row-major A = col-major A^T) */
    int mine;      /* placement index of this process's device, or -1 */
} sl_grid;

/* 1 when the layout is one block per device, every device on its own process. */
int sl_expressible(const spmd_sharding *s, const placement *pl, int procs);
void sl_grid_make(int sys, const spmd_sharding *s, const placement *pl, int me, int64_t n,
                  sl_grid *g);
void sl_grid_free(sl_grid *g);
double sl_run(const sl_grid *a, sl_grid *b, int all, int64_t n, MPI_Comm comm);
#endif /* SPMD_BENCH_HAVE_SCALAPACK */

#endif /* SPMD_BENCH_RESHARD_H */
