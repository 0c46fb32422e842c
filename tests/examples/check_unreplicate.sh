#!/bin/sh
# usage: check_unreplicate.sh PROCS DEVICES_PER_PROC PROGRAM [MPIEXEC]
# Runs examples/unreplicate and compares every line, tagged with the process that printed it,
# with what an awk reference computes from PROCS and DEVICES_PER_PROC alone: the (3, 4) slice
# w[r, c] = (4r + c) / 4 - 1 stacked on n = PROCS * DEVICES_PER_PROC devices; the anti-pattern
# (gather, then x[0]) moves n x 48 bytes, (n - DEVICES_PER_PROC) x 48 of them from other
# processes, and np.asarray of the whole array works only in one process
# (SPMD_ERR_NOT_ADDRESSABLE otherwise); the fix (spmd_unreplicate) moves 0 bytes and lives on
# the process's first device; every way gives w.
set -eu
procs=$1 per=$2 prog=$3 mpiexec=${4:-}
# stdout (process 0's result) and stderr (the rest), each line tagged with its process
if [ "$procs" -gt 1 ]; then
    out=$("$mpiexec" -n "$procs" --tag-output -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" 2>&1)
    out=$(printf '%s\n' "$out" | sed 's/^\(\[1,[0-9]*\]\)<stderr>:/\1<stdout>:/')
else
    out=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" 2>&1 | sed 's/^/[1,0]<stdout>:/')
fi

want=$(awk -v P="$procs" -v L="$per" '
function line(p, text) { printf "[1,%d]<stdout>:process=%d %s\n", p, p, text }
BEGIN {
    n = P * L; S = 3 * 4 * 4
    w = "["
    for (r = 0; r < 3; r++) {
        w = w (r ? " [" : "[")
        for (c = 0; c < 4; c++) w = w (c ? " " : "") sprintf("%g", (4 * r + c) / 4 - 1)
        w = w "]"
    }
    w = w "]"
    for (p = 0; p < P; p++) {
        line(p, "devices=" n " local_devices=" L " slice_shape=(3, 4) slice_bytes=" S)
        line(p, "stacked shape=(" n ", 3, 4) shards=" L " stacked_replicas=1")
        line(p, "antipattern array_to_host=" (P == 1 ? "SPMD_OK" : "SPMD_ERR_NOT_ADDRESSABLE"))
        line(p, "antipattern gathered_bytes=" n * S " from_other_processes=" (n - L) * S " index0_copy_bytes=" S " values=" w)
        line(p, "fix unreplicate device=" p * L " shape=(3, 4) bytes_moved=0 values=" w)
        line(p, "fix unreplicate_to_host host_copy_bytes=" S " values=" w)
        line(p, "identical=1")
    }
    printf "[1,0]<stdout>:x[0] = %s, the same by the gather, spmd_unreplicate and spmd_unreplicate_to_host\n", w
}' | sort)
got=$(printf '%s\n' "$out" | grep 'process=\|x\[0\] = ' | sort || true)
if [ "$got" != "$want" ]; then
    printf 'unreplicate output differs from the reference.\n--- expected\n%s\n--- got\n%s\n' \
        "$want" "$got"
    exit 1
fi
printf '%s\n' "$out"
