#!/usr/bin/python3
"""Conformance runner for the Python clients: confluent-kafka (librdkafka)
and kafka-python, both from Debian (run with /usr/bin/python3).

Called by conformance/TestConformance as
    runner.py --client confluent|kafka-python --scenario ID --bootstrap H:P
              --topic T --group G [--codec C]
it prints a last line `RESULT {"status": "pass"|"fail"|"na", "detail": ...}`.
The scenarios mirror cmd/goclients/main.go.
"""

import argparse
import json
import os
import sys
import time
import traceback

PRODUCE_COUNT = 10000
SECURE_COUNT = 1000  # conformance.SecureCount
TIMESTAMP_BASE = 1700000000000
COMPACTED_READ_BOUND = 40  # seconds; see cmd/goclients/compacted.go


class NA(Exception):
    """The client has no such feature."""


class Fail(Exception):
    pass


class Stalled(Exception):
    """consume_from reached its deadline."""


def log(msg):
    print(time.strftime("%H:%M:%S ") + msg, file=sys.stderr, flush=True)


def make_records(prefix, n, partitions=1):
    out = []
    for i in range(n):
        v = "%s-%05d-" % (prefix, i) + "".join(chr(97 + (i * 7 + j * 13) % 26) for j in range(20 + i % 100))
        out.append({"key": b"key-%05d" % i, "value": v.encode(), "headers": [("idx", str(i).encode())],
                    "partition": i % partitions})
    return out


def same_records(got, want, with_headers=True):
    if len(got) != len(want):
        raise Fail("consumed %d records, want %d" % (len(got), len(want)))
    for i, (g, w) in enumerate(zip(got, want)):
        if g["key"] != w["key"] or g["value"] != w["value"]:
            raise Fail("record %d: got key %r value %r, want key %r value %r" % (i, g["key"], g["value"][:40], w["key"], w["value"][:40]))
        if with_headers and list(g["headers"] or []) != w["headers"]:
            raise Fail("record %d: headers %r, want %r" % (i, g["headers"], w["headers"]))
        if g["offset"] != i:
            raise Fail("record %d has offset %d" % (i, g["offset"]))


def same_values(got, want):
    if len(got) != len(want):
        raise Fail("%d records, want %d" % (len(got), len(want)))
    for i, (g, w) in enumerate(zip(got, want)):
        if g["value"] != w["value"]:
            raise Fail("record %d: %r, want %r" % (i, g["value"][:40], w["value"][:40]))


# ---------------------------------------------------------------- confluent


class Client:
    """What both clients share: consume on top of their consume_from(topic,
    partition, fn, deadline, read_committed), which reads partition from the
    earliest offset, without a group, and calls fn with each record until
    fn returns True, and raises Stalled at deadline (time.time())."""

    def consume(self, topic, partition, n, read_committed=False):
        out = []

        def enough(r):
            out.append(r)
            return len(out) >= n
        try:
            self.consume_from(topic, partition, enough, time.time() + 120, read_committed)
        except Stalled:
            raise Fail("consumed %d of %d records in 120s" % (len(out), n))
        return out[:n]


