#!/bin/sh
# usage: check_toy.sh PROCS DEVICES_PER_PROC TOY [MPIEXEC]
# Runs examples/toy and checks that every process printed exactly its own shards of
# arange(32).reshape(4, 8) under P('i', 'j') on the (4, 2) mesh (device d holds row d/2,
# columns 4*(d%2) .. 4*(d%2)+3), and the shard_map result sum(sin(arange(32))) =
# -0.12398729 (float32: within 1e-5), once, from process 0.
set -eu
procs=$1 per=$2 toy=$3 mpiexec=${4:-}
if [ "$procs" -gt 1 ]; then
    out=$("$mpiexec" -n "$procs" --tag-output -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$toy")
else
    out=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$toy" | sed 's/^/[1,0]<stdout>:/')
fi
expected=""
d=0
while [ "$d" -lt 8 ]; do
    row=$((d / 2)) col=$((4 * (d % 2)))
    base=$((row * 8 + col))
    line="[1,$((d / per))]<stdout>:device $d has local data [[$base $((base + 1)) $((base + 2)) $((base + 3))]]"
    expected="$expected$line
"
    d=$((d + 1))
done
results=$(printf '%s\n' "$out" | grep 'got result' || true)
shards=$(printf '%s\n' "$out" | grep -v 'got result' || true)
value=$(printf '%s\n' "$results" | sed -n 's/^\[1,0\]<stdout>:process=0 got result: //p')
if [ "$(printf '%s\n' "$results" | grep -c .)" -ne 1 ] || [ -z "$value" ] ||
    ! awk -v v="$value" 'BEGIN { d = v + 0.12398729; exit !(d < 1e-5 && d > -1e-5) }'; then
    printf 'expected one line "process=0 got result: -0.123987317" (within 1e-5), from process 0, got:\n%s\n' \
        "$results"
    exit 1
fi
got=$(printf '%s\n' "$shards" | sort)
want=$(printf '%s' "$expected" | sort)
if [ "$got" != "$want" ]; then
    printf 'toy output differs.\n--- expected\n%s\n--- got\n%s\n' "$want" "$got"
    exit 1
fi
printf '%s\n' "$out"
