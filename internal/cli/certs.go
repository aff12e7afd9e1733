package cli

import (
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/samsahq/samsa/internal/auth"
)

func init() { clientCommands = append(clientCommands, newCertsCommand) }

// newCertsCommand is `samsa certs`: a development CA and PEM keystores for
// TLS listeners and mTLS clients (KIP-651 files: key then chain).
func newCertsCommand() *cobra.Command {
	var (
		dir      string
		hosts    []string
		clients  []string
		validity time.Duration
	)
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make a development CA and PEM server and client certificates",
		Long: `Make a development certificate authority and PEM keystores in --dir:

  ca.pem          the CA certificate: ssl.truststore.location of brokers and clients
  ca-key.pem      the CA certificate and its private key (keep it private;
                  reused when present, so later runs issue from the same CA)
  server.pem      a keystore (private key, certificate, CA) for --host names:
                  ssl.keystore.location of the brokers
  client-NAME.pem a keystore for each --client NAME (subject CN=NAME), for
                  mTLS (ssl.client.auth=required); the principal is User:CN=NAME
                  unless ssl.principal.mapping.rules maps it

Keys are ECDSA P-256, unencrypted. For development and tests: a production
cluster's certificates come from its own CA.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir is required")
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			caKey := filepath.Join(dir, "ca-key.pem")
			var ca *auth.DevCA
			if data, err := os.ReadFile(caKey); err == nil {
				if ca, err = auth.LoadDevCA(data); err != nil {
					return fmt.Errorf("%s: %w", caKey, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "using the CA of %s\n", caKey)
			} else if errors.Is(err, os.ErrNotExist) {
				if ca, err = auth.NewDevCA("Samsa development CA", validity); err != nil {
					return err
				}
				data, err := ca.PEM()
				if err != nil {
					return err
				}
				if err := writeFile(cmd, caKey, data, 0o600); err != nil {
					return err
				}
			} else {
				return err
			}
			if err := writeFile(cmd, filepath.Join(dir, "ca.pem"), ca.CertPEM(), 0o644); err != nil {
				return err
			}
			cn := "localhost"
			if len(hosts) > 0 {
				cn = hosts[0]
			}
			ks, err := ca.Issue(pkix.Name{CommonName: cn}, hosts, validity)
			if err != nil {
				return err
			}
			if err := writeFile(cmd, filepath.Join(dir, "server.pem"), ks, 0o600); err != nil {
				return err
			}
			for _, c := range clients {
				ks, err := ca.Issue(pkix.Name{CommonName: c}, nil, validity)
				if err != nil {
					return err
				}
				if err := writeFile(cmd, filepath.Join(dir, "client-"+c+".pem"), ks, 0o600); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the files to")
	cmd.Flags().StringSliceVar(&hosts, "host", []string{"localhost", "127.0.0.1"}, "host names and IP addresses of the server certificate")
	cmd.Flags().StringSliceVar(&clients, "client", nil, "client certificate common names (repeatable)")
	cmd.Flags().DurationVar(&validity, "validity", 365*24*time.Hour, "how long the certificates are valid")
	return cmd
}

func writeFile(cmd *cobra.Command, path string, data []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, data, mode); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", path)
	return nil
}
