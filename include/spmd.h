/* libspmd: SPMD programs over device meshes, threads and MPI processes. Umbrella header. */
#ifndef SPMD_H
#define SPMD_H

#include "spmd/config.h"
#include "spmd/export.h"
#include "spmd/version.h"

#include "spmd/status.h"
#include "spmd/dtype.h"
#include "spmd/runtime.h"

#include "spmd/mesh.h"
#include "spmd/spec.h"
#include "spmd/sharding.h"
#include "spmd/array.h"
#include "spmd/reshard.h"
#include "spmd/shard_map.h"
#include "spmd/ops.h"
#include "spmd/array_ops.h"
#include "spmd/multihost.h"
#include "spmd/compat.h"
#include "spmd/pmap.h"
#include "spmd/trace.h"

#endif /* SPMD_H */
