#!/usr/bin/env node
// Conformance runner for kafkajs. Called by conformance/TestConformance as
//   node runner.js --scenario ID --bootstrap H:P --topic T --group G
//                  [--codec C] [--groups 0|1]
// and prints a last line `RESULT {"status": "pass"|"fail"|"na", "detail": ...}`.
// The scenarios mirror cmd/goclients/main.go.
'use strict'

const { Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4js = require('lz4js')
const { ZstdCodec } = require('zstd-codec')

const PRODUCE_COUNT = 10000
const SECURE_COUNT = 1000 // conformance.SecureCount
const TIMESTAMP_BASE = 1700000000000
const COMPACTED_READ_BOUND = 40000 // ms; see cmd/goclients/compacted.go

class NA extends Error {}
class Fail extends Error {}
class Stalled extends Error {}

const log = msg => process.stderr.write(`${new Date().toISOString().slice(11, 23)} ${msg}\n`)
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// kafkajs ships gzip only; the other codecs are plugged in, as its docs
// describe, with pure JavaScript implementations.
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress(encoder) {
    return Buffer.from(lz4js.compress(encoder.buffer))
  },
  async decompress(buffer) {
    return Buffer.from(lz4js.decompress(buffer))
  },
})
let zstdReady = null
const zstd = () => {
  if (!zstdReady) zstdReady = new Promise(resolve => ZstdCodec.run(z => resolve(z)))
  return zstdReady
}
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress(encoder) {
    const z = await zstd()
    return Buffer.from(new z.Simple().compress(encoder.buffer, 3))
  },
  async decompress(buffer) {
    const z = await zstd()
    return Buffer.from(new z.Streaming().decompress(buffer))
  },
})

const codecs = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

function parseArgs() {
  const a = { codec: 'none', groups: '0', topic: '', group: '' }
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1]
  return a
}

// security is kafkajs's ssl and sasl options for the --security-protocol
// flags: the CA, a client certificate for mTLS, SCRAM-SHA-512.
function security(a) {
  const proto = a['security-protocol'] || 'PLAINTEXT'
  if (proto === 'PLAINTEXT') return {}
  const fs = require('fs')
  const ssl = { ca: [fs.readFileSync(a['ssl-ca'], 'utf8')] }
  if (a['ssl-cert']) {
    ssl.cert = fs.readFileSync(a['ssl-cert'], 'utf8')
    ssl.key = fs.readFileSync(a['ssl-key'], 'utf8')
  }
  const out = { ssl }
  if (proto === 'SASL_SSL') {
    if (a['sasl-mechanism'] !== 'SCRAM-SHA-512') throw new Fail(`unsupported mechanism ${a['sasl-mechanism']}`)
    out.sasl = { mechanism: 'scram-sha-512', username: a['sasl-username'], password: a['sasl-password'] }
  }
  return out
}

// errorTypes are the kafkajs error types (KafkaJSProtocolError.type) in e
// and the errors it wraps.
function errorTypes(e, seen = new Set()) {
  if (!e || typeof e !== 'object' || seen.has(e)) return []
  seen.add(e)
  const out = e.type ? [e.type] : []
  for (const inner of [e.cause, e.originalError, ...(Array.isArray(e.errors) ? e.errors : [])])
    out.push(...errorTypes(inner, seen))
  return out
}

function makeRecords(prefix, n, partitions = 1) {
  const out = []
  for (let i = 0; i < n; i++) {
    let v = `${prefix}-${String(i).padStart(5, '0')}-`
    for (let j = 0; j < 20 + (i % 100); j++) v += String.fromCharCode(97 + ((i * 7 + j * 13) % 26))
    out.push({ key: `key-${String(i).padStart(5, '0')}`, value: v, headers: { idx: String(i) }, partition: i % partitions })
  }
  return out
}

const fromMessage = (m, partition) => ({
  key: m.key ? m.key.toString() : null,
  value: m.value ? m.value.toString() : null,
  headers: Object.fromEntries(Object.entries(m.headers || {}).map(([k, v]) => [k, v.toString()])),
  partition,
  offset: Number(m.offset),
})

