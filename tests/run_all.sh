#!/bin/sh
# Builds libspmd and runs the whole test suite (unit, MPI, examples, CLI, install; CUDA tests
# skip without a GPU). The last line is ctest's summary.
set -eu
cd "$(dirname "$0")/.."
sh tests/install_deps.sh
build=${SPMD_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_WERROR=ON
cmake --build "$build" -j"$(nproc)"
# Serial: on a small machine, MPI tests running side by side only slow each other down. The
# soak test (label soak) runs on demand: ctest --test-dir build -L soak.
ctest --test-dir "$build" --output-on-failure --label-exclude soak
