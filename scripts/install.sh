#!/usr/bin/env bash
# Installs git-agent and its man pages so that `git agent ...` and `git help agent` work.
#   scripts/install.sh            # into ~/.local (binary in ~/.local/bin, man pages in ~/.local/share/man/man1)
#   PREFIX=/usr/local scripts/install.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${PREFIX:-$HOME/.local}

command -v cargo >/dev/null || { echo "error: cargo not found: install Rust from https://rustup.rs first" >&2; exit 1; }
cargo install --quiet --locked --force --path "$root" --root "$prefix"
mkdir -p "$prefix/share/man/man1"
install -m 644 "$root"/man/*.1 "$prefix/share/man/man1/"

echo "installed $prefix/bin/git-agent and its man pages in $prefix/share/man/man1"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "hint: add $prefix/bin to PATH (e.g. export PATH=\"$prefix/bin:\$PATH\") so 'git agent' finds it" ;;
esac
if command -v manpath >/dev/null && ! manpath 2>/dev/null | tr ':' '\n' | grep -qx "$prefix/share/man"; then
  echo "hint: if 'git help agent' finds no page, add $prefix/share/man to MANPATH"
fi
