#!/bin/sh
# usage: check_data_parallel_mlp.sh PROCS DEVICES_PER_PROC PROGRAM REFERENCE [MPIEXEC]
# Runs examples/data_parallel_mlp (PROCS processes x DEVICES_PER_PROC devices) and
# tests/examples/mlp_reference (plain host loops, double precision, full batch), and checks:
#  - every process printed the same report (process 0 on stdout, the others on stderr), and
#    each names itself one of PROCS processes (on stderr);
#  - steps 0..9 each print pmap_loss and shard_map_loss with the same text: bit-identical
#    (%.9g tells float32 values apart), because both run the same body on the same blocks over
#    the same 1-D mesh of devices 0..7, so the pmeans reduce in the same order;
#  - the loss decreases at every step;
#  - each step's loss and the final parameters' sum of squares match the reference within
#    1e-5 relative: float32 on devices (rounded differently by each split of the batch over
#    processes) against double on the host; the mean of the 8 devices' gradients over equal
#    shares of the batch is the full-batch gradient, so any other difference is a bug;
#  - the program reports the two final parameter sets bit-identical.
set -eu
procs=$1 per=$2 program=$3 reference=$4 mpiexec=${5:-}
# process 0 reports on stdout, the others on stderr: both are read, each line tagged with its
# process (lines of one process keep their order within each stream)
if [ "$procs" -gt 1 ]; then
    out=$("$mpiexec" -n "$procs" --tag-output -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$program" 2>&1)
    out=$(printf '%s\n' "$out" | sed 's/^\(\[1,[0-9]*\]\)<stderr>:/\1<stdout>:/')
else
    out=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$program" 2>&1)
    out=$(printf '%s\n' "$out" | sed 's/^/[1,0]<stdout>:/')
fi
ref=$("$reference")

# the layout's line, then the report: the same lines on every process
count=$(printf '%s\n' "$out" | grep -c "<stdout>:data_parallel_mlp: process [0-9]* of $procs process(es)$" || true)
if [ "$count" -ne "$procs" ]; then
    printf 'expected %d lines "process P of %d process(es)", got %d:\n%s\n' "$procs" "$procs" "$count" "$out"
    exit 1
fi
report_of() {
    printf '%s\n' "$out" | sed -n "s/^\[1,$1\]<stdout>://p" | grep -v '^data_parallel_mlp: process '
}
lines0=$(report_of 0)
p=1
while [ "$p" -lt "$procs" ]; do
    lines=$(report_of "$p")
    if [ "$lines" != "$lines0" ]; then
        printf 'process %d printed other lines than process 0.\n--- process 0\n%s\n--- process %d\n%s\n' \
            "$p" "$lines0" "$p" "$lines"
        exit 1
    fi
    p=$((p + 1))
done

if ! printf '%s\n--- reference\n%s\n' "$lines0" "$ref" | awk -v procs="$procs" '
    BEGIN { nsteps = 0; nref = 0; failed = 0 }
    function abs(v) { return v < 0 ? -v : v }
    function close_to(v, want) { return abs(v - want) <= 1e-5 * abs(want) }
    function bad(msg) { print "FAIL: " msg; failed = 1 }
    $0 == "--- reference" { in_ref = 1; next }
    in_ref && /^step / { sub(/^loss=/, "", $3); ref_loss[$2] = $3; nref++; next }
    in_ref && /^final param_sumsq=/ { sub(/^.*=/, ""); ref_sumsq = $0; next }
    in_ref { next }
    /^data_parallel_mlp: / { header = 1; next }
    /^step / {
        if ($2 != nsteps) bad("expected step " nsteps ", got: " $0)
        pm = $3; sm = $4
        if (sub(/^pmap_loss=/, "", pm) != 1 || sub(/^shard_map_loss=/, "", sm) != 1)
            bad("unparseable step line: " $0)
        if (pm != sm) bad("step " $2 ": pmap_loss " pm " and shard_map_loss " sm " are not bit-identical")
        loss[nsteps] = pm
        nsteps++
        next
    }
    /^final param_sumsq=/ { sub(/^.*=/, ""); sumsq = $0; next }
    /^params pmap vs shard_map: / { verdict = $NF; next }
    { bad("unexpected line: " $0) }
    END {
        if (!header) bad("no header line")
        if (nref != 10) bad("the reference printed " nref " steps, expected 10")
        if (nsteps != nref) bad("printed " nsteps " steps, the reference " nref)
        for (k = 0; k < nsteps; k++) {
            if (k > 0 && !(loss[k] + 0 < loss[k - 1] + 0))
                bad("loss does not decrease at step " k ": " loss[k - 1] " -> " loss[k])
            if (!close_to(loss[k] + 0, ref_loss[k] + 0))
                bad("step " k ": loss " loss[k] ", reference " ref_loss[k] " (beyond 1e-5 relative)")
        }
        if (sumsq == "" || !close_to(sumsq + 0, ref_sumsq + 0))
            bad("final param_sumsq " sumsq ", reference " ref_sumsq " (beyond 1e-5 relative)")
        if (verdict != "bit-identical") bad("final parameters: " verdict)
        exit failed
    }'; then
    printf -- '--- data_parallel_mlp (%s x %s)\n%s\n--- mlp_reference\n%s\n' "$procs" "$per" "$out" "$ref"
    exit 1
fi
printf '%s\n' "$out"
