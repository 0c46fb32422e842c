#!/bin/sh
# spmd launch and spmd compare, end to end (sum of squares of 0..47 = 47*48*95/6 = 35720): exit statuses forwarded, layouts compared (equal
# and different), standard error without mpiexec's tags, a bad layout refused in one line,
# tolerances.
# usage: check_launch.sh SPMD_CLI LAUNCH_PROBE HAVE_MPI(0|1)
set -u
spmd=$1 probe=$2 mpi=$3
. "$(dirname "$0")/expect.sh"
if [ "$mpi" = 1 ]; then more=2x2,4x1; else more=1x3,1x2; fi

expect 0 "one layout" -- "$spmd" launch -n 1 -d 4 -- "$probe" sum
grep -qx 'sum of squares 35720' "$work/out" || report "wrong sum: $(cat "$work/out")"
expect 5 "exit status forwarded" -- "$spmd" launch -n 1 -d 2 -- "$probe" exit 5
expect 0 "--output" -- "$spmd" launch -d 2 --output "$work/saved" -- "$probe" sum
grep -qx 'sum of squares 35720' "$work/saved" || report "--output did not keep stdout"
if [ "$mpi" = 1 ]; then
    expect 7 "exit status of one of 2 processes forwarded" -- "$spmd" launch -n 2 -d 2 -- "$probe" exit 7
    expect 0 "2 processes" -- "$spmd" launch -n 2 -d 2 -- "$probe" sum
    grep -qx 'sum of squares 35720' "$work/out" || report "wrong sum under mpiexec"
fi

# layouts: the same output in each, and a verdict that says so
expect 0 "equal layouts" -- "$spmd" launch --layouts "1x4,$more" -- "$probe" sum
grep -q '^spmd launch: 3 layouts, the same output' "$work/err" || report "no verdict"
[ "$(grep -c '^sum of squares 35720$' "$work/out")" -eq 3 ] || report "not every layout's output shown"
if [ "$mpi" = 1 ]; then
    expect 1 "different layouts" -- "$spmd" launch --layouts 1x4,2x2 -- "$probe" layout
    grep -q 'spmd: launch: layouts 1x4 and 2x2 give different output' "$work/err" \
        || report "the difference is not named"
    grep -q '"processes 1 devices 4" against "processes 2 devices 4"' "$work/err" \
        || report "the lines are not shown"
    expect 3 "a failing layout" -- "$spmd" launch --layouts 1x2,2x1 -- "$probe" exit 3
    # each process's lines together, in process order: per-device lines read alike
    expect 0 "per-device lines in process order" -- "$spmd" launch --layouts 1x4,2x2,4x1 -- "$probe" devices
    expect 0 "--output in process order" -- "$spmd" launch -n 4 -d 1 --output "$work/ordered" -- "$probe" devices
    printf 'device 0 of 4\ndevice 1 of 4\ndevice 2 of 4\ndevice 3 of 4\n' | cmp -s - "$work/ordered" ||
        report "--output is not in process order, untagged: $(cat "$work/ordered")"
    # standard error comes without mpiexec's tags too (--layouts and --output have it tag)
    for how in "--layouts 2x1" "-n 2 --output $work/tagged"; do
        # shellcheck disable=SC2086 # the words of $how are options
        expect 0 "stderr untagged, $how" -- "$spmd" launch $how -- "$probe" devices
        grep -q '<stderr>' "$work/err" && report "$how: standard error keeps mpiexec's tags"
        grep -qx 'process 1 of 2' "$work/err" || report "$how: process 1's stderr line is not whole"
    done
else
    expect 1 "a layout that needs MPI" -- "$spmd" launch --layouts 1x2,2x1 -- "$probe" sum
fi
# bytes after a NUL count: in --output, and in the comparison of layouts
expect 0 "--output keeps NUL bytes" -- "$spmd" launch -d 2 --output "$work/nul" -- "$probe" nul
printf 'result\000 2\nsecond line\n' | cmp -s - "$work/nul" || report "--output lost bytes after a NUL"
expect 1 "layouts differing after a NUL" -- "$spmd" launch --layouts 1x1,1x2 -- "$probe" nul
grep -q 'result\\x00 1" against "result\\x00 2"' "$work/err" || report "the NUL line is not shown"
expect 1 "an unwritable --output, before the program runs" -- "$spmd" launch --output /nonexistent/x -- "$probe" sum
grep -q "cannot write /nonexistent/x" "$work/err" || report "unwritable --output not named"
[ ! -s "$work/out" ] || report "the program ran although --output cannot be written"
expect 2 "absurd -n" -- "$spmd" launch -n 100000 -- "$probe" sum

