/* Private: the bytes of a message made of boxes (comm.h's spmd__piece), read or written in
 * order a stretch at a time, for a message that streams through the rings chunk by chunk
 * (check_exchange_mpi.c) instead of going through MPI's datatypes. */
#ifndef SPMD_RUNTIME_PIECE_CURSOR_H
#define SPMD_RUNTIME_PIECE_CURSOR_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/comm/comm.h"

/** Where a walk through the boxes' bytes, in message order, has come to. */
typedef struct spmd__piece_cursor {
    const spmd__piece *pieces;
    int npieces;
    int at;                       /* the box */
    int inner;                    /* its dimensions from here on lie in one run ... */
    size_t run;                   /* ... of this many contiguous bytes */
    int64_t runs, row;            /* its runs, and the one the walk is in */
    int64_t index[SPMD_MAX_RANK]; /* that run's index along the dimensions before `inner` */
    char *row_at;                 /* where it begins */
    size_t in_row;                /* bytes of it already passed */
} spmd__piece_cursor;

/** The bytes of n boxes. */
size_t spmd__pieces_bytes(const spmd__piece *pieces, int n);
/** A cursor at the first byte of n boxes. */
void spmd__piece_cursor_init(spmd__piece_cursor *c, const spmd__piece *pieces, int n);
/** For a cursor just made: where the boxes' bytes begin when they are one contiguous run in
 * message order (one box whose rows are whole, or one row long), else NULL. */
void *spmd__piece_cursor_one_run(const spmd__piece_cursor *c);
/** Copies the next `bytes` of the boxes to dst (at most what is left), with non-temporal stores
 * where `streaming` (spmd__copy_either). */
void spmd__piece_cursor_read(spmd__piece_cursor *c, void *dst, size_t bytes, int streaming);
/** Copies `bytes` from src into the next bytes of the boxes (at most what is left). */
void spmd__piece_cursor_write(spmd__piece_cursor *c, const void *src, size_t bytes);

#endif /* SPMD_RUNTIME_PIECE_CURSOR_H */
