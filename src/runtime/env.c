#include "runtime/env.h"

#include <errno.h>
#include <stdlib.h>

#include "runtime/check.h"
#include "runtime/process.h"

spmd_status spmd__env_int(const char *name, long min, long max, long *value, int *is_set)
{
    const char *text = getenv(name);
    *is_set = 0;
    if (!text || !*text)
        return SPMD_OK;
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    SPMD_REQUIRE(errno == 0 && *end == '\0' && v >= min && v <= max, SPMD_ERR_INVALID_ARGUMENT,
                 "environment variable %s=\"%s\" is not an integer in [%ld, %ld]; set it to one "
                 "or unset it",
                 name, text, min, max);
    *value = v;
    *is_set = 1;
    return SPMD_OK;
}

spmd_status spmd__env_seconds(const char *name, double *seconds)
{
    const char *text = getenv(name);
    if (!text || !*text) /* set but empty means unset, as for every variable */
        return SPMD_OK;
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    SPMD_REQUIRE(errno == 0 && *end == '\0' && v > 0 && v <= 1e7, SPMD_ERR_INVALID_ARGUMENT,
                 "environment variable %s=\"%s\" is not a number of seconds in (0, 1e7]; set it "
                 "to one or unset it",
                 name, text);
    *seconds = v;
    return SPMD_OK;
}

int spmd__launcher_process_count(const char **launcher)
{
    /* Variables that each launcher sets in every process it starts. */
    static const struct {
        const char *variable;
        const char *launcher;
    } known[] = {
        {"OMPI_COMM_WORLD_SIZE", "Open MPI mpirun"},
        {"PMI_SIZE", "an MPICH-style launcher (hydra, PMI)"},
        {"PMIX_SIZE", "a PMIx launcher"},
        {"MV2_COMM_WORLD_SIZE", "MVAPICH mpirun"},
        {"SLURM_NTASKS", "Slurm srun"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const char *v = getenv(known[i].variable);
        /* sbatch sets SLURM_NTASKS too; only a job step (srun) sets SLURM_STEP_ID. */
        if (!v || (i == 4 && !getenv("SLURM_STEP_ID")))
            continue;
        long n = strtol(v, NULL, 10);
        if (n > 0) {
            if (launcher)
                *launcher = known[i].launcher;
            return (int)n;
        }
    }
    if (getenv("PMIX_RANK")) {
        if (launcher)
            *launcher = "a PMIx launcher";
        return 1;
    }
    return 0;
}
