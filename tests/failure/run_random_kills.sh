#!/bin/sh
# usage: run_random_kills.sh PROCS MPIEXEC PROGRAM SEED... (each a number, or FIRST-LAST)
# Runs test_random_kill once per seed under `MPIEXEC $SPMD_TEST_RECOVERY_FLAG` (--enable-recovery) (each run guarded by
# `timeout`), collects the survivors' RESULT lines and prints the distribution of the time from
# the kill to each survivor's return (since_kill) and from the start of the operation that
# failed (in_op). Exits with 1 when a survivor returned later than timeout + grace after the
# kill (grace: a tenth of the timeout, at least 0.5 s), did not name the victim as the first
# cause, named a process that is alive as missing, failed with another status than
# SPMD_ERR_TIMEOUT or SPMD_ERR_DISTRIBUTED, failed before the kill, or hung (no RESULT line).
# SPMD_COLLECTIVE_TIMEOUT must be set. RK_LOG_DIR: keep every run's output there (default: a
# temporary directory, removed at the end unless something failed).
set -u
procs=$1 mpiexec=$2 prog=$3
shift 3
seeds=""
for range in "$@"; do
    case $range in
    "" | *[!0-9-]* | -* | *- | *-*-*) echo "run_random_kills.sh: bad seed \"$range\"" >&2; exit 2 ;;
    *-*) seed=${range%-*} ;;
    *) seed=$range ;;
    esac
    while [ "$seed" -le "${range#*-}" ]; do
        seeds="$seeds $seed"
        seed=$((seed + 1))
    done
done
[ -n "$seeds" ] || { echo "usage: run_random_kills.sh PROCS MPIEXEC PROGRAM SEED..." >&2; exit 2; }
recovery=${SPMD_TEST_RECOVERY_FLAG:-}
if [ -z "$recovery" ]; then
    echo "skipped: $mpiexec has no flag known here to outlive a dead process (Open MPI: --enable-recovery)"
    exit 77
