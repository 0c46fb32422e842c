#!/bin/sh
# usage: check_shm_attack.sh MPIEXEC HELLO SHM_ATTACKER LIBSPMD [RUNS]
# Another local user races to take a job's shared memory (shm_attacker.c) while a job
# (examples/hello, 4 processes of 2 devices) runs RUNS times (default 20) as a user of its own. Every run must compute its sum right, the attacker must open none
# of the job's segments, and no byte may land in a file the attacker made. Needs root (to add
# the two users) and runuser; skipped otherwise.
set -u
mpiexec=$1 prog=$2 attacker=$3 lib=$4 runs=${5:-20}
[ "$(id -u)" -eq 0 ] || { echo "skipped: adding the two users needs root"; exit 77; }
for tool in useradd userdel runuser; do
    command -v $tool >/dev/null 2>&1 || { echo "skipped: no $tool"; exit 77; }
done
victim=spmdv$$ thief=spmdt$$
dir=$(mktemp -d) || exit 1
cleanup() {
    [ -n "${watch:-}" ] && pkill -u "$thief" 2>/dev/null
    find /dev/shm -maxdepth 1 -user "$thief" -delete 2>/dev/null
    userdel "$victim" 2>/dev/null
    userdel "$thief" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
useradd -M -N -r -s /bin/sh "$victim" && useradd -M -N -r -s /bin/sh "$thief" ||
    { echo "skipped: useradd failed"; exit 77; }
# the programs where both users can read them (the build tree may be private)
cp "$prog" "$attacker" "$dir/" && cp -L "$lib" "$dir/$(basename "$lib")" || exit 1
supp=$(printf '%s' "${LSAN_OPTIONS:-}" | tr ':' '\n' | sed -n 's/^suppressions=//p')
if [ -n "$supp" ]; then # LeakSanitizer's suppressions, likewise
    cp "$supp" "$dir/lsan.supp" || exit 1
    LSAN_OPTIONS=$(printf '%s' "$LSAN_OPTIONS" | tr ':' '\n' |
        sed "s|^suppressions=.*|suppressions=$dir/lsan.supp|" | paste -sd: -)
    export LSAN_OPTIONS
fi
chmod -R a+rX "$dir"
# a job the attacker stalls fails within its collective timeout, and the test at the first
export LD_LIBRARY_PATH="$dir" HOME="$dir" OMPI_MCA_rmaps_base_oversubscribe=1 \
    SPMD_NUM_CPU_DEVICES=2 SPMD_COLLECTIVE_TIMEOUT=10

runuser -u "$thief" -- "$dir/$(basename "$attacker")" 4 >"$dir/attacker.out" 2>&1 &
watch=$!
tries=0
until grep -q watching "$dir/attacker.out" 2>/dev/null || [ $tries -ge 100 ]; do
    sleep 0.1; tries=$((tries + 1))
done
grep -q watching "$dir/attacker.out" || { echo "FAIL: the attacker did not start:"; cat "$dir/attacker.out"; exit 1; }
fail=0
run=1
while [ $run -le "$runs" ] && [ $fail -eq 0 ]; do
    out=$(cd "$dir" && timeout -k 5 60 runuser -u "$victim" -- "$mpiexec" -n 4 \
        "$dir/$(basename "$prog")" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || ! printf '%s\n' "$out" | grep -qx 'sum of 0..63 over 8 devices = 2016'; then
        echo "FAIL: run $run (exit $rc):"; printf '%s\n' "$out"; fail=1
    fi
    if printf '%s\n' "$out" | grep -q 'shared-memory segment'; then
        echo "run $run warned:"; printf '%s\n' "$out" | grep 'shared-memory segment'
    fi
    run=$((run + 1))
done
kill "$(sed -n 's/^watching //p' "$dir/attacker.out")"; wait "$watch"; watch=
cat "$dir/attacker.out"
report=$(grep '^seen' "$dir/attacker.out")
seen=$(printf '%s' "$report" | sed -n 's/^seen \([0-9]*\) .*/\1/p')
opened=$(printf '%s' "$report" | sed -n 's/.* opened \([0-9]*\) .*/\1/p')
[ "${seen:-0}" -gt 0 ] || { echo "FAIL: the attacker saw none of the job's segments"; fail=1; }
[ "${opened:-1}" -eq 0 ] || { echo "FAIL: the attacker opened $opened of the job's segments"; fail=1; }
# the planted files: their head as the attacker wrote it, zero bytes after it
written=0
for f in $(find /dev/shm -maxdepth 1 -user "$thief"); do
    if [ "$(tail -c +25 "$f" | tr -d '\000' | wc -c)" -ne 0 ]; then
        echo "FAIL: the job wrote into $f, a file another user made"; written=1
    fi
done
[ $written -eq 0 ] || fail=1
echo "--- $((run - 1)) runs as $victim; the attacker made $(find /dev/shm -maxdepth 1 -user "$thief" | wc -l) files"
[ $fail -eq 0 ] && echo ok
exit $fail
