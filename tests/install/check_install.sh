#!/bin/sh
# usage: check_install.sh BUILD_DIR SOURCE_DIR WORK_DIR C_COMPILER EXTRA_CFLAGS MPI CUDA NCCL
# (the last three 1 or 0: what the build has)
# Installs into WORK_DIR/prefix and builds, against the installed package only, examples/toy.c
# (find_package and pkg-config) and migration-guide/snippets/model.c (find_package).
# EXTRA_CFLAGS carries the sanitizer flags of a sanitized build into the consumer builds.
set -eu
build=$1 src=$2 work=$3 cc=$4 extra=${5:-} mpi=${6:-0} cuda=${7:-0} nccl=${8:-0}
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
# (the snippet prints what depends on the layout on stderr: the checker reads both)
SPMD_NUM_CPU_DEVICES=8 SPMD_CUDA_DEVICES_PER_GPU=8 "$work/consumer/model" >"$work/model.out" 2>&1 || {
    echo "migration-guide/snippets/model.c, built with find_package(spmd), failed:"
    cat "$work/model.out"; exit 1; }
awk -v P=1 -v L=8 -f "$guide/checks/common.awk" -f "$guide/checks/model.awk" "$work/model.out" || {
    echo "unexpected output from the guide's first program (find_package build):"
    cat "$work/model.out"; exit 1; }

# 1b. SpmdTesting from the installed package: the deterministic probe's layouts agree, the
# layout-printing probe's comparison fails (and only that test), each layout passes itself.
cmake -S "$src/tests/install/consumer" -B "$work/consumer" \
      -DSPMD_PROBE_SOURCE="$src/tests/cli/launch_probe.c" >"$work/configure_probe.log"
cmake --build "$work/consumer" >"$work/build_probe.log"
if [ "$mpi" = 1 ]; then
    want_tests="agree_1x8 agree_2x4 agree_4x2 agree_compare differ_1x8 differ_2x4 differ_4x2 differ_compare"
else
    want_tests="agree_1x8 differ_1x8"
fi
listed=$(cd "$work/consumer" && ctest -N | sed -n 's/^ *Test *#[0-9]*: //p' | tr '\n' ' ')
[ "$listed" = "$want_tests " ] || { echo "SpmdTesting registered \"$listed\", expected \"$want_tests \""; exit 1; }
(cd "$work/consumer" && ctest --output-on-failure >"$work/ctest_probe.log" 2>&1) || true # differ_compare fails
failed=$(sed -n 's/^[[:space:]]*[0-9]* - \([a-z0-9_]*\) (Failed)$/\1/p' "$work/ctest_probe.log" | tr '\n' ' ')
if [ "$mpi" = 1 ] && [ "$failed" != "differ_compare " ]; then
    echo "SpmdTesting: expected exactly differ_compare to fail, got: \"$failed\""
    cat "$work/ctest_probe.log"; exit 1
fi
if [ "$mpi" = 0 ] && [ -n "$failed" ]; then
    echo "SpmdTesting: failures: $failed"; cat "$work/ctest_probe.log"; exit 1
fi
grep -q 'give different output\|compared (exact), [0-9]* differ' "$work/ctest_probe.log" \
    || [ "$mpi" = 0 ] || { echo "the comparison does not name the difference"; exit 1; }

# 1c. components: each configures exactly when the build has it; an unknown one never does.
for component in mpi cuda nccl bogus; do
    case $component in
    mpi) have=$mpi ;; cuda) have=$cuda ;; nccl) have=$nccl ;; *) have=0 ;;
    esac
    if cmake -S "$src/tests/install/components" -B "$work/components_$component" \
             -DCMAKE_PREFIX_PATH="$prefix" -DSPMD_WANT="$component" \
             >"$work/components_$component.log" 2>&1; then got=1; else got=0; fi
    [ "$got" = "$have" ] || {
        echo "find_package(spmd COMPONENTS $component): configured=$got, the build has it=$have"
        cat "$work/components_$component.log"; exit 1; }
    if [ "$got" = 0 ]; then
        grep -q "component '$component'\|component.*$component" "$work/components_$component.log" || {
            echo "find_package(spmd COMPONENTS $component) failed without naming it"
            cat "$work/components_$component.log"; exit 1; }
    fi
done

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
