#include "runtime/comm/mpi_failure.h"

#include <mpi.h>
#include <stdio.h>

#include "runtime/base/check.h"

spmd_status spmd__mpi_failure(int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error code %d", rc);
    return SPMD_ERROR(SPMD_ERR_DISTRIBUTED, "%s failed: %s", what, text);
}
