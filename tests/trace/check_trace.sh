#!/bin/sh
# check_trace.sh CASE MPIEXEC TRACE_PLANTED SPMD
#   diverge  trace_planted perturbs one all_gather input on device 5 in the 4 x 2 layout only:
#            `spmd trace diff` of the 1 x 8 and 4 x 2 traces names that call, that collective
#            and that device; the clean program's traces agree across layouts (and their
#            processes' files pair up);
#   hang     device 2 never reaches collective #2 (timeout 2 s): the timeout names where process
#            1's devices are, and `spmd trace show` names for every process the collective each
#            device is in;
#   killed   the same hang, the job killed by `timeout -s KILL` before the timeout: `spmd trace
#            show` says the same from what the files held;
#   signal   a process that aborts, and one that exits without spmd_finalize: the header says so;
#   submesh  (TRACE_PLANTED is trace_submesh) shard_maps on a sub-mesh between calls on the full
#            mesh, processes outside it skipping them (or calling them and running nothing):
#            the traces of 1 x 4, 2 x 2 and 4 x 1 agree, though each process numbers its calls
#            its own way, and so do those whose rings went round (SPMD_TRACE_RECORDS=64); a
#            changed input in one sub-mesh call, another collective in one full-mesh call and
#            a renamed sync are found and named, with each side's own call number;
#   files    (no MPI) `spmd trace show` of a crafted ring whose header claims 2^20 devices reads
#            its records once (it took 25 s); show and diff refuse, as bad usage and without
#            waiting, what is not a regular file: a FIFO, a device, a directory named like a
#            trace file.
set -u
case=$1 mpiexec=$2 program=$3 spmd=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
# expect FILE PATTERN: an extended regular expression some line of FILE matches
expect() {
    grep -Eq -- "$2" "$1" || fail "$(basename "$1") lacks /$2/"
}
run() { # run P D DIR MODE [ENV...]: P processes x D devices, traced into DIR
    p=$1 d=$2 dir=$3 mode=$4
    shift 4
    # shellcheck disable=SC2086 # the words of $mode are the program's arguments
    env SPMD_NUM_CPU_DEVICES="$d" SPMD_CUDA_DEVICES_PER_GPU="$d" SPMD_TRACE="$dir" "$@" \
        "$mpiexec" -n "$p" "$program" $mode >"$dir.out" 2>"$dir.err"
}

