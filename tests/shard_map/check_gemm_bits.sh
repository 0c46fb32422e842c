#!/bin/sh
# usage: check_gemm_bits.sh PROGRAM MPIEXEC
# test_gemm_bits at 1 x 8, 2 x 4 and 4 x 2, each bound to cores and not: one digest everywhere
# (spmd_op_gemm runs the BLAS with SPMD_BLAS_THREADS threads, 1 by default).
set -eu
prog=$1 mpiexec=$2
first=""
for layout in 1x8 2x4 4x2; do
    procs=${layout%x*} per=${layout#*x}
    for bind in none core:overload-allowed; do
        out=$("$mpiexec" -n "$procs" --bind-to "$bind" -x SPMD_NUM_CPU_DEVICES="$per" "$prog")
        d=$(printf '%s\n' "$out" | sed -n 's/^gemm digest //p')
        if [ -z "$d" ]; then
            printf 'layout %s, bind-to %s: no digest in:\n%s\n' "$layout" "$bind" "$out"
            exit 1
        fi
        echo "$layout bind-to $bind: $d"
        if [ -z "$first" ]; then
            first=$d
        elif [ "$d" != "$first" ]; then
            printf 'layout %s, bind-to %s gives %s; 1x8 unbound gave %s\n' "$layout" "$bind" "$d" "$first"
            exit 1
        fi
    done
done
