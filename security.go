package samsa

import (
	"crypto/tls"
	"fmt"
	"strconv"

	"github.com/samsahq/samsa/internal/auth"
	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/server"
	"github.com/samsahq/samsa/internal/wire"
)

// httpTLS is the TLS configuration of the operations HTTP listener, nil
// for http.listener.security.protocol=PLAINTEXT.
func httpTLS(nc *config.Node) (*tls.Config, error) {
	sec, err := nc.HTTPSecurity()
	if err != nil || !sec.TLS() {
		return nil, err
	}
	tc, err := auth.ServerTLS(sec.SSL)
	if err != nil {
		return nil, fmt.Errorf("http.listener: %w", err)
	}
	return tc, nil
}

// listenerSecurity fills scfg's TLS and SASL settings for a listener from
// its security protocol and ssl.*/sasl.* properties. SCRAM credentials are
// read from the controller's current image at each authentication (h.ctrl,
// set once the controller exists: until then no SCRAM user is known).
func listenerSecurity(nc *config.Node, name string, h *lateHandler, scfg *server.Config) error {
	sec, err := nc.Security(name)
	if err != nil {
		return err
	}
	if sec.TLS() {
		tc, err := auth.ServerTLS(sec.SSL)
		if err != nil {
			return fmt.Errorf("listener %s: %w", name, err)
		}
		mapper, err := auth.ParsePrincipalMappingRules(sec.SSL.PrincipalMappingRules)
		if err != nil {
			return fmt.Errorf("listener %s: %w", name, err)
		}
		scfg.TLS = tc
		scfg.CertificatePrincipal = mapper.CertificatePrincipal
	}
	if !sec.SASLEnabled() {
		return nil
	}
	a, err := auth.NewAuthenticator(sec.SASL, h.scramCredential)
	if err != nil {
		return fmt.Errorf("listener %s: %w", name, err)
	}
	scfg.SASL = &server.SASL{
		Mechanisms: a.Mechanisms(),
		Start: func(mechanism string) server.SASLExchange {
			ex, _ := a.Start(mechanism)
			return ex
		},
		MaxReauth:       sec.SASL.MaxReauth,
		MaxReceiveBytes: sec.SASL.MaxReceiveBytes,
	}
	return nil
}

// scramCredential looks a SCRAM credential up in the metadata image.
func (h *lateHandler) scramCredential(mechanism, user string) (auth.ScramCredential, bool) {
	c := h.ctrl.Load()
	if c == nil {
		return auth.ScramCredential{}, false
	}
	r, ok := c.Image().ScramCredential(auth.ScramMechanism(mechanism), user)
	if !ok {
		return auth.ScramCredential{}, false
	}
	return auth.ScramCredential{Salt: r.Salt, StoredKey: r.StoredKey, ServerKey: r.ServerKey, Iterations: r.Iterations}, true
}

// nodeDialers are how this node dials other brokers (on
// inter.broker.listener.name, with sasl.mechanism.inter.broker.protocol)
// and controllers (on the first of controller.listener.names, with
// sasl.mechanism.controller.protocol): TLS and SASL as those listeners
// are secured, with their ssl.* properties and
// listener.name.<l>.<mechanism>.sasl.jaas.config credentials (see
// auth.Dialer). Nil for plain TCP.
func nodeDialers(nc *config.Node) (dialBroker, dialController wire.DialFunc, err error) {
	id := "samsa-node-" + strconv.Itoa(int(nc.NodeID))
	if name := nc.InterBrokerListener(); name != "" && nc.HasRole("broker") {
		sec, err := nc.Security(name)
		if err != nil {
			return nil, nil, err
		}
		if dialBroker, err = auth.Dialer(sec, nc.InterBrokerSASLMechanism(false), id); err != nil {
			return nil, nil, fmt.Errorf("inter.broker.listener.name %s (sasl.mechanism.inter.broker.protocol): %w", name, err)
		}
	}
	if len(nc.QuorumVoters) > 0 && len(nc.ControllerListenerNames) > 0 {
		name := nc.ControllerListenerNames[0]
		sec, err := nc.Security(name)
		if err != nil {
			return nil, nil, err
		}
		if dialController, err = auth.Dialer(sec, nc.InterBrokerSASLMechanism(true), id); err != nil {
			return nil, nil, fmt.Errorf("controller.listener.names %s (sasl.mechanism.controller.protocol): %w", name, err)
		}
	}
	return dialBroker, dialController, nil
}

// multiNode reports whether nc's node has other nodes to dial: other
// voters in controller.quorum.voters, or none of its own (broker-only).
func multiNode(nc *config.Node) bool {
	for _, v := range nc.QuorumVoters {
		if v.ID != nc.NodeID {
			return true
		}
	}
	return false
}
