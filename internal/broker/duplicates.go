package broker

// Admin requests that name a topic twice: Kafka's ControllerApis answers
// INVALID_REQUEST for that name, with one result, and carries out the rest
// of the request (CreateTopics, CreatePartitions, DeleteTopics).

// msgDuplicateTopic is Kafka's error message for a topic named twice.
const msgDuplicateTopic = "Duplicate topic name."

// duplicates returns the names listed more than once; nil when none is.
func duplicates(names []string) map[string]bool {
	var dup map[string]bool
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			if dup == nil {
				dup = map[string]bool{}
			}
			dup[n] = true
		}
		seen[n] = true
	}
	return dup
}
