#!/usr/bin/env bash
# Neovim end-to-end tests (0.7.2 from Debian, 0.11 from PyPI) against the real server.
# Installs what is missing first (editors/ci/install-editors.sh, cached). Exits non-zero on failure;
# logs and per-version results land in .ci/artifacts/editors/nvim/.
#   PYTHON   the project's Python (default .venv/bin/python if present, else python3)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHON
t0=$(date +%s)
PERFLSP_EDITORS=nvim bash editors/ci/install-editors.sh
t1=$(date +%s)
mkdir -p .ci/artifacts/editors/nvim
echo "== nvim e2e: pytest tests/editors/test_nvim_e2e.py"
PERFLSP_EDITOR_TESTS=1 "$PYTHON" -m pytest tests/editors/test_nvim_e2e.py -v -p no:cacheprovider \
  --junitxml=.ci/artifacts/editors/nvim/junit.xml
t2=$(date +%s)
echo "== nvim e2e: install $((t1 - t0)) s, tests $((t2 - t1)) s"