function sameRecords(got, want) {
  if (got.length !== want.length) throw new Fail(`consumed ${got.length} records, want ${want.length}`)
  for (let i = 0; i < want.length; i++) {
    const g = got[i]
    const w = want[i]
    if (g.key !== w.key || g.value !== w.value)
      throw new Fail(`record ${i}: got key ${g.key} value ${String(g.value).slice(0, 40)}, want key ${w.key} value ${w.value.slice(0, 40)}`)
    if (JSON.stringify(g.headers) !== JSON.stringify(w.headers))
      throw new Fail(`record ${i}: headers ${JSON.stringify(g.headers)}, want ${JSON.stringify(w.headers)}`)
    if (g.offset !== i) throw new Fail(`record ${i} has offset ${g.offset}`)
  }
}

function sameValues(got, want) {
  if (got.length !== want.length) throw new Fail(`${got.length} records, want ${want.length}`)
  for (let i = 0; i < want.length; i++)
    if (got[i].value !== want[i].value) throw new Fail(`record ${i}: ${got[i].value.slice(0, 40)}, want ${want[i].value.slice(0, 40)}`)
}

class Client {
  constructor(a) {
    this.a = a
    this.kafka = new Kafka({
      clientId: 'samsa-conformance',
      brokers: [a.bootstrap],
      ...security(a),
      logLevel: logLevel.WARN,
      retry: { retries: 5, initialRetryTime: 100 },
    })
    this.closers = []
    this.notes = new Set() // reported with a pass
  }

  async admin() {
    if (!this._admin) {
      this._admin = this.kafka.admin()
      await this._admin.connect()
      this.closers.push(() => this._admin.disconnect())
    }
    return this._admin
  }

  async close() {
    for (const c of this.closers.reverse()) await c().catch(() => {})
  }

  async metadata(topic) {
    const adm = await this.admin()
    const { brokers } = await adm.describeCluster()
    const { topics } = await adm.fetchTopicMetadata() // all topics: a named one may be auto-created
    const t = topics.find(t => t.name === topic)
    if (!t) return [brokers.length, []]
    return [brokers.length, [...t.partitions].sort((x, y) => x.partitionId - y.partitionId).map(p => p.leader)]
  }

