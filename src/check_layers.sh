#!/bin/sh
# Checks that every #include under src/ points down the layers (src/README.md): a file may
# include its own layer's headers, those of the layers its row below allows, the public headers
# (include/) and system headers, except the system headers its layer refuses. A file in no
# layer fails too, so a new folder cannot slip past. Prints each violation with its line and
# exits 1; exits 0 when all includes are allowed.
#
# usage: src/check_layers.sh [ROOT]   (ROOT holds src/ and include/; default: this script's ..)
set -eu
root=${1:-$(dirname "$0")/..}
[ -d "$root/src" ] || { echo "check_layers: $root/src is not a directory" >&2; exit 2; }

# The layers, lowest first: where their files lie (a file's layer is its longest matching
# path; folders end in /), which layers they may include, and which system headers they refuse.
layers='
basics    | runtime/base/              | | mpi.h spmd/mpi.h cuda* cublas* nccl.h
devices   | runtime/devices/           | basics | mpi.h spmd/mpi.h nccl.h
calls     | runtime/calls/             | basics devices | mpi.h spmd/mpi.h cuda* cublas* nccl.h
comm      | runtime/comm/              | basics devices calls | cuda* cublas*
runtime   | runtime/                   | basics devices calls comm |
sharding  | sharding/                  | basics | mpi.h spmd/mpi.h cuda* cublas* nccl.h
array     | array/                     | basics devices calls comm runtime sharding |
shard_map | shard_map/                 | basics devices calls comm runtime sharding array |
array_ops | array_ops/                 | basics devices calls comm runtime sharding array shard_map |
multihost | multihost/                 | basics devices calls comm runtime sharding array shard_map array_ops |
compat    | compat/                    | basics devices calls comm runtime sharding array shard_map array_ops |
pmap      | pmap/                      | basics devices calls comm runtime sharding array shard_map array_ops |
cli       | cli/                       | |
'

tab=$(printf '\t')

# Every include as "file<TAB>line<TAB>q|s<TAB>name" (q: "quoted", s: <system>), paths from src/.
list_includes() {
    (cd "$root/src" && find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
        -o -name '*.cc' -o -name '*.cpp' -o -name '*.hpp' \) | sed 's|^\./||' | LC_ALL=C sort |
        while read -r f; do
            printf '%s\t0\t-\t-\n' "$f" # so that a file without includes still gets a layer
            grep -n '^[[:space:]]*#[[:space:]]*include' "$f" |
                sed -n -e "s|^\\([0-9]*\\):[^\"<]*\"\\([^\"]*\\)\".*|$f$tab\\1${tab}q$tab\\2|p" \
                       -e "s|^\\([0-9]*\\):[^\"<]*<\\([^>]*\\)>.*|$f$tab\\1${tab}s$tab\\2|p"
        done)
}

# Resolves includes: a quoted one beside the file, else from src/, else a public header (p),
# else unknown (u); beside the file but outside src/: o. An <included> file that lies under
# src/ (src/ is on the include path) counts as a quoted include from src/.
resolve() {
    srcdir=$(cd "$root/src" && pwd -P)
    while IFS="$tab" read -r f line kind name; do
        target=$name
        if [ "$kind" = s ] && [ -f "$root/src/$name" ]; then
            kind=q
        elif [ "$kind" = q ]; then
            dir=$(dirname "$f")
            if [ -f "$root/src/$dir/$name" ]; then
                target=$(cd "$root/src/$dir" && cd "$(dirname "$name")" && pwd -P)/$(basename "$name")
                case $target in
                    "$srcdir"/*) target=${target#"$srcdir/"} ;;
                    *) kind=o ;;
                esac
            elif [ -f "$root/src/$name" ]; then
                target=$name
            elif [ -f "$root/include/$name" ]; then
                kind=p
            else
                kind=u
            fi
        fi
        printf '%s\t%s\t%s\t%s\t%s\n' "$f" "$line" "$kind" "$name" "$target"
    done
}

list_includes | resolve | awk -F '\t' -v layers="$layers" '
function layer_of(path,    best, len, l, k, n, p) {
    best = ""; len = -1
    for (l = 1; l <= nlayers; l++) {
        n = split(paths[l], p, " ")
        for (k = 1; k <= n; k++)
            if ((p[k] ~ /\/$/ ? index(path, p[k]) == 1 : path == p[k]) && length(p[k]) > len) {
                best = l; len = length(p[k])
            }
    }
    return best
}
function refused(l, header,    n, r, k, pattern) {
    n = split(refuses[l], r, " ")
    for (k = 1; k <= n; k++) {
        pattern = r[k]; gsub(/\./, "\\.", pattern); gsub(/\*/, ".*", pattern)
        if (header ~ ("^" pattern "$")) return 1
    }
    return 0
}
BEGIN {
    nl = split(layers, rows, "\n")
    for (i = 1; i <= nl; i++) {
        if (rows[i] !~ /\|/) continue
        split(rows[i], c, "|")
        for (j = 1; j <= 4; j++) { gsub(/^[ ]+|[ ]+$/, "", c[j]); gsub(/[ ]+/, " ", c[j]) }
        nlayers++; name[nlayers] = c[1]; paths[nlayers] = c[2]; refuses[nlayers] = c[4]
        allowed[nlayers] = " " c[1] " " c[3] " "
    }
    bad = 0
}
{
    file = $1; line = $2; kind = $3; header = $4; target = $5
    from = layer_of(file)
    if (from == "") {
        if (!(file in told)) {
            printf "src/%s: in no layer; add its folder to the table in src/check_layers.sh\n", file
            told[file] = 1; bad++
        }
        next
    }
    if (kind == "-" || kind == "p") next
    if (kind == "o") {
        printf "src/%s:%s: includes \"%s\", a path out of src/ (name public headers as <spmd/...>)\n", file, line, header
        bad++; next
    }
    if (kind == "u") {
        printf "src/%s:%s: includes \"%s\", which is neither under src/ nor a public header\n", file, line, header
        bad++; next
    }
    if (kind == "s") {
        if (refused(from, header)) {
            printf "src/%s:%s: includes <%s>, which layer %s refuses (it stays free of MPI and CUDA)\n", file, line, header, name[from]
            bad++
        }
        next
    }
    to = layer_of(target)
    if (to == "") next # reported for that file itself
    if (index(allowed[from], " " name[to] " ") == 0) {
        printf "src/%s:%s: includes %s (layer %s), but layer %s may include only:%s\n", file, line, target, name[to], name[from], allowed[from]
        bad++
    }
}
END {
    if (bad) { printf "check_layers: %d include(s) against the layers (src/README.md)\n", bad; exit 1 }
}'
