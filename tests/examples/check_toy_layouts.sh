#!/bin/sh
# usage: check_toy_layouts.sh TOY MPIEXEC
# One program, any layout, the same bits: examples/toy at 1 x 8, 2 x 4, 4 x 2 and 8 x 1 must
# print the same "got result" value, digit for digit (%.9g round-trips float32), on every
# process: psum adds in one order whatever the layout (README "Reduction order").
set -eu
toy=$1 mpiexec=$2
first=""
for layout in 1x8 2x4 4x2 8x1; do
    procs=${layout%x*} per=${layout#*x}
    if [ "$procs" -gt 1 ]; then
        out=$("$mpiexec" -n "$procs" -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$toy")
    else
        out=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$toy")
    fi
    values=$(printf '%s\n' "$out" | sed -n 's/^process=[0-9]* got result: //p' | sort -u)
    count=$(printf '%s\n' "$out" | grep -c 'got result' || true)
    if [ "$count" -ne "$procs" ] || [ "$(printf '%s\n' "$values" | wc -l)" -ne 1 ]; then
        printf 'layout %s: expected one result line per process, all alike; got:\n%s\n' "$layout" "$out"
        exit 1
    fi
    echo "$layout: $values"
    if [ -z "$first" ]; then
        first=$values
    elif [ "$values" != "$first" ]; then
        printf 'layout %s prints %s, layout 1x8 printed %s\n' "$layout" "$values" "$first"
        exit 1
    fi
done
