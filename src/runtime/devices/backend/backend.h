/* Private: what a device platform provides. CUDA code lives only in backend/cuda.cu. */
#ifndef SPMD_BACKEND_H
#define SPMD_BACKEND_H

#include <stddef.h>

#include <spmd/runtime.h>
#include <spmd/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spmd__backend {
    const char *name;
    spmd_platform platform;
    /** 1 when device memory is ordinary host memory (memcpy may touch it directly). */
    int host_addressable;
    /** Number of physical devices this process can use; SPMD_ERR_BACKEND says why none. */
    spmd_status (*probe)(int *count);
    /** Prepares the calling (worker) thread to run work on hardware device `hw`. */
    spmd_status (*bind_thread)(int hw);
    spmd_status (*alloc)(int hw, size_t bytes, void **ptr);
    /** `bytes` as passed to alloc: small blocks may be kept for reuse. */
    void (*free)(int hw, void *ptr, size_t bytes);
    spmd_status (*copy_to_device)(int hw, void *dst, const void *host_src, size_t bytes);
    spmd_status (*copy_to_host)(int hw, void *host_dst, const void *src, size_t bytes);
    spmd_status (*copy_on_device)(int hw, void *dst, const void *src, size_t bytes);
    /** The work queue of local device `local` (on hardware `hw`), made on first use; NULL on cpu.
     */
    spmd_status (*stream)(int local, int hw, void **stream);
    /** Waits for the work queued on local device `local` (nothing queued: returns at once). */
    spmd_status (*sync)(int local);
    /** The BLAS handle of local device `local`, made on first use (bound to its stream). */
    spmd_status (*blas)(int local, int hw, void **handle);
    /** Releases every stream and handle (spmd_finalize, once the workers have stopped). */
    void (*shutdown)(void);
} spmd__backend;

extern const spmd__backend spmd__backend_cpu;
/**
 * Threads of every BLAS call in the process (spmd_op_gemm on CPU devices): fixed, so that a
 * gemm's bits do not depend on the machine's cores or on how processes are bound to them, and
 * so that P x L device threads calling the BLAS do not oversubscribe the cores.
 */
void spmd__cpu_set_blas_threads(int threads);
/** large 1 (the default): CPU buffers of 2 MiB and more ask for transparent huge pages (cpu.c
 * says why); pooled 1: so do those from 64 KiB, carved from shared huge pages (huge_pool.c), for
 * a process whose peers on its machine read its buffers straight; 0: malloc's, like the others.
 * Buffers keep how they were made. */
void spmd__cpu_set_huge_pages(int large, int pooled);
#ifdef SPMD_HAVE_CUDA
extern const spmd__backend spmd__backend_cuda;
#endif

#ifdef __cplusplus
}
#endif

#endif /* SPMD_BACKEND_H */
