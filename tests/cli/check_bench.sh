#!/bin/sh
# spmd bench: a quick run of the suites that take no time writes report.md (each row beside
# its baseline and ratio), results.json and, with gnuplot, the plots; `compare` reports the
# regressions of a hand-made pair of results and exits 1 for them; bad usage exits 2.
# usage: check_bench.sh SPMD_TOOL EXPECTED_DIR HAVE_MPI
set -u
spmd=$1 expected=$2 have_mpi=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_bench: $*" >&2; exit 1; }

suites="pmap unreplicate replicate gemm array_ops"
[ "$have_mpi" = 1 ] && suites="$suites reshard array_ops_mpi"
# the caller's own settings of the pages would change what the report says
env -u SPMD_HUGE_PAGES -u GLIBC_TUNABLES \
    "$spmd" bench --quick --devices 2 --procs 2 --out "$work/r" $suites 2>"$work/progress" ||
    { cat "$work/progress" "$work"/r/raw/*.log >&2; fail "spmd bench failed"; }
[ -s "$work/r/report.md" ] || fail "no report.md"
[ -s "$work/r/results.json" ] || fail "no results.json"
for s in $suites; do
    grep -q "^## $s\$" "$work/r/report.md" || fail "report.md has no section for $s"
    grep -q "\"name\":	\"$s\"" "$work/r/results.json" || fail "results.json has no suite $s"
done
# every table row: a result, its baseline and a finite ratio
rows=$(grep -c '^| devices=' "$work/r/report.md")
[ "$rows" -ge 2 ] || fail "report.md has $rows device rows"
if grep '^| ' "$work/r/report.md" | grep -v '^| row \|^|---' | grep -q '| nan |\|| inf |'; then
    fail "a row has no ratio"
fi
grep -q '^| row | metric | result | baseline | ratio | run ratio | spread | #wrong |' "$work/r/report.md" ||
    fail "report.md has no run ratio or spread column"
# a row with a baseline: its run ratio's median (min–max)
grep -Eq '^\| devices=.* \| [0-9.]+ \| [0-9.]+ \([0-9.]+–[0-9.]+\) \| ' "$work/r/report.md" ||
    fail "report.md shows no run ratio"
grep -q '"iteration_divisor":' "$work/r/results.json" || fail "results.json has no iteration divisor"
grep -q 'MPI baselines ran with single-copy mechanism: ' "$work/r/report.md" ||
    fail "report.md does not say which single-copy mechanism MPI used"
# the baselines get the huge pages libspmd's buffers get (bench/README.md, "Pages")
grep -q "Every process's GLIBC_TUNABLES: glibc.malloc.hugetlb=1 " "$work/r/report.md" ||
    fail "report.md does not say that malloc asked for huge pages"
grep -q '"glibc_tunables":	".*glibc.malloc.hugetlb=1"' "$work/r/results.json" ||
    fail "results.json has no glibc_tunables"
if [ "$have_mpi" = 1 ]; then
    grep -q -- '-x GLIBC_TUNABLES=.*glibc.malloc.hugetlb=1 bench_reshard' "$work/r/report.md" ||
        fail "the MPI suite's command does not pass the tunable"
fi
env -u GLIBC_TUNABLES SPMD_HUGE_PAGES=00 \
    "$spmd" bench --quick --devices 2 --out "$work/small" pmap 2>"$work/progress" ||
    { cat "$work/progress" >&2; fail "spmd bench with SPMD_HUGE_PAGES=0 failed"; }
if ! grep -q "Every process's GLIBC_TUNABLES: (not set)" "$work/small/report.md"; then
    fail "with SPMD_HUGE_PAGES=00 the report does not say that GLIBC_TUNABLES was not set"
fi
grep -q '"ratio":' "$work/r/results.json" || fail "results.json has no ratio"
grep -q '"run_ratio":' "$work/r/results.json" || fail "results.json has no run ratios"
grep -q '"median":' "$work/r/results.json" || fail "results.json has no medians"
if command -v gnuplot >/dev/null; then
    [ -s "$work/r/dispatch_devices.png" ] || fail "no dispatch plot although gnuplot is installed"
    grep -q '!\[dispatch against device count\](dispatch_devices.png)' "$work/r/report.md" ||
        fail "report.md does not show the dispatch plot"
fi

# compare: a run against itself has no regression
"$spmd" bench compare "$work/r/results.json" "$work/r/results.json" >"$work/same" ||
    { cat "$work/same"; fail "compare of a run with itself failed"; }
grep -q ' 0 regression' "$work/same" || fail "compare of a run with itself found regressions"
# devices=8 became 1.5 times slower: flagged; gemm 1.2 times faster: better; devices=4 noise
"$spmd" bench compare "$expected/bench_old.json" "$expected/bench_new.json" >"$work/cmp"
[ $? -eq 1 ] || fail "compare did not exit 1 on a regression"
grep -q 'devices=8 .*0.667  REGRESSION' "$work/cmp" || { cat "$work/cmp"; fail "regression not flagged"; }
grep -q 'M-sharded .*1.200  better' "$work/cmp" || { cat "$work/cmp"; fail "improvement not shown"; }
grep -q 'devices=4 .*within noise' "$work/cmp" || { cat "$work/cmp"; fail "noise not recognised"; }
# psum ran 3 times slower, its baseline too (the machine's speed): its ratio is within noise
grep -q 'op=psum size=1048576 *busbw ratio .*within noise' "$work/cmp" ||
    { cat "$work/cmp"; fail "a row with a baseline not compared by its ratio"; }
grep -q '4 row(s) compared, 1 regression.*; 1 by their ratio' "$work/cmp" ||
    { cat "$work/cmp"; fail "bad summary"; }

# usage errors: one line, exit 2
"$spmd" bench nonsense 2>"$work/err"; [ $? -eq 2 ] || fail "unknown suite did not exit 2"
grep -q "^spmd: bench: unknown suite 'nonsense'" "$work/err" || fail "unknown suite message"
"$spmd" bench --sizes 64M:8 2>"$work/err"; [ $? -eq 2 ] || fail "bad --sizes did not exit 2"
"$spmd" bench compare "$work/none.json" "$work/none.json" 2>"$work/err"
[ $? -eq 1 ] || fail "compare of missing files did not exit 1"
echo "check_bench: ok ($suites)"
