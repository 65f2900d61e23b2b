#!/usr/bin/env bash
# System (apt) packages the test suite needs. Idempotent; quiet when everything is present.
set -euo pipefail
packages=()
need() { command -v "$1" >/dev/null 2>&1 || packages+=("$2"); }
need make make
# Image tests: a real daemonless build (buildah) pushed to a local registry (docker-registry).
need buildah buildah
need docker-registry docker-registry
# The `make airflow` deployment and its tests: a PostgreSQL server, and a browser for the UI tests.
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || packages+=(postgresql)
need chromium chromium
# The real-image test: a Debian root file system as the stand-in base (tests/integration/image/test_real_image.py).
need debootstrap debootstrap
if ((${#packages[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${packages[@]}"
fi
