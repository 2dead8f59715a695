#!/usr/bin/env bash
# deploy/k8s checked offline with python3 + PyYAML (k8s_check.py says what is checked); the TLS
# overlay deploy/k8s-tls rendered with kubectl kustomize where kubectl is installed.
#   k8s_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
if command -v kubectl >/dev/null; then
  rendered=$(kubectl kustomize "$src/deploy/k8s-tls") || { echo "FAIL: kubectl kustomize deploy/k8s-tls"; exit 1; }
  for want in "--tls-cert" "tls://psched-scheduler:8786" "scheme: HTTPS" "secretName: psched-tls-scheduler" \
    "secretName: psched-tls-worker" "fsGroup: 10001" "defaultMode: 288"; do
    grep -qF -- "$want" <<<"$rendered" || { echo "FAIL: deploy/k8s-tls renders no '$want'"; exit 1; }
  done
  echo "deploy/k8s-tls: renders mutual TLS for the scheduler and the workers"
fi
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null && "$py" -c 'import yaml' 2>/dev/null; then
    exec "$py" "$src/tests/deploy/k8s_check.py" "$src/deploy/k8s"
  fi
done
echo "SKIP: no python3 with PyYAML (deploy/install-deps.sh --test installs python3-yaml)"
