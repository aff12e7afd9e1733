#!/usr/bin/env bash
# Long fault runs against real samsa processes (e2e/cluster with -long) and
# the throughput measurement (-throughput): acks=all on 3 nodes beside
# acks=1 on 1 node, from the same run. See docs/testing.md.
#
#   scripts/fault-tests.sh                      # everything
#   RUN=TestIsolatedLeader scripts/fault-tests.sh
#   SAMSA_TEST_LOGS=/tmp/fault-logs scripts/fault-tests.sh   # keep logs of failures
set -euo pipefail
cd "$(dirname "$0")/.."
go test -count=1 -timeout "${TIMEOUT:-60m}" -v -run "${RUN:-.}" ./e2e/cluster -args -long -throughput
