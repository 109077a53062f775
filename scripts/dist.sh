#!/usr/bin/env bash
# The tuned release binary for x86-64 Linux (what a release archive ships). `cargo install` and distribution
# packages get the plain `cargo build --release` instead: position-independent, no symbol order, the system's
# unwinder. This script builds with the `dist` profile (the release settings) and adds four link changes
# through RUSTFLAGS, each with an opt-out (unset: on; empty or 0: off):
#
# - Hot code first (GIT_AGENT_TEXT_ORDER=0 turns it off). The kernel maps a program's code 64 KB around each
#   page it faults on, and a session calls about 2,800 of the binary's 12,000 functions, spread over all of its
#   code: a session that ran 2.1 MB of code had 6 MB of it resident. scripts/gen-text-order.py traces which
#   functions real sessions call, in first-call order, and the linker lays them out first (2.4 MB resident, a
#   small session's peak down by a third). Most names carry a hash of the exact rustc that built them, so the
#   list is made here, for this toolchain, from a build of this very source, into target/dist-link/.
#   Needs rustc 1.90 or later, whose default linker for x86_64-unknown-linux-gnu is its own LLD
#   (`--symbol-ordering-file`; GNU ld has no such option).
# - Position-dependent (GIT_AGENT_PIE=1 keeps PIE). A PIE carries a relocation for every pointer in its
#   read-only data (20,000 here), which the loader applies at every start: linked at a fixed address,
#   `--version` starts in three quarters of the time and four fifths of the memory, and a fleet's sessions
#   keep those pages shared. Given up: the random placement of the executable's own image (libraries, heap,
#   stack and mmap stay randomised).
# - The unwinder linked in (GIT_AGENT_STATIC_UNWIND=0 turns it off). std asks for libgcc_s.so for its
#   _Unwind_* functions, and loading it costs every start about 0.1 ms: `-lgcc_s` is pointed at a linker
#   script naming the C compiler's static unwinder, libgcc_eh.a (what `gcc -static-libgcc` links).
# - Segments aligned to 64 KB (GIT_AGENT_ALIGN_64K=0 turns it off): `-z max-page-size=65536`, so each segment's
#   address and file offset agree modulo 64 KB. The page cache holds the binary in folios of up to 64 KB aligned
#   in the file; with the segments aligned only to 4 KB, the 64 KB the kernel maps around a faulting page of
#   code straddled two folios and it mapped both (31 pages instead of 16). Measured with /proc/self/pagemap
#   after `--version`: 39 resident pages of code instead of 55; the file does not grow.
#
# Usage: scripts/dist.sh        # prints the path of the binary, target/x86_64-unknown-linux-gnu/dist/git-agent
#        scripts/dist.sh --figures [--short] [NANO]
#   then, beside the plain build (`cargo build --release`, built when missing): both sizes and what each
#   needs loaded, and scripts/bench-task.py's figures of both (the 3-step task's wall, CPU and own peak,
#   `--version` spawned and its own peak), with ratios to the plain build; NANO (a nano-coder binary) is
#   measured in the same runs. --short: 3 rounds without waiting for a quiet host (default 11 rounds).
# Needs: cargo, python3 (the tracer, Linux x86-64 ptrace), cc. Takes two full release links (the second
# after the symbol order is written) on top of one release build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

figures=
runs=(--runs 11)
nano=
for arg in "$@"; do
  case $arg in
  --figures) figures=1 ;;
  --short) runs=(--runs 3 --quiet-wait 0) ;;
  -*)
    echo "error: unknown option $arg: see the usage at the top of scripts/dist.sh" >&2
    exit 2
    ;;
  *) nano=$arg ;;
  esac
done

triple=x86_64-unknown-linux-gnu
work=$root/target/dist-link
binary=$root/target/$triple/dist/git-agent

die() {
  echo "error: $*" >&2
  exit 1
}