  async createTopic(topic, partitions) {
    const adm = await this.admin()
    const created = await adm.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true })
    if (!created) throw new Fail('createTopics answered that the topic already exists')
  }

  async send(producer, topic, codec, recs) {
    for (let i = 0; i < recs.length; i += 1000) {
      await producer.send({ topic, acks: -1, compression: codecs[codec], messages: recs.slice(i, i + 1000) })
    }
  }

  async produce(topic, codec, recs, idempotent) {
    const p = this.kafka.producer({ idempotent, maxInFlightRequests: idempotent ? 1 : undefined, allowAutoTopicCreation: false })
    await p.connect()
    try {
      await this.send(p, topic, codec, recs)
    } finally {
      await p.disconnect()
    }
  }

  // consume reads the first n records of partition from the earliest
  // offset: with a consumer group when the broker has groups (kafkajs has
  // no consumer without one), else with kafkajs's own Fetch request and
  // record decoding, through its internal cluster object.
  async consume(topic, partition, n, readCommitted) {
    if (this.a.groups === '1') return this.consumeGroup(topic, partition, n, readCommitted)
    if (readCommitted) throw new Fail('read_committed without consumer groups is not implemented in this runner')
    this.notes.add("consumed with kafkajs's own Fetch request and record decoding, without a group: kafkajs has no consumer without one and the broker has no groups yet")
    return this.consumeFetch(topic, partition, n)
  }

  async consumeGroup(topic, partition, n, readCommitted) {
    const out = []
    const enough = r => out.push(r) >= n
    try {
      await this.consumeFrom(topic, partition, enough, Date.now() + 120000, readCommitted)
    } catch (e) {
      throw e instanceof Stalled ? new Fail(`consumed ${out.length} of ${n} records in 120s`) : e
    }
    return out.slice(0, n)
  }

  async consumeFetch(topic, partition, n) {
    const sym = Object.getOwnPropertySymbols(this.kafka).find(s => s.description === 'private:Kafka:createCluster')
    const cluster = this.kafka[sym]({ allowAutoTopicCreation: false })
    await cluster.connect()
    try {
      await cluster.addTargetTopic(topic)
      await cluster.refreshMetadata()
      const leaders = cluster.findLeaderForPartitions(topic, [partition])
      const broker = await cluster.findBroker({ nodeId: Object.keys(leaders)[0] })
      const out = []
      let offset = 0
      const deadline = Date.now() + 120000
      while (out.length < n) {
        if (Date.now() > deadline) throw new Fail(`fetched ${out.length} of ${n} records in 120s`)
        const resp = await broker.fetch({
          replicaId: -1,
          isolationLevel: 0,
          maxWaitTime: 200,
          topics: [{ topic, partitions: [{ partition, fetchOffset: String(offset), maxBytes: 1 << 20 }] }],
        })
        const p = resp.responses[0].partitions[0]
        if (p.errorCode) throw new Fail(`fetch error code ${p.errorCode}`)
        for (const m of p.messages) {
          if (m.isControlRecord || Number(m.offset) < offset) continue
          out.push(fromMessage(m, partition))
          offset = Number(m.offset) + 1
        }
      }
      return out.slice(0, n)
    } finally {
      await cluster.disconnect()
    }
  }

  // consumeFrom reads partition from the earliest offset with a consumer
  // of a new group (kafkajs has no consumer without one) and calls fn with
  // each record until fn returns true; it throws Stalled at deadline
  // (Date.now()) and what fn throws.
  async consumeFrom(topic, partition, fn, deadline, readCommitted = false) {
    if (this.a.groups !== '1') throw new Fail('the broker does not advertise the group APIs, which kafkajs needs to consume')
    const c = this.kafka.consumer({ groupId: `conf-read-${Date.now()}-${Math.random()}`, readUncommitted: !readCommitted, maxWaitTimeInMs: 200 })
    await c.connect()
    try {
      await c.subscribe({ topic, fromBeginning: true })
      let done
      const finished = new Promise(resolve => (done = resolve))
      await c.run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          if (batch.partition !== partition) return
          try {
            for (const m of batch.messages) if (fn(fromMessage(m, batch.partition))) return done(null)
          } catch (e) {
            done(e)
          }
        },
      })
      const timer = new Promise(resolve => setTimeout(() => resolve(new Stalled()), deadline - Date.now()))
      const err = await Promise.race([finished, timer])
      if (err) throw err
    } finally {
      await c.disconnect()
    }
  }

  async offsetForTime(topic, partition, ts) {
    const adm = await this.admin()
    let list
    if (ts === -2 || ts === -1) {
      list = (await adm.fetchTopicOffsets(topic)).map(o => ({ partition: o.partition, offset: ts === -2 ? o.low : o.high }))
    } else {
      list = await adm.fetchTopicOffsetsByTimestamp(topic, ts)
    }
    const o = list.find(o => o.partition === partition)
    if (!o) throw new Fail(`no offset for partition ${partition}`)
    return Number(o.offset)
  }

  async describeConfigs(topic) {
    const adm = await this.admin()
    const r = await adm.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }], includeSynonyms: false })
    const res = r.resources[0]
    if (res.errorCode) throw new Fail(`describe configs: error code ${res.errorCode} ${res.errorMessage}`)
    return Object.fromEntries(res.configEntries.map(e => [e.configName, e.configValue]))
  }

  async alterConfig(topic, key, value) {
    const adm = await this.admin()
    // kafkajs has only the non-incremental AlterConfigs.
    const r = await adm.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: key, value }] }] })
    const res = r.resources[0]
    if (res.errorCode) throw new Fail(`alter configs: error code ${res.errorCode} ${res.errorMessage}`)
  }

  async deleteTopic(topic) {
    const adm = await this.admin()
    await adm.deleteTopics({ topics: [topic], timeout: 30000 })
  }

  async newMember(topic, group) {
    const c = this.kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 1000, maxWaitTimeInMs: 200, rebalanceTimeout: 10000 })
    const m = { c, queue: [], assigned: [], polled: new Map(), error: null }
    c.on(c.events.GROUP_JOIN, e => (m.assigned = e.payload.memberAssignment[topic] || []))
    // kafkajs crashes its consumer on an error its retries did not
    // outlast and, when the error is retriable (COORDINATOR_LOAD_IN_PROGRESS
    // while a fresh __consumer_offsets loads on a busy machine), restarts
    // it: only a crash it does not restart from fails the scenario; one it
    // does is waited out by the scenario's deadlines.
    c.on(c.events.CRASH, e => {
      if (e.payload.restart) log(`consumer crashed, kafkajs restarts it: ${e.payload.error}`)
      else m.error = e.payload.error
    })
    await c.connect()
    await c.subscribe({ topic, fromBeginning: true })
    await c.run({ autoCommit: false, eachMessage: async ({ partition, message }) => m.queue.push(fromMessage(message, partition)) })
    m.poll = async d => {
      await sleep(d)
      if (m.error) throw m.error
      const out = m.queue.splice(0)
      for (const r of out) m.polled.set(r.partition, r.offset + 1)
      return out
    }
    m.assignment = () => m.assigned
    m.commit = async () => {
      const offsets = [...m.polled].map(([partition, offset]) => ({ topic, partition, offset: String(offset) }))
      if (offsets.length) await c.commitOffsets(offsets)
      m.polled.clear()
    }
    m.close = () => c.disconnect()
    return m
  }

  async newTxnProducer(topic, txnId) {
    const p = this.kafka.producer({ transactionalId: txnId, idempotent: true, maxInFlightRequests: 1 })
    await p.connect()
    this.closers.push(() => p.disconnect())
    let txn
    return {
      begin: async () => (txn = await p.transaction()),
      produce: recs => this.send(txn, topic, 'none', recs),
      commit: () => txn.commit(),
      abort: () => txn.abort(),
    }
  }
}