class Confluent(Client):
    def __init__(self, bootstrap, a):
        import confluent_kafka
        self.ck = confluent_kafka
        self.bootstrap = bootstrap
        self._admin = None
        self.sec = {}
        if a.security_protocol != "PLAINTEXT":
            self.sec["security.protocol"] = a.security_protocol.lower()
            self.sec["ssl.ca.location"] = a.ssl_ca
            if a.ssl_cert:
                self.sec.update({"ssl.certificate.location": a.ssl_cert, "ssl.key.location": a.ssl_key})
            if a.sasl_mechanism:
                self.sec.update({"sasl.mechanisms": a.sasl_mechanism, "sasl.username": a.sasl_username,
                                 "sasl.password": a.sasl_password})

    def conf(self, **extra):
        c = {"bootstrap.servers": self.bootstrap, "client.id": "samsa-conformance"}
        c.update(self.sec)
        c.update(extra)
        return c

    def topic_authz_failed(self, e):
        err = getattr(e, "kafka_error", None)
        return err is not None and err.code() == self.ck.KafkaError.TOPIC_AUTHORIZATION_FAILED

    def admin(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient(self.conf())
        return self._admin

    def version(self):
        return "%s (librdkafka %s)" % (self.ck.version()[0], self.ck.libversion()[0])

    def metadata(self, topic):
        md = self.admin().list_topics(timeout=10)  # all topics: a named one may be auto-created
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return len(md.brokers), []
        return len(md.brokers), [t.partitions[p].leader for p in sorted(t.partitions)]

    def create_topic(self, topic, partitions):
        from confluent_kafka.admin import NewTopic
        fs = self.admin().create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        fs[topic].result(30)

    def _produce(self, p, topic, recs):
        errors = []

        def cb(err, msg):
            if err is not None:
                errors.append(err)
        for r in recs:
            while True:
                try:
                    p.produce(topic, key=r["key"], value=r["value"], headers=r["headers"], partition=r["partition"], on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
        left = p.flush(60)
        if left:
            raise Fail("%d records not delivered after 60s" % left)
        if errors:
            f = Fail("delivery failed: %s" % errors[0])
            f.kafka_error = errors[0]
            raise f

    def produce(self, topic, codec, recs, idempotent=False):
        from confluent_kafka import Producer
        p = Producer(self.conf(**{"compression.type": codec, "linger.ms": 5, "acks": "all",
                                  "enable.idempotence": idempotent}))
        self._produce(p, topic, recs)

    @staticmethod
    def _rec(m):
        return {"key": m.key(), "value": m.value(), "headers": m.headers() or [], "partition": m.partition(), "offset": m.offset()}

    def consume_from(self, topic, partition, fn, deadline, read_committed=False):
        from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
        c = Consumer(self.conf(**{"group.id": "samsa-conformance-assign", "enable.auto.commit": False,
                                  "isolation.level": "read_committed" if read_committed else "read_uncommitted"}))
        try:
            c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
            while time.time() < deadline:
                for m in c.consume(num_messages=1000, timeout=0.2):
                    if m.error():
                        if m.error().fatal():
                            raise Fail("consume: %s" % m.error())
                        log("consumer error (not fatal): %s" % m.error())
                        continue
                    if fn(self._rec(m)):
                        return
            raise Stalled()
        finally:
            c.close()

    def offset_for_time(self, topic, partition, ts):
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer(self.conf(**{"group.id": "samsa-conformance-offsets"}))
        try:
            if ts in (-2, -1):
                lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
                return lo if ts == -2 else hi
            r = c.offsets_for_times([TopicPartition(topic, partition, ts)], timeout=10)
            if r[0].error:
                raise Fail(str(r[0].error))
            return r[0].offset
        finally:
            c.close()

    def describe_configs(self, topic):
        from confluent_kafka.admin import ConfigResource
        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        fs = self.admin().describe_configs([res])
        entries = list(fs.values())[0].result(30)
        return {k: e.value for k, e in entries.items()}

    def alter_config(self, topic, key, value):
        from confluent_kafka.admin import ConfigResource
        # confluent-kafka 1.7 has only the non-incremental AlterConfigs,
        # which replaces the topic's whole set of overrides.
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={key: value})
        fs = self.admin().alter_configs([res])
        list(fs.values())[0].result(30)

    def delete_topic(self, topic):
        fs = self.admin().delete_topics([topic])
        fs[topic].result(30)

    def new_member(self, topic, group):
        from confluent_kafka import Consumer, libversion
        if getattr(self, "kip848", False):
            if libversion()[1] < 0x020400ff:
                raise NA("librdkafka %s has no KIP-848 consumer (2.4+)" % libversion()[0])
            c = Consumer(self.conf(**{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                      "group.protocol": "consumer"}))
            c.subscribe([topic])
            return ConfluentMember(c, self._rec)
        c = Consumer(self.conf(**{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000}))
        c.subscribe([topic])
        return ConfluentMember(c, self._rec)

    def new_txn_producer(self, topic, txn_id):
        from confluent_kafka import Producer
        p = Producer(self.conf(**{"transactional.id": txn_id, "linger.ms": 5}))
        p.init_transactions(30)
        return ConfluentTxn(self, p, topic)

    def close(self):
        pass


class ConfluentMember:
    def __init__(self, c, rec):
        self.c = c
        self.rec = rec

    def poll(self, d):
        out = []
        for m in self.c.consume(num_messages=1000, timeout=d):
            if m.error():
                if m.error().fatal():
                    raise Fail("consume: %s" % m.error())
                log("consumer error (not fatal): %s" % m.error())
                continue
            out.append(self.rec(m))
        return out

    def assignment(self):
        return [tp.partition for tp in self.c.assignment()]

    def commit(self):
        from confluent_kafka import KafkaError, KafkaException
        try:
            self.c.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._NO_OFFSET:
                raise

    def close(self):
        self.c.close()


class ConfluentTxn:
    def __init__(self, client, p, topic):
        self.client, self.p, self.topic = client, p, topic

    def begin(self):
        self.p.begin_transaction()

    def produce(self, recs):
        self.client._produce(self.p, self.topic, recs)

    def commit(self):
        self.p.commit_transaction(30)

    def abort(self):
        self.p.abort_transaction(30)

    def close(self):
        pass


# ------------------------------------------------------------- kafka-python


class KafkaPython(Client):
    def __init__(self, bootstrap, a):
        import kafka
        self.kafka = kafka
        self.bootstrap = bootstrap
        self._admin = None
        # kafka-python's security keyword arguments, on every client.
        self.sec = {}
        if a.security_protocol != "PLAINTEXT":
            self.sec = {"security_protocol": a.security_protocol, "ssl_cafile": a.ssl_ca}
            if a.ssl_cert:
                self.sec.update(ssl_certfile=a.ssl_cert, ssl_keyfile=a.ssl_key)
            if a.sasl_mechanism:
                self.sec.update(sasl_mechanism=a.sasl_mechanism, sasl_plain_username=a.sasl_username,
                                sasl_plain_password=a.sasl_password)

    def topic_authz_failed(self, e):
        return isinstance(e, self.kafka.errors.TopicAuthorizationFailedError)

    def admin(self):
        if self._admin is None:
            from kafka.admin import KafkaAdminClient
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, **self.sec, client_id="samsa-conformance")
        return self._admin

    def version(self):
        return self.kafka.__version__

    def metadata(self, topic):
        a = self.admin()
        brokers = a.describe_cluster()["brokers"]
        for t in a.describe_topics():  # all topics: a named one may be auto-created
            if t["topic"] == topic and t["error_code"] == 0:
                return len(brokers), [p["leader"] for p in sorted(t["partitions"], key=lambda p: p["partition"])]
        return len(brokers), []

    def create_topic(self, topic, partitions):
        from kafka.admin import NewTopic
        r = self.admin().create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        for t in r.topic_errors:
            if t[1] != 0:
                raise Fail("create topic: error code %d %s" % (t[1], t[2] if len(t) > 2 else ""))

    def produce(self, topic, codec, recs, idempotent=False):
        if idempotent:
            raise NA("kafka-python 2.0 has no idempotent producer")
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=self.bootstrap, **self.sec, compression_type=None if codec == "none" else codec,
                          linger_ms=5, acks="all", batch_size=64 * 1024)
        try:
            futs = [p.send(topic, key=r["key"], value=r["value"], headers=r["headers"], partition=r["partition"]) for r in recs]
            p.flush(60)
            for f in futs:
                f.get(timeout=60)
        finally:
            p.close(10)

    def consume_from(self, topic, partition, fn, deadline, read_committed=False):
        if read_committed:
            raise NA("kafka-python 2.0 has no read_committed isolation")
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, **self.sec, enable_auto_commit=False, auto_offset_reset="earliest",
                          fetch_max_wait_ms=200)
        try:
            tp = TopicPartition(topic, partition)
            c.assign([tp])
            c.seek_to_beginning(tp)
            while time.time() < deadline:
                for recs in c.poll(timeout_ms=200, max_records=1000).values():
                    for r in recs:
                        if fn({"key": r.key, "value": r.value, "headers": list(r.headers), "partition": r.partition, "offset": r.offset}):
                            return
            raise Stalled()
        finally:
            c.close()

    def offset_for_time(self, topic, partition, ts):
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, **self.sec, enable_auto_commit=False)
        try:
            tp = TopicPartition(topic, partition)
            if ts == -2:
                return c.beginning_offsets([tp])[tp]
            if ts == -1:
                return c.end_offsets([tp])[tp]
            r = c.offsets_for_times({tp: ts})[tp]
            return -1 if r is None else r.offset
        finally:
            c.close()

    def describe_configs(self, topic):
        from kafka.admin import ConfigResource, ConfigResourceType
        resps = self.admin().describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        out = {}
        for resp in resps:
            for res in resp.resources:
                if res[0] != 0:
                    raise Fail("describe configs: error code %d %s" % (res[0], res[1]))
                for e in res[4]:
                    out[e[0]] = e[1]
        return out

    def alter_config(self, topic, key, value):
        from kafka.admin import ConfigResource, ConfigResourceType
        resp = self.admin().alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={key: value})])
        for res in resp.resources:
            if res[0] != 0:
                raise Fail("alter configs: error code %d %s" % (res[0], res[1]))

    def delete_topic(self, topic):
        r = self.admin().delete_topics([topic])
        for t in r.topic_error_codes:
            if t[1] != 0:
                raise Fail("delete topic: error code %d" % t[1])

    def new_member(self, topic, group):
        from kafka import KafkaConsumer
        if getattr(self, "kip848", False):
            raise NA("kafka-python has no KIP-848 consumer")
        c = KafkaConsumer(topic, bootstrap_servers=self.bootstrap, **self.sec, group_id=group, enable_auto_commit=False,
                          auto_offset_reset="earliest", session_timeout_ms=10000, heartbeat_interval_ms=1000,
                          fetch_max_wait_ms=200)
        return KafkaPythonMember(c, topic)

    def new_txn_producer(self, topic, txn_id):
        raise NA("kafka-python 2.0 has no transactional producer")

    def close(self):
        if self._admin is not None:
            self._admin.close()


