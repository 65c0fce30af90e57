#!/usr/bin/env bash
# (Re)creates the search benchmark corpus under .keel-bench/corpus (gitignored):
#   - a copy of the cargo registry sources (real Rust code, READMEs, tests, some binaries),
#   - a generated tree that brings the corpus past 20,000 files, part of it gitignored,
#   - `git init` and a .gitignore, so ripgrep, fd and Keel's walker see the same files.
# Usage: scripts/bench-corpus.sh [--force]   (without --force an existing corpus is kept)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench="${KEEL_BENCH_DIR:-$repo/.keel-bench}"
corpus="$bench/corpus"
registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
generated_dirs=50
files_per_dir=100

if [[ -f "$corpus/.corpus-ready" && "${1:-}" != "--force" ]]; then
  echo "corpus exists: $corpus ($(cat "$corpus/.corpus-ready")); pass --force to rebuild"
  exit 0
fi
if [[ ! -d "$registry" ]]; then
  echo "no cargo registry sources at $registry; run 'cargo fetch' first" >&2
  exit 1
fi

rm -rf "$corpus"
mkdir -p "$corpus/registry"
cp -R "$registry/." "$corpus/registry/"

# Generated sources: deterministic, varied lines, a few "needles" per file.
gen="$corpus/generated"
for d in $(seq -w 1 "$generated_dirs"); do
  mkdir -p "$gen/module_$d"
  for f in $(seq -w 1 "$files_per_dir"); do
    ext=rs
    case $((10#$f % 4)) in 1) ext=txt ;; 2) ext=md ;; esac
    awk -v d="$d" -v f="$f" 'BEGIN {
      for (i = 1; i <= 60; i++) {
        if ((i * 7 + d * 3 + f) % 97 == 0) print "    // NEEDLE_" d "_" f ": tune the parser here";
        else if (i % 10 == 0) print "pub fn generated_" d "_" f "_" i "(value: u64) -> u64 { value * " i " }";
        else print "    let line_" i " = compute(" d ", " f ", " i "); // filler text for the corpus";
      }
    }' > "$gen/module_$d/file_$f.$ext"
  done
done
# A gitignored build directory full of matching files: every tool must skip it.
mkdir -p "$corpus/target/debug"
for f in $(seq 1 500); do
  echo "fn ignored_$f() { let NEEDLE_ignored = PhantomData; }" > "$corpus/target/debug/ignored_$f.rs"
done

cat > "$corpus/.gitignore" <<'IGNORE'
/target/
*.o
*.tmp
IGNORE
git -C "$corpus" init -q

count=$(cd "$corpus" && rg --files -j2 | wc -l)
size=$(du -sh "$corpus" | cut -f1)
echo "$count searchable files, $size on disk" > "$corpus/.corpus-ready"
echo "corpus ready: $corpus: $(cat "$corpus/.corpus-ready")"
