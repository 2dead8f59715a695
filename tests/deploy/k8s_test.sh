#!/usr/bin/env bash
# deploy/k8s checked offline with python3 + PyYAML (k8s_check.py says what is checked).
#   k8s_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null && "$py" -c 'import yaml' 2>/dev/null; then
    exec "$py" "$src/tests/deploy/k8s_check.py" "$src/deploy/k8s"
  fi
done
echo "SKIP: no python3 with PyYAML (deploy/install-deps.sh --test installs python3-yaml)"