class KafkaPythonMember:
    """A kafka-python group consumer polled by its own thread: its poll
    blocks in JoinGroup until the rebalance completes, which needs the other
    members to poll too. KafkaConsumer is not thread-safe, so commits run on
    that thread as well. Commits name the offsets after the records poll
    returned, not the consumer's positions, which run ahead by what the
    thread fetched into the queue (group-crash counts on it: a killed
    member must not have committed records it never returned)."""

    def __init__(self, c, topic):
        import queue
        self.topic = topic
        self.returned = {}  # partition -> offset after the last record poll returned
        import threading
        self.c = c
        self.records = queue.Queue()
        self.commands = queue.Queue()
        self.assigned = []
        self.error = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        import queue
        try:
            while not self.stop.is_set():
                for recs in self.c.poll(timeout_ms=100, max_records=1000).values():
                    for r in recs:
                        self.records.put({"key": r.key, "value": r.value, "headers": list(r.headers),
                                          "partition": r.partition, "offset": r.offset})
                self.assigned = [tp.partition for tp in self.c.assignment()]
                try:
                    fn, done = self.commands.get_nowait()
                except queue.Empty:
                    continue
                try:
                    fn()
                    done.append(None)
                except Exception as e:  # handed to the caller
                    done.append(e)
        except Exception as e:  # reported by the next poll
            self.error = e
        finally:
            self.c.close()

    def poll(self, d):
        import queue
        out = []
        deadline = time.time() + d
        while len(out) < 1000:
            if self.error is not None:
                raise self.error
            try:
                r = self.records.get(timeout=max(0.0, deadline - time.time()))
            except queue.Empty:
                break
            out.append(r)
            self.returned[r["partition"]] = r["offset"] + 1
        return out

    def assignment(self):
        return self.assigned

    def commit(self):
        from kafka.structs import OffsetAndMetadata, TopicPartition
        offsets = {TopicPartition(self.topic, p): OffsetAndMetadata(o, "") for p, o in self.returned.items()}
        if not offsets:
            return
        done = []
        self.commands.put((lambda: self.c.commit(offsets), done))
        deadline = time.time() + 30
        while not done:
            if self.error is not None:
                raise self.error
            if time.time() > deadline:
                raise Fail("commit did not finish within 30s")
            time.sleep(0.01)
        if done[0] is not None:
            raise done[0]

    def close(self):
        self.stop.set()
        self.thread.join(30)