# 200 MiB of output: --output and --layouts keep every byte in bounded memory (GNU time)
# (under AddressSanitizer, whose shadow memory and quarantine the bound does not allow for, 50
# MiB and no bound: what it checks there is every byte and no error)
if [ -x /usr/bin/time ]; then
    mib=200 most=51200
    [ -n "${ASAN_OPTIONS:-}" ] && mib=50 most=100000000
    big=$((mib * 1048576)) last=$((mib * 16384 - 1))
    /usr/bin/time -f %M -o "$work/peak" "$spmd" launch --output "$work/big" -- "$probe" big $mib \
        >/dev/null 2>"$work/err" || report "--output of $mib MiB failed: $(cat "$work/err")"
    echo "--- --output of $mib MiB: $(wc -c <"$work/big") bytes, peak $(tail -n 1 "$work/peak") KiB"
    [ "$(wc -c <"$work/big")" -eq $big ] || report "--output lost bytes of $mib MiB"
    tail -n 1 "$work/big" | grep -qx "line $(printf %010d $last) of the big output, the same in every layout ..." ||
        report "--output's last line of $mib MiB"
    [ "$(tail -n 1 "$work/peak")" -lt $most ] || report "--output of $mib MiB took over 50 MiB"
    rm -f "$work/big"
    if [ "$mpi" = 1 ]; then pair=1x1,2x1; else pair=1x1,1x2; fi
    /usr/bin/time -f %M -o "$work/peak" "$spmd" launch --layouts $pair -- "$probe" big $mib \
        >/dev/null 2>"$work/err" || report "--layouts of $mib MiB failed: $(cat "$work/err")"
    echo "--- --layouts $pair of $mib MiB: peak $(tail -n 1 "$work/peak") KiB"
    grep -q '2 layouts, the same output' "$work/err" || report "--layouts of $mib MiB differ"
    [ "$(tail -n 1 "$work/peak")" -lt $most ] || report "--layouts of $mib MiB took over 50 MiB"
fi

# SIGTERM (and SIGKILL) on the launcher: no process of the job survives it
ranks_of() { pgrep -f "$probe sleep $1\$" | wc -l; }
sleepers=1; [ "$mpi" = 1 ] && sleepers=2
mark=0
for sig in TERM INT KILL; do
    mark=$((mark + 1)); seconds=$((1000 + $$ % 50000 * 4 + mark)) # marks this run's ranks
    "$spmd" launch -n $sleepers -- "$probe" sleep $seconds >"$work/out" 2>"$work/err" &
    launcher=$!
    tries=0
    while [ "$(grep -c ready "$work/err")" -lt $sleepers ] && [ $tries -lt 600 ]; do
        sleep 0.1; tries=$((tries + 1))
    done
    [ "$(ranks_of $seconds)" -ge 1 ] || report "SIG$sig: the job did not start"
    kill -$sig $launcher
    wait $launcher; rc=$?
    tries=0
    while [ "$(ranks_of $seconds)" -gt 0 ] && [ $tries -lt 300 ]; do
        sleep 0.1; tries=$((tries + 1))
    done
    echo "--- SIG$sig on spmd launch: exit $rc, $(ranks_of $seconds) rank(s) left"
    [ "$(ranks_of $seconds)" -eq 0 ] || { report "SIG$sig: ranks survived the launcher"; pkill -f "$probe sleep $seconds"; }
    [ "$sig" = KILL ] || [ $rc -gt 128 ] || report "SIG$sig: the launcher did not end by the signal ($rc)"
done
expect 2 "bad layout" -- "$spmd" launch --layouts 1x4,2y2 -- "$probe" sum
[ "$(wc -l <"$work/err")" -eq 1 ] || report "a bad layout takes more than one line"
grep -q '^spmd: launch: layout "2y2" is not PxL' "$work/err" || report "bad layout not named"
# digits alone on each side, no blank inside a layout (strtol took "1x<TAB>1" as 1x1)
tab=$(printf '\t')
for bad in 0x2 2x0 x2 2x 2x2x2 -1x2 +2x2 2x99999 "1x${tab}1" " 1x1" "1 x1" "1x 1" "1x1 " "+1x1" \
    "1x+1" "1x-1" "1x1 ,1x2" "1x1,,1x2" "1x1,"; do
    expect 2 "bad layout '$bad'" -- "$spmd" launch --layouts "$bad" -- "$probe" sum
    grep -q "^spmd: launch: layout \".*\" is not PxL" "$work/err" || report "bad layout '$bad' not named"
done
expect 0 "a blank after a comma" -- "$spmd" launch --layouts "1x1, 1x2" -- "$probe" sum
for bad in " 2" "+2" "2 " "0x2"; do
    expect 2 "-n '$bad'" -- "$spmd" launch -n "$bad" -- "$probe" sum
    expect 2 "-d '$bad'" -- "$spmd" launch -d "$bad" -- "$probe" sum
done
expect 2 "no program" -- "$spmd" launch -n 1
expect 2 "--compare without --layouts" -- "$spmd" launch --compare exact -- "$probe" sum

# spmd compare: exact and within a tolerance
printf 'loss 1.0000001 step 3\nok\n' >"$work/a"
printf 'loss 1.0000002 step 3\nok\n' >"$work/b"
printf 'loss 1.0000002 step 4\nok\n' >"$work/c"
printf 'loss 1.0000001 step 3\n' >"$work/d"
expect 0 "same file" -- "$spmd" compare "$work/a" "$work/a"
expect 1 "exact differs" -- "$spmd" compare "$work/a" "$work/b"
grep -q 'line 1' "$work/err" || report "the line is not named"
expect 0 "within tolerance" -- "$spmd" compare --compare tolerance=1e-6 "$work/a" "$work/b"
expect 1 "words must match" -- "$spmd" compare --compare 1e-6 "$work/a" "$work/c"
expect 1 "a missing line" -- "$spmd" compare --compare 1e-6 "$work/a" "$work/d"
expect 1 "beyond tolerance" -- "$spmd" compare --compare 1e-9 "$work/a" "$work/b"
expect 2 "bad tolerance" -- "$spmd" compare --compare -1 "$work/a" "$work/b"
expect 1 "missing file" -- "$spmd" compare "$work/a" "$work/nonexistent"
exit $fail
