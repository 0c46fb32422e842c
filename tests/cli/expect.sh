# The shell tests' harness (sourced): a scratch folder $work, removed at exit; report marks a
# failure ($fail); expect STATUS DESCRIPTION -- COMMAND... runs a command, shows what it
# printed ($work/out, $work/err) and checks its exit status.
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
fail=0
report() { echo "FAIL: $*"; fail=1; }
expect() {
    want=$1 what=$2; shift 3
    "$@" >"$work/out" 2>"$work/err"; rc=$?
    echo "--- $what: $* -> $rc"; cat "$work/out" "$work/err"
    [ "$rc" -eq "$want" ] || report "$what: exit status $rc, expected $want"
}
