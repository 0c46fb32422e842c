/* shard_map: run a C function once per mesh device on its block, with collectives inside. */
#ifndef SPMD_SHARD_MAP_H
#define SPMD_SHARD_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "spmd/array.h"
#include "spmd/dtype.h"
#include "spmd/export.h"
#include "spmd/mesh.h"
#include "spmd/spec.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/** What fn sees of one array on one device: its block, rank-preserving (global / shards). */
typedef struct spmd_block {
    void *data; /**< device memory of the calling device (host memory on cpu) */
    spmd_dtype dtype;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
} spmd_block;

/**
 * Per-device context of one shard_map call; valid only while fn runs (also from threads fn
 * starts). A ctx kept after fn returned is refused (SPMD_ERR_INVALID_ARGUMENT) by every function
 * that takes one.
 */
typedef struct spmd_ctx spmd_ctx;

/**
 * The per-device body. `in` are the input blocks (read-only unless donated), `out` the output
 * blocks to fill (uninitialized memory): fill their data, and leave the descriptors themselves
 * (data pointer, dtype, shape) as the call made them. Return SPMD_OK, or an error that becomes the
 * status of the whole call (the other devices' pending collectives are released with an error too).
 * Inside fn use the collectives and block ops below. What runs on the devices or between
 * processes cannot be nested in fn, the devices being busy with the enclosing call: spmd_shard_map,
 * spmd_plan_execute, spmd_pmap, spmd_reshard(_batch), the multihost functions, array transfers
 * (spmd_device_put, spmd_array_to_host ...) and spmd_finalize return SPMD_ERR_INVALID_ARGUMENT
 * at once there, naming the enclosing call (JAX refuses nested pmap too).
 */
typedef spmd_status (*spmd_fn)(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user);

/** Global shape and dtype of one output (C cannot trace fn to find them). */
typedef struct spmd_out_desc {
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    spmd_dtype dtype;
} spmd_out_desc;

typedef struct spmd_shard_map_options {
    unsigned int version; /**< SPMD_SHARD_MAP_OPTIONS_VERSION */
    /**
     * 1 (default): verify that every output is identical along the mesh axes its out_spec
     * leaves out (the replication it claims), failing with SPMD_ERR_SPEC otherwise. A block
     * that a psum, pmean, pmax, pmin or all_gather_invariant over those axes (no
     * axis_index_groups) wrote whole as its out, or that spmd_op_copy copied from an input
     * block its in_spec replicates along them, with no block op writing it after, is alike
     * by construction and is not hashed (fn must not change either by hand:
     * SPMD_CHECK_REPLICATION_STRICT, or SPMD_STRICT_REPLICATION=1, hashes every block). A
     * block that an all_gather, pbroadcast, ppermute, all_to_all or psum_scatter over one of
     * those axes (of any size, as JAX counts them) wrote last varies by type and is refused
     * whatever its values, as JAX refuses it; libspmd sees only those writes, so a varying
     * value a block op copies into the output is hashed instead (JAX would refuse it too).
     * The refusal comes after fn ran: donated inputs are gone, as after any call. Other
     * blocks are hashed. 0: trust it, as JAX's check_vma=False does.
     */
    int check_replication;
    /**
     * Inputs handed to the call (may be NULL), as jax's donate_argnums; donate[i] is one of:
     * - 0: not donated.
     * - SPMD_DONATE: input i is deleted when the call ends (later use fails) and its memory
     *   goes to the buffer pool, where the next outputs of that size take it: a loop that
     *   donates its parameters every step runs in flat memory (two blocks per device: the
     *   step's input and output). fn sees distinct input and output blocks, so donation never
     *   changes what fn computes, as in JAX.
     * - SPMD_DONATE_IN_PLACE: as SPMD_DONATE, but input i's buffers become those of the first
     *   output with the same block shape and dtype, with no second block: fn then sees
     *   in[i].data == out[j].data. Only for a fn that tolerates it: one that reads each element
     *   of in[i] before, or only where, it writes the same element of out[j] (an elementwise
     *   update does; a stencil, a transpose or a matmul does not, and would return wrong
     *   values). An input that matches no output, or shares its buffers with another array, is
     *   only deleted, with a logged warning.
     * Any other value is refused (SPMD_ERR_INVALID_ARGUMENT).
     */
    const int *donate;
} spmd_shard_map_options;

