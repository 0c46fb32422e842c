/* Private: the reductions collectives perform (shared by MPI, host and CUDA code). */
#ifndef SPMD_REDUCE_OP_H
#define SPMD_REDUCE_OP_H

typedef enum spmd__reduce_op { SPMD__OP_SUM, SPMD__OP_MAX, SPMD__OP_MIN } spmd__reduce_op;

#endif /* SPMD_REDUCE_OP_H */
