#!/bin/sh
# Builds the libFuzzer harnesses of tests/fuzz with clang, in a build directory of their own
# (default build-fuzz), and runs them: ctest -L fuzz runs each one over a fixed number of
# inputs from its seed corpus (seconds each). tests/fuzz/README.md says how to fuzz for longer.
#
# usage: sh tests/run_fuzz.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
sh tests/install_deps.sh
build=${1:-build-fuzz}
# The harnesses get their own ASan+UBSan+coverage copy of libspmd (tests/fuzz/CMakeLists.txt),
# so nothing else is built; MPI and CUDA stay out of the way of the sanitizers.
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPMD_WERROR=ON -DSPMD_BUILD_FUZZERS=ON -DSPMD_ENABLE_MPI=OFF -DSPMD_ENABLE_CUDA=OFF \
    -DSPMD_BUILD_EXAMPLES=OFF -DSPMD_BUILD_BENCH=OFF
cmake --build "$build" -j"$(nproc)" --target fuzz_spec fuzz_sharding fuzz_cli
ctest --test-dir "$build" -L fuzz --output-on-failure