# ---------------------------------------------------------------- scenarios


def scenario_metadata(c, a):
    brokers, leaders = c.metadata(a.topic)
    if brokers != 1:
        raise Fail("metadata lists %d brokers, want 1" % brokers)
    if len(leaders) != 3:
        raise Fail("topic %s has %d partitions in metadata, want 3" % (a.topic, len(leaders)))
    for p, l in enumerate(leaders):
        if l < 0:
            raise Fail("partition %d has no leader" % p)


def wait_partitions(c, topic, n, want_gone=False):
    deadline = time.time() + 60
    while time.time() < deadline:
        _, leaders = c.metadata(topic)
        if len(leaders) == n:
            return
        time.sleep(0.2)
    raise Fail("metadata: topic %s has %d partitions, want %d" % (topic, len(leaders), n))


def scenario_produce(c, a, codec, n, idempotent):
    recs = make_records("value", n)
    t0 = time.time()
    c.produce(a.topic, codec, recs, idempotent)
    log("produced %d records in %.2fs" % (n, time.time() - t0))
    t0 = time.time()
    got = c.consume(a.topic, 0, n)
    log("consumed %d records in %.2fs" % (len(got), time.time() - t0))
    same_records(got, recs)


def scenario_list_offsets(c, a):
    cases = [("earliest", -2, 0), ("latest", -1, 10), ("before the first record", TIMESTAMP_BASE - 5000, 0),
             ("the first record's timestamp", TIMESTAMP_BASE, 0), ("between records 4 and 5", TIMESTAMP_BASE + 4500, 5),
             ("the last record's timestamp", TIMESTAMP_BASE + 9000, 9), ("after the last record", TIMESTAMP_BASE + 60000, -1)]
    for name, ts, want in cases:
        got = c.offset_for_time(a.topic, 0, ts)
        if got != want and not (want == -1 and got == 10):
            raise Fail("ListOffsets %s (%d): offset %s, want %d" % (name, ts, got, want))