/** options.check_replication: hash every block, also those a collective proved alike. */
#define SPMD_CHECK_REPLICATION_STRICT 2

/** spmd_shard_map_options.donate values (0: not donated). */
#define SPMD_DONATE 1
#define SPMD_DONATE_IN_PLACE 2

#define SPMD_SHARD_MAP_OPTIONS_VERSION 1
#define SPMD_SHARD_MAP_OPTIONS_INIT                                                                \
    {                                                                                              \
        SPMD_SHARD_MAP_OPTIONS_VERSION, 1, NULL                                                    \
    }

SPMD_API SPMD_NODISCARD spmd_status spmd_shard_map_options_init(spmd_shard_map_options *opts,
                                                                unsigned int version);

/**
 * jax.shard_map(fn, mesh, in_specs, out_specs): runs fn once per device of `mesh` that this
 * process owns, concurrently, each on its own worker, with the blocks of the inputs given by
 * in_specs, and assembles the outputs described by out_descs/out_specs.
 *
 * Collective over: every process that owns a device of `mesh`, in the same order, with the
 * same arguments. A process outside the mesh may call it too, as every JAX process runs the same
 * program: it runs nothing, meets nobody, and gets the same global arrays with no shards (what
 * spmd_process_allgather and spmd_reshard then take from it). From several threads: one call
 * at a time per process, and calls pair by their order in each process (spmd/runtime.h,
 * "Calls from several threads"); paired calls that differ in fn, specs, shapes, the
 * collectives fn issues or the thread's name (spmd_thread_set_name) fail on every process
 * with SPMD_ERR_COLLECTIVE_MISMATCH, never with another call's data.
 * @param in_arrays  their shardings must place the same boxes on the same devices as
 *        NamedSharding(mesh, in_specs[i]) (no implicit resharding).
 * @param out_arrays receives nout new arrays, sharded NamedSharding(mesh, out_specs[j]).
 * @return SPMD_OK; SPMD_ERR_SPEC (unknown axis, or out_specs claim a replication the values do
 *         not have); SPMD_ERR_SHAPE; SPMD_ERR_INCOMPATIBLE_DEVICES (an input laid out
 *         differently: reshard it first); the status fn returned on some device;
 *         SPMD_ERR_COLLECTIVE_MISMATCH / SPMD_ERR_TIMEOUT / SPMD_ERR_DISTRIBUTED (devices or
 *         processes disagreed or did not arrive; the message names them). Every process
 *         returns the same status. After a failure seen across processes, the next call on the
 *         mesh recreates its communicators (collectively); if a process did not even finish
 *         the failed call, the mesh refuses further calls (SPMD_ERR_DISTRIBUTED) and a new mesh
 *         must be created.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_shard_map(spmd_mesh *mesh, spmd_fn fn, void *user, int nin,
                                                   spmd_array *const *in_arrays,
                                                   const spmd_spec *const *in_specs, int nout,
                                                   const spmd_out_desc *out_descs,
                                                   const spmd_spec *const *out_specs,
                                                   const spmd_shard_map_options *options,
                                                   spmd_array **out_arrays);

/**
 * A validated shard_map signature (mesh, fn, input shapes/dtypes and specs, outputs and
 * options), for repeated calls without re-validation: the shardings, block shapes and device
 * plan are computed once, and collectives reuse their communicators and scratch buffers.
 */
typedef struct spmd_plan spmd_plan;

/** Input signature of a plan: global shape and dtype of each input. */
typedef spmd_out_desc spmd_in_desc;

SPMD_API SPMD_NODISCARD spmd_status spmd_plan_create(
    spmd_mesh *mesh, spmd_fn fn, void *user, int nin, const spmd_in_desc *in_descs,
    const spmd_spec *const *in_specs, int nout, const spmd_out_desc *out_descs,
    const spmd_spec *const *out_specs, const spmd_shard_map_options *options, spmd_plan **out);
/**
 * Runs the plan on arrays of its signature (each input must have the shape, dtype and layout
 * the plan was made for). Collective as spmd_shard_map.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_plan_execute(spmd_plan *plan, spmd_array *const *in_arrays,
                                                      spmd_array **out_arrays);
/** NULL-safe. */
SPMD_API void spmd_plan_destroy(spmd_plan *plan);

/* ---- inside fn ---- */

