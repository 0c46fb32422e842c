#!/bin/sh
# usage: check_install.sh BUILD_DIR SOURCE_DIR WORK_DIR C_COMPILER [EXTRA_CFLAGS]
# Installs into WORK_DIR/prefix and builds, against the installed package only, examples/toy.c
# (find_package and pkg-config) and migration-guide/snippets/model.c (find_package).
# EXTRA_CFLAGS carries the sanitizer flags of a sanitized build into the consumer builds.
set -eu
build=$1 src=$2 work=$3 cc=$4 extra=${5:-}
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"

expect_toy() {
    out=$("$1")
    echo "$out" | grep -qx 'device 7 has local data \[\[28 29 30 31\]\]' || {
        echo "unexpected output from $1:"; echo "$out"; exit 1; }
}

# 1. CMake package: examples/toy.c, and the migration guide's first program, whose output
# the guide's own checker verifies (1 process x 8 devices).
guide=$src/migration-guide
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
      -DSPMD_TOY_SOURCE="$src/examples/toy.c" -DCMAKE_C_COMPILER="$cc" \
      -DSPMD_GUIDE_MODEL_SOURCE="$guide/snippets/model.c" \
      -DCMAKE_C_FLAGS="$extra" >"$work/configure.log"
cmake --build "$work/consumer" >"$work/build.log"
expect_toy "$work/consumer/toy"
SPMD_NUM_CPU_DEVICES=8 SPMD_CUDA_DEVICES_PER_GPU=8 "$work/consumer/model" >"$work/model.out" || {
    echo "migration-guide/snippets/model.c, built with find_package(spmd), failed:"
    cat "$work/model.out"; exit 1; }
awk -v P=1 -v L=8 -f "$guide/checks/common.awk" -f "$guide/checks/model.awk" "$work/model.out" || {
    echo "unexpected output from the guide's first program (find_package build):"
    cat "$work/model.out"; exit 1; }

# 2. pkg-config
pcdir=$(dirname "$(find "$prefix" -name spmd.pc | head -n 1)")
libdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir spmd)
# shellcheck disable=SC2046
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror $extra -o "$work/toy_pc" "$src/examples/toy.c" \
      $(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs spmd) -Wl,-rpath,"$libdir"
expect_toy "$work/toy_pc"

# 3. the installed CLI runs
"$prefix/bin/spmd" --version >/dev/null
echo "installed package OK: find_package(spmd) and pkg-config both build and run examples/toy.c;"
echo "find_package(spmd) builds and runs the migration guide's first program (snippets/model.c)"