def scenario_configs(c, a):
    before = c.describe_configs(a.topic)
    for k in ("retention.ms", "cleanup.policy", "segment.bytes"):
        if k not in before:
            raise Fail("describe configs: %s missing (got %d configs)" % (k, len(before)))
    if before["cleanup.policy"] != "delete":
        raise Fail("describe configs: cleanup.policy = %r, want delete" % before["cleanup.policy"])
    c.alter_config(a.topic, "retention.ms", "3600000")
    after = c.describe_configs(a.topic)
    if after.get("retention.ms") != "3600000":
        raise Fail("retention.ms = %r after alter, want 3600000" % after.get("retention.ms"))


def scenario_delete(c, a):
    c.delete_topic(a.topic)
    wait_partitions(c, a.topic, 0)


def poll_until(prefix, want, *members):
    seen = {}
    counts = [0] * len(members)
    deadline = time.time() + 60
    while len(seen) < want:
        if time.time() > deadline:
            raise Fail("received %d of %d %r records within 60s (per member %s)" % (len(seen), want, prefix, counts))
        for i, m in enumerate(members):
            for r in m.poll(0.2):
                v = r["value"].decode()
                if not v.startswith(prefix + "-"):
                    raise Fail("member %d received %r (partition %d offset %d) while waiting for %r records: committed offsets not respected" % (i, v[:40], r["partition"], r["offset"], prefix))
                if v in seen:
                    raise Fail("record %r delivered twice (members %d and %d)" % (v, seen[v], i))
                seen[v] = i
                counts[i] += 1
    return counts