/** Global id of the calling device. */
SPMD_API int spmd_ctx_device(const spmd_ctx *ctx);
/** The mesh of the call (borrowed). */
SPMD_API const spmd_mesh *spmd_ctx_mesh(const spmd_ctx *ctx);
/**
 * The device's stream (cudaStream_t) on cuda; NULL on cpu. fn may queue its own kernels there
 * without waiting: the runtime waits for them before each collective and when fn returns.
 * Block data on cuda is CUDA managed memory on the device's GPU, so host code may also read
 * and write it (at page-migration cost) once the stream's work is done.
 */
SPMD_API void *spmd_ctx_stream(const spmd_ctx *ctx);
/**
 * The device's cuBLAS handle (cublasHandle_t, bound to spmd_ctx_stream) on cuda, created on
 * first use; NULL on cpu, or when cuBLAS cannot be loaded (spmd_last_error() says why).
 */
SPMD_API void *spmd_ctx_cublas(spmd_ctx *ctx);
/**
 * A temporary block on the calling device, freed when the call ends (contents uninitialized).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_ctx_alloc(spmd_ctx *ctx, int ndim, const int64_t *shape,
                                                   spmd_dtype dtype, spmd_block *block);

/*
 * Collectives. `axes` names one mesh axis ("i") or several ("i,j"; the first is the major
 * digit of the position). The group is the devices that share their coordinates on every other
 * axis. Every device of the mesh must call the same collectives in the same order with the same
 * shapes: a mismatch or a device that never arrives is reported (SPMD_ERR_COLLECTIVE_MISMATCH,
 * SPMD_ERR_TIMEOUT after $SPMD_COLLECTIVE_TIMEOUT seconds), never waited on forever.
 * `out` may be `in` (in place) where the shapes agree.
 * Between processes MPI reads and writes the blocks themselves. When a call fails because a
 * process stopped in the middle of moving data, MPI may still write them after the call
 * returned: the call's arrays and spmd_ctx_alloc blocks are then kept for the rest of the
 * process, but memory fn got elsewhere (malloc, its stack) is fn's to keep.
 */

/**
 * Sum over the group; f32 f64 i32 i64, and f16/bf16 accumulated in f32. out: in's shape and
 * dtype, except for bool, whose true values are counted into an int32 out (as JAX).
 * The order of the additions depends only on the group's positions (the same bits in every
 * layout of the mesh, CPU or CUDA): with p2 the largest power of two <= n and rem = n - p2, a
 * binary tree over p2 leaves, leaf i being x[2i] + x[2i + 1] for i < rem and x[i + rem] after,
 * each node its left child plus its right child (README "Reduction order"). pmean,
 * psum_scatter and the _groups and _many forms add in the same order.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_psum(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                              const char *axes);
/** psum / group size; out is a float dtype (in's dtype when in is a float; integers and bool
 * are averaged as floats: bools [true, false] over 2 devices give [0.5, 0.5]). */
