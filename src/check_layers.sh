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

# Every include as "file<TAB>line<TAB>kind<TAB>name<TAB>target", paths from src/, resolved: a
# quoted one beside the file, else from src/ (q), else a public header (p, its name the
# target), else unknown (u); a quoted one that leads out of src/ from beside the file or from
# src/ is o, as is an <included> name that climbs ("..") anywhere but into src/. An <included>
# file that lies under src/ (src/ is on the include path) counts as a quoted include from src/
# (q); another stays a system header (s, its name without "." the target). A file without
# includes still gets a line (kind -), so that it gets a layer; a last line (no file, kind
# "end") says the listing finished. Paths resolve by their names ("..", "."): the tree holds
# no symbolic links. One awk reads every file, where a shell loop with a few commands per
# include took 3 s a run (2 minutes in CI for the test that runs it 30 times).
includes() {
    {
        (cd "$root" && find src include -type f 2> /dev/null || true)
        echo # the end of the files, the start of the sources
        (cd "$root/src" && find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
            -o -name '*.cc' -o -name '*.cpp' -o -name '*.hpp' \) | sed 's|^\./||' | LC_ALL=C sort)
    } | SPMD_LAYERS_ROOT=$root awk '
    # The path without "." and "..", or "" where ".." climbs above its start.
    function normal(path,    n, part, kept, k, m, out) {
        n = split(path, part, "/"); m = 0
        for (k = 1; k <= n; k++) {
            if (part[k] == "" || part[k] == ".") continue
            if (part[k] != "..") { kept[++m] = part[k]; continue }
            if (m == 0) return ""
            m--
        }
        out = ""
        for (k = 1; k <= m; k++) out = out (k > 1 ? "/" : "") kept[k]
        return out
    }
    function outside_src(path) { return path == "" || substr(path, 1, 4) != "src/" }
    function resolve(file, name,    dir, beside, from_src) {
        target = name
        from_src = normal("src/" name)
        if (kind == "s") {
            if (name ~ /(^|\/)\.\.(\/|$)/) {
                if (!outside_src(from_src) && from_src in exists) { kind = "q"; target = substr(from_src, 5) }
                else kind = "o"
            } else {
                target = normal(name)
                if (("src/" target) in exists) kind = "q"
            }
            return
        }
        dir = file; if (!sub(/\/[^\/]*$/, "", dir)) dir = "."
        beside = normal("src/" dir "/" name)
        if (outside_src(beside)) kind = "o"
        else if (beside in exists) { kind = "q"; target = substr(beside, 5) }
        else if (outside_src(from_src)) kind = "o"
        else if (from_src in exists) { kind = "q"; target = substr(from_src, 5) }
        else if (("include/" normal(name)) in exists) { kind = "p"; target = normal(name) }
        else kind = "u"
    }
    !sources { if ($0 == "") sources = 1; else exists[$0] = 1; next }
    {
        file = $0
        printf "%s\t0\t-\t-\t-\n", file
        path = ENVIRON["SPMD_LAYERS_ROOT"] "/src/" file
        line = 0
        while ((getline text < path) > 0) {
            line++
            if (text !~ /^[[:space:]]*#[[:space:]]*include/) continue
            quote = index(text, "\""); angle = index(text, "<")
            if (quote && (!angle || quote < angle)) {
                rest = substr(text, quote + 1); end = index(rest, "\""); kind = "q"
            } else if (angle) {
                rest = substr(text, angle + 1); end = index(rest, ">"); kind = "s"
            } else continue
            if (!end) continue
            name = substr(rest, 1, end - 1)
            resolve(file, name)
            printf "%s\t%s\t%s\t%s\t%s\n", file, line, kind, name, target
        }
        close(path)
    }
    END { printf "\t0\tend\t-\t-\n" }'
}

includes | awk -F '\t' -v layers="$layers" '
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
$1 == "" && $3 == "end" { listed = 1; next }
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
    if (kind == "-") next
    if (kind == "o") {
        printf "src/%s:%s: includes \"%s\", a path out of src/ (name public headers as <spmd/...>)\n", file, line, header
        bad++; next
    }
    if (kind == "u") {
        printf "src/%s:%s: includes \"%s\", which is neither under src/ nor a public header\n", file, line, header
        bad++; next
    }
    if (kind == "s" || kind == "p") { # a system or public header: by its name, however written
        if (refused(from, target)) {
            printf "src/%s:%s: includes %s, which layer %s refuses (it stays free of MPI and CUDA)\n", file, line, kind == "s" ? "<" header ">" : "\"" header "\"", name[from]
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
    if (!listed) { printf "check_layers: listing the includes failed (see above)\n"; exit 2 }
    if (bad) { printf "check_layers: %d include(s) against the layers (src/README.md)\n", bad; exit 1 }
}'
