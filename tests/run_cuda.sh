#!/bin/sh
# The GPU run: builds libspmd with CUDA and runs every ctest suite on CUDA devices. Each test's
# device count N (SPMD_NUM_CPU_DEVICES=N on CPU) becomes N logical devices per GPU
# (SPMD_CUDA_DEVICES_PER_GPU=N), so the 1-, 2-, 4- and 8-device configurations of the CPU run
# all run on the GPU. The last line is ctest's summary. Without a usable GPU it says why and
# exits 77. SPMD_NO_DEPS=1 skips the Debian package check (machines that are not Debian).
set -eu
cd "$(dirname "$0")/.."
[ -n "${SPMD_NO_DEPS:-}" ] || sh tests/install_deps.sh
build=${SPMD_BUILD_DIR:-build-cuda}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_WERROR=ON -DSPMD_ENABLE_CUDA=ON \
    -DSPMD_TEST_PLATFORM=cuda
cmake --build "$build" -j"$(nproc)"
if ! SPMD_PLATFORM=cuda "$build/src/spmd" info >/dev/null; then
    echo "run_cuda.sh: no usable GPU (see the message above); nothing was run"
    exit 77
fi
# Processes of the MPI tests share the GPU; several tests at once keep it busy.
ctest --test-dir "$build" --output-on-failure --label-exclude "soak|fuzz" -j"${SPMD_CTEST_JOBS:-4}"