SPMD_API SPMD_NODISCARD spmd_status spmd_pmean(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                               const char *axes);
SPMD_API SPMD_NODISCARD spmd_status spmd_pmax(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                              const char *axes);
SPMD_API SPMD_NODISCARD spmd_status spmd_pmin(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                              const char *axes);
/**
 * Untiled: out = stack of the group's blocks at `axis` (normalized against rank+1, so -1 is a
 * new last axis). Tiled: concatenation along `axis` (normalized against rank). As in JAX, the
 * result varies over `axes` by type: written last into an output whose out_spec claims
 * replication along them, the call fails with SPMD_ERR_SPEC whatever the values (unless
 * check_replication is 0); gather with spmd_all_gather_invariant there.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_all_gather(spmd_ctx *ctx, const spmd_block *in,
                                                    spmd_block *out, const char *axes, int axis,
                                                    int tiled);
/**
 * JAX's all_gather_invariant (lax.all_gather(..., to='invarying')): spmd_all_gather whose
 * result is invariant over `axes`, so an out_spec replicated along them takes it, proven alike
 * (no hashing). The same collective and data as spmd_all_gather.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_all_gather_invariant(spmd_ctx *ctx, const spmd_block *in,
                                                              spmd_block *out, const char *axes,
                                                              int axis, int tiled);
/**
 * The group's sum, scattered: untiled needs in.shape[d] == group size and the member at
 * position g gets slice g with dimension d removed; tiled needs in.shape[d] divisible by it and
 * gets the g-th block along d.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_psum_scatter(spmd_ctx *ctx, const spmd_block *in,
                                                      spmd_block *out, const char *axes,
                                                      int scatter_dimension, int tiled);
/**
 * JAX's lax.pbroadcast: every member of the group gets the block of the member at position
 * `source` (0 <= source < group size) over `axes`; out has in's shape and dtype. Several axes
 * must be given in mesh order. The result is the same on every member, yet varies over
 * `axes` by type, as JAX's does (see spmd_all_gather): a replicated out_spec refuses it; a
 * psum to which only `source` adds its block is invariant.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_pbroadcast(spmd_ctx *ctx, const spmd_block *in,
                                                    spmd_block *out, const char *axes, int source);
/**
 * pairs[2k] -> pairs[2k+1] (positions in the group, taken modulo its size; sources and
 * destinations unique): the destination receives the source's block; positions that are no
 * destination receive zeros. Several axes must be given in mesh order. Its result varies over
 * `axes` by type, as those of spmd_all_to_all, spmd_psum_scatter and their _many, _groups and
 * ragged forms (see spmd_all_gather).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_ppermute(spmd_ctx *ctx, const spmd_block *in,
                                                  spmd_block *out, const char *axes,
                                                  const int *pairs, int npairs);
/**
 * Member g receives chunk g (along split_axis) of every member's block, stacked (untiled: the
 * split dimension must equal the group size and is replaced) or concatenated (tiled) along
 * concat_axis, in position order.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_all_to_all(spmd_ctx *ctx, const spmd_block *in,
                                                    spmd_block *out, const char *axes,
                                                    int split_axis, int concat_axis, int tiled);
/**
 * axis_index_groups (JAX): subgroups of the positions 0..n-1 of a group over `axes` (n = the
 * product of their sizes, positions as spmd_axis_index gives them). A grouped collective runs
 * within each subgroup alone; member k of a subgroup is its k-th listed position, which orders
 * all_gather's stack, psum_scatter's and all_to_all's chunks. The subgroups must cover every
 * position exactly once. psum, pmax and pmin accept subgroups of different sizes; pmean,
 * all_gather, psum_scatter and all_to_all need equal ones (n is then the subgroup size).
 *
 * Example, axis "i" of size 4, JAX's [[0, 2], [3, 1]]:
 *     static const int positions[] = {0, 2, 3, 1};
 *     const spmd_axis_groups g = {2, NULL, positions};
 * The positions array is read during the call only. A mesh keeps the groups (and their
 * communicators, made once) of up to 32 distinct groupings; past them, a new grouping replaces
 * the least recently used one (built again if it comes back). One shard_map call may use at most
 * 32 distinct groupings per mesh: the 33rd is refused (SPMD_ERR_UNSUPPORTED).
 */
typedef struct spmd_axis_groups {
    int num_groups;
    /** [num_groups] positions in each subgroup; NULL: all subgroups have n / num_groups. */
    const int *sizes;
    /** Every subgroup's positions, one subgroup after another, in member order. */
    const int *positions;
} spmd_axis_groups;

/* The collectives above within subgroups; `groups` NULL is the whole group. */
SPMD_API SPMD_NODISCARD spmd_status spmd_psum_groups(spmd_ctx *ctx, const spmd_block *in,
                                                     spmd_block *out, const char *axes,
                                                     const spmd_axis_groups *groups);
SPMD_API SPMD_NODISCARD spmd_status spmd_pmean_groups(spmd_ctx *ctx, const spmd_block *in,
                                                      spmd_block *out, const char *axes,
                                                      const spmd_axis_groups *groups);
SPMD_API SPMD_NODISCARD spmd_status spmd_pmax_groups(spmd_ctx *ctx, const spmd_block *in,
                                                     spmd_block *out, const char *axes,
                                                     const spmd_axis_groups *groups);
SPMD_API SPMD_NODISCARD spmd_status spmd_pmin_groups(spmd_ctx *ctx, const spmd_block *in,
                                                     spmd_block *out, const char *axes,
                                                     const spmd_axis_groups *groups);
SPMD_API SPMD_NODISCARD spmd_status spmd_all_gather_groups(spmd_ctx *ctx, const spmd_block *in,
                                                           spmd_block *out, const char *axes,
                                                           int axis, int tiled,
                                                           const spmd_axis_groups *groups);
