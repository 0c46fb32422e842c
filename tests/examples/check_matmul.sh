#!/bin/sh
# usage: check_matmul.sh PROCS DEVICES_PER_PROC MATMUL [MPIEXEC]
# Runs examples/matmul (the docs' shapes) and checks, from the definitions alone:
#  - process 0 (only) draws z = relu(x @ y) of the multi-controller guide as A row boxes, top to
#    bottom "CPU 0,1", "CPU 2,3", ... (mesh (A, 2) = ('a', 'b') in device-id order, z sharded
#    P('a',), the docs' picture for this mesh), followed by its NamedSharding;
#  - docs part, x = ones((4096, 2048)) P('a', 'b'), y = ones((2048, 4096)) P('b', None): every
#    process lists exactly its own devices' shards, device d holding rows (d/2)*M/A.. of all
#    columns (on stderr), each element relu(2048 ones summed) = 2048; total = 4096*4096*2048,
#    once per process (process 0 on stdout, the others on stderr);
#  - values part, x[i,k] = ((5i + 3k + 1) mod 11 - 5) / 4, y[k,j] = ((7k + 2j + 3) mod 9 - 4) / 8,
#    shapes (4A, 8) and (8, 8): every printed element equals relu(x @ y) recomputed here (within
#    1e-5), each device printing exactly the rows of its block, and total = sum(relu(x @ y)).
set -eu
procs=$1 per=$2 prog=$3 mpiexec=${4:-}
# stdout and stderr (the shards, the other processes' totals), each line tagged with its process
if [ "$procs" -gt 1 ]; then
    out=$("$mpiexec" -n "$procs" --tag-output -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" 2>&1)
    out=$(printf '%s\n' "$out" | sed 's/^\(\[1,[0-9]*\]\)<stderr>:/\1<stdout>:/')
else
    out=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" 2>&1)
    out=$(printf '%s\n' "$out" | sed 's/^/[1,0]<stdout>:/')
fi
if ! printf '%s\n' "$out" | awk -v procs="$procs" -v per="$per" '
function fail(msg) { print "check_matmul: " msg; bad = 1; exit 1 }
function absf(v) { return v < 0 ? -v : v }
function close_to(got, want, tol) { return absf(got - want) <= tol * (1 + absf(want)) }
function xv(i, k) { return ((5 * i + 3 * k + 1) % 11 - 5) / 4 }
function yv(k, j) { return ((7 * k + 2 * j + 3) % 9 - 4) / 8 }
function field(name,   i) {       # value of name=... in the current line
    for (i = 1; i <= NF; i++)
        if (index($i, name "=") == 1)
            return substr($i, length(name) + 2)
    fail("no " name "= in: " $0)
}
BEGIN {
    ndev = procs * per; A = ndev / 2
    M = 4096; K = 2048; N = 4096; R = M / A            # the docs part
    VM = 4 * A; VK = 8; VN = 8; VR = 4                 # the values part
    vtotal = 0
    for (i = 0; i < VM; i++)
        for (j = 0; j < VN; j++) {
            s = 0
            for (k = 0; k < VK; k++)
                s += xv(i, k) * yv(k, j)
            ref[i, j] = s > 0 ? s : 0
            vtotal += ref[i, j]
        }
    in_box = 0; boxes = 0; drawn = 0
}
{
    if (!match($0, /^\[1,[0-9]+\]<stdout>:/))
        fail("untagged line: " $0)
    p = substr($0, 4, RLENGTH - 13) + 0
    line = substr($0, RLENGTH + 1)
    $0 = line
}
/┌|│|├|└/ {
    if (p != 0)
        fail("process " p " drew a picture; only process 0 should: " line)
    if (line ~ /┌/) { in_box = 1; drawn++ }
    if (line ~ /├/) boxes++
    if (line ~ /└/) { in_box = 0; boxes++ }
    rest = line; n = 0
    while (match(rest, /[CG]PU [0-9,]+/)) {
        # the picture names the platform: "GPU 0,1" on CUDA devices; the ids are what count
        labels[++nlabels] = "CPU" substr(rest, RSTART + 3, RLENGTH - 3)
        rest = substr(rest, RSTART + RLENGTH); n++
    }
    if (n > 1)
        fail("more than one box per row (z should be split by rows only): " line)
    next
}
/^NamedSharding/ {
    want = "NamedSharding(mesh=Mesh(\047a\047: " A ", \047b\047: 2, axis_types=(Auto, Auto)), spec=P(\047a\047,))"
    if (p != 0 || line != want)
        fail("expected \"" want "\" from process 0, got \"" line "\" from process " p)
    named++
    next
}
/^docs total=/ {
    if (!close_to(field("total"), M * N * K, 1e-6))
        fail("docs total: expected " M * N * K ", got: " line)
    docs_total[p]++
    next
}
/^docs process=/ {
    d = field("device") + 0
    if (field("process") + 0 != p || int(d / per) != p)
        fail("process " p " printed a shard of device " d " it does not own: " line)
    if (docs_seen[d]++) fail("device " d " printed twice: " line)
    r0 = int(d / 2) * R
    if (!index(line, "index=[" r0 ":" (r0 + R) ", 0:" N "] "))
        fail("device " d " should hold [" r0 ":" r0 + R ", 0:" N "]: " line)
    if (field("min") + 0 != K || field("max") + 0 != K)
        fail("every element of relu(ones @ ones) is " K ": " line)
    if (!close_to(field("sum"), K * R * N, 1e-9))
        fail("shard sum should be " K * R * N ": " line)
    next
}
/^values total=/ {
    if (!close_to(field("total"), vtotal, 1e-5))
        fail("values total: expected " vtotal ", got: " line)
    values_total[p]++
    next
}
/^values process=/ {
    d = field("device") + 0
    split(field("row"), rr, ":"); i = rr[1] + 0
    if (field("process") + 0 != p || int(d / per) != p)
        fail("process " p " printed a shard of device " d " it does not own: " line)
    if (i < int(d / 2) * VR || i >= int(d / 2) * VR + VR)
        fail("device " d " does not hold row " i ": " line)
    if (values_seen[d, i]++) fail("row printed twice: " line)
    rows[d]++
    split(line, v, ": ")
    n = split(v[2], e, " ")
    if (n != VN) fail("expected " VN " values: " line)
    for (j = 0; j < VN; j++)
        if (!close_to(e[j + 1], ref[i, j], 1e-5))
            fail("z[" i ", " j "] = " e[j + 1] ", expected relu(x @ y) = " ref[i, j] ": " line)
    next
}
/^$/ { next }
{ fail("unexpected line: " line) }
END {
    if (bad) exit 1
    if (drawn != 1 || in_box) fail("process 0 should draw exactly one complete picture")
    if (boxes != A) fail("expected " A " boxes, counted " boxes)
    if (nlabels != A) fail("expected " A " labels, got " nlabels)
    for (b = 0; b < A; b++)
        if (labels[b + 1] != "CPU " 2 * b "," 2 * b + 1)
            fail("box " b " is labelled \"" labels[b + 1] "\", expected \"CPU " 2 * b "," 2 * b + 1 "\"")
    if (named != 1) fail("expected the NamedSharding line once")
    for (d = 0; d < ndev; d++) {
        if (!docs_seen[d]) fail("no docs shard from device " d)
        if (rows[d] != VR) fail("device " d " printed " rows[d] + 0 " rows of its values block, expected " VR)
    }
    for (q = 0; q < procs; q++)
        if (docs_total[q] != 1 || values_total[q] != 1)
            fail("process " q " should print each total once")
}'; then
    printf '%s\n' "--- output" "$out"
    exit 1
fi
printf '%s\n' "$out"