async function scenarioMetadata(c, a) {
  const [brokers, leaders] = await c.metadata(a.topic)
  if (brokers !== 1) throw new Fail(`metadata lists ${brokers} brokers, want 1`)
  if (leaders.length !== 3) throw new Fail(`topic ${a.topic} has ${leaders.length} partitions in metadata, want 3`)
  leaders.forEach((l, p) => {
    if (l < 0) throw new Fail(`partition ${p} has no leader`)
  })
}

async function waitPartitions(c, topic, n) {
  const deadline = Date.now() + 60000
  let leaders = []
  while (Date.now() < deadline) {
    ;[, leaders] = await c.metadata(topic)
    if (leaders.length === n) return
    await sleep(200)
  }
  throw new Fail(`metadata: topic ${topic} has ${leaders.length} partitions, want ${n}`)
}

async function scenarioProduce(c, a, codec, n, idempotent) {
  const recs = makeRecords('value', n)
  let t0 = Date.now()
  await c.produce(a.topic, codec, recs, idempotent)
  log(`produced ${n} records in ${Date.now() - t0}ms`)
  t0 = Date.now()
  const got = await c.consume(a.topic, 0, n, false)
  log(`consumed ${got.length} records in ${Date.now() - t0}ms`)
  sameRecords(got, recs)
}

async function scenarioListOffsets(c, a) {
  const cases = [
    ['earliest', -2, 0],
    ['latest', -1, 10],
    ['before the first record', TIMESTAMP_BASE - 5000, 0],
    ["the first record's timestamp", TIMESTAMP_BASE, 0],
    ['between records 4 and 5', TIMESTAMP_BASE + 4500, 5],
    ["the last record's timestamp", TIMESTAMP_BASE + 9000, 9],
    ['after the last record', TIMESTAMP_BASE + 60000, -1],
  ]
  for (const [name, ts, want] of cases) {
    const got = await c.offsetForTime(a.topic, 0, ts)
    // kafkajs turns Kafka's -1 (no such record) into the latest offset.
    if (got !== want && !(want === -1 && got === 10)) throw new Fail(`ListOffsets ${name} (${ts}): offset ${got}, want ${want}`)
  }
}

async function scenarioConfigs(c, a) {
  const before = await c.describeConfigs(a.topic)
  for (const k of ['retention.ms', 'cleanup.policy', 'segment.bytes'])
    if (!(k in before)) throw new Fail(`describe configs: ${k} missing (got ${Object.keys(before).length} configs)`)
  if (before['cleanup.policy'] !== 'delete') throw new Fail(`describe configs: cleanup.policy = ${before['cleanup.policy']}, want delete`)
  await c.alterConfig(a.topic, 'retention.ms', '3600000')
  const after = await c.describeConfigs(a.topic)
  if (after['retention.ms'] !== '3600000') throw new Fail(`retention.ms = ${after['retention.ms']} after alter, want 3600000`)
}

