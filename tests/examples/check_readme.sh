#!/bin/sh
# usage: check_readme.sh README FILE
# The first ```c block under "## A first program" in README must be FILE, verbatim.
set -eu
readme=$1 file=$2
block=$(awk '/^## A first program/ { on = 1 } on && /^```c$/ { grab = 1; next }
             grab && /^```$/ { exit } grab { print }' "$readme")
if [ "$block" != "$(cat "$file")" ]; then
    printf '%s: the first program differs from %s; copy the file into the README\n' \
        "$readme" "$file"
    exit 1
fi
