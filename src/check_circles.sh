#!/bin/sh
# Checks that no source files call each other in a circle: reads each object's defined and
# undefined global symbols with nm, draws an edge from a file to every file that defines a
# function or variable it uses, and fails on any circle of edges (two files calling each other,
# or a longer round such as a -> b -> c -> a). Prints each circle with the symbols on its edges
# and exits 1; exits 0 when the calls between files form no circle.
#
# usage: src/check_circles.sh DIR|OBJECT|@LIST...   (a DIR is searched for *.o; @LIST is a file
#        naming one object per line; an object built by CMake, .../CMakeFiles/<target>.dir/
#        <path>.o, is named by <path>, its source file)
set -eu
[ "$#" -gt 0 ] || { echo "usage: check_circles.sh DIR|OBJECT|@LIST..." >&2; exit 2; }
command -v nm > /dev/null || { echo "check_circles: nm not found (install binutils)" >&2; exit 2; }

list=$(mktemp)
trap 'rm -f "$list"' EXIT
for arg in "$@"; do
    if [ "${arg#@}" != "$arg" ] && [ -f "${arg#@}" ]; then
        grep -v '^[[:space:]]*$' "${arg#@}"
    elif [ -d "$arg" ]; then
        find "$arg" -type f -name '*.o' | LC_ALL=C sort
    elif [ -f "$arg" ]; then
        printf '%s\n' "$arg"
    else
        echo "check_circles: $arg is neither a directory nor a file" >&2
        exit 2
    fi
done > "$list"
[ -s "$list" ] || { echo "check_circles: no objects under $*; build first" >&2; exit 2; }

# "D<TAB>file<TAB>symbol" for what a file defines, "U<TAB>file<TAB>symbol" for what it uses. One
# nm reads all the objects, each line led by its object's path (-A): run twice per object, nm
# took 16 s for the library's 73.
symbols() {
    tr '\n' '\0' < "$list" | xargs -0 nm -A "$@" | awk -v kind="$1" '
    NF >= 3 { # path:address type symbol, or path: type symbol
        symbol = $NF
        object = $0
        sub(/ +[^ ]+ +[^ ]+$/, "", object) # the type and the symbol
        sub(/:[0-9a-fA-F]*$/, "", object)  # the address, if any
        sub(/.*\.dir\//, "", object)
        sub(/\.o$/, "", object)
        print (kind == "-u" ? "U" : "D") "\t" object "\t" symbol
    }'
}
{ symbols -g --defined-only; symbols -u; } | awk -F '\t' '
$1 == "D" { definer[$3] = $2; next }
{ used[++nused] = $2 "\t" $3 }
END {
    for (i = 1; i <= nused; i++) {
        split(used[i], u, "\t")
        if (!(u[2] in definer) || definer[u[2]] == u[1]) continue
        key = u[1] SUBSEP definer[u[2]]
        if (!(key in via)) { nout[u[1]]++; out[u[1], nout[u[1]]] = definer[u[2]]; node[u[1]] = 1 }
        if (length(via[key]) < 120) via[key] = via[key] " " u[2]
    }
    # Depth-first search in a fixed order; a grey file met again closes a circle.
    n = 0
    for (f in node) names[++n] = f
    for (i = 2; i <= n; i++)                       # insertion sort: the same report every run
        for (j = i; j > 1 && names[j - 1] > names[j]; j--) { t = names[j]; names[j] = names[j - 1]; names[j - 1] = t }
    bad = 0
    for (s = 1; s <= n; s++) {
        if (colour[names[s]]) continue
        depth = 1; stack[1] = names[s]; next_edge[1] = 1; colour[names[s]] = 1
        while (depth > 0) {
            f = stack[depth]
            if (next_edge[depth] > nout[f]) { colour[f] = 2; depth--; continue }
            g = out[f, next_edge[depth]++]
            if (colour[g] == 1) {
                for (k = depth; stack[k] != g; k--) ;
                text = ""
                for (m = k; m <= depth; m++) {
                    to = m < depth ? stack[m + 1] : g
                    text = text "\n  src/" stack[m] " -> src/" to " (uses" via[stack[m], to] ")"
                }
                printf "circle of %d files:%s\n", depth - k + 1, text
                bad++
            } else if (!colour[g]) {
                colour[g] = 1; stack[++depth] = g; next_edge[depth] = 1
            }
        }
    }
    if (bad) {
        printf "%d circle(s): break each with the smaller interface (a callback registered from above, or the shared part in a file both use)\n", bad
        exit 1
    }
}'