async function pollUntil(prefix, want, ...members) {
  const seen = new Map()
  const counts = members.map(() => 0)
  const deadline = Date.now() + 60000
  while (seen.size < want) {
    if (Date.now() > deadline) throw new Fail(`received ${seen.size} of ${want} ${prefix} records within 60s (per member ${counts})`)
    for (let i = 0; i < members.length; i++) {
      for (const r of await members[i].poll(200)) {
        if (!r.value.startsWith(prefix + '-'))
          throw new Fail(`member ${i} received ${r.value.slice(0, 40)} (partition ${r.partition} offset ${r.offset}) while waiting for ${prefix} records: committed offsets not respected`)
        if (seen.has(r.value)) throw new Fail(`record ${r.value} delivered twice (members ${seen.get(r.value)} and ${i})`)
        seen.set(r.value, i)
        counts[i]++
      }
    }
  }
  return counts
}

async function scenarioGroup(c, a) {
  const ma = await c.newMember(a.topic, a.group)
  const mb = await c.newMember(a.topic, a.group)
  const deadline = Date.now() + 60000
  for (;;) {
    for (const m of [ma, mb]) if ((await m.poll(100)).length) throw new Fail('member received records before any was produced')
    const pa = ma.assignment()
    const pb = mb.assignment()
    if (pa.length && pb.length && new Set([...pa, ...pb]).size === 4 && pa.length + pb.length === 4) break
    if (Date.now() > deadline) throw new Fail(`two members did not split 4 partitions within 60s: ${pa} and ${pb}`)
  }
  await c.produce(a.topic, 'none', makeRecords('g1', 400, 4), false)
  const counts = await pollUntil('g1', 400, ma, mb)
  if (counts.includes(0)) throw new Fail(`phase 1: one member got nothing (${counts}): partitions not split`)
  await ma.commit()
  await mb.commit()
  await mb.close()
  // Produce only once a owns every partition: records a got before its
  // rebalance and had not committed would rightly come again.
  const deadline2 = Date.now() + 60000
  while (new Set(ma.assignment()).size !== 4) {
    if ((await ma.poll(100)).length) throw new Fail('member a received records before any was produced')
    if (Date.now() > deadline2) throw new Fail(`after b left, a did not get all 4 partitions within 60s: ${ma.assignment()}`)
  }
  await c.produce(a.topic, 'none', makeRecords('g2', 400, 4), false)
  await pollUntil('g2', 400, ma).catch(e => {
    throw new Fail(`phase 2 (b left, a takes over): ${e.message}`)
  })
  await ma.commit()
  await ma.close()
  await c.produce(a.topic, 'none', makeRecords('g3', 100, 4), false)
  const mc = await c.newMember(a.topic, a.group)
  try {
    await pollUntil('g3', 100, mc).catch(e => {
      throw new Fail(`phase 3 (new member resumes from commits): ${e.message}`)
    })
  } finally {
    await mc.close()
  }
}

// crashMember is the child runner of group-crash: a member that prints
// GOT VALUE for each record and then commits, until it is killed (see the
// Go runner's crashMember).
async function crashMember(c, a) {
  const m = await c.newMember(a.topic, a.group)
  process.stdout.write('JOINED\n')
  for (;;) {
    const recs = await m.poll(200)
    if (!recs.length) continue
    // Commit only once the lines reached the pipe: a write to a full pipe
    // is queued in the process, and SIGKILL loses the queue (222 records
    // committed but never printed looked lost).
    const lines = recs.map(r => `GOT ${r.value}\n`).join('')
    await new Promise((resolve, reject) => process.stdout.write(lines, err => (err ? reject(err) : resolve())))
    await m.commit()
  }
}

