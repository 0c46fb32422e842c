#!/bin/sh
# usage: check_hello.sh PROCS DEVICES_PER_PROC HELLO [MPIEXEC]
# examples/hello must print, from process 0 alone, the sum of 0..63 (computed here) and the
# device count.
set -eu
procs=$1 per=$2 hello=$3 mpiexec=${4:-}
if [ "$procs" -gt 1 ]; then
    out=$("$mpiexec" -n "$procs" -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$hello")
else
    out=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$hello")
fi
printf '%s\n' "$out"
want=$(awk -v p="$procs" -v d="$per" 'BEGIN {
    s = 0; for (k = 0; k < 64; k++) s += k
    printf "sum of 0..63 over %d devices = %d\n", p * d, s }')
got=$(printf '%s\n' "$out" | sort)
if [ "$got" != "$(printf '%s\n' "$want" | sort)" ]; then
    printf 'hello output differs; expected:\n%s\n' "$want"
    exit 1
fi
