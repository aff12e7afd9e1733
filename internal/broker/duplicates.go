package broker

// Admin requests that name a topic twice: Kafka's ControllerApis answers
// INVALID_REQUEST for that name, with one result, and carries out the rest
// of the request (CreateTopics, CreatePartitions, DeleteTopics).

// msgDuplicateTopic is Kafka's error message for a topic named twice.
const msgDuplicateTopic = "Duplicate topic name."

// duplicates returns the keys listed more than once; nil when none is.
func duplicates[K comparable](keys []K) map[K]bool {
	if len(keys) < 2 {
		return nil
	}
	var dup map[K]bool
	seen := make(map[K]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			if dup == nil {
				dup = map[K]bool{}
			}
			dup[k] = true
		}
		seen[k] = true
	}
	return dup
}
