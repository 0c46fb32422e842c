#!/bin/sh
# usage: check_subset_mesh.sh PROCS DEVICES_PER_PROC PROGRAM [MPIEXEC]
# Runs examples/subset_mesh and compares every line, tagged with the process that printed it,
# with what an awk reference computes from PROCS and DEVICES_PER_PROC alone: the (n, 3) array
# x[i, j] = 3i + j + 1 on the mesh of devices 0 .. n/2-1 (two rows per device; processes with
# no device there hold 0 shards and skip the shard_map), the column sums of x (a plain loop)
# on every subset device, then on every device of every process with the same total, x with
# one row per device of the full mesh and back on the subset mesh, and the bytes each reshard
# brings to each process (each element a process lacks, once: 12 bytes per row or per sum
# vector that its devices need and another process holds).
set -eu
procs=$1 per=$2 prog=$3 mpiexec=${4:-}
# stdout (process 0's results) and stderr (the rest), each line tagged with its process
if [ "$procs" -gt 1 ]; then
    out=$("$mpiexec" -n "$procs" --tag-output -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" 2>&1)
    out=$(printf '%s\n' "$out" | sed 's/^\(\[1,[0-9]*\]\)<stderr>:/\1<stdout>:/')
else
    out=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" 2>&1 | sed 's/^/[1,0]<stdout>:/')
fi

want=$(awk -v P="$procs" -v L="$per" '
function row(r,   c, s) {          # "v v v" of rows r (and r + 1 when two)
    s = ""
    for (c = 0; c < 3; c++) s = s (c ? " " : "") x[r, c]
    return s
}
function line(p, text) { printf "[1,%d]<stdout>:process=%d %s\n", p, p, text }
BEGIN {
    N = P * L; H = N / 2
    for (r = 0; r < N; r++) for (c = 0; c < 3; c++) x[r, c] = 3 * r + c + 1
    total = 0
    for (c = 0; c < 3; c++) { sum[c] = 0; for (r = 0; r < N; r++) sum[c] += x[r, c]; total += sum[c] }
    sums = sum[0] " " sum[1] " " sum[2]
    for (p = 0; p < P; p++) {
        k = 0
        for (d = p * L; d < p * L + L; d++) if (d < H) k++
        line(p, "subset_mesh_devices=" H " local_devices_in_it=" k)
        for (s = 0; s < 2; s++) {   # put, and x_back after the round trip: the same shards
            step = s ? "x_back" : "put"
            if (s) {                 # rows 2d, 2d+1 of p subset devices that sat elsewhere
                got = 0
                for (d = p * L; d < p * L + k; d++)
                    for (r = 2 * d; r < 2 * d + 2; r++) if (int(r / L) != p) got += 12
                line(p, "step=x_back received_bytes=" got)
            }
            line(p, "step=" step " shards=" k)
            for (d = p * L; d < p * L + k; d++)
                line(p, "step=" step " device=" d " index=[" 2 * d ":" 2 * d + 2 ",0:3] values=[" row(2 * d) " " row(2 * d + 1) "]")
        }
        if (k == 0) line(p, "step=psum not_in_mesh")
        line(p, "step=psum shards=" k)
        for (d = p * L; d < p * L + k; d++)
            line(p, "step=psum device=" d " index=[0:3] values=[" sums "]")
        line(p, "step=sums_to_all received_bytes=" (k ? 0 : 12))
        line(p, "step=sums_to_all shards=" L)
        for (d = p * L; d < p * L + L; d++)
            line(p, "step=sums_to_all device=" d " index=[0:3] values=[" sums "]")
        line(p, "total=" total)
        got = 0                      # row d of the full mesh came from subset device int(d / 2)
        for (d = p * L; d < p * L + L; d++) if (int(int(d / 2) / L) != p) got += 12
        line(p, "step=x_to_all received_bytes=" got)
        line(p, "step=x_to_all shards=" L)
        for (d = p * L; d < p * L + L; d++)
            line(p, "step=x_to_all device=" d " index=[" d ":" d + 1 ",0:3] values=[" row(d) "]")
    }
    printf "[1,0]<stdout>:column sums of x [%s], total %s\n", sums, total
}' | sort)
got=$(printf '%s\n' "$out" | grep 'process=\|column sums' | sort || true)
if [ "$got" != "$want" ]; then
    printf 'subset_mesh output differs from the reference.\n--- expected\n%s\n--- got\n%s\n' \
        "$want" "$got"
    exit 1
fi
printf '%s\n' "$out"
