#!/bin/sh
# usage: check_shm_full.sh MPIEXEC PROGRAM
# A /dev/shm too small for libspmd's shared-memory segments, in a mount namespace of this test's
# own (root only: it mounts a small tmpfs there; Open MPI's own segments go to a directory of
# their own). PROGRAM (it checks its values) runs at 2 processes three times: with room for no
# segment, for one of the two, then for both. Every run must pass; a process left without a
# segment must say so, once, and its peer reach it through MPI. The segment's pages are
# reserved when it is made: a full /dev/shm never shows up later, in the middle of a transfer.
set -u
mpiexec=$1 prog=$2
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
    echo "skipped: needs root and mount namespaces (unshare -m)"
    exit 77
fi
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
export OMPI_MCA_btl_vader_backing_directory="$work"
warning="no room in /dev/shm for its"
# run SIZE: PROGRAM at 2 processes with a /dev/shm of SIZE bytes; its output in $work/out
run() {
    unshare -m sh -c 'mount -t tmpfs -o size="$1",mode=1777 tmpfs /dev/shm && shift && exec "$@"' \
        sh "$1" "$mpiexec" -n 2 "$prog" >"$work/out" 2>&1
    rc=$?
    warned=$(grep -c "$warning" "$work/out")
    echo "--- /dev/shm of $1 bytes: exit $rc, $warned process(es) without a segment"
    if [ "$rc" -ne 0 ]; then
        cat "$work/out"
        echo "FAIL: the program failed with a /dev/shm of $1 bytes"
        exit 1
    fi
}
run 4096
grep "$warning" "$work/out" | head -1
[ "$warned" -eq 2 ] || { cat "$work/out"; echo "FAIL: expected both processes to warn"; exit 1; }
bytes=$(grep -o "$warning [0-9]*-byte" "$work/out" | head -1 | tr -dc 0-9)
[ -n "$bytes" ] || { echo "FAIL: the warning gives no size"; exit 1; }
# One segment fits, the second does not. Both processes reserve at once, and tmpfs takes pages
# one by one, so both may fail together: the values must be right every time, and one of a few
# tries must leave exactly one process without its segment.
tries=0
while :; do
    run $((bytes + bytes / 2))
    [ "$warned" -eq 1 ] && break
    [ "$warned" -eq 2 ] || { cat "$work/out"; echo "FAIL: expected a process to warn"; exit 1; }
    tries=$((tries + 1))
    [ "$tries" -lt 5 ] || { cat "$work/out"; echo "FAIL: expected one process to warn"; exit 1; }
done
run $((4 * bytes))
[ "$warned" -eq 0 ] || { cat "$work/out"; echo "FAIL: no process should warn"; exit 1; }
echo "ok"
