#!/bin/sh
# The suite under AddressSanitizer + UndefinedBehaviorSanitizer, then its threaded tests under
# ThreadSanitizer (suppressions, each justified, only for Open MPI's and OpenBLAS's internals:
# tests/sanitizers/*.supp). What each run keeps, and why, is in tests/README.md: every test
# program, in the layouts that run its code (labels layout_repeat and tree mark the rest).
# Build directories: build-asan, build-tsan.
set -eu
cd "$(dirname "$0")/.."
sh tests/install_deps.sh
jobs=$(nproc)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_WERROR=ON \
      -DSPMD_SANITIZE=address,undefined
cmake --build build-asan -j"$jobs"
ctest --test-dir build-asan --output-on-failure -j"$jobs" \
      --label-exclude '^(soak|layout_repeat|tree)$'
# ThreadSanitizer: the tests labelled tsan, and only the programs they run (spmd_tsan_tests). No
# CUDA: its tests skip without a GPU, and ThreadSanitizer does not see into nvcc's code.
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_WERROR=ON \
      -DSPMD_SANITIZE=thread -DSPMD_ENABLE_CUDA=OFF -DSPMD_BUILD_BENCH=OFF \
      -DSPMD_BUILD_EXAMPLES=OFF
cmake --build build-tsan -j"$jobs" --target spmd_tsan_tests
ctest --test-dir build-tsan --output-on-failure -j"$jobs" --label-regex '^tsan$'
