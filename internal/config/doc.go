// Package config turns Kafka-style properties (a server.properties file and
// key=value overrides) into the node's typed configuration, and describes
// topic-level configs (their Kafka names, defaults, broker synonyms and
// validation) for CreateTopics, DescribeConfigs and AlterConfigs.
//
// Property names and defaults are Apache Kafka's; where Samsa differs (the
// default log directory is ./samsa-data) the property's doc says so. An
// unknown property, or a value that does not parse, is an error naming the
// property: a typo never passes silently.
package config
