#!/bin/sh
# usage: check_install.sh BUILD_DIR SOURCE_DIR WORK_DIR C_COMPILER [EXTRA_CFLAGS]
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

# 1. CMake package
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
      -DSPMD_TOY_SOURCE="$src/examples/toy.c" -DCMAKE_C_COMPILER="$cc" \
      -DCMAKE_C_FLAGS="$extra" >"$work/configure.log"
cmake --build "$work/consumer" >"$work/build.log"
expect_toy "$work/consumer/toy"

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
echo "installed package OK: find_package(spmd) and pkg-config both build and run examples/toy.c"
