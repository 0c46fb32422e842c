#!/bin/sh
# usage: check_pages.sh GUIDE_DIR
# Every C block on the guide's pages must be a compiled snippet, verbatim: each ```c block is
# preceded by <!-- snippet: FILE --> (the whole of snippets/FILE) or <!-- snippet: FILE#NAME -->
# (the lines between /* [snippet:NAME] */ and /* [end] */ in snippets/FILE). Every snippet
# file must be shown somewhere, and every marked excerpt too.
set -eu
dir=$1
work=${TMPDIR:-/tmp}/guide_pages.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT INT TERM
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Split each page's C blocks into files: $work/<n>.block, listed in $work/list as
# "<n> <page> <line> <reference or ->".
n=0
: >"$work/list"
for page in "$dir"/*.md; do
    awk -v page="$(basename "$page")" -v work="$work" -v start="$n" '
        /^<!-- snippet: [^ ]+ -->$/ { ref = $3; refline = NR; next }
        /^```c$/ {
            n = start + (++count); file = work "/" n ".block"
            printf "" >file
            printf "%d %s %d %s\n", n, page, NR, (refline == NR - 1 ? ref : "-") >>(work "/list")
            inside = 1; next
        }
        inside && /^```$/ { inside = 0; close(file); next }
        inside { print >>file }
        END { print start + count >(work "/count") }' "$page"
    n=$(cat "$work/count")
done

blocks=0
while read -r id page line ref; do
    blocks=$((blocks + 1))
    if [ "$ref" = "-" ]; then
        fail "$page:$line: a C block without <!-- snippet: FILE[#NAME] --> on the line before"
        continue
    fi
    file=${ref%%#*}
    src=$dir/snippets/$file
    if [ ! -f "$src" ]; then
        fail "$page:$line: snippets/$file does not exist"
        continue
    fi
    if [ "$file" = "$ref" ]; then
        cp "$src" "$work/$id.source"
    else
        name=${ref#*#}
        awk -v name="$name" '
            { t = $0; sub(/^[ \t]+/, "", t); sub(/[ \t]+$/, "", t) }
            t == "/* [snippet:" name "] */" { inside = 1; found = 1; next }
            inside && t == "/* [end] */" { inside = 0; exit }
            inside { print }
            END { exit !found }' "$src" >"$work/$id.source" ||
            { fail "$page:$line: no /* [snippet:$name] */ marker in snippets/$file"; continue; }
    fi
    echo "$ref" >>"$work/shown"
    if ! cmp -s "$work/$id.source" "$work/$id.block"; then
        fail "$page:$line: the block differs from snippets/$ref (< snippet, > page):"
        diff "$work/$id.source" "$work/$id.block" || true
    fi
done <"$work/list"

# Nothing compiled stays unshown: each file, and each marked excerpt, appears on a page.
touch "$work/shown"
for src in "$dir"/snippets/*.c; do
    file=$(basename "$src")
    grep -Eq "^$file(#|\$)" "$work/shown" || fail "snippets/$file is shown on no page"
    for name in $(sed -n 's/^[ \t]*\/\* \[snippet:\([A-Za-z0-9_-]*\)\] \*\/$/\1/p' "$src"); do
        grep -qx "$file#$name" "$work/shown" || grep -qx "$file" "$work/shown" ||
            fail "snippets/$file#$name is shown on no page"
    done
done

if [ "$failures" -ne 0 ]; then
    echo "$failures problem(s) in the guide's pages"
    exit 1
fi
echo "PASS: $blocks C block(s) on the pages are the compiled snippets, verbatim"