// scenarioCrash is group-crash: member a (here) and member b (a child
// runner) split the 4 partitions; b is killed with SIGKILL while it
// consumes; a takes b's partitions once b's session expires, from b's
// commits. Every record is received by a or printed by b before b
// committed it (see the Go runner's scenarioCrash).
async function scenarioCrash(c, a) {
  const { spawn } = require('child_process')
  const readline = require('readline')
  const ma = await c.newMember(a.topic, a.group)
  const child = spawn(process.execPath, [__filename, '--client', 'kafkajs', '--scenario', 'group-crash-member',
    '--bootstrap', a.bootstrap, '--topic', a.topic, '--group', a.group], { stdio: ['ignore', 'pipe', 'inherit'] })
  const got = new Set()
  const closed = new Promise(resolve => child.on('close', resolve))
  readline.createInterface({ input: child.stdout }).on('line', line => {
    if (line.startsWith('GOT ')) got.add(line.slice(4))
  })
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await closed
  }
  const bCount = prefix => [...got].filter(v => v.startsWith(prefix + '-')).length
  const seen = new Set()
  const values = {}
  const produce = async (prefix, n) => {
    const recs = makeRecords(prefix, n, 4)
    values[prefix] = recs.map(r => r.value)
    await c.produce(a.topic, 'none', recs, false)
  }
  const wait = async (what, prefix, onlyA, stop) => {
    let nA = 0
    const deadline = Date.now() + 60000
    for (;;) {
      const missing = values[prefix].filter(v => !seen.has(v) && (onlyA || !got.has(v))).length
      if (missing === 0 || (stop && stop())) return nA
      if (Date.now() > deadline)
        throw new Fail(`${what}: ${missing} of ${values[prefix].length} ${prefix} records received neither by a nor by b within 60s: lost`)
      const recs = await ma.poll(200)
      for (const r of recs) {
        if (r.value.startsWith(prefix + '-')) nA++
        seen.add(r.value)
      }
      if (recs.length) await ma.commit()
    }
  }
  try {
    const deadline = Date.now() + 60000
    for (;;) {
      if ((await ma.poll(100)).length) throw new Fail('member a received records before any was produced')
      const pa = ma.assignment()
      if (pa.length && new Set(pa).size < 4) break
      if (Date.now() > deadline) throw new Fail(`a and b did not split 4 partitions within 60s: a has ${pa}`)
    }
    await produce('c1', 400)
    const nA = await wait('phase 1 (a and b)', 'c1', false)
    if (nA === 0 || bCount('c1') === 0) throw new Fail(`phase 1: a got ${nA} records, b ${bCount('c1')}: partitions not split`)
    await produce('c2', 2000)
    await wait('phase 2 (b consuming)', 'c2', false, () => bCount('c2') > 0)
    await kill()
    log(`b killed after printing ${bCount('c2')} of the 2000 records of phase 2`)
    await wait("phase 2 (after b's kill)", 'c2', false)
    await produce('c3', 400)
    await wait("phase 3 (a alone after b's kill)", 'c3', true)
  } finally {
    await kill()
    await ma.close()
  }
}

async function scenarioTransactions(c, a) {
  const p = await c.newTxnProducer(a.topic, 'conf-txn-kafkajs')
  const t1 = makeRecords('t1', 100)
  const t2 = makeRecords('t2', 50)
  const t3 = makeRecords('t3', 100)
  for (const [recs, commit] of [[t1, true], [t2, false], [t3, true]]) {
    await p.begin()
    await p.produce(recs)
    if (commit) await p.commit()
    else await p.abort()
  }
  try {
    sameValues(await c.consume(a.topic, 0, 200, true), [...t1, ...t3])
  } catch (e) {
    throw new Fail(`read_committed: ${e.message}`)
  }
  try {
    sameValues(await c.consume(a.topic, 0, 250, false), [...t1, ...t2, ...t3])
  } catch (e) {
    throw new Fail(`read_uncommitted: ${e.message}`)
  }
}

// scenarioCompactedRead reads the compacted topic the driver prepared to
// its last offset and prints the key -> value map seen on a DATA line; as
// cmd/goclients/compacted.go.
async function scenarioCompactedRead(c, a) {
  const end = await c.offsetForTime(a.topic, 0, -1)
  if (end <= 0) throw new Fail(`ListOffsets latest: ${end}: the topic is empty`)
  const values = {}
  let n = 0
  let last = -1
  const t0 = Date.now()
  let err = null
  try {
    await c.consumeFrom(
      a.topic,
      0,
      r => {
        if (r.offset <= last) throw new Fail(`looped: offset ${r.offset} delivered after offset ${last} (record ${n + 1})`)
        last = r.offset
        n++
        values[r.key] = r.value
        return r.offset >= end - 1
      },
      t0 + COMPACTED_READ_BOUND
    )
  } catch (e) {
    if (e instanceof Stalled)
      err = new Fail(`stalled at offset ${last + 1}: ${n} records read in ${COMPACTED_READ_BOUND / 1000}s, last offset ${last}, log end offset ${end}`)
    else if (e instanceof Fail) err = e
    else err = new Fail(`after ${n} records (last offset ${last}, log end offset ${end}): ${e.name}: ${e.message}`)
  }
  process.stdout.write(`DATA ${JSON.stringify({ records: n, last_offset: last, end_offset: end, values })}\n`)
  log(`read ${n} records to offset ${last} (end ${end}) in ${Date.now() - t0}ms`)
  if (err) throw err
}

// scenarioACLDenied produces one record to a topic the principal may
// describe but not write: kafkajs must fail with TOPIC_AUTHORIZATION_FAILED.
async function scenarioACLDenied(c, a) {
  try {
    await c.produce(a.topic, 'none', makeRecords('denied', 1), false)
  } catch (e) {
    const msg = `${e.name}: ${e.message} [${errorTypes(e).join(', ')}]`
    process.stdout.write(`DATA ${msg}\n`)
    if (!errorTypes(e).includes('TOPIC_AUTHORIZATION_FAILED'))
      throw new Fail(`produce failed, but not with TOPIC_AUTHORIZATION_FAILED: ${msg}`)
    return `the client's error: ${msg.length > 160 ? msg.slice(0, 160) + '…' : msg}`
  }
  throw new Fail('produce without WRITE on the topic succeeded')
}

async function run(c, a) {
  switch (a.scenario) {
    case 'version':
      return require('kafkajs/package.json').version
    case 'metadata':
      return scenarioMetadata(c, a)
    case 'create-topic':
      await c.createTopic(a.topic, 3)
      return waitPartitions(c, a.topic, 3)
    case 'produce':
      return scenarioProduce(c, a, a.codec, PRODUCE_COUNT, false)
    case 'idempotent':
      return scenarioProduce(c, a, 'none', 1000, true)
    case 'list-offsets-time':
      return scenarioListOffsets(c, a)
    case 'configs':
      return scenarioConfigs(c, a)
    case 'delete-topic':
      await c.deleteTopic(a.topic)
      return waitPartitions(c, a.topic, 0)
    case 'group':
      return scenarioGroup(c, a)
    case 'group-crash':
      return scenarioCrash(c, a)
    case 'group-crash-member':
      return crashMember(c, a)
    case 'group-kip848':
    case 'group-migration':
    case 'group-crash-kip848':
      throw new NA('kafkajs has no KIP-848 consumer')
    case 'share-group':
      throw new NA('kafkajs has no share consumer (KIP-932)')
    case 'transactions':
      return scenarioTransactions(c, a)
    case 'compacted-read':
      return scenarioCompactedRead(c, a)
    case 'secure-produce':
      return scenarioProduce(c, a, 'none', SECURE_COUNT, false)
    case 'acl-denied':
      return scenarioACLDenied(c, a)
  }
  throw new Fail(`unknown scenario ${a.scenario}`)
}

function result(status, detail) {
  process.stdout.write(`RESULT ${JSON.stringify({ status, detail: detail || '' })}\n`)
}

async function main() {
  const a = parseArgs()
  const c = new Client(a)
  const timer = setTimeout(() => {
    result('fail', 'runner timed out after 170s')
    process.exit(0)
  }, 170000)
  try {
    const detail = await run(c, a)
    await c.close()
    result('pass', typeof detail === 'string' ? detail : [...c.notes].join('; '))
  } catch (e) {
    await c.close()
    if (e instanceof NA) result('na', e.message)
    else {
      log(e.stack || String(e))
      result('fail', e instanceof Fail ? e.message : `${e.name}: ${e.message}`)
    }
  }
  clearTimeout(timer)
  process.exit(0)
}

main()
