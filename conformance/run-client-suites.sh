#!/usr/bin/env bash
# Runs the Kafka clients' own integration suites against a samsa server and
# records pass/fail/skip counts, with each failure's first error and its
# triage (conformance/suite-triage.txt), in the client-suites section of
# docs/COMPATIBILITY.md.
#
#   conformance/run-client-suites.sh [kafka-go] [kafkajs]
#   conformance/run-client-suites.sh report   # only rewrite the doc section
#
# kafka-go: the test files of the module version in conformance/go.mod,
# taken from the Go module cache (go mod download), run with
# KAFKA_VERSION=3.7.0 against a broker advertised as localhost:9092 with
# node id 1, one top-level test at a time from a compiled test binary (one
# panic would abort a whole package). As kafka-go's docker-compose-370.yml,
# a SASL_PLAINTEXT listener on localhost:9093 (PLAIN user adminplain,
# SCRAM user adminscram with admin-secret-256 and admin-secret-512) and the
# authorizer with allow.everyone.if.no.acl.found=true. Needs ports 9092
# and 9093 free.
#
# kafkajs: its specs are not in the npm package; set KAFKAJS_SRC to a
# checkout of kafkajs v2.2.4 to run them (see below); without it the suite
# is recorded as not run.
#
# Environment: TEST_TIMEOUT per test (default 120s), ONLY (for triage: a
# regexp of kafka-go's top-level tests or of kafkajs's spec file paths to
# run; such a partial run prints its results and leaves the doc and the
# stored results as they were), KEEP=1 keeps the work directory, SUITE_SAMSA a
# prebuilt samsa binary to use instead of building ../cmd/samsa, and
# SUITE_COMMIT the commit it was built from (recorded instead of HEAD).
set -euo pipefail
here=${SUITES_HERE:-$(cd "$(dirname "$0")" && pwd)}
if [ -z "${SUITES_HERE:-}" ]; then
  # Run from a copy, so that editing this file during a long run is safe.
  copy=$(mktemp /tmp/run-client-suites.XXXXXX.sh)
  cp "$0" "$copy"
  SUITES_HERE=$here exec bash "$copy" "$@"
fi
rm -f "$0" # the copy
root=$(dirname "$here")
doc="$root/docs/COMPATIBILITY.md"
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(kafka-go kafkajs)
test_timeout=${TEST_TIMEOUT:-120s}

