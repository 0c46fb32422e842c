/*
 * Under mpirun: process 1 dies (SIGKILL) right after creating its shared-memory segment inside
 * spmd_init (src/runtime/comm/host_rings.c), before the segment is unlinked; it prints
 * "victim pid P" first. Process 0 goes without rings (SPMD_SHM=0), so that the next start-up is
 * the first to find the segment, and prints how its spmd_init ended. check_shm_leftover.sh runs
 * it, then a job, and checks that the job's start-up removed the dead process's segment.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spmd.h>

static int victim;

/* libspmd's shm_open, interposed: the executable's definition comes first. */
int shm_open(const char *name, int flags, mode_t mode)
{
    int (*real)(const char *, int, mode_t) =
        (int (*)(const char *, int, mode_t))dlsym(RTLD_NEXT, "shm_open");
    int fd = real(name, flags, mode);
    if (fd >= 0 && victim && (flags & O_CREAT) && strncmp(name, "/spmd-rings-", 12) == 0) {
        printf("victim pid %ld\n", (long)getpid());
        fflush(stdout);
        raise(SIGKILL);
    }
    return fd;
}

int main(void)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    victim = rank && strcmp(rank, "1") == 0;
    if (!victim)
        setenv("SPMD_SHM", "0", 1);
    spmd_status st = spmd_init(NULL);
    printf("process %s: spmd_init: %s\n", rank ? rank : "0", spmd_status_name(st));
    fflush(stdout);
    _Exit(0); /* MPI_Finalize would wait for the dead */
}
