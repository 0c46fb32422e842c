#!/bin/sh
# usage: check_shm_leftover.sh MPIEXEC TEST_SHM HELLO
# A process killed inside spmd_init, after creating its shared-memory segment and before
# unlinking it, leaves the segment behind; the next start-up of the same user removes it.
set -u
mpiexec=$1 prog=$2 hello=$3
recovery=${SPMD_TEST_RECOVERY_FLAG:-}
if [ -z "$recovery" ]; then
    echo "skipped: $mpiexec has no flag known here to outlive a dead process (Open MPI: --enable-recovery)"
    exit 77
fi
[ -d /dev/shm ] || { echo "skipped: no /dev/shm"; exit 77; }
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
segments() { find /dev/shm -maxdepth 1 -user "$(id -u)" -name 'spmd-rings-*' | sort; }
segments >"$work/before"
out=$("$mpiexec" "$recovery" -n 2 "$prog" 2>&1)
echo "$out"
printf '%s\n' "$out" | grep -q '^victim pid ' || { echo "FAIL: process 1 did not die in spmd_init"; exit 1; }
left=$(segments | comm -13 "$work/before" -)
echo "--- left in /dev/shm by the dead process: ${left:-nothing}"
[ -n "$left" ] || { echo "FAIL: expected the dead process's segment to be left behind"; exit 1; }
out=$(SPMD_NUM_CPU_DEVICES=1 "$mpiexec" -n 2 "$hello" 2>&1) # examples/hello
echo "$out"
printf '%s\n' "$out" | grep -qx 'sum of 0..63 over 2 devices = 2016' ||
    { echo "FAIL: the next job's sum"; exit 1; }
still=$(for f in $left; do [ -e "$f" ] && echo "$f"; done)
echo "--- after the next start-up: ${still:-nothing left}"
[ -z "$still" ] || { echo "FAIL: the next start-up did not remove $still"; exit 1; }
echo "ok"