SPMD_API SPMD_NODISCARD spmd_status spmd_psum_scatter_groups(spmd_ctx *ctx, const spmd_block *in,
                                                             spmd_block *out, const char *axes,
                                                             int scatter_dimension, int tiled,
                                                             const spmd_axis_groups *groups);
SPMD_API SPMD_NODISCARD spmd_status spmd_all_to_all_groups(spmd_ctx *ctx, const spmd_block *in,
                                                           spmd_block *out, const char *axes,
                                                           int split_axis, int concat_axis,
                                                           int tiled,
                                                           const spmd_axis_groups *groups);

/**
 * Many blocks in one collective: the leaves of a pytree, such as a training step's gradients.
 * out[i] = psum (pmean, pmax, pmin) over the group of in[i], for every i < n, each block with
 * the rules of the one-block call (dtypes and shapes may differ between blocks; n = 0 does
 * nothing). One rendezvous and one agreement serve all n blocks. Between processes, blocks
 * below 32 KiB and f16/bf16 blocks (accumulated in f32) are packed into one buffer per
 * accumulator dtype, which travels with the agreement when it is 64 KiB at most and no block
 * goes on its own; every other block travels on its own, straight between the blocks, all in
 * flight together. The numbers are those of n one-block calls: each block's terms are added in
 * the one order of README "Reduction order", whatever the processes, the packing or the sizes,
 * so every layout gives the same bits.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_psum_many(spmd_ctx *ctx, int n, const spmd_block *in,
                                                   spmd_block *out, const char *axes);
SPMD_API SPMD_NODISCARD spmd_status spmd_pmean_many(spmd_ctx *ctx, int n, const spmd_block *in,
                                                    spmd_block *out, const char *axes);
SPMD_API SPMD_NODISCARD spmd_status spmd_pmax_many(spmd_ctx *ctx, int n, const spmd_block *in,
                                                   spmd_block *out, const char *axes);
SPMD_API SPMD_NODISCARD spmd_status spmd_pmin_many(spmd_ctx *ctx, int n, const spmd_block *in,
                                                   spmd_block *out, const char *axes);
/**
 * all_gather of n blocks (each its own shape and dtype) along `axis`, tiled or stacked, as
 * spmd_all_gather does each: one rendezvous and, between processes, one exchange of every
 * member's blocks packed together (carrying the agreement up to 64 KiB, after it beyond).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_all_gather_many(spmd_ctx *ctx, int n, const spmd_block *in,
                                                         spmd_block *out, const char *axes,
                                                         int axis, int tiled);
/**
 * JAX's lax.psend / lax.precv: a ppermute in two halves, for pipeline stages. spmd_psend keeps
 * a copy of `in` (so fn may overwrite in at once); the next spmd_precv with the same axes and
 * pairs runs the ppermute and writes what this device receives into out (in's shape and dtype;
 * zeros where no pair sends to it). Every device of the group calls both, in the same order,
 * as JAX's token orders them; up to 8 sends may wait, received oldest first. A psend that no
 * precv takes before fn returns fails the call, naming the device.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_psend(spmd_ctx *ctx, const spmd_block *in,
                                               const char *axes, const int *pairs, int npairs);
SPMD_API SPMD_NODISCARD spmd_status spmd_precv(spmd_ctx *ctx, spmd_block *out, const char *axes,
                                               const int *pairs, int npairs);
/**
 * all_to_all of n blocks (each its own shape and dtype), block i split along split_axes[i] and
 * its chunks stacked (untiled) or concatenated (tiled) along concat_axes[i], as spmd_all_to_all
 * does each: one collective, every block's chunk for a member packed into one message (a
 * pytree's leaves). in and out may be the same blocks.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_all_to_all_many(spmd_ctx *ctx, int n, const spmd_block *in,
                                                         spmd_block *out, const char *axes,
                                                         const int *split_axes,
                                                         const int *concat_axes, int tiled);
/** pswapaxes of n blocks, block i along axis[i], as spmd_pswapaxes does each: one collective
 * (spmd_all_to_all_many with split and concat axes both axis[i], untiled). */
SPMD_API SPMD_NODISCARD spmd_status spmd_pswapaxes_many(spmd_ctx *ctx, int n, const spmd_block *in,
                                                        spmd_block *out, const char *axes,
                                                        const int *axis);
