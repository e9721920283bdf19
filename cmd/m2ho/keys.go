package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/m2ho/m2ho/proxy/tunnel"
)

func newKeysCmd() *cobra.Command {
	var (
		out      string
		names    []string
		clients  []string
		validity time.Duration
	)
	cmd := &cobra.Command{
		Use:   "keys --out DIR [flags]",
		Short: "Generate the tunnel's CA, server certificate and client certificates",
		Long: `keys writes a private CA and the certificates the QUIC tunnel needs for
mutual TLS (ECDSA P-256):

  DIR/ca.crt, DIR/ca.key            the CA (keep ca.key offline)
  DIR/server.crt, DIR/server.key    for m2ho server (--cert, --key)
  DIR/<client>.crt, DIR/<client>.key one pair per --client, for the phones

The server trusts any client certificate signed by ca.crt (--client-ca) and
names the client by its certificate's subject CN (the --client name): the
per-client connection bound counts by it. Keys are written 0600, certificates
0644; an existing file is never overwritten.

Example:
  m2ho keys --out /etc/m2ho/pki --server-name tunnel.example.org --server-name 192.0.2.10 --client phone-1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out: required")
			}
			if len(names) == 0 {
				return errors.New("--server-name: at least one DNS name or IP address the clients dial")
			}
			if len(clients) == 0 {
				return errors.New("--client: at least one client name")
			}
			seen := map[string]bool{"ca": true, "server": true}
			for _, c := range clients {
				if c == "" || c != filepath.Base(c) || seen[c] {
					return fmt.Errorf("--client %q: want a plain, unique file name other than ca and server", c)
				}
				seen[c] = true
			}
			if err := os.MkdirAll(out, 0o700); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			ca, err := tunnel.NewCA("m2ho tunnel CA", validity)
			if err != nil {
				return err
			}
			if err := ca.WriteFiles(out, "ca"); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			srv, err := tunnel.NewServerCert(ca, names, validity)
			if err != nil {
				return fmt.Errorf("--server-name: %w", err)
			}
			if err := srv.WriteFiles(out, "server"); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			for _, c := range clients {
				k, err := tunnel.NewClientCert(ca, c, validity)
				if err != nil {
					return fmt.Errorf("--client %q: %w", c, err)
				}
				if err := k.WriteFiles(out, c); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "m2ho: wrote CA, server certificate for %v and %d client certificate(s) to %s\n", names, len(clients), out)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&out, "out", "", "directory for the files (created 0700 if missing)")
	fs.StringSliceVar(&names, "server-name", nil, "DNS name or IP address of the server, put in its certificate's SANs (repeatable)")
	fs.StringSliceVar(&clients, "client", []string{"phone"}, "client name: its certificate's CN and file name (repeatable)")
	fs.DurationVar(&validity, "validity", 365*24*time.Hour, "how long the certificates are valid")
	return cmd
}
