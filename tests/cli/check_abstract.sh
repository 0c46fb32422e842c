#!/bin/sh
# spmd sharding on an abstract mesh (SPMD_NUM_CPU_DEVICES unset) prints exactly what it prints
# on that many real CPU devices: JSON and picture, several meshes, specs, shapes and device ids.
# usage: check_abstract.sh SPMD_CLI
set -u
spmd=$1
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
fail=0
compare() { # compare DEVICES ARGS...
    n=$1; shift
    SPMD_NUM_CPU_DEVICES=$n "$spmd" sharding "$@" >"$work/devices" 2>&1; a=$?
    env -u SPMD_NUM_CPU_DEVICES "$spmd" sharding "$@" >"$work/abstract" 2>&1; b=$?
    if [ "$a" -ne 0 ] || [ "$b" -ne 0 ] || ! cmp -s "$work/devices" "$work/abstract"; then
        echo "FAIL: spmd sharding $* (exit $a on $n devices, $b abstract)"
        diff "$work/devices" "$work/abstract" | head -20
        fail=1
    fi
}
for out in --json ""; do
    compare 8 --mesh a=4,b=2 --spec "'a', None" --shape 8,8 $out
    compare 8 --mesh a=4,b=2 --spec "('b','a'), None" --shape 16,4 $out
    compare 8 --mesh a=2,b=2,c=2 --spec "None, 'c'" --shape 3,4 $out
    compare 16 --mesh a=2,b=2 --devices 15,3,0,7 --spec "'b', 'a'" --shape 4,6 $out
    compare 32 --mesh x=8,y=4 --spec "'y', ('x',)" --shape 8,16,2 $out
    compare 4 --mesh x=4 --spec "" --shape 5 $out
    compare 512 --mesh a=64,b=8 --spec "'a','b'" --shape 512,64 $out
done
exit $fail
