#!/bin/sh
# Installs what a fresh Debian 12 machine lacks, builds libspmd, and runs examples/toy under
# mpirun with 4 processes x 2 CPU devices, then in 1 process x 8 CPU devices.
set -eu
cd "$(dirname "$0")/.."
sh tests/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)" --target toy
# The demo shows CPU devices; without this a machine with a GPU would pick the cuda platform.
export SPMD_PLATFORM=cpu
echo "== examples/toy: 4 processes x 2 CPU devices =="
# --allow-run-as-root and --oversubscribe: root on a machine with fewer cores than processes;
# btl_vader_single_copy_mechanism none: containers that forbid cross-process memory access.
mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none \
       --tag-output -np 4 -x SPMD_PLATFORM -x SPMD_NUM_CPU_DEVICES=2 build/examples/toy
echo "== examples/toy: 1 process x 8 CPU devices =="
SPMD_NUM_CPU_DEVICES=8 build/examples/toy
