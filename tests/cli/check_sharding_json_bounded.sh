#!/bin/sh
# spmd sharding --json writes as it goes: 2^21 devices (159 MB of JSON) in under 100 MB of
# memory (it held the whole text before: 2.35 GB). Needs GNU time (Debian's `time`).
# usage: check_sharding_json_bounded.sh SPMD_CLI
set -u
spmd=$1
[ -x /usr/bin/time ] || { echo "no /usr/bin/time (Debian package time): skipped"; exit 77; }
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
n=2097152
/usr/bin/time -f %M -o "$work/peak" "$spmd" sharding --mesh a=$n --spec "'a'" --shape $n --json \
    >"$work/json" || { echo "spmd sharding failed"; exit 1; }
peak=$(tail -n 1 "$work/peak")
bytes=$(wc -c <"$work/json")
echo "2^21 devices: $bytes bytes of JSON, peak memory $peak KiB"
# the last device, whole, and the text closed
tail -c 80 "$work/json" | grep -q "{\"id\":$((n - 1)),\"process\":0,\"index\":\[\[$((n - 1)),$n\]\],\"replica_id\":0}\]}$" ||
    { echo "the JSON does not end with the last device"; tail -c 200 "$work/json"; exit 1; }
[ "$bytes" -gt 150000000 ] || { echo "only $bytes bytes"; exit 1; }
# AddressSanitizer's shadow memory and quarantine come on top: no bound there
[ -n "${ASAN_OPTIONS:-}" ] || [ "$peak" -lt 102400 ] ||
    { echo "peak memory $peak KiB, over 100 MiB"; exit 1; }
