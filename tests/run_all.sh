#!/bin/sh
# Builds libspmd and runs the whole test suite (unit, MPI, examples, CLI, install; CUDA tests
# skip without a GPU). The last line is ctest's summary.
set -eu
cd "$(dirname "$0")/.."
sh tests/install_deps.sh
build=${SPMD_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_WERROR=ON
cmake --build "$build" -j"$(nproc)"
# In parallel, one test per core, but MPI jobs one at a time (side by side on a small machine
# they only slow each other down) and alone the tests a neighbour could fail (tests/README.md).
# The soak test (label soak) runs on demand: ctest --test-dir build -L soak.
ctest --test-dir "$build" --output-on-failure --label-exclude soak -j"$(nproc)"
