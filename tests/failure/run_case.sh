#!/bin/sh
# usage: run_case.sh PROCS MPIEXEC PROGRAM CASE [all]
# Runs one failure case under `MPIEXEC $SPMD_TEST_RECOVERY_FLAG` (Open MPI's --enable-recovery) and checks the processes' lines:
# with --enable-recovery, mpirun exits with 0 whatever the processes return, so the verdict is
# each process's "survivor N: ok": every process but 1 (the victim), or with `all` every one
# (process 1 being only late).
set -u
procs=$1 mpiexec=$2 prog=$3 case=$4 who=${5:-}
recovery=${SPMD_TEST_RECOVERY_FLAG:-}
if [ -z "$recovery" ]; then
    echo "skipped: $mpiexec has no flag known here to outlive a dead process (Open MPI: --enable-recovery)"
    exit 77
fi
out=$("$mpiexec" "$recovery" -n "$procs" "$prog" "$case" 2>&1)
echo "$out"
status=0
p=0
while [ "$p" -lt "$procs" ]; do
    if { [ "$who" = all ] || [ "$p" -ne 1 ]; } &&
        ! printf '%s\n' "$out" | grep -q "^survivor $p: ok\$"; then
        echo "FAIL: process $p did not report a correct failure in time"
        status=1
    fi
    p=$((p + 1))
done
exit $status
