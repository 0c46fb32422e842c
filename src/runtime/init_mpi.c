/* spmd_init_mpi (spmd/mpi.h): spmd_init over a communicator the program chose. Apart from
 * runtime.c, which builds without MPI too. */
#include <mpi.h>

#include <spmd/mpi.h>

#include "runtime/base/check.h"
#include "runtime/runtime_impl.h"

static spmd_status spmd_init_mpi_checked(MPI_Comm user, const spmd_init_options *opts)
{
    SPMD_REQUIRE(user != MPI_COMM_NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_init_mpi: comm is MPI_COMM_NULL; pass the communicator to run on");
    return spmd__runtime_init(opts, &user);
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_init_mpi(MPI_Comm user, const spmd_init_options *opts)
{
    return spmd__error_in(spmd_init_mpi_checked(user, opts), "spmd_init_mpi");
}
