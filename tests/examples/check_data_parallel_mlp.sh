#!/bin/sh
# usage: check_data_parallel_mlp.sh PROCS DEVICES_PER_PROC PROGRAM REFERENCE [MPIEXEC]
# Runs examples/data_parallel_mlp (PROCS processes x DEVICES_PER_PROC devices) and
# tests/examples/mlp_reference (plain host loops, double precision, full batch), and checks:
#  - every process printed the same lines, and the header names PROCS processes;
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
if [ "$procs" -gt 1 ]; then
    out=$("$mpiexec" -n "$procs" --tag-output -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$program")
else
    out=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$program")
    out=$(printf '%s\n' "$out" | sed 's/^/[1,0]<stdout>:/')
fi
ref=$("$reference")

lines0=$(printf '%s\n' "$out" | sed -n 's/^\[1,0\]<stdout>://p')
p=1
while [ "$p" -lt "$procs" ]; do
    lines=$(printf '%s\n' "$out" | sed -n "s/^\[1,$p\]<stdout>://p")
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
    /^data_parallel_mlp: / {
        header = 1
        if ($0 !~ (" " procs " process\\(es\\)"))
            bad("header does not name " procs " process(es): " $0)
        next
    }
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
