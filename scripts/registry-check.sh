#!/usr/bin/env bash
# Checks an ACP Registry archive of Keel the way a client installs it: unpacked in a fresh
# directory, started there as the manifest says (`./keel acp`) with an empty environment and
# home, it must answer `initialize` with protocol version 1 and a terminal auth method (the
# registry lists only agents with one).
#
#   scripts/registry-check.sh dist/keel-0.1.0-linux-x86_64.tar.gz
set -euo pipefail
archive=$(realpath "$1")
clean=$(mktemp -d)
trap 'rm -rf "$clean"' EXIT
mkdir -p "$clean/agent" "$clean/home" "$clean/project"
tar -xzf "$archive" -C "$clean/agent"
request='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"auth":{"terminal":true},"_meta":{"terminal-auth":true}}}}'
cd "$clean/project"
answer=$(printf '%s\n' "$request" |
    env -i HOME="$clean/home" PATH=/usr/bin:/bin timeout 60 "$clean/agent/keel" acp | head -1)
case "$answer" in
    *'"id":1'*'"protocolVersion":1'*'"type":"terminal"'*) ;;
    *) echo "registry-check: ./keel acp did not answer initialize as expected: ${answer:-<nothing>}" >&2; exit 1 ;;
esac
echo "registry-check: $(basename "$archive") starts keel acp in a clean directory and answers initialize"