work=$(mktemp -d /tmp/samsa-suites.XXXXXX)
server_pid=""
cleanup() {
  stop_server
  if [ "${KEEP:-}" = 1 ]; then echo "work dir kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

if [ "${suites[*]}" = report ]; then
  : # nothing to run
elif [ -n "${SUITE_SAMSA:-}" ]; then
  cp "$SUITE_SAMSA" "$work/samsa"
else
  echo "building samsa"
  (cd "$root" && go build -o "$work/samsa" ./cmd/samsa)
fi

server_extra=()   # more --override flags, per suite
server_sasl=""    # 1: a SASL_PLAINTEXT listener on localhost:9093 too (kafka-go)
server_setup=""   # a command run once the server is up (users), per suite
start_server() { # starts samsa on localhost:9092 as node 1, fresh data
  local i port listeners=PLAINTEXT://localhost:9092 ports=9092 sasl=()
  if [ -n "$server_sasl" ]; then
    listeners=$listeners,SASL_PLAINTEXT://localhost:9093 ports="9092 9093"
    # With a SASL listener CONTROLLER needs its entry, as in Kafka.
    sasl=(--override listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT)
  fi
  for port in $ports; do
    for i in $(seq 1 60); do
      (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null || break
      [ "$i" = 60 ] && { echo "port $port is in use: cannot run the suites" >&2; exit 1; }
      sleep 1
    done
  done
  rm -rf "$work/data"
  "$work/samsa" server \
    --override node.id=1 \
    --override log.dirs="$work/data" \
    --override listeners="$listeners",CONTROLLER://127.0.0.1:0 \
    --override advertised.listeners="$listeners" \
    --override auto.create.topics.enable=true \
    "${sasl[@]}" "${server_extra[@]}" \
    >>"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    if grep -q "bootstrap=" "$work/server.log" 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/9092) 2>/dev/null; then
      [ -z "$server_setup" ] || $server_setup >>"$work/server.log" 2>&1 || { echo "server setup failed:"; tail -20 "$work/server.log"; exit 1; }
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || { echo "samsa exited at startup:"; tail -20 "$work/server.log"; exit 1; }
    sleep 0.1
  done
  echo "samsa did not start"; exit 1
}
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
server_alive() { [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; }

# results.tsv: suite, test, status (pass/fail/skip), seconds, first error
results="$work/results.tsv"
leaves="$work/leaves.tsv" # suite, test/subtest, status, for leaf tests only
: >"$results"
: >"$leaves"
declare -A versions notes rundate runcommit
# Suites not run this time keep their last results (and their own date).
prev_results="$here/client-suites-results.tsv" prev_leaves="$here/client-suites-leaves.tsv" meta="$here/client-suites-meta.tsv"
all_suites=()
if [ -f "$meta" ]; then
  while IFS=$'\t' read -r ms mv md mc mn; do
    [[ " ${suites[*]} " == *" $ms "* ]] && continue
    all_suites+=("$ms"); versions[$ms]=$mv; rundate[$ms]=$md; runcommit[$ms]=$mc; notes[$ms]=$mn
    awk -F'\t' -v s="$ms" '$1==s' "$prev_results" >>"$results" 2>/dev/null || true
    awk -F'\t' -v s="$ms" '$1==s' "$prev_leaves" >>"$leaves" 2>/dev/null || true
  done <"$meta"
fi
now_date=$(date -u '+%Y-%m-%d %H:%M UTC')
now_commit=${SUITE_COMMIT:-$(cd "$root" && git rev-parse --short HEAD)}
for s in "${suites[@]}"; do
  [ "$s" = report ] && continue
  all_suites+=("$s"); rundate[$s]=$now_date; runcommit[$s]=$now_commit
done

# run_go_test_binary SUITE BIN DIR: runs each top-level test of BIN in DIR.
run_go_test_binary() {
  local suite=$1 bin=$2 dir=$3 t status t0 secs first
  for t in $(cd "$dir" && "$bin" -test.list '.*' | grep -E '^(Test|Example)' || true); do
    if [ -n "${ONLY:-}" ] && ! [[ $t =~ $ONLY ]]; then continue; fi
    server_alive || start_server
    t0=$(date +%s)
    set +e
    (cd "$dir" && KAFKA_VERSION=3.7.0 timeout -k 10 "$((${test_timeout%s} + 30))" \
      "$bin" -test.run "^${t}\$" -test.v -test.timeout "$test_timeout" -test.count 1) >"$work/out/$suite.$t.log" 2>&1
    local rc=$?
    set -e
    secs=$(( $(date +%s) - t0 ))
    if [ $rc = 0 ]; then
      if grep -q -- "^--- SKIP: $t " "$work/out/$suite.$t.log"; then status=skip; else status=pass; fi
      first=""
    else
      status=fail
      # A panic, else the last test log line before the first failure
      # (t.Logf and t.Error lines look alike; the error is usually last).
      first=$(grep -m1 -E '^panic:|test timed out' "$work/out/$suite.$t.log" || true)
      [ -n "$first" ] || first=$(awk '/^[[:space:]]*--- FAIL/ { exit } /_test\.go:[0-9]+:/ { l = $0 } END { print l }' "$work/out/$suite.$t.log")
      first=$(echo "$first" | sed 's/^[[:space:]]*//' | cut -c1-200)
      [ -n "$first" ] || first="exit status $rc"
      if ! server_alive; then first="SAMSA SERVER EXITED during the test; $first"; fi
    fi
    # Leaf subtests: results lines whose name is no other's parent.
    { grep -oE -- '--- (PASS|FAIL|SKIP): [^ ]+' "$work/out/$suite.$t.log" || true; } | awk -v s="$suite" '
      { sub(":", "", $2); st[$3] = tolower($2); order[++n] = $3 }
      END { for (i = 1; i <= n; i++) { name = order[i]; leaf = 1
              for (o in st) if (index(o, name "/") == 1) { leaf = 0; break }
              if (leaf) printf "%s\t%s\t%s\n", s, name, st[name] } }' >>"$leaves"
    if [ $status = fail ]; then
      local failing
      failing=$(awk -F'\t' -v s="$suite" -v t="$t" '$1==s && $3=="fail" && index($2, t "/")==1 { sub(t "/", "", $2); printf "%s%s", (n++ ? ", " : ""), $2 }' "$leaves" | cut -c1-300)
      [ -z "$failing" ] || first="$first [failing subtests: $failing]"
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$suite" "$t" "$status" "$secs" "$first" >>"$results"
    printf '%-8s %-4s %4ss %s %s\n' "$suite" "$status" "$secs" "$t" "$first"
  done
}

mkdir -p "$work/out"

# kafka_go_users creates the SCRAM user of kafka-go's docker-compose-370.yml
# (its kafka-configs.sh line): adminscram, one password per mechanism.
kafka_go_users() {
  "$work/samsa" user create adminscram --password admin-secret-256 --mechanism SCRAM-SHA-256 -b localhost:9092 &&
    "$work/samsa" user alter adminscram --password admin-secret-512 --mechanism SCRAM-SHA-512 -b localhost:9092
}

run_kafka_go() {
  local v src
  # As kafka-go's docker-compose-370.yml sets it; its image starts from
  # Kafka's config/server.properties, which sets
  # group.initial.rebalance.delay.ms=0 (consumer_group_rebalance of
  # TestReaderConsumerGroup counts on the first reader forming the group
  # alone).
  server_extra=(--override message.max.bytes=200000000 --override group.initial.rebalance.delay.ms=0
    # Its SASL_PLAINTEXT listener on 9093 (sasl_test.go, TestWriter's
    # SASL subtest, TestUnsupportedSASLMechanism): PLAIN from the JAAS
    # line, SCRAM users from kafka_go_users; and its authorizer.
    --override sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
    --override 'listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="adminplain" password="admin-secret" user_adminplain="admin-secret";'
    --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
    --override allow.everyone.if.no.acl.found=true)
  server_sasl=1 server_setup=kafka_go_users
  stop_server
  v=$(cd "$here" && go list -m -f '{{.Version}}' github.com/segmentio/kafka-go)
  versions[kafka-go]=$v
  src=$(cd "$here" && go mod download -json "github.com/segmentio/kafka-go@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  cp -r "$src" "$work/kafka-go"
  chmod -R u+w "$work/kafka-go"
  (cd "$work/kafka-go" && go mod download)
  # One test binary per package with tests.
  local pkg name
  for pkg in $(cd "$work/kafka-go" && go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./...); do
    name=$(echo "${pkg#"$work/kafka-go"}" | tr / _)
    name=${name:-_root}
    echo "compiling kafka-go tests of ${pkg#"$work/kafka-go"}/"
    (cd "$pkg" && go test -c -o "$work/bin/kafka-go$name.test" .) || {
      printf 'kafka-go\t%s (build)\tfail\t0\tthe test binary did not build\n' "$name" >>"$results"; continue; }
    run_go_test_binary kafka-go "$work/bin/kafka-go$name.test" "$pkg"
  done
}

run_kafkajs() {
  versions[kafkajs]=$(node -p 'require(process.argv[1]).version' "$here/js/node_modules/kafkajs/package.json" 2>/dev/null || echo unknown)
  if [ -z "${KAFKAJS_SRC:-}" ]; then
    notes[kafkajs]="not run: the npm package has no specs; set KAFKAJS_SRC to a kafkajs checkout"
    return
  fi
  local src="$work/kafkajs" v=${versions[kafkajs]}
  mkdir -p "$src"
  if [ -d "$KAFKAJS_SRC/.git" ] || [ ! -f "$KAFKAJS_SRC/HEAD" ]; then
    cp -r "$KAFKAJS_SRC/." "$src"
  else # a bare repository: take the tag of the version we use
    git --git-dir="$KAFKAJS_SRC" archive "v$v" | tar -x -C "$src"
  fi
  (cd "$src" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error >"$work/out/kafkajs.npm.log" 2>&1) || {
    notes[kafkajs]="not run: npm install of its dev dependencies failed"; return; }
  # Specs that need the SSL, SASL or OAUTHBEARER listeners of kafkajs's
  # Docker cluster are excluded (samsa has no such listener yet).
  local ignore=(--testPathIgnorePatterns /node_modules/) f excluded=0
  for f in $(cd "$src" && grep -rlE 'sslBrokers|saslBrokers|sslConnectionOpts|saslConnectionOpts|saslSCRAM|OAUTHBEARER' --include='*.spec.js' src); do
    ignore+=(--testPathIgnorePatterns "$f"); excluded=$((excluded + 1))
  done
  server_extra=(--override group.initial.rebalance.delay.ms=0) # as kafkajs's docker-compose.2_4.yml
  server_sasl="" server_setup=""
  stop_server; start_server # a fresh log, without kafka-go's topics
  echo "running kafkajs specs ($excluded spec files excluded: SSL/SASL)"
  # One jest run per group of specs (as kafkajs's CI splits them), each
  # bounded by KAFKAJS_GROUP_TIMEOUT seconds; a group that runs out is
  # recorded as such and the others still count.
  local group pattern unfinished=""
  local groups=(admin producer consumer broker others)
  [ -z "${ONLY:-}" ] || groups=(only)
  for group in "${groups[@]}"; do
    case $group in
      others) pattern='src/(?!(broker|admin|producer|consumer)/).*' ;;
      only) pattern=$ONLY ;;
      *) pattern="src/$group/" ;;
    esac
    server_alive || start_server
    echo "running kafkajs specs: $group"
    set +e
    (cd "$src" && KAFKA_VERSION=2.4 NODE_ENV=test KAFKAJS_DEBUG_PROTOCOL_BUFFERS=1 timeout "${KAFKAJS_GROUP_TIMEOUT:-1800}" \
      npx jest --ci --maxWorkers=2 --forceExit --json --outputFile="$work/kafkajs-$group.json" \
      "${ignore[@]}" --testPathPattern "$pattern") >"$work/out/kafkajs-$group.log" 2>&1
    set -e
    [ -f "$work/kafkajs-$group.json" ] || unfinished="$unfinished $group"
  done
  local died=""
  server_alive || died="SAMSA SERVER EXITED during the run (see its log); "
  notes[kafkajs]="${died}jest per group of specs (admin, producer, consumer, broker, others) with KAFKA_VERSION=2.4 against one broker (kafkajs's own cluster has three); $excluded spec files excluded (SSL/SASL/OAUTHBEARER listeners); counts are of spec files (tests)${unfinished:+; groups that ran out of time, not counted:$unfinished}"
  python3 - "$src" "$results" "$leaves" "$work"/kafkajs-*.json <<'PY'
import json, sys
src, results, leaves = sys.argv[1], open(sys.argv[2], "a"), open(sys.argv[3], "a")
files = []
for path in sys.argv[4:]:
    try:
        files += json.load(open(path))["testResults"]
    except (OSError, ValueError):
        pass
for f in files:
    name = f["name"].replace(src + "/", "")
    asserts = f.get("assertionResults", [])
    st = {"passed": "pass", "failed": "fail", "pending": "skip", "skipped": "skip", "todo": "skip"}
    for a in asserts:
        leaves.write("kafkajs\t%s › %s\t%s\n" % (name, a["fullName"], st.get(a["status"], "fail")))
    failed = [a for a in asserts if a["status"] == "failed"]
    if f["status"] == "failed" or failed:
        first = ""
        if failed and failed[0].get("failureMessages"):
            first = failed[0]["fullName"] + ": " + failed[0]["failureMessages"][0].strip().splitlines()[0]
        elif f.get("message"):
            first = f["message"].strip().splitlines()[0]
        first = " ".join(first.split())[:240]
        if len(failed) > 1:
            first += " [%d failing tests]" % len(failed)
        results.write("kafkajs\t%s\tfail\t%d\t%s\n" % (name, (f["endTime"] - f["startTime"]) // 1000, first))
    else:
        status = "pass" if any(a["status"] == "passed" for a in asserts) else "skip"
        results.write("kafkajs\t%s\t%s\t%d\t\n" % (name, status, (f["endTime"] - f["startTime"]) // 1000))
PY
}

for s in "${suites[@]}"; do
  case $s in
    kafka-go) run_kafka_go ;;
    kafkajs) run_kafkajs ;;
    report) ;; # only rewrite the doc from the last results
    *) echo "unknown suite $s" >&2; exit 2 ;;
  esac
done
stop_server

if [ -n "${ONLY:-}" ]; then
  # A partial run: its counts must not replace a whole suite's.
  echo "ONLY=$ONLY: a partial run; docs/COMPATIBILITY.md and the stored results are left as they were"
  awk -F'\t' -v run=" ${suites[*]} " 'index(run, " " $1 " ") { print; c[$1" "$3]++ } END {for (k in c) print k, c[k]}' "$results"
  exit 0
fi

# The doc section.
section="$work/section.md"
{
  echo "## The clients' own test suites"
  echo
  echo "Run by \`conformance/run-client-suites.sh\` (not in CI: it needs port 9092 and takes about half an hour). kafka-go: one top-level test at a time, ${test_timeout} each, \`KAFKA_VERSION=3.7.0\`. The server runs with \`group.initial.rebalance.delay.ms=0\`, as in both suites' Docker setups. For kafka-go, as its docker-compose-370.yml: a SASL_PLAINTEXT listener on localhost:9093 (PLAIN \`adminplain\`, SCRAM \`adminscram\`), \`sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\` and the authorizer with \`allow.everyone.if.no.acl.found=true\`. Counts are of top-level tests (kafka-go) or spec files (kafkajs), and in brackets of leaf tests."
  echo
  echo "| suite | version | last run | samsa commit | pass | fail | skip | note |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
  for s in "${all_suites[@]}"; do
    p=$(awk -F'\t' -v s="$s" '$1==s && $3=="pass"' "$results" | wc -l)
    f=$(awk -F'\t' -v s="$s" '$1==s && $3=="fail"' "$results" | wc -l)
    k=$(awk -F'\t' -v s="$s" '$1==s && $3=="skip"' "$results" | wc -l)
    lp=$(awk -F'\t' -v s="$s" '$1==s && $3=="pass"' "$leaves" | wc -l)
    lf=$(awk -F'\t' -v s="$s" '$1==s && $3=="fail"' "$leaves" | wc -l)
    lk=$(awk -F'\t' -v s="$s" '$1==s && $3=="skip"' "$leaves" | wc -l)
    echo "| $s | ${versions[$s]:-} | ${rundate[$s]} | \`${runcommit[$s]}\` | $p ($lp) | $f ($lf) | $k ($lk) | ${notes[$s]:-} |"
  done
  echo
  if grep -qP '\tfail\t' "$results"; then
    echo "Failures, with who is at fault (\`conformance/suite-triage.txt\`; \`untriaged\` until someone looks):"
    echo
    echo "| suite | test | at fault | why | first error |"
    echo "| --- | --- | --- | --- | --- |"
    while IFS=$'\t' read -r s t st secs first; do
      [ "$st" = fail ] || continue
      tri=$(awk -v s="$s" -v t="$t" '$1==s && $2==t { $1=""; $2=""; sub(/^  /, ""); print; exit }' "$here/suite-triage.txt" 2>/dev/null)
      fault=${tri%%: *}; why=${tri#*: }
      [ -n "$tri" ] || { fault=untriaged; why=""; }
      first=${first//|/\\|}
      echo "| $s | $t | $fault | $why | \`${first//\`/}\` |"
    done <"$results"
  fi
} >"$section"

python3 - "$doc" "$section" <<'PY'
import sys
doc_path, section_path = sys.argv[1], sys.argv[2]
begin = "<!-- BEGIN client-suites: generated by conformance/run-client-suites.sh, do not edit -->"
end = "<!-- END client-suites -->"
doc = open(doc_path).read()
body = open(section_path).read().rstrip("\n")
i, j = doc.find(begin), doc.find(end)
new = begin + "\n" + body + "\n" + end
doc = doc[:i] + new + doc[j + len(end):] if i >= 0 and j > i else doc.rstrip("\n") + "\n\n" + new + "\n"
open(doc_path, "w").write(doc)
PY
cp "$results" "$prev_results"
cp "$leaves" "$prev_leaves"
for s in "${all_suites[@]}"; do
  printf '%s\t%s\t%s\t%s\t%s\n' "$s" "${versions[$s]:-}" "${rundate[$s]}" "${runcommit[$s]}" "${notes[$s]:-}"
done >"$meta"
echo "wrote $doc and conformance/client-suites-{results,leaves}.tsv"
awk -F'\t' '{c[$1" "$3]++} END {for (k in c) print k, c[k]}' "$results" | sort
