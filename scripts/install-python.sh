#!/usr/bin/env bash
# Installs the Python package built in build/ (or $1) into Debian's python3 (site-packages under
# /usr/local), so that `python3 -c "import acrobat"` works from anywhere; then checks that it does.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO cmake --install "$dir" --component python >/dev/null
(cd / && /usr/bin/python3 -c "import acrobat; print('python: acrobat installed at', acrobat.__file__)")
