#!/usr/bin/env bash
# validation-bench.sh: what the broker's record validation (issue 12)
# costs, measured in one run against a baseline. It builds samsa from
# OLD_REF (default main) and from the work tree, then, ROUNDS times and
# alternating the two brokers, starts a fresh single node on free loopback
# ports, runs `samsa perf produce` (the work tree's client for both) of
# RECORDS records of 1 KiB text in each codec of CODECS, and reads the
# broker process's CPU time (utime+stime of /proc/PID/stat) before and
# after. It prints one line per run and then, per codec, the median
# records/s and broker CPU seconds per GB of record bytes of each broker
# and their ratio (new/old).
#
#   scripts/validation-bench.sh                 # main against the work tree
#   ROUNDS=5 RECORDS=500000 CODECS="none lz4" scripts/validation-bench.sh
set -euo pipefail

OLD_REF=${OLD_REF:-main}
ROUNDS=${ROUNDS:-3}
RECORDS=${RECORDS:-300000}
CODECS=${CODECS:-none lz4 zstd}
SIZE=1024

repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
pid=
cleanup() {
	if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/old-src"
git -C "$repo" archive "$OLD_REF" | tar -x -C "$work/old-src"
(cd "$work/old-src" && go build -o "$work/samsa-old" ./cmd/samsa)
(cd "$repo" && go build -o "$work/samsa-new" ./cmd/samsa)
client=$work/samsa-new
ticks=$(getconf CLK_TCK)

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run NAME CODEC: one broker, one perf produce; prints "NAME CODEC rec/s cpu_s_per_gb".
run() {
	local name=$1 codec=$2 bin=$work/samsa-$1 dir=$work/data
	rm -rf "$dir"
	mkdir -p "$dir"
	local p c
	p=$(freeport)
	c=$(freeport)
	"$bin" server --override "listeners=PLAINTEXT://127.0.0.1:$p,CONTROLLER://127.0.0.1:$c" \
		--override "log.dirs=$dir" >"$work/server-$name.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		if "$client" topic list --brokers "127.0.0.1:$p" >/dev/null 2>&1; then break; fi
		sleep 0.2
	done
	"$client" topic create bench --partitions 4 --brokers "127.0.0.1:$p" >/dev/null
	local t0 t1 out
	t0=$(cpu_ticks "$pid")
	out=$("$client" perf produce bench -n "$RECORDS" --record-size "$SIZE" -z "$codec" -q --brokers "127.0.0.1:$p" | tail -1)
	t1=$(cpu_ticks "$pid")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	python3 - "$name" "$codec" "$out" "$t0" "$t1" "$ticks" "$RECORDS" "$SIZE" <<'EOF'
import json, sys
name, codec, out, t0, t1, ticks, n, size = sys.argv[1:]
r = json.loads(out)
cpu = (int(t1) - int(t0)) / int(ticks)
print(f"{name} {codec} {r['records_per_sec']:.0f} {cpu / (int(n) * int(size) / 1e9):.3f}")
EOF
}

results=$work/results
for round in $(seq "$ROUNDS"); do
	for codec in $CODECS; do
		# Alternate which broker goes first, so that drift in the
		# machine's load falls on both.
		if (( round % 2 )); then order="old new"; else order="new old"; fi
		for name in $order; do
			run "$name" "$codec" | tee -a "$results"
		done
	done
done

echo
echo "median of $ROUNDS runs, $RECORDS records of $SIZE bytes, acks=all, 4 partitions"
python3 - "$results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
codecs = []
for r in rows:
    if r[1] not in codecs:
        codecs.append(r[1])
print(f"{'codec':6} {'old rec/s':>10} {'new rec/s':>10} {'ratio':>6}   {'old CPU s/GB':>12} {'new CPU s/GB':>12} {'ratio':>6}")
for c in codecs:
    m = {n: (statistics.median(float(r[2]) for r in rows if r[0] == n and r[1] == c),
             statistics.median(float(r[3]) for r in rows if r[0] == n and r[1] == c)) for n in ("old", "new")}
    print(f"{c:6} {m['old'][0]:10.0f} {m['new'][0]:10.0f} {m['new'][0] / m['old'][0]:6.3f}   {m['old'][1]:12.3f} {m['new'][1]:12.3f} {m['new'][1] / m['old'][1]:6.3f}")
EOF
