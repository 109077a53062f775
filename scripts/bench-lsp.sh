#!/usr/bin/env bash
# Benchmark language servers (issue 25): the wall time each edit gains when its diagnostics are awaited, and
# the servers' start-up.
#
# usage: scripts/bench-lsp.sh [--short]
#   env: GIT_AGENT_BIN, default target/release/git-agent; LSP_BIN, the folder holding pyright-langserver,
#   default $GIT_AGENT_LSP_PARTNERS/node_modules/.bin, else the cache `.ci/run` installs the language servers
#   into (${XDG_CACHE_HOME:-~/.cache}/git-agent-ci/lsp/node_modules/.bin); FILES, modules in the project,
#   default 200; EDITS, default 10. --short: 50 modules and 4 edits unless FILES or EDITS say.
#
# A Python project of FILES modules (each imports the previous one and defines a few typed functions) in a git
# repository; a scripted model (benchlib/fakesrv.py) makes EDITS edit_file calls, each on its own module,
# then answers. The same session runs three times: pyright not on PATH (no server), pyright with
# `[lsp] diagnostics = false` (files synced, nothing awaited) and with diagnostics on. Per edit: the time from
# the request that asked for it to the next request (the call, its step commit and, when on, the wait for the
# server's diagnostics), median over the edits. Then `git agent lsp status --start` for each server's start-up.
#
# Figures (2026-12-02, debug build, a 2-core machine shared with other builds, pyright 1.1.414): per edit
# no server 115 ms, diagnostics off 110 ms, diagnostics on 702 ms median (8.1 s for the first edit: pyright's
# cold start and first check of the project); start-up pyright 1.1 s, typescript-language-server 0.8 s,
# clangd 0.4 s.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${GIT_AGENT_BIN:-$root/target/release/git-agent}
partners=${GIT_AGENT_LSP_PARTNERS:-${XDG_CACHE_HOME:-$HOME/.cache}/git-agent-ci/lsp}
lsp_bin=${LSP_BIN:-$partners/node_modules/.bin}
files=${FILES:-200}
edits=${EDITS:-10}
case ${1:-} in
--short) files=${FILES:-50} edits=${EDITS:-4} ;;
"") ;;
*) echo "usage: scripts/bench-lsp.sh [--short]" >&2; exit 2 ;;
esac
[[ -x $bin ]] || { echo "error: $bin is not built (cargo build --release, or set GIT_AGENT_BIN)"; exit 1; }
[[ -x $lsp_bin/pyright-langserver ]] || { echo "error: no pyright-langserver in $lsp_bin (set LSP_BIN)"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/git-agent-bench-lsp.XXXXXX")
# `|| true`: under `set -e` a failing `kill` (no job left) would end the trap before the folder is removed.
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
repo=$work/repo
mkdir -p "$repo/pkg"
touch "$repo/pkg/__init__.py"
for ((i = 0; i < files; i++)); do
    prev=$(( i > 0 ? i - 1 : 0 ))
    {
        [[ $i -gt 0 ]] && echo "from pkg.mod_$prev import value_$prev"
        echo "def value_$i(x: int) -> int:"
        echo "    return x + $i"
        echo
        echo "def name_$i(x: int) -> str:"
        echo "    return str(x) + \"_$i\""
        echo
        echo "def total_$i() -> int:"
        if [[ $i -gt 0 ]]; then echo "    return value_$prev(1) + value_$i(2)"; else echo "    return value_0(2)"; fi
    } >"$repo/pkg/mod_$i.py"
done
git -C "$repo" init -q
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.com commit -qm project

calls=$(python3 - "$edits" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps([{"tool": "edit_file",
                   "args": {"path": f"pkg/mod_{i + 1}.py", "old_string": f"return x + {i + 1}",
                            "new_string": f"return x + {i + 1} + 1"}} for i in range(n)]))
PY
)

# One session; prints the median milliseconds between the request that asked for an edit and the next one.
session() {
    local label=$1 path=$2 config=$3
    local log=$work/$label.log port_file=$work/$label.port
    : >"$log"
    python3 "$root/scripts/benchlib/fakesrv.py" --log "$log" --port-file "$port_file" --calls "$calls" &
    local srv=$!
    for _ in $(seq 50); do [[ -s $port_file ]] && break; sleep 0.1; done
    local started
    started=$(date +%s.%N)
    (cd "$repo" && env -i HOME="$work/home-$label" PATH="$path" GIT_AGENT_CONFIG="$config" \
        OPENAI_BASE_URL="http://127.0.0.1:$(cat "$port_file")/v1" OPENAI_API_KEY=bench \
        GIT_AGENT_MODEL=openai/fake-model "$bin" ask "edit" >/dev/null 2>"$work/$label.err") ||
        { echo "error: the $label session failed:"; cat "$work/$label.err"; exit 1; }
    local ended
    ended=$(date +%s.%N)
    kill "$srv" 2>/dev/null || true
    python3 - "$log" "$label" "$started" "$ended" <<'PY'
import json, statistics, sys
log, label, started, ended = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
t = [r["t"] for r in map(json.loads, open(log)) if r.get("flavour") == "chat"]
gaps = [(b - a) * 1000 for a, b in zip(t, t[1:])]
print(f"  {label:<16} per edit: median {statistics.median(gaps):7.0f} ms, max {max(gaps):7.0f} ms;"
      f" session wall {ended - started:5.1f} s ({len(gaps)} edits)")
with open(log + ".median", "w") as f:
    f.write(str(statistics.median(gaps)))
PY
}

mkdir -p "$work/home-none" "$work/home-off" "$work/home-on"
printf '[lsp]\ndiagnostics = false\n' >"$work/off.toml"
printf '[lsp]\ndiagnostics = true\n' >"$work/on.toml"
plain_path=$(dirname "$(command -v git)"):/usr/bin:/bin
echo "project: $files Python modules; $edits edits, each on its own module; binary $bin"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== wall time per edit =="
session no-server "$plain_path" "$work/on.toml"
session diagnostics-off "$lsp_bin:$plain_path" "$work/off.toml"
session diagnostics-on "$lsp_bin:$plain_path" "$work/on.toml"
python3 - "$work" <<'PY'
import sys
median = {k: float(open(f"{sys.argv[1]}/{k}.log.median").read())
          for k in ("no-server", "diagnostics-off", "diagnostics-on")}
on, off, none = median["diagnostics-on"], median["diagnostics-off"], median["no-server"]
print(f"  added per edit by diagnostics: {on - off:.0f} ms over diagnostics off ({on / off:.2f}x),"
      f" {on - none:.0f} ms over no server ({on / none:.2f}x); diagnostics off / no server {off / none:.2f}x")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== server start-up (initialize handshake) =="
(cd "$repo" && PATH="$lsp_bin:$PATH" "$bin" lsp status --start | grep --no-group-separator -B1 "running:\|last error" | sed 's/^/  /')
