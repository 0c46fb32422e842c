#!/bin/sh
# usage: run_snippet.sh NAME PROCS DEVICES_PER_PROC PROGRAM [MPIEXEC]
# Runs one snippet of the guide (PROCS > 1: under MPIEXEC) and checks its output with
# checks/common.awk + checks/NAME.awk, which compute every expected line themselves. Then the
# pages: every line of a block tagged <!-- output: NAME PROCSxDEVICES --> must be a line the
# program printed, and when such blocks exist, every
# message it printed (a line starting with SPMD_ERR_) must be shown in one. So a page cannot
# show a message the library no longer prints, nor miss one it prints now.
set -eu
name=$1 procs=$2 per=$3 prog=$4 mpiexec=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
work=${TMPDIR:-/tmp}/guide_$name.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT INT TERM

# Snippets print what is the same in every layout on stdout (spmd launch --layouts compares it)
# and what depends on the layout (process numbers, messages naming processes) on stderr: the
# checks read both.
status=0
if [ "$procs" -gt 1 ]; then
    "$mpiexec" -n "$procs" -x SPMD_NUM_CPU_DEVICES="$per" -x SPMD_CUDA_DEVICES_PER_GPU="$per" \
        ${SPMD_COLLECTIVE_TIMEOUT:+-x SPMD_COLLECTIVE_TIMEOUT} "$prog" >"$work/stdout" \
        2>"$work/stderr" || status=$?
else
    SPMD_NUM_CPU_DEVICES="$per" SPMD_CUDA_DEVICES_PER_GPU="$per" "$prog" >"$work/stdout" \
        2>"$work/stderr" || status=$?
fi
cat "$work/stdout" "$work/stderr" >"$work/out"
cat "$work/out"
if [ "$status" -ne 0 ]; then
    echo "FAIL: $prog exited with status $status"
    exit 1
fi
awk -v P="$procs" -v L="$per" -f "$here/checks/common.awk" -f "$here/checks/$name.awk" \
    "$work/out"

grep '^SPMD_ERR_' "$work/out" | sort -u >"$work/printed" || true
for page in "$here"/*.md; do
    awk -v tag="<!-- output: $name ${procs}x$per -->" '
        $0 == tag { armed = 1; next }
        armed && /^```/ { if (inside) { armed = 0; inside = 0 } else inside = 1; next }
        inside && NF { print }' "$page"
done | sort -u >"$work/shown"
if [ -s "$work/shown" ]; then
    bad=0
    while IFS= read -r line; do
        grep -Fxq -- "$line" "$work/out" ||
            { echo "FAIL: a page shows a line the program did not print: $line"; bad=1; }
    done <"$work/shown"
    while IFS= read -r line; do
        grep -Fxq -- "$line" "$work/shown" ||
            { echo "FAIL: no page (<!-- output: $name ${procs}x$per -->) shows: $line"; bad=1; }
    done <"$work/printed"
    [ "$bad" -eq 0 ] || exit 1
    echo "pages: the $(wc -l <"$work/shown") line(s) shown for ${procs}x$per are printed, and every message is shown"
fi
echo "PASS: $name, $procs process(es) x $per device(s)"
