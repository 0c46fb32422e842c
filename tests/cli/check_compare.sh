#!/bin/sh
# spmd compare: numbers found inside text within a tolerance (key=value, brackets, commas,
# exponents), the summary (counts, largest differences), exact mode, and no false pass
# (infinities, NaN, hex, numbers beyond float64, a CR on one side, NUL bytes, options after the
# files, bad tolerances).
# usage: check_compare.sh SPMD_CLI
set -u
spmd=$1
. "$(dirname "$0")/expect.sh"
pair() { printf -- "$1" >"$work/a"; printf -- "$2" >"$work/b"; } # "--": a case may start with -

# numbers inside text: within and beyond the tolerance
pair 'loss=1.0 acc=(0.5) w=[1.0, 2.5e-3], lr 1e-3,\n' 'loss=1.0000001 acc=(0.5000001) w=[1.0000001, 2.5000001e-3], lr 1e-3,\n'
expect 0 "key=value, brackets, commas within 1e-6" -- "$spmd" compare --compare 1e-6 "$work/a" "$work/b"
grep -q '1 line(s) compared (tolerance=1e-06), 0 differ; 5 number(s) compared' "$work/out" ||
    report "summary of a match"
expect 1 "the same beyond 1e-9" -- "$spmd" compare --compare 1e-9 "$work/a" "$work/b"
grep -q '1 differ; 5 number(s) compared, largest difference 1e-07 at line 1' "$work/err" ||
    report "largest difference not named"
expect 1 "exact mode unchanged" -- "$spmd" compare "$work/a" "$work/b"
grep -q 'compared (exact), 1 differ' "$work/err" || report "exact summary"
expect 0 "abs" -- "$spmd" compare --compare abs=2e-7 "$work/a" "$work/b"
expect 1 "abs too small" -- "$spmd" compare --compare abs=1e-8 "$work/a" "$work/b"
expect 0 "rel" -- "$spmd" compare --compare rel=1e-6 "$work/a" "$work/b"
expect 0 "ulps32: float32 neighbours" -- "$spmd" compare --compare ulps32=2 "$work/a" "$work/b"
expect 1 "ulps: float64 steps are finer" -- "$spmd" compare --compare ulps=2 "$work/a" "$work/b"
expect 0 "several criteria, any one suffices" -- "$spmd" compare --compare abs=0,rel=1e-6 "$work/a" "$work/b"

# the summary: lines compared and differing, the largest relative difference, the first lines
pair 'a 1\nb 2\nc 3\nd 4\ne 5\n' 'a 1\nb 2.5\nc 3\nd 8\ne 5.1\n'
expect 1 "three lines differ" -- "$spmd" compare --compare 0.01 "$work/a" "$work/b"
grep -q '5 line(s) compared (tolerance=0.01), 3 differ; 5 number(s) compared, largest difference 4 at line 4 (4 against 8), largest relative difference 0.5 at line 4' "$work/err" ||
    report "summary counts"
grep -q 'line 2: "b 2" against "b 2.5"' "$work/err" || report "first difference"
grep -q 'line 5: "e 5" against "e 5.1"' "$work/err" || report "third difference"

# words stay words: numbers only where they stand apart
pair 'float32 v1.2.3 2x4\n' 'float33 v1.2.4 2x5\n'
expect 1 "digits inside words are text" -- "$spmd" compare --compare 0.5 "$work/a" "$work/b"

# no false pass
for case in 'loss 0.5|loss inf' 'inf|-inf' '-inf|0' '0x10|16' '0x10|0x11' 'nan|0' 'inf|1e308' '1.0|1.0 2.0' 'x|x y'; do
    pair "${case%%|*}\n" "${case#*|}\n"
    expect 1 "'${case%%|*}' against '${case#*|}'" -- "$spmd" compare --compare 1e-6 "$work/a" "$work/b"
done
pair 'inf nan -inf\n' 'inf -nan -inf\n'
expect 0 "an infinity matches itself, NaN matches NaN" -- "$spmd" compare --compare 1e-6 "$work/a" "$work/b"

# numbers float64 cannot hold are text (strtod would make them infinities or 0)
for case in '1e400|2e400' '1e400|inf' '-1e400|-inf' '1e400|1e401' '1e-400|0' '1e-400|2e-400'; do
    pair "${case%%|*}\n" "${case#*|}\n"
    expect 1 "'${case%%|*}' against '${case#*|}'" -- "$spmd" compare --compare 0.5 "$work/a" "$work/b"
done
pair 'x=1e400 y=[-1e-400]\n' 'x=1e400 y=[-1e-400]\n'
expect 0 "out of float64's range, equal as text" -- "$spmd" compare --compare 0.5 "$work/a" "$work/b"

# a CR that ends a line (CRLF) must end the other too; blanks before it still count as one
pair 'a 1\r\n' 'a 1\n'
expect 1 "a CR on one side only" -- "$spmd" compare --compare 1e-6 "$work/a" "$work/b"
pair 'a 1\n' 'a 1\r\n'
expect 1 "a CR on the other side only" -- "$spmd" compare --compare 1e-6 "$work/a" "$work/b"
pair 'a 1\r\nb 2\r\n' 'a  1.0000001 \r\nb 2\r\n'
expect 0 "a CR on both sides" -- "$spmd" compare --compare 1e-6 "$work/a" "$work/b"
printf 'result\000 1\nok\n' >"$work/a"; printf 'result\000 2\nok\n' >"$work/b"
expect 1 "bytes after a NUL, exact" -- "$spmd" compare "$work/a" "$work/b"
grep -q 'line 1: "result\\x00 1" against "result\\x00 2"' "$work/err" || report "NUL shown"
expect 1 "bytes after a NUL, within a tolerance" -- "$spmd" compare --compare 0.1 "$work/a" "$work/b"
printf 'a\000b\n' >"$work/a"; printf 'a\000c\n' >"$work/b"
expect 1 "a NUL then text" -- "$spmd" compare "$work/a" "$work/b"

# options before or after the files (the README's own example)
pair 'loss 1.0\n' 'loss 1.0000001\n'
expect 0 "options after the files" -- "$spmd" compare "$work/a" "$work/b" --compare 1e-6
expect 0 "short option after the files" -- "$spmd" compare "$work/a" "$work/b" -c 1e-6
expect 2 "an unknown option after the files" -- "$spmd" compare "$work/a" "$work/b" --tolerance 1
grep -q "unknown option" "$work/err" || report "unknown option not named"

# bad tolerances are refused by name, exit 2
for bad in -1 tolerance=-1 abs=-1 rel=nan abs=inf ulps=1.5 ulps=-2 0x10 foo=1 'abs=1,' ''; do
    expect 2 "bad comparison '$bad'" -- "$spmd" compare --compare "$bad" "$work/a" "$work/b"
    grep -q 'is not T, tolerance=T' "$work/err" || report "bad comparison '$bad' not explained"
done
exit $fail
