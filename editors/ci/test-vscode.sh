#!/usr/bin/env bash
# VS Code end-to-end tests: builds the extension (npm ci, unit tests, settings in sync, .vsix), then
# starts code-server with that .vsix and drives it with headless Chromium against the real server.
# Installs what is missing first (editors/ci/install-editors.sh, cached). Exits non-zero on failure;
# screenshots and logs land in .ci/artifacts/editors/vscode/.
#   PYTHON   the project's Python (default .venv/bin/python if present, else python3)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHON
stage() {
  local name=$1; shift
  local t; t=$(date +%s)
  echo "== vscode: $name"
  "$@"
  echo "== vscode: $name done in $(( $(date +%s) - t )) s"
}
mkdir -p .ci/artifacts/editors/vscode
stage "install editors" env PERFLSP_EDITORS=vscode bash editors/ci/install-editors.sh
stage "settings in sync with the server's model" "$PYTHON" vscode-extension/scripts/sync_settings.py --check
stage "npm ci" bash -c 'cd vscode-extension && npm ci --no-audit --no-fund --loglevel=error'
stage "typecheck + unit tests" bash -c 'cd vscode-extension && npm run -s typecheck && npm test'
stage "eslint (typescript-eslint)" bash -c 'cd vscode-extension && npm run -s lint'
stage "package .vsix" bash -c 'cd vscode-extension && npm run -s package < /dev/null'
cp vscode-extension/perflsp.vsix .ci/artifacts/editors/vscode/
stage "e2e (code-server + Chromium)" env PERFLSP_EDITOR_TESTS=1 PERFLSP_VSIX="$ROOT/vscode-extension/perflsp.vsix" \
  "$PYTHON" -m pytest tests/editors/test_vscode_e2e.py tests/editors/test_vscode_trust_e2e.py tests/editors/test_vscode_quiet_e2e.py tests/editors/test_vscode_tuning_e2e.py -v -p no:cacheprovider --junitxml=.ci/artifacts/editors/vscode/junit.xml
