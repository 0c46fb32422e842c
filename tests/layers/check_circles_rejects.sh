#!/bin/sh
# Feeds src/check_circles.sh objects compiled from small files that call each other: two files
# calling each other and a round of three must fail, naming every file and symbol on the circle;
# the same files without the closing call must pass. usage: check_circles_rejects.sh ROOT CC
set -eu
root=$1 cc=$2
check=$root/src/check_circles.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# unit NAME DEFINES [CALLS...]: NAME.o defines function DEFINES and calls each of CALLS.
unit() {
    name=$1 defines=$2
    shift 2
    {
        for f in "$@"; do printf 'void %s(void);\n' "$f"; done
        printf 'void %s(void)\n{\n' "$defines"
        for f in "$@"; do printf '    %s();\n' "$f"; done
        printf '}\n'
    } > "$work/$name.c"
    "$cc" -c -o "$work/$name.o" "$work/$name.c"
}

# expect RC WHAT OBJECTS... -- FRAGMENTS...: the check exits RC and prints every fragment.
expect() {
    want=$1 what=$2
    shift 2
    objects=
    while [ "$1" != -- ]; do objects="$objects $1"; shift; done
    shift
    rc=0
    # shellcheck disable=SC2086 # the objects are words without blanks
    sh "$check" $objects > "$work/out" 2>&1 || rc=$?
    if [ "$rc" -ne "$want" ]; then
        echo "FAIL: $what: exit $rc, want $want; output:"; cat "$work/out"
        failures=$((failures + 1))
        return
    fi
    for fragment in "$@"; do
        if ! grep -qF -- "$fragment" "$work/out"; then
            echo "FAIL: $what: output lacks \"$fragment\":"; cat "$work/out"
            failures=$((failures + 1))
            return
        fi
    done
    echo "ok: $what"
}

unit pair_a a_top b_low
unit pair_b b_low a_top
expect 1 "two files that call each other" "$work/pair_a.o" "$work/pair_b.o" -- \
    "circle of 2 files" "pair_a -> " "pair_b -> " "(uses b_low)" "(uses a_top)"

unit round_a ra rb
unit round_b rb rc
unit round_c rc ra
unit leaf leaf_fn
expect 1 "a round of three" "$work/round_a.o" "$work/round_b.o" "$work/round_c.o" "$work/leaf.o" -- \
    "circle of 3 files" "(uses rb)" "(uses rc)" "(uses ra)" "1 circle(s)"

unit down_c rc leaf_fn
expect 0 "the same files without the closing call" "$work/round_a.o" "$work/round_b.o" \
    "$work/down_c.o" "$work/leaf.o" --

printf '%s\n%s\n' "$work/pair_a.o" "$work/leaf.o" > "$work/list"
expect 0 "a list file (@LIST) without a circle" "@$work/list" --
printf '%s\n' "$work/pair_b.o" >> "$work/list"
expect 1 "a list file (@LIST) with a circle" "@$work/list" -- "circle of 2 files"

expect 2 "no objects" "$work/nothing-here" -- "neither a directory nor a file"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all cases behave"
