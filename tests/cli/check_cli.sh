#!/bin/sh
# Runs one spmd CLI command and checks its exit status and output.
#
# usage: check_cli.sh [options] -- command [args...]
#   -x STATUS   expected exit status (default 0). For a nonzero status, stderr must also be
#               exactly one line starting with "spmd: " (the CLI's error contract).
#   -s TEXT     stdout must equal TEXT exactly (one line, plus the final newline)
#   -f FILE     stdout must equal the contents of FILE exactly
#   -o TEXT     stdout must contain TEXT (fixed string; may repeat)
#   -e TEXT     stderr must contain TEXT (fixed string; may repeat)
#   -n COUNT    stdout must have exactly COUNT lines
#   -u VAR      unset environment variable VAR before running (may repeat)
set -u

status=0
lines=
checks=$(mktemp) || exit 1
out=$(mktemp) || exit 1
err=$(mktemp) || exit 1
trap 'rm -f "$checks" "$out" "$err"' EXIT

# Checks are queued in a file, one "kind<TAB>text" per line, so TEXT may hold any character
# except a newline.
tab=$(printf '\t')
while [ $# -gt 0 ]; do
    case $1 in
    -x) status=$2; shift 2 ;;
    -s | -f | -o | -e) printf '%s%s%s\n' "$1" "$tab" "$2" >>"$checks"; shift 2 ;;
    -n) lines=$2; shift 2 ;;
    -u) unset "$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "check_cli.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "check_cli.sh: no command given" >&2; exit 2; }

"$@" >"$out" 2>"$err"
rc=$?
fail=0

report() {
    echo "FAIL: $*"
    fail=1
}

echo "command: $*"
echo "--- exit status: $rc (expected $status)"
echo "--- stdout:"
cat "$out"
echo "--- stderr:"
cat "$err"
echo "---"

[ "$rc" -eq "$status" ] || report "exit status $rc, expected $status"

if [ "$status" -ne 0 ]; then
    n=$(wc -l <"$err")
    [ "$n" -eq 1 ] || report "stderr has $n lines, expected exactly one"
    head -n 1 "$err" | grep -q '^spmd: ' || report "stderr does not start with 'spmd: '"
fi

if [ -n "$lines" ]; then
    n=$(wc -l <"$out")
    [ "$n" -eq "$lines" ] || report "stdout has $n lines, expected $lines"
fi

while IFS="$tab" read -r kind text; do
    case $kind in
    -s)
        expected=$(mktemp) || exit 1
        printf '%s\n' "$text" >"$expected"
        cmp -s "$expected" "$out" || report "stdout is not exactly: $text"
        rm -f "$expected"
        ;;
    -f) cmp -s "$text" "$out" || report "stdout differs from $text" ;;
    -o) grep -F -q -e "$text" "$out" || report "stdout lacks: $text" ;;
    -e) grep -F -q -e "$text" "$err" || report "stderr lacks: $text" ;;
    esac
done <"$checks"

[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
