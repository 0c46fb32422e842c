#!/bin/sh
# usage: check_distributed_arrays.sh PROCS DEVICES_PER_PROC PROGRAM [MPIEXEC]
# Runs examples/distributed_arrays (PROCS processes x DEVICES_PER_PROC devices) and checks:
#  - it exits 0: the program compares its three trainings' losses with its own host reference
#    (double, plain loops) and exits 1 beyond 1e-5 relative;
#  - only process 0 writes to stdout;
#  - each training, (a) unsharded, (b) 8-way data parallel, (c) 4x2 data and model parallel,
#    prints steps 0..7 in order, and its last loss is below its first;
#  - one step runs 0 collectives in (a), 9 in (b) (a psum of the loss and of each gradient)
#    and 12 in (c) (3 more: the psums over 'model' after W2 and W4, and in the backward of W3),
#    so no op communicates behind the caller's back;
#  - the final verdict reads "ok".
set -eu
procs=$1 per=$2 program=$3 mpiexec=${4:-}
# stdout only, each line tagged with the process that printed it
status=0
if [ "$procs" -gt 1 ]; then
    out=$("$mpiexec" -n "$procs" --tag-output -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$program" 2>/dev/null) || status=$?
else
    out=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$program" 2>/dev/null) || status=$?
    out=$(printf '%s\n' "$out" | sed 's/^/[1,0]<stdout>:/')
fi
if [ "$status" -ne 0 ]; then
    printf -- '--- distributed_arrays (%s x %s) exited with status %s\n%s\n' "$procs" "$per" "$status" "$out"
    exit 1
fi
if ! printf '%s\n' "$out" | awk '
    BEGIN { failed = 0; k = -1 }
    function bad(msg) { print "FAIL: " msg; failed = 1 }
    !/^\[1,0\]<stdout>:/ { bad("a line not from process 0 on stdout: " $0); next }
    { sub(/^\[1,0\]<stdout>:/, "") }
    /^== \([abc]\) / { k++; nsteps[k] = 0; next }
    k >= 0 && /^  one step: / { colls[k] = $3; next }
    k >= 0 && /^  step [0-9]+ loss / {
        if ($2 != nsteps[k]) bad("training " k ": expected step " nsteps[k] ", got: " $0)
        if (nsteps[k] == 0) first[k] = $4
        last[k] = $4
        nsteps[k]++
        next
    }
    /^largest relative difference / { verdict = $5; next }
    END {
        if (k != 2) bad("expected 3 trainings, got " k + 1)
        split("0 9 12", want)
        for (i = 0; i <= k; i++) {
            if (nsteps[i] != 8) bad("training " i ": " nsteps[i] " steps, expected 8")
            if (!(last[i] + 0 < first[i] + 0)) bad("training " i ": loss " first[i] " -> " last[i])
            if (colls[i] != want[i + 1]) bad("training " i ": " colls[i] " collectives per step, expected " want[i + 1])
        }
        if (verdict != "ok") bad("verdict: " verdict)
        exit failed
    }'; then
    printf -- '--- distributed_arrays (%s x %s)\n%s\n' "$procs" "$per" "$out"
    exit 1
fi
printf '%s\n' "$out"
