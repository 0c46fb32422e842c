#include "runtime/base/env.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/check.h"

/* Whether text is decimal digits alone, after a '-' where `negative` allows one: strtol also
 * takes leading blanks and a '+', which would let " 7" pass where "7 " fails. */
static int is_integer_text(const char *text, int negative)
{
    if (negative && *text == '-')
        text++;
    return *text && strspn(text, "0123456789") == strlen(text);
}

spmd_status spmd__env_int(const char *name, long min, long max, long *value, int *is_set)
{
    const char *text = getenv(name);
    *is_set = 0;
    if (!text || !*text)
        return SPMD_OK;
    int digits = is_integer_text(text, min < 0);
    errno = 0;
    long v = digits ? strtol(text, NULL, 10) : 0;
    SPMD_REQUIRE(digits && errno == 0 && v >= min && v <= max, SPMD_ERR_INVALID_ARGUMENT,
                 "environment variable %s=\"%s\" is not an integer in [%ld, %ld] (decimal digits "
                 "alone: no blanks, no '+'); set it to one or unset it",
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
    /* decimal only, as for integers: strtod also takes blanks, a sign, hex, inf and nan */
    int decimal = (isdigit((unsigned char)text[0]) || text[0] == '.') &&
                  strspn(text, "0123456789.eE+-") == strlen(text);
    double v = decimal ? strtod(text, &end) : 0;
    SPMD_REQUIRE(decimal && errno == 0 && *end == '\0' && v > 0 && v <= 1e7,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "environment variable %s=\"%s\" is not a number of seconds in (0, 1e7] (a "
                 "decimal number such as 2 or 0.5, no blanks, no sign); set it to one or unset it",
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
        long n = is_integer_text(v, 0) ? strtol(v, NULL, 10) : 0;
        if (n > 0 && n <= INT_MAX) {
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