def scenario_group(c, a):
    ma = c.new_member(a.topic, a.group)
    mb = c.new_member(a.topic, a.group)
    deadline = time.time() + 60
    while True:
        for m in (ma, mb):
            if m.poll(0.1):
                raise Fail("member received records before any was produced")
        pa, pb = ma.assignment(), mb.assignment()
        if pa and pb and len(set(pa) | set(pb)) == 4 and not set(pa) & set(pb):
            break
        if time.time() > deadline:
            raise Fail("two members did not split 4 partitions within 60s: %s and %s" % (pa, pb))
    c.produce(a.topic, "none", make_records("g1", 400, 4))
    counts = poll_until("g1", 400, ma, mb)
    if 0 in counts:
        raise Fail("phase 1: one member got nothing (%s): partitions not split" % counts)
    ma.commit()
    mb.commit()
    mb.close()
    # Produce only once a owns every partition: records a got before its
    # rebalance and had not committed would rightly come again.
    deadline = time.time() + 60
    while len(set(ma.assignment())) != 4:
        if ma.poll(0.1):
            raise Fail("member a received records before any was produced")
        if time.time() > deadline:
            raise Fail("after b left, a did not get all 4 partitions within 60s: %s" % ma.assignment())
    c.produce(a.topic, "none", make_records("g2", 400, 4))
    try:
        poll_until("g2", 400, ma)
    except Fail as e:
        raise Fail("phase 2 (b left, a takes over): %s" % e)
    ma.commit()
    ma.close()
    c.produce(a.topic, "none", make_records("g3", 100, 4))
    mc = c.new_member(a.topic, a.group)
    try:
        poll_until("g3", 100, mc)
    except Fail as e:
        raise Fail("phase 3 (new member resumes from commits): %s" % e)
    finally:
        mc.close()


def scenario_transactions(c, a):
    p = c.new_txn_producer(a.topic, "conf-txn-" + a.client)
    t1, t2, t3 = make_records("t1", 100), make_records("t2", 50), make_records("t3", 100)
    for i, (recs, commit) in enumerate([(t1, True), (t2, False), (t3, True)]):
        p.begin()
        p.produce(recs)
        p.commit() if commit else p.abort()
    p.close()
    try:
        same_values(c.consume(a.topic, 0, 200, read_committed=True), t1 + t3)
    except Fail as e:
        raise Fail("read_committed: %s" % e)
    try:
        same_values(c.consume(a.topic, 0, 250), t1 + t2 + t3)
    except Fail as e:
        raise Fail("read_uncommitted: %s" % e)


def scenario_compacted_read(c, a):
    """Reads the compacted topic the driver prepared to its last offset and
    prints the key -> value map seen on a DATA line; as
    cmd/goclients/compacted.go."""
    end = c.offset_for_time(a.topic, 0, -1)
    if end <= 0:
        raise Fail("ListOffsets latest: %d: the topic is empty" % end)
    values = {}
    st = {"n": 0, "last": -1}

    def on_record(r):
        if r["offset"] <= st["last"]:
            raise Fail("looped: offset %d delivered after offset %d (record %d)" % (r["offset"], st["last"], st["n"] + 1))
        st["last"] = r["offset"]
        st["n"] += 1
        values[r["key"].decode()] = None if r["value"] is None else r["value"].decode()
        return r["offset"] >= end - 1

    t0 = time.time()
    err = None
    try:
        c.consume_from(a.topic, 0, on_record, t0 + COMPACTED_READ_BOUND)
    except Stalled:
        err = Fail("stalled at offset %d: %d records read in %ds, last offset %d, log end offset %d"
                   % (st["last"] + 1, st["n"], COMPACTED_READ_BOUND, st["last"], end))
    except Fail as e:
        err = e
    except Exception as e:  # a client's own error: say where it happened
        traceback.print_exc()
        err = Fail("after %d records (last offset %d, log end offset %d): %s: %s" % (st["n"], st["last"], end, type(e).__name__, e))
    print("DATA " + json.dumps({"records": st["n"], "last_offset": st["last"], "end_offset": end, "values": values}), flush=True)
    log("read %d records to offset %d (end %d) in %.2fs" % (st["n"], st["last"], end, time.time() - t0))
    if err is not None:
        raise err


