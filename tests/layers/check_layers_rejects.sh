#!/bin/sh
# Feeds src/check_layers.sh copies of the tree with one bad include each and expects it to fail
# naming that file, line and edge; the unchanged copy must pass. usage: check_layers_rejects.sh ROOT
set -eu
root=$1
check=$root/src/check_layers.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# fresh copy of src/ and include/ in $work/tree
fresh() {
    rm -rf "$work/tree"
    mkdir -p "$work/tree"
    cp -R "$root/src" "$root/include" "$work/tree/"
}

# expect_rejected WHAT FILE LINE_TEXT FRAGMENT...: FILE gets LINE_TEXT as its first line; the
# check must exit 1 and print every fragment.
expect_rejected() {
    what=$1 file=$2 text=$3
    shift 3
    fresh
    { printf '%s\n' "$text"; cat "$work/tree/src/$file"; } > "$work/edit"
    mv "$work/edit" "$work/tree/src/$file"
    rc=0
    sh "$check" "$work/tree" > "$work/out" 2>&1 || rc=$?
    if [ "$rc" -ne 1 ]; then
        echo "FAIL: $what: exit $rc, want 1; output:"; cat "$work/out"
        failures=$((failures + 1))
        return
    fi
    for fragment in "$@"; do
        if ! grep -qF -- "$fragment" "$work/out"; then
            echo "FAIL: $what: output lacks \"$fragment\":"; cat "$work/out"
            failures=$((failures + 1))
            return
        fi
    done
    echo "ok: $what"
}

fresh
if sh "$check" "$work/tree" > "$work/out" 2>&1; then
    echo "ok: the unchanged tree passes"
else
    echo "FAIL: the unchanged tree is rejected:"; cat "$work/out"
    failures=$((failures + 1))
fi

expect_rejected "sharding includes shard_map (upward)" sharding/spec.c \
    '#include "shard_map/executor.h"' \
    "src/sharding/spec.c:1: includes shard_map/executor.h (layer shard_map)" "layer sharding"
expect_rejected "sharding includes the runtime's threads" sharding/mesh.c \
    '#include "runtime/devices/worker.h"' \
    "src/sharding/mesh.c:1: includes runtime/devices/worker.h (layer devices)"
expect_rejected "sharding includes array (upward)" sharding/sharding.c \
    '#include "array/array_impl.h"' "src/sharding/sharding.c:1: includes array/array_impl.h"
expect_rejected "sharding includes <mpi.h>" sharding/visualize.c '#include <mpi.h>' \
    "src/sharding/visualize.c:1: includes <mpi.h>, which layer sharding refuses"
expect_rejected "sharding includes a CUDA header" sharding/mesh_impl.h \
    '#include <cuda_runtime.h>' "includes <cuda_runtime.h>, which layer sharding refuses"
expect_rejected "runtime includes array (upward)" runtime/runtime.c '#include "array/buffer.h"' \
    "src/runtime/runtime.c:1: includes array/buffer.h (layer array)" "layer runtime"
expect_rejected "a CUDA kernel includes shard_map (upward)" runtime/devices/backend/cuda_kernels.cu \
    '#include "shard_map/reduce.h"' "src/runtime/devices/backend/cuda_kernels.cu:1: includes shard_map/reduce.h"
expect_rejected "array includes shard_map (upward)" array/reshard.c '#include "shard_map/groups.h"' \
    "src/array/reshard.c:1: includes shard_map/groups.h (layer shard_map)"
expect_rejected "the basics include the runtime" runtime/base/session.c '#include "runtime/comm/process.h"' \
    "src/runtime/base/session.c:1: includes runtime/comm/process.h (layer comm)" "layer basics"
expect_rejected "the basics include the device threads" runtime/base/log.c \
    '#include "runtime/devices/worker.h"' "src/runtime/base/log.c:1: includes runtime/devices/worker.h (layer devices)"
expect_rejected "the devices include the calls (upward)" runtime/devices/worker.c \
    '#include "runtime/calls/calls.h"' "src/runtime/devices/worker.c:1: includes runtime/calls/calls.h (layer calls)" \
    "layer devices"
expect_rejected "the calls include comm (upward)" runtime/calls/calls.c \
    '#include "runtime/comm/notes.h"' "src/runtime/calls/calls.c:1: includes runtime/comm/notes.h (layer comm)"
