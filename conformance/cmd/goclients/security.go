package main

import (
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	segkafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	franzscram "github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"
)

// sec is how the runner connects: the --security-protocol flags. The
// only SASL mechanism the suite uses is SCRAM-SHA-512.
var sec struct {
	protocol, mechanism, user, pass, ca, cert, key string
}

func secureFlags() {
	flag.StringVar(&sec.protocol, "security-protocol", "PLAINTEXT", "PLAINTEXT, SSL or SASL_SSL")
	flag.StringVar(&sec.mechanism, "sasl-mechanism", "", "SCRAM-SHA-512")
	flag.StringVar(&sec.user, "sasl-username", "", "SASL user")
	flag.StringVar(&sec.pass, "sasl-password", "", "SASL password")
	flag.StringVar(&sec.ca, "ssl-ca", "", "PEM file of the CA that signed the server's certificate")
	flag.StringVar(&sec.cert, "ssl-cert", "", "PEM file of the client certificate (mTLS)")
	flag.StringVar(&sec.key, "ssl-key", "", "PEM file of the client certificate's key")
}

func useTLS() bool  { return strings.HasSuffix(sec.protocol, "SSL") }
func useSASL() bool { return strings.HasPrefix(sec.protocol, "SASL_") }

// tlsConfig is the Go clients' TLS configuration: the CA's roots and, for
// mTLS, the client certificate; nil without TLS.
func tlsConfig() (*tls.Config, error) {
	if !useTLS() {
		return nil, nil
	}
	ca, err := os.ReadFile(sec.ca)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", sec.ca)
	}
	c := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if sec.cert != "" {
		kp, err := tls.LoadX509KeyPair(sec.cert, sec.key)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}

func checkMechanism() error {
	if useSASL() && sec.mechanism != "SCRAM-SHA-512" {
		return fmt.Errorf("the runner speaks SCRAM-SHA-512 only, not %q", sec.mechanism)
	}
	return nil
}

// franzSecurity are franz-go's options for sec.
func franzSecurity() ([]kgo.Opt, error) {
	tc, err := tlsConfig()
	if err != nil || checkMechanism() != nil {
		return nil, errors.Join(err, checkMechanism())
	}
	var o []kgo.Opt
	if tc != nil {
		o = append(o, kgo.DialTLSConfig(tc))
	}
	if useSASL() {
		o = append(o, kgo.SASL(franzscram.Auth{User: sec.user, Pass: sec.pass}.AsSha512Mechanism()))
	}
	return o, nil
}

// saramaSecurity sets sarama's Net.TLS and Net.SASL for sec.
func saramaSecurity(cfg *sarama.Config) error {
	tc, err := tlsConfig()
	if err != nil || checkMechanism() != nil {
		return errors.Join(err, checkMechanism())
	}
	if tc != nil {
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tc
	}
	if useSASL() {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.User, cfg.Net.SASL.Password = sec.user, sec.pass
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
	}
	return nil
}

// saramaSCRAM is sarama's SCRAM client over xdg-go/scram, as sarama's
// examples write it (sarama ships none).
type saramaSCRAM struct{ conv *xdgscram.ClientConversation }

func (s *saramaSCRAM) Begin(user, pass, authzID string) error {
	c, err := xdgscram.HashGeneratorFcn(sha512.New).NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaSCRAM) Done() bool                            { return s.conv.Done() }

// kafkaGoSecurity returns kafka-go's transport (Writer, Client) and dialer
// (Reader) for sec.
func kafkaGoSecurity() (*segkafka.Transport, *segkafka.Dialer, error) {
	tc, err := tlsConfig()
	if err != nil || checkMechanism() != nil {
		return nil, nil, errors.Join(err, checkMechanism())
	}
	t := &segkafka.Transport{TLS: tc}
	d := &segkafka.Dialer{TLS: tc, DualStack: true}
	if useSASL() {
		m, err := scram.Mechanism(scram.SHA512, sec.user, sec.pass)
		if err != nil {
			return nil, nil, err
		}
		t.SASL, d.SASLMechanism = m, m
	}
	return t, d, nil
}

// librdkafkaSecurity are librdkafka's properties for sec (confluent-kafka-go
// and kcat).
func librdkafkaSecurity() map[string]string {
	m := map[string]string{}
	if sec.protocol == "PLAINTEXT" {
		return m
	}
	m["security.protocol"] = strings.ToLower(sec.protocol)
	if useTLS() {
		m["ssl.ca.location"] = sec.ca
		if sec.cert != "" {
			m["ssl.certificate.location"], m["ssl.key.location"] = sec.cert, sec.key
		}
	}
	if useSASL() {
		m["sasl.mechanisms"] = sec.mechanism
		m["sasl.username"], m["sasl.password"] = sec.user, sec.pass
	}
	return m
}

// topicAuthzFailed reports whether err is the client's own form of
// TOPIC_AUTHORIZATION_FAILED (error code 29).
func topicAuthzFailed(c client, err error) bool {
	switch c.(type) {
	case *franzClient:
		return errors.Is(err, kerr.TopicAuthorizationFailed)
	case *saramaClient:
		// SyncProducer.SendMessages: ProducerErrors, one per record.
		return errors.Is(recordErr(err), sarama.ErrTopicAuthorizationFailed)
	case *kafkaGoClient:
		// Writer.WriteMessages: WriteErrors, one per message.
		var we segkafka.WriteErrors
		if errors.As(err, &we) {
			return len(we) > 0 && errors.Is(we[0], segkafka.TopicAuthorizationFailed)
		}
		return errors.Is(err, segkafka.TopicAuthorizationFailed)
	case *confluentClient:
		var ke kafka.Error
		return errors.As(err, &ke) && ke.Code() == kafka.ErrTopicAuthorizationFailed
	case *kcatClient:
		// librdkafka's text for the code: rd_kafka_err2str.
		return strings.Contains(err.Error(), "Broker: Topic authorization failed")
	}
	return false
}

// recordErr is the first record's error of sarama's ProducerErrors (whose
// own text is only "Failed to deliver N messages"), else err.
func recordErr(err error) error {
	var pe sarama.ProducerErrors
	if errors.As(err, &pe) && len(pe) > 0 {
		return pe[0]
	}
	return err
}
