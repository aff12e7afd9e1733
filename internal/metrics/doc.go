// Package metrics holds the node's Prometheus metrics: the counters the
// request paths increment (per topic, per API), the HTTP listener that
// serves them (http.listener: /metrics, /healthz, /readyz), and the names,
// which follow Strimzi's JMX exporter rules for Kafka's MBeans
// (kafka_server_replicamanager_underreplicatedpartitions, ...) so that
// dashboards and alerts written for Kafka read Samsa unchanged; Samsa's own
// additions start with samsa_.
//
// Hot paths only add to atomics held by handles resolved once (a
// partition's *Topic, a request's per-API histograms); gauges such as
// under-replicated partitions are computed when scraped, by iterating the
// hosted partitions once. Scrapes that arrive while a gather runs share
// its result (scrape.go), so a slow node gathers once however many
// scrapers ask. Each node has its own Registry, so several nodes in one
// process (tests) keep separate metrics.
package metrics
