#!/usr/bin/env bash
# Peer benchmark: OpenClaw's own session-state code, taken from its published npm package, driven through
# the scenarios of docs/benchmarks.md by bench.mjs (next to this script). The package needs Node 24, which
# npm also publishes as a package, so both go into one cache folder outside the repository on first use
# (about 770 MB; SESSIONWATCH_PEER_CACHE moves it). Prints JSON lines; every argument goes to bench.mjs
# (--quick, --only append,changes,ack,sweep,prune, --no-all, --tmp DIR, --out FILE). --install only
# installs; --installed only answers whether the cache holds both (exit 0) or not (exit 3).
set -euo pipefail

openclaw_version=2026.9.6
node_version=24.21.0
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${SESSIONWATCH_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sessionwatch-peer}/openclaw-$openclaw_version
node="$cache/node_modules/.bin/node"

installed() {
  [ -x "$node" ] && [ -f "$cache/node_modules/openclaw/package.json" ] &&
    [ "$("$node" -p 'process.versions.node')" = "$node_version" ]
}

if [ "${1:-}" = "--installed" ]; then
  installed && exit 0
  exit 3
fi
if ! installed; then
  echo "# installing node@$node_version and openclaw@$openclaw_version into $cache (once)" >&2
  mkdir -p "$cache"
  # A package.json of its own keeps npm from walking up into whatever project encloses the cache folder.
  [ -f "$cache/package.json" ] || printf '{"name": "sessionwatch-peer", "private": true}\n' >"$cache/package.json"
  npm install --prefix "$cache" --no-audit --no-fund --save-exact --loglevel=error "node@$node_version" >&2
  # OpenClaw's own install steps must see Node 24 first on PATH, not the machine's Node.
  PATH="$cache/node_modules/.bin:$PATH" npm install --prefix "$cache" --no-audit --no-fund --save-exact --loglevel=error \
    "openclaw@$openclaw_version" >&2
  installed || { echo "peer install in $cache is incomplete" >&2; exit 2; }
fi

if [ "${1:-}" = "--install" ]; then
  exit 0
fi
OPENCLAW_PACKAGE="$cache/node_modules/openclaw" exec "$node" "$script_dir/bench.mjs" "$@"
