// Package console is Samsa's web console, served at / on the operations
// HTTP listener (http.listener) from the binary: server-side HTML
// (html/template) with a little plain JavaScript (live tail, keyboard
// navigation), inline SVG charts, and JSON endpoints under /api/ that the
// pages and the CLI can use (docs/console.md).
//
// The console is a Kafka client of the node it runs in: every read and
// write goes through franz-go (kgo, kadm) to the node's own broker
// listener, so the broker's authorization applies to it as to any tool.
// When that listener needs SASL, a console user logs in with SCRAM
// credentials and the console keeps one client per session, authenticated
// as that principal (session cookie HttpOnly, SameSite=Strict).
//
// Writes are POSTs carrying the session's CSRF token; the pages show what
// a write will do and ask for confirmation first. console.read.only hides
// the writes and the API refuses them with 403.
//
// Samples: every 10 s the console records the node's bytes in/out
// counters and the total lag of the groups viewed in the last hour, in
// ring buffers of one hour (360 samples), for the charts.
//
// Locks: Console.mu guards the sessions and the lag watches; ring's own
// mutex is a leaf.
package console