fi
timeout_s=${SPMD_COLLECTIVE_TIMEOUT:?SPMD_COLLECTIVE_TIMEOUT must be set}
bound=$(awk -v t="$timeout_s" 'BEGIN { g = t / 10; if (g < 0.5) g = 0.5; printf "%.3f", t + g }')
guard=$(awk -v t="$timeout_s" 'BEGIN { printf "%d", 8 * t + 30 }')
keep=${RK_LOG_DIR:-}
logs=${RK_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/random_kills.XXXXXX")}
mkdir -p "$logs"
results=$logs/results.txt
: >"$results"
status=0

for seed in $seeds; do
    dir=$logs/seed.$seed
    rm -rf "$dir"
    mkdir -p "$dir"
    timeout -k 5 "$guard" "$mpiexec" "$recovery" -n "$procs" "$prog" "$seed" "$dir" \
        >"$dir/out.txt" 2>&1
    rc=$?
    if grep -q 'skipped' "$dir/out.txt" && ! grep -q '^RESULT' "$dir/out.txt"; then
        cat "$dir/out.txt"
        exit 77
    fi
    grep '^RESULT ' "$dir/out.txt" >>"$results"
    victim=$(sed -n 's/^KILL seed=[0-9]* victim=\([0-9]*\) .*/\1/p' "$dir/out.txt" | head -n 1)
    got=$(grep -c '^RESULT ' "$dir/out.txt")
    if [ "$got" -lt $((procs - 1)) ]; then
        echo "FAIL seed=$seed: $got of $((procs - 1)) survivors reported (mpirun rc=$rc," \
            "victim ${victim:-unknown}): a survivor hung or crashed"
        cat "$dir/out.txt"
        echo "RESULT seed=$seed survivor=? status=MISSING" >>"$results"
        status=1
    fi
    line=$(grep '^KILL ' "$dir/out.txt" | head -n 1)
    printf '%s\n' "${line:-KILL seed=$seed (no kill line)}"
done

echo
echo "=== $(grep -c '^RESULT' "$results") survivor reports; bound timeout + grace = $bound s" \
    "(SPMD_COLLECTIVE_TIMEOUT=$timeout_s) ==="
# the distribution over the survivors that returned a failure (status != SPMD_OK); the hung
# ones are counted apart (their times are the watchdog's, a lower bound)
for field in since_kill in_op; do
    sed -n "/status=SPMD_OK/d; /status=MISSING/d; /status=HUNG/d; s/.* $field=\([0-9.-]*\) .*/\1/p" \
        "$results" | sort -n >"$logs/$field.txt"
    awk -v name="$field" -v bound="$bound" '
        { v[NR] = $1 }
        END {
            if (NR == 0) { printf "%-10s: no values\n", name; exit }
            over = 0
            for (i = 1; i <= NR; i++) if (v[i] > bound) over++
            i50 = int((NR + 1) / 2)
            i90 = int(NR * 0.9 + 0.999999); if (i90 > NR) i90 = NR
            printf "%-10s: n=%d min=%.3f median=%.3f p90=%.3f max=%.3f over_bound=%d\n",
                   name, NR, v[1], v[i50], v[i90], v[NR], over
        }' "$logs/$field.txt"
done
echo "hung survivors (no return within 4 timeouts + 5 s; HUNG or no RESULT): $(grep -c 'status=HUNG\|status=MISSING' "$results")"
echo "survivors that completed the sequence (victim died after its part): $(grep -c 'status=SPMD_OK' "$results")"
echo "status:       $(sed -n 's/.* status=\([^ ]*\).*/\1/p' "$results" | sort | uniq -c | tr '\n' ' ')"
echo "first_cause:  $(sed -n 's/.* first_cause=\([a-z]*\):.*/\1/p' "$results" | sort | uniq -c | tr '\n' ' ')"
echo "kill_op:      $(sed -n 's/.* kill_op=\([^ ]*\) .*/\1/p' "$results" | sort | uniq -c | tr '\n' ' ')"
echo "failing op:   $(sed -n 's/.* op=\([^ ]*\) status.*/\1/p' "$results" | sort | uniq -c | tr '\n' ' ')"

# the defects, each with the survivors' full messages
bad=$(awk -v bound="$bound" '
    /status=MISSING/ { print; next }
    {
        st = ""; sk = ""; nv = ""; ba = ""
        for (i = 1; i <= NF; i++) {
            split($i, kv, "=")
            if (kv[1] == "status") st = kv[2]
            if (kv[1] == "since_kill") sk = kv[2]
            if (kv[1] == "named_victim") nv = kv[2]
            if (kv[1] == "blamed_alive") ba = kv[2]
        }
        why = ""
        if (st == "SPMD_OK") next
        if (st != "SPMD_ERR_TIMEOUT" && st != "SPMD_ERR_DISTRIBUTED") why = why " status"
        if (sk == "na") why = why " failed-before-kill"
        else if (sk + 0 > bound + 0) why = why " late"
        if (nv != "1") why = why " victim-not-first-cause"
        if (ba == "1") why = why " blamed-alive"
        if (why != "") print "DEFECT" why ": " $0
    }' "$results")
if [ -n "$bad" ]; then
    status=1
    echo
    echo "=== defects ==="
    printf '%s\n' "$bad" | while IFS= read -r line; do
        printf '%s\n' "$line"
        seed=$(printf '%s\n' "$line" | sed -n 's/.*RESULT seed=\([0-9]*\) .*/\1/p')
        survivor=$(printf '%s\n' "$line" | sed -n 's/.* survivor=\([0-9]*\) .*/\1/p')
        [ -n "$seed" ] && [ -n "$survivor" ] &&
            grep "^MESSAGE seed=$seed survivor=$survivor:" "$logs/seed.$seed/out.txt"
    done
    echo "defects: $(printf '%s\n' "$bad" | wc -l) survivor reports; logs in $logs"
elif [ "$status" -ne 0 ]; then
    echo "logs in $logs"
else
    echo "no defect"
fi
if [ -z "$keep" ] && [ "$status" -eq 0 ]; then
    rm -rf "$logs"
fi
exit $status
