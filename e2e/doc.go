// Package e2e holds tests that run the built samsa binary as a real
// process: SIGKILL and recovery, and clients from other languages (kcat).
package e2e
