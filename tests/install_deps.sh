#!/bin/sh
# Installs the Debian 12 packages libspmd builds and tests with, when any is missing.
# Runs as root (or through sudo). The CUDA toolkit is optional and not installed here: when
# nvcc is found (PATH or /usr/local/cuda), the CUDA backend is built as well. clang and
# libclang-rt-dev (-> libclang-rt-14-dev: compiler-rt, with libFuzzer's -fsanitize=fuzzer runtime
# and clang's ASan/UBSan; clang only recommends it, and --no-install-recommends skips that) are
# for tests/run_fuzz.sh. time (GNU time) measures the peak memory of cli_sharding_json_bounded.
set -eu
packages="build-essential cmake pkg-config git libopenmpi-dev openmpi-bin libcmocka-dev libcjson-dev libopenblas-dev librandom123-dev libscalapack-openmpi-dev libxxhash-dev clang libclang-rt-dev gnuplot-nox time"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing:$missing"
$sudo apt-get update -q
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing
