#!/usr/bin/env bash
# Builds Keel's linux-x86_64 release archive for the ACP Registry and fills the registry manifest
# (crates/acp/registry/keel/agent.json: version, archive URL, sha256) from it, then checks that the archive,
# unpacked in a clean directory with an empty environment, starts `keel acp` and answers
# `initialize` (scripts/registry-check.sh). docs/configuration.md, "The ACP Registry".
#
#   scripts/registry-archive.sh                      release build, dist/ archive, crates/acp/registry/keel/agent.json
#   scripts/registry-archive.sh --binaries DIR --out DIR --manifest FILE
#                                                    package already built binaries (the test suite
#                                                    does this with the debug build)
#
# The archive URL is `<repository>/releases/download/v<version>/<archive>`, from the workspace's
# Cargo.toml (`repository`, `version`); KEEL_RELEASE_URL overrides the directory part.
set -euo pipefail
cd "$(dirname "$0")/.."

binaries=""
out="dist"
manifest="crates/acp/registry/keel/agent.json"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --binaries) binaries="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --manifest) manifest="$2"; shift 2 ;;
        *) echo "usage: $0 [--binaries DIR] [--out DIR] [--manifest FILE]" >&2; exit 2 ;;
    esac
done

if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
    echo "registry-archive: builds the linux-x86_64 archive, so it runs on Linux x86_64 (this is $(uname -s)-$(uname -m))" >&2
    exit 2
fi

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
repository=$(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -1)
[[ -n "$version" && -n "$repository" ]] || { echo "registry-archive: no version or repository in Cargo.toml" >&2; exit 1; }
release_url="${KEEL_RELEASE_URL:-$repository/releases/download/v$version}"
name="keel-$version-linux-x86_64.tar.gz"

if [[ -z "$binaries" ]]; then
    cargo build --locked --release -p keel-acp --bin keel --bin keel-sandbox
    binaries="target/release"
fi
for binary in keel keel-sandbox; do
    [[ -x "$binaries/$binary" ]] || { echo "registry-archive: $binaries/$binary is missing" >&2; exit 1; }
done

# The archive: `keel` and its sandbox helper at the top, the licences beside them; sorted names,
# fixed owner and times, no gzip timestamp, so the same binaries give the same bytes.
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$binaries/keel" "$binaries/keel-sandbox" "$stage/"
for file in LICENSE LICENSE-MIT LICENSE-APACHE README.md; do
    if [[ -f "$file" ]]; then cp "$file" "$stage/"; fi
done
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -cf - . |
    gzip -n -6 > "$out/$name"
sha256=$(sha256sum "$out/$name" | cut -d' ' -f1)

mkdir -p "$(dirname "$manifest")"
cat > "$manifest" <<JSON
{
  "id": "keel",
  "name": "Keel",
  "version": "$version",
  "description": "A coding agent with its own tool runtime: every call passes a capability check, permission rules and a watchdog, and shell commands run in a kernel sandbox.",
  "repository": "$repository",
  "authors": ["The Keel authors"],
  "license": "MIT OR Apache-2.0",
  "distribution": {
    "binary": {
      "linux-x86_64": {
        "archive": "$release_url/$name",
        "sha256": "$sha256",
        "cmd": "./keel",
        "args": ["acp"]
      }
    }
  }
}
JSON

scripts/registry-check.sh "$out/$name"
echo "registry-archive: $out/$name (sha256 $sha256), $manifest filled"