expect_rejected "the calls include <mpi.h>" runtime/calls/trace.c '#include <mpi.h>' \
    "src/runtime/calls/trace.c:1: includes <mpi.h>, which layer calls refuses"
expect_rejected "comm includes the runtime's start-up (upward)" runtime/comm/process_mpi.c \
    '#include "runtime/runtime_impl.h"' "src/runtime/comm/process_mpi.c:1: includes runtime/runtime_impl.h (layer runtime)"
expect_rejected "the devices include <mpi.h>" runtime/devices/event.c '#include <mpi.h>' \
    "src/runtime/devices/event.c:1: includes <mpi.h>, which layer devices refuses"
expect_rejected "pmap includes multihost (sideways)" pmap/pmap.c '#include "multihost/shapes.c"' \
    "src/pmap/pmap.c:1: includes multihost/shapes.c (layer multihost)"
expect_rejected "a relative path up and over" sharding/spec.c '#include "../array/copy.h"' \
    "src/sharding/spec.c:1: includes array/copy.h (layer array)"
expect_rejected "a path from src/ through another folder" sharding/spec.c \
    '#include "runtime/../shard_map/executor.h"' \
    "src/sharding/spec.c:1: includes shard_map/executor.h (layer shard_map)"
expect_rejected "a path from src/ that leaves it" sharding/spec.c '#include "../include/spmd/mesh.h"' \
    "src/sharding/spec.c:1: includes \"../include/spmd/mesh.h\", a path out of src/"
expect_rejected "a path in <brackets> up and over into src/" sharding/spec.c \
    '#include <../src/array/copy.h>' "src/sharding/spec.c:1: includes array/copy.h (layer array)"
expect_rejected "a path in <brackets> up and back to a refused header" sharding/spec.c \
    '#include <spmd/../spmd/mpi.h>' \
    "src/sharding/spec.c:1: includes \"spmd/../spmd/mpi.h\", a path out of src/"
expect_rejected "a refused header as <./mpi.h>" sharding/mesh.c '#include <./mpi.h>' \
    "src/sharding/mesh.c:1: includes <./mpi.h>, which layer sharding refuses"
expect_rejected "a refused public header in quotes" sharding/mesh.c '#include "spmd/mpi.h"' \
    "src/sharding/mesh.c:1: includes \"spmd/mpi.h\", which layer sharding refuses"
expect_rejected "sharding includes array in <brackets>" sharding/spec.c '#include <array/buffer.h>' \
    "src/sharding/spec.c:1: includes array/buffer.h (layer array)"
expect_rejected "sharding includes <spmd/mpi.h>" sharding/spec.c '#include <spmd/mpi.h>' \
    "src/sharding/spec.c:1: includes <spmd/mpi.h>, which layer sharding refuses"
expect_rejected "a relative path out of src/" sharding/mesh.c \
    '#include "../../include/spmd.h"' \
    "src/sharding/mesh.c:1: includes \"../../include/spmd.h\", a path out of src/"
expect_rejected "an include that is nowhere" shard_map/ops.c '#include "shard_map/gone.h"' \
    "src/shard_map/ops.c:1: includes \"shard_map/gone.h\", which is neither"

# expect_exit RC WHAT CHECK FRAGMENT: CHECK (a copy of the check) on the tree as it stands exits
# RC and prints FRAGMENT.
expect_exit() {
    want=$1 what=$2 script=$3 fragment=$4
    rc=0
    sh "$script" "$work/tree" > "$work/out" 2>&1 || rc=$?
    if [ "$rc" -eq "$want" ] && grep -qF -- "$fragment" "$work/out"; then
        echo "ok: $what"
    else
        echo "FAIL: $what: exit $rc, want $want:"; cat "$work/out"
        failures=$((failures + 1))
    fi
}

fresh
mkdir "$work/tree/src/newfolder"
printf '#include "runtime/base/check.h"\n' > "$work/tree/src/newfolder/x.c"
expect_exit 1 "a file in no layer" "$check" "src/newfolder/x.c: in no layer"

# A listing that fails half way (here an awk that cannot parse) must not pass for a clean tree.
fresh
sed 's/function normal(path,/function normal(path,,/' "$check" > "$work/broken.sh"
expect_exit 2 "a listing that fails" "$work/broken.sh" "listing the includes failed"

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
