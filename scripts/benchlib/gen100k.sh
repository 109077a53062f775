#!/usr/bin/env bash
# The 100,000-file repository the benchmarks share (bench-commit.sh, bench-bigrepo.py), in $1.
# usage: gen100k.sh DIR   (env: DIRS=1000 FILES=100). Does nothing when DIR/.git exists.
set -euo pipefail
repo=$1
dirs=${DIRS:-1000}
files=${FILES:-100}
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 LC_ALL=C
[[ -d $repo/.git ]] && exit 0
echo "building $((dirs * files)) files in $repo ..." >&2
mkdir -p "$repo"
git -C "$repo" init -q -b main
git -C "$repo" config user.name bench
git -C "$repo" config user.email bench@example.com
(
    cd "$repo"
    for ((d = 0; d < dirs; d++)); do
        dir=$(printf 'd%03d' "$d")
        mkdir -p "$dir"
        for ((f = 0; f < files; f++)); do
            printf 'file %s/%03d\nsome content to make it a real blob\n' "$dir" "$f" >"$dir/$(printf 'f%03d.txt' "$f")"
        done
    done
)
git -C "$repo" add -A
git -C "$repo" commit -q -m "synthetic $((dirs * files)) files"
