package broker

import "github.com/twmb/franz-go/pkg/kerr"

// fencedForVersion returns code as a client of the request version
// understands it: PRODUCER_FENCED (KIP-588) is answered as
// INVALID_PRODUCER_EPOCH to versions before fencedFrom, as Kafka's
// KafkaApis does for InitProducerId v0-v3, AddPartitionsToTxn v0-v1,
// AddOffsetsToTxn v0-v1 and EndTxn v0-v1. kafkajs's EndTxn and
// AddOffsetsToTxn specs expect it.
func fencedForVersion(code, version, fencedFrom int16) int16 {
	if version < fencedFrom && code == kerr.ProducerFenced.Code {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
