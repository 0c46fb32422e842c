#!/bin/sh
# The whole suite (but the layout comparisons) under AddressSanitizer + UndefinedBehaviorSanitizer,
# then the runtime, log, random, shard_map, collective (axis_index_groups and many blocks too),
# donation, reshard, pmap, compat, multihost and several-threads tests under ThreadSanitizer
# (test_reduction_order, whose threads share the collectives' code above, runs under ASan only:
# CI's 30 minutes)
# (suppressions, each justified, only for Open MPI's internals: tests/sanitizers/*.supp).
# Build directories: build-asan, build-tsan.
set -eu
cd "$(dirname "$0")/.."
sh tests/install_deps.sh
jobs=$(nproc)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_WERROR=ON \
      -DSPMD_SANITIZE=address,undefined
cmake --build build-asan -j"$jobs"
# The layout comparisons (example_*_layouts*, guide_*_layouts*) rerun programs whose checkers
# already run under ASan; they compare outputs, which the sanitizer does not change: left out.
ctest --test-dir build-asan --output-on-failure --label-exclude soak -E '_layouts'
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_WERROR=ON \
      -DSPMD_SANITIZE=thread -DSPMD_BUILD_BENCH=OFF -DSPMD_BUILD_EXAMPLES=OFF
cmake --build build-tsan -j"$jobs"
# Left out: the collective suites with several processes of several devices each. Their large
# collectives over several groups at once run MPI from several device threads, and under
# MPI_THREAD_MULTIPLE one thread's MPI progress copies a message into a buffer another thread
# then reads, ordered by Open MPI's request completion, which TSan cannot see (and the copy's
# stack is gone from its history, so no suppression can name it). Their 1-process and
# 1-device-per-process runs stay in.
ctest --test-dir build-tsan --output-on-failure \
      -R '^test_(runtime|platform|log|random|abstract_mesh|status|dtype|adopt_mpi|thread_level|mesh|array|collectives|shard_map|nested_calls|bool_reductions|axis_groups|many_blocks|donation|failures|reshard|ops|spec|sharding_reference|sharding_math|bad_input|pmap|compat|multihost|threads|fn_threads|call_mismatch|trace|pbroadcast|replication_proof|ppermute_many|all_to_all_many|take_concat_softmax|bitwise|psend_precv|ragged_all_to_all|unreduced)' \
      -E '^test_(collectives|many_blocks)_np[2-9]_d[2-9]$'
