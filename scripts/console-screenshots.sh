#!/usr/bin/env bash
# Regenerates the web console screenshots in docs/console/ (shown in
# docs/console.md) by running the browser test against a 3-node cluster:
# needs chromium and kcat (apt-get install chromium kcat).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p docs/console
SAMSA_CONSOLE_DOCS="$PWD/docs/console" go test ./e2e/console -run 'TestConsoleBrowser$' -count=1 "$@"
ls -l docs/console