/**
 * ppermute of n blocks (each its own shape and dtype; out[i] as in[i]) with one pairs list, as
 * spmd_ppermute does each: one collective, the blocks packed into one message per pair (a
 * pytree's leaves). Positions that are no destination receive zeros in every block.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_ppermute_many(spmd_ctx *ctx, int n, const spmd_block *in,
                                                       spmd_block *out, const char *axes,
                                                       const int *pairs, int npairs);

/**
 * JAX's lax.ragged_all_to_all over the group of `axes` (G members, in position order): slices
 * of rows (dimension 0) of different lengths, the mixture-of-experts token dispatch. This
 * member sends rows [input_offsets[j], input_offsets[j] + send_sizes[j]) of operand to member j,
 * which writes them at row output_offsets[j] of its output (an offset in the receiver's
 * coordinates); recv_sizes[h] is how many rows this member gets from member h and must equal
 * h's send_sizes for it. out is output with the received rows written (out may be output, in
 * place); its other rows keep output's values. operand and output share dtype and every
 * dimension but the first; the four counts are int32 or int64 blocks of G entries. A slice
 * outside operand or output, or a recv_sizes that differs from its sender's send_sizes, fails
 * the call on every device (SPMD_ERR_INVALID_ARGUMENT). Where slices overlap in one output, the
 * higher sender's rows win. Two collectives: a pmax of one number (the group's longest slice)
 * and an all_to_all of every slice padded to it. JAX's axis_index_groups are not offered.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_ragged_all_to_all(
    spmd_ctx *ctx, const spmd_block *operand, const spmd_block *output,
    const spmd_block *input_offsets, const spmd_block *send_sizes, const spmd_block *output_offsets,
    const spmd_block *recv_sizes, spmd_block *out, const char *axes);

/* The other legacy pmap collectives, built on those above. */

/** pswapaxes: all_to_all(in, axes, axis, axis, untiled): in.shape[axis] must be the group (or
 * subgroup) size; out has in's shape. */
SPMD_API SPMD_NODISCARD spmd_status spmd_pswapaxes(spmd_ctx *ctx, const spmd_block *in,
                                                   spmd_block *out, const char *axes, int axis,
                                                   const spmd_axis_groups *groups);
/**
 * pshuffle: position i receives the block of position perm[i]: ppermute with pairs (perm[i], i).
 * perm must hold each of 0..N-1 exactly once, N the group size along `axis` (n == N), as JAX's
 * docstring says; JAX's code checks only that perm is a permutation of range(len(perm)) and
 * fills zeros where a shorter one sends nothing, but libspmd follows the documented rule and
 * refuses any other n (SPMD_ERR_INVALID_ARGUMENT on every device, naming n and N).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_pshuffle(spmd_ctx *ctx, const spmd_block *in,
                                                  spmd_block *out, const char *axis,
                                                  const int *perm, int n);
/**
 * pargmax / pargmin over one mesh axis: per element, the smallest position along `axis` whose
 * block holds the maximum (minimum) of the group; out is int32 with in's shape. Where no
 * position equals the extreme (a NaN), INT32_MAX, as JAX. Each call holds a temporary block of
 * in's size until fn returns (spmd_ctx_alloc).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_pargmax(spmd_ctx *ctx, const spmd_block *in,
                                                 spmd_block *out, const char *axis);
SPMD_API SPMD_NODISCARD spmd_status spmd_pargmin(spmd_ctx *ctx, const spmd_block *in,
                                                 spmd_block *out, const char *axis);

/** Position of the calling device in its group (mixed radix, first axis major). */
SPMD_API SPMD_NODISCARD spmd_status spmd_axis_index(const spmd_ctx *ctx, const char *axes,
                                                    int *index);
/** Size of the group: the product of the named axes' sizes. */
SPMD_API SPMD_NODISCARD spmd_status spmd_axis_size(const spmd_ctx *ctx, const char *axes,
                                                   int *size);

/** Number of elements of a block. */
SPMD_API int64_t spmd_block_size(const spmd_block *block);
/** Bytes of a block's data. */
SPMD_API size_t spmd_block_nbytes(const spmd_block *block);

SPMD_END_DECLS

#endif /* SPMD_SHARD_MAP_H */
