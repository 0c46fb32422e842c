/* Private: the float loops of spmd_op_unary and spmd_op_binary that run at the copy bound:
 * one loop per op and broadcast (the op chosen once, no division per element), vectorized.
 * The same bits as the element-by-element path (scalar_ops.h): no operation is reordered. */
#ifndef SPMD_ELEMENTWISE_LOOPS_H
#define SPMD_ELEMENTWISE_LOOPS_H

#include <stddef.h>

#include <spmd/ops.h>

/** y = op(x) for n floats (doubles); 0 when the op has no loop here (exp, log ...). */
int spmd__unary_loop_f32(spmd_unary_op op, const float *x, float *y, size_t n);
int spmd__unary_loop_f64(spmd_unary_op op, const double *x, double *y, size_t n);
/** z = a op b for n elements, b repeating with `period` (1, a row, or n); 0 when not here. */
int spmd__binary_loop_f32(spmd_binary_op op, const float *a, const float *b, size_t period,
                          float *z, size_t n);
int spmd__binary_loop_f64(spmd_binary_op op, const double *a, const double *b, size_t period,
                          double *z, size_t n);

#endif /* SPMD_ELEMENTWISE_LOOPS_H */
