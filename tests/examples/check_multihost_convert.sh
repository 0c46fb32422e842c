#!/bin/sh
# usage: check_multihost_convert.sh PROCS DEVICES_PER_PROC PROGRAM [MPIEXEC]
# Runs examples/multihost_convert and compares every "case=" line, tagged with the process that
# printed it, with the lines an awk reference computes from PROCS and DEVICES_PER_PROC alone:
# each process's local data, the global shape, every device's replica id, index box and values,
# the whole global value and the part taken back (host_local_array_to_global_array's rule:
# process p's part sits in the global array where p's subcube sits in the mesh). Then checks
# the values the JAX docstring and tests print, literally: (0, 1, 2, 3, 0, 2, 4, 6, 0, 3, 6, 9)
# after process 0's zeros for P('x') and P('host'), shape (4,) and (0, 1, 2, 3) on every device
# for P(), and arange(16).reshape(8, 2) for P('x', 'y') with 4 processes x 2 devices.
set -eu
procs=$1 per=$2 prog=$3 mpiexec=${4:-}
# the "case=NAME process=" lines come on stderr, process 0's verdicts on stdout: both are read,
# each line tagged with its process
if [ "$procs" -gt 1 ]; then
    all=$("$mpiexec" -n "$procs" --tag-output -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" 2>&1)
else
    all=$(SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" 2>&1 | sed 's/^/[1,0]<stdout>:/')
fi
all=$(printf '%s\n' "$all" | sed 's/^\(\[1,[0-9]*\]\)<stderr>:/\1<stdout>:/')
out=$(printf '%s\n' "$all" | grep 'case=[a-z_]* process=' || true)
verdicts=$(printf '%s\n' "$all" | grep 'case=[a-z_]* spec=' || true)

want=$(awk -v P="$procs" -v L="$per" '
function gcd(a, b) { return b ? gcd(b, a % b) : a }
# numpy layout of v[lo .. lo + rows * cols) as rows x cols (rows 0: 1-D)
function fmt(v, lo, rows, cols,   s, r, c, nr) {
    nr = rows ? rows : 1
    s = rows ? "[" : ""
    for (r = 0; r < nr; r++) {
        s = s (r ? " [" : "[")
        for (c = 0; c < cols; c++)
            s = s (c ? " " : "") v[lo + r * cols + c]
        s = s "]"
    }
    return s (rows ? "]" : "")
}
function line(cs, p, text) { printf "[1,%d]<stdout>:case=%s process=%d %s\n", p, cs, p, text }
BEGIN {
    N = P * L
    # x: 1-D mesh over all devices, P("x"), local = arange(K) * p, K = lcm(4, L)
    K = 4 / gcd(4, L) * L; b = K / L
    for (p = 0; p < P; p++) for (i = 0; i < K; i++) G[p * K + i] = i * p
    for (p = 0; p < P; p++) {
        line("x", p, "mesh=Mesh(\047x\047: " N ", axis_types=(Auto,)) spec=P(\047x\047,) local_shape=(" K ",) local=" fmt(G, p * K, 0, K))
        line("x", p, "global_shape=(" K * P ",) local_to_global_shape=(" K * P ",) zero_copy=1")
        for (j = 0; j < L; j++) {
            d = p * L + j
            line("x", p, "device=" d " replica=0 index=[" d * b ":" (d + 1) * b "] values=" fmt(G, d * b, 0, b))
        }
        line("x", p, "global_value=" fmt(G, 0, 0, K * P))
        line("x", p, "back_shape=(" K ",) back=" fmt(G, p * K, 0, K) " zero_copy=1")
    }
    # host_dev: (P, L) mesh ("host", "dev"), P("host"), local = arange(4) * p
    delete G
    for (p = 0; p < P; p++) for (i = 0; i < 4; i++) G[p * 4 + i] = i * p
    for (p = 0; p < P; p++) {
        line("host_dev", p, "mesh=Mesh(\047host\047: " P ", \047dev\047: " L ", axis_types=(Auto, Auto)) spec=P(\047host\047,) local_shape=(4,) local=" fmt(G, 4 * p, 0, 4))
        line("host_dev", p, "global_shape=(" 4 * P ",) local_to_global_shape=(" 4 * P ",) zero_copy=1")
        for (j = 0; j < L; j++)
            line("host_dev", p, "device=" p * L + j " replica=" j " index=[" 4 * p ":" 4 * p + 4 "] values=" fmt(G, 4 * p, 0, 4))
        line("host_dev", p, "global_value=" fmt(G, 0, 0, 4 * P))
        line("host_dev", p, "back_shape=(4,) back=" fmt(G, 4 * p, 0, 4) " zero_copy=1")
    }
    # replicated: the same mesh, P(), local = arange(4) everywhere
    delete G
    for (i = 0; i < 4; i++) G[i] = i
    for (p = 0; p < P; p++) {
        line("replicated", p, "mesh=Mesh(\047host\047: " P ", \047dev\047: " L ", axis_types=(Auto, Auto)) spec=P() local_shape=(4,) local=" fmt(G, 0, 0, 4))
        line("replicated", p, "global_shape=(4,) local_to_global_shape=(4,) zero_copy=1")
        for (j = 0; j < L; j++)
            line("replicated", p, "device=" p * L + j " replica=" p * L + j " index=[0:4] values=" fmt(G, 0, 0, 4))
        line("replicated", p, "global_value=" fmt(G, 0, 0, 4))
        line("replicated", p, "back_shape=(4,) back=" fmt(G, 0, 0, 4) " zero_copy=1")
    }
    # transposed: (L, P) mesh ("dev", "host"), P("host", "dev"), local (2, L) = arange(2L) + 2Lp;
    # the global (2P, L) array holds r * L + c at row r, column c
    delete G
    for (i = 0; i < 2 * P * L; i++) G[i] = i
    for (p = 0; p < P; p++) {
        line("transposed", p, "mesh=Mesh(\047dev\047: " L ", \047host\047: " P ", axis_types=(Auto, Auto)) spec=P(\047host\047, \047dev\047) local_shape=(2, " L ") local=" fmt(G, 2 * L * p, 2, L))
        line("transposed", p, "global_shape=(" 2 * P ", " L ") local_to_global_shape=(" 2 * P ", " L ") zero_copy=1")
        for (j = 0; j < L; j++) {
            col[0] = G[2 * p * L + j]; col[1] = G[(2 * p + 1) * L + j]
            line("transposed", p, "device=" p * L + j " replica=0 index=[" 2 * p ":" 2 * p + 2 "," j ":" j + 1 "] values=" fmt(col, 0, 2, 1))
        }
        line("transposed", p, "global_value=" fmt(G, 0, 2 * P, L))
        line("transposed", p, "back_shape=(2, " L ") back=" fmt(G, 2 * L * p, 2, L) " zero_copy=1")
    }
}' | sort)
got=$(printf '%s\n' "$out" | grep 'case=' | sort || true)
if [ "$got" != "$want" ]; then
    printf 'multihost_convert output differs from the reference.\n--- expected\n%s\n--- got\n%s\n' \
        "$want" "$got"
    printf '%s\n' "$want" >/tmp/check_multihost_convert.want.$$
    printf '%s\n' "$got" >/tmp/check_multihost_convert.got.$$
    diff /tmp/check_multihost_convert.want.$$ /tmp/check_multihost_convert.got.$$ || true
    rm -f /tmp/check_multihost_convert.want.$$ /tmp/check_multihost_convert.got.$$
    exit 1
fi

# The docstring's literal values (process 0's all-zero slice comes first; the docs skip it).
fail=0
docs="0 1 2 3 0 2 4 6 0 3 6 9"
n=$((procs - 1))
[ "$n" -gt 3 ] && n=3
for cs in x host_dev; do
    if [ "$n" -gt 0 ] && { [ "$cs" = host_dev ] || [ $((4 % per)) -eq 0 ]; }; then
        printf '%s\n' "$out" | grep "case=$cs process=[0-9]* global_value=" |
            awk -v docs="$docs" -v n="$n" -v cs="$cs" '
            { v = $0; sub(/.*global_value=\[/, "", v); sub(/\].*/, "", v)
              split(v, a, " "); split(docs, e, " ")
              for (i = 1; i <= 4 * n; i++)
                  if (a[4 + i] != e[i]) {
                      printf "case %s: element %d is %s, the docs print %s\n", cs, 3 + i, a[4 + i], e[i]
                      bad = 1
                  } }
            END { exit bad }' || fail=1
    fi
done
# P(): "will have the shape (4,) and the value (0, 1, 2, 3) ... replicated across all hosts and
# devices"
count=$(printf '%s\n' "$out" | grep -c 'case=replicated process=[0-9]* device=[0-9]* replica=[0-9]* index=\[0:4\] values=\[0 1 2 3\]$' || true)
if [ "$count" -ne $((procs * per)) ]; then
    echo "case replicated: $count devices hold (0, 1, 2, 3), expected $((procs * per))"
    fail=1
fi
if ! printf '%s\n' "$out" | grep 'case=replicated process=[0-9]* global_shape=' |
    awk '!/global_shape=\(4,\) /{ exit 1 }'; then
    echo "case replicated: the global shape is not (4,)"
    fail=1
fi
# JAX's test_host_local_to_global values on 4 processes x 2 devices.
if [ "$procs" -eq 4 ] && [ "$per" -eq 2 ]; then
    count=$(printf '%s\n' "$out" | grep -c 'case=transposed process=[0-9]* global_value=\[\[0 1\] \[2 3\] \[4 5\] \[6 7\] \[8 9\] \[10 11\] \[12 13\] \[14 15\]\]$' || true)
    if [ "$count" -ne 4 ]; then
        echo "case transposed: the global value is not arange(16).reshape(8, 2) on every process"
        fail=1
    fi
fi
# process 0's verdicts, one per case: the round trip gave back its data
cases=$(printf '%s\n' "$out" | sed -n 's/^.*case=\([a-z_]*\) process=.*/\1/p' | sort -u | wc -l)
good=$(printf '%s\n' "$verdicts" | grep -c '^\[1,0\]<stdout>:case=[a-z_]* spec=.* round trip host-local -> global -> host-local: the same data$' || true)
if [ "$good" -ne "$cases" ] || [ "$(printf '%s\n' "$verdicts" | grep -c .)" -ne "$cases" ]; then
    printf 'expected %d verdicts "the same data" from process 0, got:\n%s\n' "$cases" "$verdicts"
    fail=1
fi
[ "$fail" -eq 0 ] || exit 1
printf '%s\n' "$all"