def scenario_acl_denied(c, a):
    """Produce one record to a topic the principal may describe but not
    write: the client must fail with its TOPIC_AUTHORIZATION_FAILED."""
    try:
        c.produce(a.topic, "none", make_records("denied", 1))
    except Exception as e:
        msg = " ".join(("%s: %s" % (type(e).__name__, e)).split())
        print("DATA " + msg, flush=True)
        if not c.topic_authz_failed(e):
            raise Fail("produce failed, but not with the client's TOPIC_AUTHORIZATION_FAILED: " + msg)
        return "the client's error: " + (msg if len(msg) <= 160 else msg[:160] + "…")
    raise Fail("produce without WRITE on the topic succeeded")


def crash_member(c, a):
    """The child runner of group-crash: a member that prints GOT VALUE for
    each record and then commits, until it is killed (see the Go runner's
    crashMember)."""
    m = c.new_member(a.topic, a.group)
    print("JOINED", flush=True)
    while True:
        recs = m.poll(0.2)
        for r in recs:
            print("GOT " + r["value"].decode(), flush=True)
        if recs:
            m.commit()


def scenario_crash(c, a):
    """group-crash: member a (here) and member b (a child runner) split the
    4 partitions; b is killed with SIGKILL while it consumes; a takes b's
    partitions once b's session expires, from b's commits. Every record is
    received by a or printed by b before b committed it (see the Go
    runner's scenarioCrash)."""
    import subprocess
    import threading
    ma = c.new_member(a.topic, a.group)
    scenario = "group-crash-member" + ("-kip848" if getattr(c, "kip848", False) else "")
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--client", a.client, "--scenario", scenario,
                              "--bootstrap", a.bootstrap, "--topic", a.topic, "--group", a.group],
                             stdout=subprocess.PIPE, text=True)
    got = set()
    lock = threading.Lock()

    def read():
        for line in child.stdout:
            if line.startswith("GOT "):
                with lock:
                    got.add(line[4:].rstrip("\n"))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def kill():
        child.kill()
        child.wait()
        reader.join(10)

    def b_count(prefix):
        with lock:
            return sum(1 for v in got if v.startswith(prefix + "-"))

    seen = set()
    values = {}
    try:
        deadline = time.time() + 60
        while True:
            if ma.poll(0.1):
                raise Fail("member a received records before any was produced")
            pa = ma.assignment() if hasattr(ma, "assignment") else []
            if pa and len(set(pa)) < 4:
                break
            if time.time() > deadline:
                raise Fail("a and b did not split 4 partitions within 60s: a has %s" % pa)

        def produce(prefix, n):
            recs = make_records(prefix, n, 4)
            values[prefix] = [r["value"].decode() if isinstance(r["value"], bytes) else r["value"] for r in recs]
            c.produce(a.topic, "none", recs)

        def wait(what, prefix, only_a=False, stop=None):
            n_a = 0
            deadline = time.time() + 60
            while True:
                with lock:
                    missing = sum(1 for v in values[prefix] if v not in seen and (only_a or v not in got))
                if missing == 0 or (stop and stop()):
                    return n_a
                if time.time() > deadline:
                    raise Fail("%s: %d of %d %r records received neither by a nor by b within 60s: lost" % (what, missing, len(values[prefix]), prefix))
                recs = ma.poll(0.2)
                for r in recs:
                    v = r["value"].decode()
                    if v.startswith(prefix + "-"):
                        n_a += 1
                    seen.add(v)
                if recs:
                    ma.commit()

        produce("c1", 400)
        n_a = wait("phase 1 (a and b)", "c1")
        if n_a == 0 or b_count("c1") == 0:
            raise Fail("phase 1: a got %d records, b %d: partitions not split" % (n_a, b_count("c1")))
        produce("c2", 2000)
        wait("phase 2 (b consuming)", "c2", stop=lambda: b_count("c2") > 0)
        kill()
        sys.stderr.write("b killed after printing %d of the 2000 records of phase 2\n" % b_count("c2"))
        wait("phase 2 (after b's kill)", "c2")
        produce("c3", 400)
        wait("phase 3 (a alone after b's kill)", "c3", only_a=True)
    finally:
        if child.poll() is None:
            kill()
        ma.close()