case $case in
diverge)
    for layout in 1x8 4x2; do
        p=${layout%x*} d=${layout#*x}
        # digests are of host memory only: CPU devices, whatever the suite's platform
        run "$p" "$d" "$work/clean_$layout" clean SPMD_TRACE_DIGESTS=1 SPMD_PLATFORM=cpu ||
            fail "clean $layout exits $?"
        run "$p" "$d" "$work/diverge_$layout" diverge SPMD_TRACE_DIGESTS=1 SPMD_PLATFORM=cpu ||
            fail "diverge $layout exits $?"
    done
    cmp -s "$work/clean_1x8.out" "$work/clean_4x2.out" || fail "clean outputs differ by layout"
    cmp -s "$work/diverge_1x8.out" "$work/diverge_4x2.out" && fail "the planted change changed nothing"
    "$spmd" trace diff "$work/clean_1x8" "$work/clean_4x2" >"$work/clean.diff"
    [ $? -eq 0 ] || fail "clean traces differ: $(cat "$work/clean.diff")"
    expect "$work/clean.diff" "^the traces agree: [0-9]+ records compared, data digests included"
    "$spmd" trace diff "$work/diverge_1x8" "$work/diverge_4x2" >"$work/diverge.diff"
    [ $? -eq 1 ] || fail "spmd trace diff of the planted divergence does not exit with 1"
    # the third shard_map call, collective #2, device 5 (process 2 in 4 x 2), its input
    expect "$work/diverge.diff" "^first difference: call #[0-9]+, collective #2 on device 5: all_gather float32\[4\] over \('i'\) #2$"
    expect "$work/diverge.diff" "^  in call #[0-9]+: spmd_shard_map on Mesh\('i': 8, axis_types=\(Auto,\)\).*call #3 on that mesh$"
    expect "$work/diverge.diff" "^  the input data \(digests\) differs:$"
    expect "$work/diverge.diff" "^    B: [0-9a-f]{16} \(process 2, call #[0-9]+\)$"
    # a directory holding the files of two runs is refused, not read as one
    mkdir "$work/mixed"
    cp "$work/clean_4x2/"*.spmd "$work/mixed/"
    cp "$work/clean_1x8/trace.0.spmd" "$work/mixed/trace.0.spmd"
    "$spmd" trace show "$work/mixed" >"$work/mixed.show" 2>&1 && fail "a mixed directory was shown"
    expect "$work/mixed.show" "mixes the traces of runs of 1 and 4 processes"
    # two processes of one run, without digests: the same calls and collectives
    run 2 2 "$work/two" clean || fail "clean 2x2 exits $?"
    "$spmd" trace diff "$work/two/trace.0.spmd" "$work/two/trace.1.spmd" >"$work/two.diff" ||
        fail "the processes of one run differ: $(cat "$work/two.diff")"
    expect "$work/two.diff" "^\(no data digests in either"
    ;;
submesh)
    for run in 1x4:skip 2x2:skip 2x2:call 4x1:skip 2x2:plant 2x2:other; do
        layout=${run%:*} mode=${run#*:}
        run "${layout%x*}" "${layout#*x}" "$work/${mode}_$layout" "$mode" SPMD_TRACE_DIGESTS=1 \
            SPMD_PLATFORM=cpu || fail "$mode $layout exits $?: $(cat "$work/${mode}_$layout.err")"
    done
    for other in skip_2x2 call_2x2 skip_4x1; do
        cmp -s "$work/skip_1x4.out" "$work/$other.out" || fail "the outputs of $other differ"
        "$spmd" trace diff "$work/skip_1x4" "$work/$other" >"$work/$other.diff" ||
            fail "the traces of 1x4 and $other differ: $(cat "$work/$other.diff")"
        expect "$work/$other.diff" "^the traces agree: [0-9]+ records compared, data digests included"
    done
    "$spmd" trace diff "$work/skip_2x2" "$work/skip_4x1" >"$work/2x2_4x1.diff" ||
        fail "the traces of 2x2 and 4x1 differ: $(cat "$work/2x2_4x1.diff")"
    # device 1's psum input in call #2 on 'j': call #8 of process 0 in both
    "$spmd" trace diff "$work/skip_1x4" "$work/plant_2x2" >"$work/plant.diff"
    [ $? -eq 1 ] || fail "the planted input is not a difference: $(cat "$work/plant.diff")"
    expect "$work/plant.diff" "^first difference: call #8, collective #1 on device 1: psum float32\[4\] over \('j'\) #1$"
    expect "$work/plant.diff" "^  in call #8: spmd_shard_map on Mesh\('j': 2, .*\(devices \[0, 1\]\), call #2 on that mesh$"
    expect "$work/plant.diff" "^  the input data \(digests\) differs:$"
    expect "$work/plant.diff" "^    B: [0-9a-f]{16} \(process 0, call #8\)$"
    # the third call on 'i', with pmax in 2 x 2: call #11 of 1 x 4's process, #9 of process 1 of
    # 2 x 2 (it skipped two calls on 'j')
    "$spmd" trace diff --more 100 "$work/skip_1x4" "$work/other_2x2" >"$work/other.diff"
    [ $? -eq 1 ] || fail "the other collective is not a difference: $(cat "$work/other.diff")"
    expect "$work/other.diff" "^first difference: call #11, collective #1 on device 0: psum float32\[4\] over \('i'\) #1$"
    expect "$work/other.diff" "^  in call #11: spmd_shard_map on Mesh\('i': 4, .*call #3 on that mesh$"
    expect "$work/other.diff" "^  what was called differs:$"
    expect "$work/other.diff" "^    B: pmax float32\[4\] over \('i'\) #1 \(process 0, call #11\)$"
    expect "$work/other.diff" "^then: call #11, collective #1 on device 3: psum .*: what was called \(B: process 1, call #9\)$"
    # and the last sync, named otherwise: the multihost calls pair by their order
    expect "$work/other.diff" "^then: call #13 \(what it is\): what was called$"
    # rings of 64 records over 12 rounds: compared from a call every file holds whole
    for layout in 1x4 2x2; do
        run "${layout%x*}" "${layout#*x}" "$work/ring_$layout" "skip 12" SPMD_TRACE_DIGESTS=1 \
            SPMD_PLATFORM=cpu SPMD_TRACE_RECORDS=64 || fail "skip 12 $layout exits $?"
    done
    "$spmd" trace diff "$work/ring_1x4" "$work/ring_2x2" >"$work/ring.diff" ||
        fail "the traces of rings that went round differ: $(cat "$work/ring.diff")"
    expect "$work/ring.diff" "^\(the rings went round: comparing from call #[0-9]+ of process 0 in A, spmd_shard_map on Mesh"
    expect "$work/ring.diff" "^the traces agree: [0-9]+ records compared, data digests included"
    ;;
hang | killed)
    if [ "$case" = hang ]; then
        run 4 2 "$work/t" hang SPMD_COLLECTIVE_TIMEOUT=2 && fail "the planted hang exited with 0"
        # the timeout names where the stuck process's devices are
        expect "$work/t.err" "^process 0: .*process 1 is alive, in spmd_shard_map.*its device 2 had last entered collective #1 \(psum over \('i'\)\), device 3 had last entered collective #2 \(all_gather over \('i'\)\)"
        open="failed after [0-9.]+ s: SPMD_ERR_TIMEOUT"
        stuck="device 2: (in fn, in no collective; its last, psum float32\[4\] over \('i'\) #1|returned from fn .* after [0-9.]+ s and 1 collective; the last psum float32\[4\] over \('i'\) #1)"
    else
        tag="killed-$$"
        command -v timeout >/dev/null || { echo "no timeout command: skipped"; exit 77; }
        mkdir -p "$work/t"
        SPMD_NUM_CPU_DEVICES=2 SPMD_CUDA_DEVICES_PER_GPU=2 SPMD_TRACE="$work/t" SPMD_COLLECTIVE_TIMEOUT=60 \
            timeout -s KILL 3 "$mpiexec" -n 4 "$program" hang "$tag" >"$work/t.out" 2>&1
        rc=$?
        pkill -KILL -f "$program hang $tag" 2>/dev/null # the ranks a killed launcher left
        [ $rc -eq 137 ] || fail "timeout -s KILL did not kill the job (exit $rc)"
        open="not ended: waited at least [0-9.]+ s"
        stuck="device 2: in fn, in no collective; its last, psum float32\[4\] over \('i'\) #1, ended at [0-9.]+ s; fn not ended"
    fi
    "$spmd" trace show "$work/t" >"$work/show" || fail "spmd trace show exits $?"
    cat "$work/show"
    expect "$work/show" "^trace .*: 4 of 4 processes"
    for p in 0 1 2 3; do
        expect "$work/show" "^process $p of 4 .*devices $((2 * p))\.\.$((2 * p + 1))"
    done
    for dev in 0 1 3 4 5 6 7; do
        expect "$work/show" "^    device $dev: in all_gather float32\[4\] over \('i'\) #2 since [0-9.]+ s: $open"
    done
    expect "$work/show" "^    $stuck"
    # the summary: the stuck device apart, first
    expect "$work/show" "^where the devices were \(the smallest groups first\):$"
    expect "$work/show" "^  device 2: (in fn, past 1 collective\(s\), the last psum|returned from fn)"
    expect "$work/show" "^  devices 0, 1, 3\.\.7: in all_gather float32\[4\] over \('i'\) #2 of call #3$"
    expect "$work/show" "^  call #3 spmd_shard_map on Mesh\('i': 8, axis_types=\(Auto,\)\).*call #2 on that mesh: started at"
    if [ "$case" = killed ]; then
        [ "$(grep -c 'no end recorded: still running, or killed' "$work/show")" -eq 4 ] ||
            fail "not every process says it has no recorded end"
    fi
    ;;