# An opt-in/opt-out variable: unset gives the default ($2); empty or "0" is off, anything else on.
switched_on() {
  if [ -z "${!1+set}" ]; then
    [ "$2" = on ]
  else
    [ -n "${!1}" ] && [ "${!1}" != 0 ]
  fi
}

host=$(rustc -vV | sed -n 's/^host: //p')
[ "$host" = "$triple" ] || die "scripts/dist.sh builds on $triple only (this host is $host): use cargo build --release"
rustc_minor=$(rustc --version | sed -n 's/^rustc 1\.\([0-9]*\)\..*/\1/p')
[ -z "${RUSTFLAGS-}${CARGO_ENCODED_RUSTFLAGS-}" ] || die "RUSTFLAGS is set: unset it, scripts/dist.sh sets its own flags"
mkdir -p "$work"

flags=()
if ! switched_on GIT_AGENT_PIE off; then
  flags+=(-C link-arg=-no-pie)
fi
if switched_on GIT_AGENT_ALIGN_64K on; then
  flags+=(-C link-arg=-Wl,-z,max-page-size=65536)
fi
if switched_on GIT_AGENT_STATIC_UNWIND on; then
  unwinder=$(${CC:-cc} -print-file-name=libgcc_eh.a)
  [ -f "$unwinder" ] || die "the C compiler has no libgcc_eh.a (got '$unwinder'): set GIT_AGENT_STATIC_UNWIND=0"
  mkdir -p "$work/static-unwind"
  echo "INPUT($unwinder)" >"$work/static-unwind/libgcc_s.so"
  flags+=(-C "link-arg=-L$work/static-unwind")
fi
order=
if switched_on GIT_AGENT_TEXT_ORDER on; then
  [ "${rustc_minor:-0}" -ge 90 ] ||
    die "symbol ordering needs rustc 1.90 or later (its own LLD); this is $(rustc --version): set GIT_AGENT_TEXT_ORDER=0"
  order=$work/hot-text.order
  # The same flags for the traced build and the ordered one, so that only the file's content differs; an
  # empty file orders nothing. The map names each function's section, which the tracer needs.
  : >"$order"
  flags+=(-C "link-arg=-Wl,--symbol-ordering-file=$order" -C "link-arg=-Wl,--no-warn-symbol-ordering")
  flags+=(-C "link-arg=-Wl,-Map=$work/git-agent.map")
fi

# --target keeps the flags off build scripts and proc macros, and the output apart from target/release. They
# go in CARGO_ENCODED_RUSTFLAGS (RUSTFLAGS split on \x1f) so that a path with a space stays one argument.
encoded=$(
  IFS=$'\x1f'
  echo "${flags[*]}"
)
build() {
  CARGO_ENCODED_RUSTFLAGS="$encoded" cargo build --quiet --locked --profile dist --target "$triple" --bin git-agent
}

build
if [ -n "$order" ]; then
  python3 scripts/gen-text-order.py --binary "$binary" --map "$work/git-agent.map" --out "$order"
  # cargo does not track a file named in a link argument: make it link again, now with the order.
  touch src/main.rs
  build
fi
echo "$binary"
[ -n "$figures" ] || exit 0

plain=$root/target/release/git-agent
[ -x "$plain" ] || cargo build --quiet --locked --release --bin git-agent
echo
echo "command: scripts/dist.sh $*   ($(date -u +%Y-%m-%d), load average $(cut -d' ' -f1 /proc/loadavg), $(nproc) cores)"
for b in "$plain" "$binary" ${nano:+"$nano"}; do
  needs=$(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  printf '%-60s %12d bytes  %s  needs: %s\n' "$b" "$(stat -c %s "$b")" \
    "$(readelf -h "$b" | sed -n 's/^ *Type: *\([A-Z]*\).*/\1/p')" "$needs"
done
agents=(--agent "plain=ga:$plain" --agent "dist=ga:$binary")
[ -z "$nano" ] || agents+=(--agent "nano=nc:$nano")
python3 scripts/bench-task.py "${runs[@]}" "${agents[@]}" --ref plain