def run(c, a):
    s = a.scenario
    if s == "version":
        return c.version()
    if s == "metadata":
        scenario_metadata(c, a)
    elif s == "create-topic":
        c.create_topic(a.topic, 3)
        wait_partitions(c, a.topic, 3)
    elif s == "produce":
        scenario_produce(c, a, a.codec, PRODUCE_COUNT, False)
    elif s == "idempotent":
        scenario_produce(c, a, "none", 1000, True)
    elif s == "list-offsets-time":
        scenario_list_offsets(c, a)
    elif s == "configs":
        scenario_configs(c, a)
    elif s == "delete-topic":
        scenario_delete(c, a)
    elif s == "group":
        scenario_group(c, a)
    elif s == "group-kip848":
        c.kip848 = True
        scenario_group(c, a)
    elif s == "group-migration":
        # Needs a KIP-848 consumer beside a classic one: neither client
        # here has one (NA from the member's creation).
        c.kip848 = True
        scenario_group(c, a)
    elif s in ("group-crash", "group-crash-kip848"):
        c.kip848 = s.endswith("kip848")
        scenario_crash(c, a)
    elif s in ("group-crash-member", "group-crash-member-kip848"):
        c.kip848 = s.endswith("kip848")
        crash_member(c, a)
    elif s == "share-group":
        raise NA("%s has no share consumer (KIP-932)" % ("librdkafka" if a.client == "confluent" else a.client))
    elif s == "transactions":
        scenario_transactions(c, a)
    elif s == "compacted-read":
        scenario_compacted_read(c, a)
    elif s == "secure-produce":
        scenario_produce(c, a, "none", SECURE_COUNT, False)
    elif s == "acl-denied":
        return scenario_acl_denied(c, a)
    else:
        raise Fail("unknown scenario %r" % s)
    return ""


def result(status, detail):
    print("RESULT " + json.dumps({"status": status, "detail": detail}), flush=True)


def main():
    import signal

    def timeout(*_):
        result("fail", "runner timed out after 170s")
        os._exit(0)
    signal.signal(signal.SIGALRM, timeout)
    signal.alarm(170)
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True, choices=["confluent", "kafka-python"])
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default="")
    ap.add_argument("--group", default="")
    ap.add_argument("--codec", default="none")
    ap.add_argument("--groups", default="0")
    ap.add_argument("--security-protocol", default="PLAINTEXT", choices=["PLAINTEXT", "SSL", "SASL_SSL"])
    ap.add_argument("--sasl-mechanism", default="")
    ap.add_argument("--sasl-username", default="")
    ap.add_argument("--sasl-password", default="")
    ap.add_argument("--ssl-ca", default="")
    ap.add_argument("--ssl-cert", default="")
    ap.add_argument("--ssl-key", default="")
    a = ap.parse_args()
    try:
        c = Confluent(a.bootstrap, a) if a.client == "confluent" else KafkaPython(a.bootstrap, a)
        try:
            detail = run(c, a)
        finally:
            c.close()
        result("pass", detail)
    except NA as e:
        result("na", str(e))
    except Exception as e:  # every failure is reported, with its type
        traceback.print_exc()
        result("fail", "%s: %s" % (type(e).__name__, e) if not isinstance(e, Fail) else str(e))
    sys.stdout.flush()
    os._exit(0)  # without waiting for clients' background threads


if __name__ == "__main__":
    main()
