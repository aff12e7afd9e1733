#!/bin/sh
# chaos.sh runs the fault harness (e2e/chaos, issue 18): N randomized
# schedules on 3-node clusters of samsa processes, each with its own seed,
# history and analysis under a results directory. The last line printed is
# "N schedules, M anomalies".
#
#   scripts/chaos.sh --schedules N --seed S [--duration 60s] [--results DIR]
set -eu
schedules=1 seed=1 duration=60s results=""
usage() {
	[ -z "${1:-}" ] || echo "$0: $1" >&2
	echo "usage: $0 --schedules N --seed S [--duration 60s] [--results DIR]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case "$1" in
	--schedules | --seed | --duration | --results) [ $# -ge 2 ] || usage "$1 needs a value" ;;
	*) usage "unknown argument $1" ;;
	esac
	case "$1" in
	--schedules) schedules=$2 ;;
	--seed) seed=$2 ;;
	--duration) duration=$2 ;;
	--results) results=$2 ;;
	esac
	shift 2
done
case "$schedules" in '' | *[!0-9]*) usage "--schedules $schedules: not a number" ;; esac
[ "$schedules" -gt 0 ] || usage "--schedules must be at least 1"
case "$seed" in '' | *[!0-9]*) usage "--seed $seed: not a non-negative number" ;; esac
# The duration is a Go duration of whole hours, minutes and seconds (60s,
# 1m30s, 2m); secs is it in seconds, for the test's timeout.
echo "$duration" | grep -Eq '^([0-9]+h)?([0-9]+m)?([0-9]+s)?$' && [ -n "$duration" ] ||
	usage "--duration $duration: not a duration such as 60s or 1m30s"
secs=$(echo "$duration" | sed -E 's/([0-9]+)h/\1*3600+/; s/([0-9]+)m/\1*60+/; s/([0-9]+)s/\1+/; s/$/0/')
secs=$(($secs))
# --results is relative to where the script was started, the default to
# the checkout.
if [ -n "$results" ]; then
	mkdir -p "$results"
	results=$(cd "$results" && pwd)
fi
cd "$(dirname "$0")/.."
[ -n "$results" ] || results=chaos-results/$(date -u +%Y%m%dT%H%M%SZ)-seed-$seed
mkdir -p "$results"
results=$(cd "$results" && pwd)
# The test builds the samsa binary (proctest.Binary) and kills every
# process it started at cleanup. Allow each schedule its duration plus
# 4 minutes of start, heal and final read.
timeout=$((schedules * (secs + 240) + 120))s
set +e
go test ./e2e/chaos -run '^TestChaos$' -count=1 -v -timeout "$timeout" \
	-chaos.schedules "$schedules" -chaos.seed "$seed" -chaos.duration "$duration" -chaos.results "$results" \
	>"$results/test.log" 2>&1
rc=$?
set -e
[ -f "$results/summary.md" ] && cat "$results/summary.md"
echo "results in $results (exit $rc)"
last=$(grep -E '^[0-9]+ schedules, [0-9]+ anomalies$' "$results/test.log" | tail -1)
if [ -z "$last" ]; then
	echo "harness failed before the end: see $results/test.log" >&2
	echo "$schedules schedules, unknown anomalies"
	exit 1
fi
# Anomalies fail the test, and so does a schedule the harness could not
# run as planned (a node that did not halt on a failed fsync, a final read
# that did not finish): either way the status is the test's.
[ "$rc" -eq 0 ] || echo "the test failed (exit $rc): see $results/test.log" >&2
echo "$last"
exit "$rc"
