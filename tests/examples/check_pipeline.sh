#!/bin/sh
# usage: check_pipeline.sh PROCS DEVICES_PER_PROC PIPELINE [MPIEXEC]
# Runs examples/pipeline and checks it against the network recomputed here from the same
# initialization: x[r,c] = ((7r + 3c) mod 37 - 18) / 24 (32 x 8), W1[r,c] = ((5r + 3c + 2) mod 17
# - 8) / 16 (8 x 16), W2[r,c] = ((3r + 7c + 1) mod 19 - 9) / 16 (16 x 4), b[c] = (c - 1.5) / 4,
# y = tanh(x @ W1) @ W2 + b, in 4 microbatches of 8 rows:
#  - every row of y printed exactly once (within 1e-5), by the process owning the stage-2 device
#    that holds it (device n/2 + q holds rows q*8/(n/2).. of each microbatch, P('batch', None));
#  - each stage-2 process prints each microbatch's sum(y) and the total; stage-1-only processes
#    print neither; the process of device n/2 alone prints them as "result" lines (stdout);
#  - each process reports, per microbatch, the reshard bytes it sent to and received from other
#    processes: 4 bytes per element of h (8 x 16, columns split over devices [0, n/2)) whose
#    stage-1 owner and stage-2 owner are different processes (all 0 in one process).
set -eu
procs=$1 per=$2 prog=$3 mpiexec=${4:-}
# stdout (the results, from the process of device n/2) and stderr (the rest), each line tagged
# with its process
if [ "$procs" -gt 1 ]; then
    out=$("$mpiexec" -n "$procs" --tag-output -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" 2>&1)
    out=$(printf '%s\n' "$out" | sed 's/^\(\[1,[0-9]*\]\)<stderr>:/\1<stdout>:/')
else
    out=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" 2>&1 | sed 's/^/[1,0]<stdout>:/')
fi
if ! printf '%s\n' "$out" | awk -v procs="$procs" -v per="$per" '
function fail(msg) { print "check_pipeline: " msg; bad = 1; exit 1 }
function absf(v) { return v < 0 ? -v : v }
function close_to(got, want, tol) { return absf(got - want) <= tol * (1 + absf(want)) }
function tanh(a,   t) { t = exp(2 * a); return (t - 1) / (t + 1) }
function field(name,   i) {
    for (i = 1; i <= NF; i++)
        if (index($i, name "=") == 1)
            return substr($i, length(name) + 2)
    fail("no " name "= in: " $0)
}
BEGIN {
    BATCH = 32; NMB = 4; MB = 8; DIN = 8; HID = 16; DOUT = 4
    n = procs * per; s = n / 2; RP = MB / s; CP = HID / s
    total = 0
    for (r = 0; r < BATCH; r++) {
        for (k = 0; k < HID; k++) {
            a = 0
            for (c = 0; c < DIN; c++)
                a += (((7 * r + 3 * c) % 37 - 18) / 24) * (((5 * c + 3 * k + 2) % 17 - 8) / 16)
            h[k] = tanh(a)
        }
        for (o = 0; o < DOUT; o++) {
            v = (o - 1.5) / 4
            for (k = 0; k < HID; k++)
                v += h[k] * (((3 * k + 7 * o + 1) % 19 - 9) / 16)
            y[r, o] = v
            mbsum[int(r / MB)] += v
            total += v
        }
    }
    # reshard traffic of one microbatch: h[r, k] moves from device k/CP to device s + r/RP
    for (r = 0; r < MB; r++)
        for (k = 0; k < HID; k++) {
            src = int(int(k / CP) / per); dst = int((s + int(r / RP)) / per)
            if (src != dst) { sent[src] += 4; recv[dst] += 4 }
        }
    for (q = 0; q < procs; q++) {
        stage1[q] = q * per < s
        stage2[q] = (q + 1) * per > s
    }
}
{
    if (!match($0, /^\[1,[0-9]+\]<stdout>:/))
        fail("untagged line: " $0)
    p = substr($0, 4, RLENGTH - 13) + 0
    line = substr($0, RLENGTH + 1)
    $0 = line
    if (line ~ /^result /) { # the results, from the process of device n/2 alone
        if (p != int(s / per)) fail("process " p " is not the process of device " s ": " line)
        if (line ~ /^result total=/) {
            if (results_total++ || !close_to(field("total"), total, 1e-5))
                fail("expected one \"result total=" total "\": " line)
        } else {
            m = field("mb") + 0
            if (results[m]++ || !close_to(field("sum"), mbsum[m], 1e-5))
                fail("microbatch " m ": expected one \"result mb=" m " sum=" mbsum[m] "\": " line)
        }
        next
    }
    if (NF > 0 && field("process") + 0 != p)
        fail("process " p " printed another process number: " line)
}
/^reshard / {
    m = field("mb") + 0
    if (reshards[p, m]++) fail("reshard reported twice: " line)
    if (field("bytes_sent") + 0 != sent[p] + 0 || field("bytes_received") + 0 != recv[p] + 0)
        fail("process " p " should send " sent[p] + 0 " and receive " recv[p] + 0 " bytes per microbatch: " line)
    next
}
/^out / {
    d = field("device") + 0; m = field("mb") + 0
    split(field("row"), rr, ":"); i = rr[1] + 0
    if (int(d / per) != p || d < s)
        fail("process " p " printed rows of device " d ", not one of its stage-2 devices: " line)
    first = m * MB + (d - s) * RP
    if (i < first || i >= first + RP)
        fail("device " d " holds rows " first ".." first + RP - 1 " of microbatch " m ": " line)
    if (seen[i]++) fail("row " i " printed twice: " line)
    split(line, parts, ": ")
    if (split(parts[2], e, " ") != DOUT) fail("expected " DOUT " values: " line)
    for (o = 0; o < DOUT; o++)
        if (!close_to(e[o + 1], y[i, o], 1e-5))
            fail("y[" i ", " o "] = " e[o + 1] ", expected " y[i, o] ": " line)
    next
}
/^checksum / {
    m = field("mb") + 0
    if (!stage2[p]) fail("process " p " has no stage-2 device but printed: " line)
    if (sums[p, m]++) fail("checksum printed twice: " line)
    if (!close_to(field("sum"), mbsum[m], 1e-5))
        fail("microbatch " m ": expected sum " mbsum[m] ": " line)
    next
}
/^total / {
    if (!stage2[p]) fail("process " p " has no stage-2 device but printed: " line)
    if (totals[p]++) fail("total printed twice: " line)
    if (!close_to(field("sum"), total, 1e-5))
        fail("expected total " total ": " line)
    next
}
{ fail("unexpected line: " line) }
END {
    if (bad) exit 1
    for (i = 0; i < BATCH; i++)
        if (!seen[i]) fail("row " i " of the output is missing")
    if (results_total != 1) fail("no \"result total=\" line")
    for (m = 0; m < NMB; m++)
        if (results[m] != 1) fail("no \"result mb=" m "\" line")
    for (q = 0; q < procs; q++) {
        if (stage2[q] && totals[q] != 1) fail("process " q " printed no total")
        for (m = 0; m < NMB; m++) {
            if (reshards[q, m] != 1) fail("process " q " reported no reshard for microbatch " m)
            if (stage2[q] && sums[q, m] != 1) fail("process " q " printed no checksum for microbatch " m)
        }
    }
}'; then
    printf '%s\n' "--- output" "$out"
    exit 1
fi
printf '%s\n' "$out"
