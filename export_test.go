package samsa

// ConsumerBytesOut is the record bytes n's broker has served to consumers
// (KIP-392 tests: which replica a consumer reads from).
func ConsumerBytesOut(n *Node) int64 { return n.broker.ConsumerBytesOut() }