signal)
    run 1 2 "$work/a" abort
    "$spmd" trace show "$work/a" >"$work/a.show"
    expect "$work/a.show" "^process 0 of 1 .*: ended: killed by signal 6"
    run 1 2 "$work/e" exit
    "$spmd" trace show "$work/e" >"$work/e.show"
    expect "$work/e.show" "^process 0 of 1 .*: ended: the process exited without spmd_finalize"
    expect "$work/e.show" "^  call #[0-9]+ spmd_shard_map on Mesh\('i': 2, axis_types=\(Auto,\)\).*: started at [0-9.]+ s, ended after"
    "$spmd" trace show "$work/none" >"$work/none.show" 2>&1 && fail "show of a missing trace exits 0"
    expect "$work/none.show" "^spmd: trace show: cannot read"
    ;;
files)
    command -v timeout >/dev/null || { echo "no timeout command: skipped"; exit 77; }
    # each collective on a device of its own: 65,535 device lines and as many summary groups
    "$program" craft "$work/big.spmd" 1048576 65536 || fail "trace_planted craft exits $?"
    begin=$(date +%s)
    timeout 10 "$spmd" trace show "$work/big.spmd" >"$work/big.show" 2>&1
    rc=$?
    echo "--- show of 2^20 devices over 65536 records: exit $rc, $(($(date +%s) - begin)) s"
    [ $rc -eq 0 ] || fail "spmd trace show of 2^20 devices exits $rc (124: over 10 s)"
    expect "$work/big.show" "^process 0 of 1 .*devices 0\.\.1048575"
    expect "$work/big.show" "^    device 65534: in psum float32\[4\] over \('i'\) #65535 since"
    expect "$work/big.show" "^  device 65534: in psum float32\[4\] over \('i'\) #65535 of call #1$"
    # not regular files: exit 2 at once, the file named
    mkfifo "$work/fifo" || fail "mkfifo"
    mkdir -p "$work/in_dir/trace.0.spmd" "$work/fifo_dir"
    mkfifo "$work/fifo_dir/trace.0.spmd"
    for what in "show $work/fifo" "diff $work/big.spmd $work/fifo" "diff $work/fifo $work/big.spmd" \
        "show /dev/null" "show $work/in_dir" "show $work/fifo_dir"; do
        # shellcheck disable=SC2086 # the words of $what are the arguments
        timeout 10 "$spmd" trace $what >"$work/refused" 2>&1
        rc=$?
        echo "--- trace $what: exit $rc: $(cat "$work/refused")"
        [ $rc -eq 2 ] || fail "trace $what exits $rc, not 2 (124: it waited)"
        expect "$work/refused" "^spmd: trace (show|diff): .*(fifo|null|trace\.0\.spmd) is not a regular file; give a trace directory"
    done
    ;;
*)
    echo "unknown case $case" >&2
    exit 2
    ;;
esac
[ $failures -eq 0 ] && echo "PASS: $case" && exit 0
exit 1
