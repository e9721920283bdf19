package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/m2ho/m2ho/proxy/tunnel"
	"github.com/m2ho/m2ho/tun"
)

// TestServerYAMLMatchesFlags loads configs/server.yaml through the same
// path as --config: every key must be a flag.
func TestServerYAMLMatchesFlags(t *testing.T) {
	cmd := newServerCmd(&globalFlags{})
	c := defaultServerConfig()
	if err := mergeConfigYAML(&c, filepath.Join("..", "..", "configs", "server.yaml"), cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":4433" || len(c.Routes) != 1 || c.MTU != 1280 {
		t.Fatalf("config %+v", c)
	}
	keys, _ := structFields(&c)
	for _, k := range keys {
		if cmd.Flags().Lookup(k) == nil {
			t.Errorf("YAML key %q has no flag", k)
		}
	}
}

func TestServerYAMLErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ yaml, want string }{
		{"listen: :1\nroutes: [10.0.0.0/8]\n", `:2: unknown key "routes"`},
		{"mtu: big\n", ":1: mtu:"},
		{"route: [a]\nroute: [b]\n", `:2: key "route" given twice`},
	} {
		p := filepath.Join(dir, "s.yaml")
		os.WriteFile(p, []byte(tc.yaml), 0o644)
		c := defaultServerConfig()
		err := mergeConfigYAML(&c, p, newServerCmd(&globalFlags{}).Flags())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestServerCheckNamesFlags(t *testing.T) {
	dir := t.TempDir()
	if err := newKeysCmdRun(t, dir); err != nil {
		t.Fatal(err)
	}
	base := func() serverConfig {
		c := defaultServerConfig()
		c.Cert, c.Key, c.ClientCA = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.crt")
		c.Routes = []string{"198.51.100.0/24"}
		return c
	}
	c := base()
	if _, err := c.check(zap.NewNop()); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	// --queue-len 0: 512 in front of quic-go's pacing, 2048 in front of
	// Wave; a value given stays.
	for _, tc := range []struct {
		pacer     string
		len, want int
	}{{pacerNone, 0, 512}, {pacerWave, 0, 2048}, {pacerWave, 300, 300}, {pacerNone, 4096, 4096}} {
		c := base()
		c.Pacer, c.QueueLen = tc.pacer, tc.len
		if sc, err := c.check(zap.NewNop()); err != nil || sc.QueueLen != tc.want {
			t.Errorf("--pacer %s --queue-len %d: QueueLen %d (%v), want %d", tc.pacer, tc.len, sc.QueueLen, err, tc.want)
		}
	}
	// --full-packets, on by default, reaches the tunnel's config.
	if f := newServerCmd(&globalFlags{}).Flags().Lookup("full-packets"); f == nil || f.DefValue != "true" {
		t.Errorf("--full-packets: %v, want a flag that defaults to true", f)
	}
	for _, full := range []bool{true, false} {
		c := base()
		c.FullPackets = full
		if sc, err := c.check(zap.NewNop()); err != nil || sc.NoFullPackets != !full {
			t.Errorf("--full-packets=%v: NoFullPackets %v (%v)", full, sc.NoFullPackets, err)
		}
	}
	for _, tc := range []struct {
		mod  func(*serverConfig)
		want string
	}{
		{func(c *serverConfig) { c.Routes = nil }, "--route"},
		{func(c *serverConfig) { c.Routes = []string{"nope"} }, `--route "nope"`},
		{func(c *serverConfig) { c.InnerPrefixes = []string{"10.1/8"} }, "--inner-prefix"},
		{func(c *serverConfig) { c.ClientCA = c.Cert + ".missing" }, "--client-ca"},
		{func(c *serverConfig) { c.Key = c.ClientCA }, "--cert/--key"},
		{func(c *serverConfig) { c.QueueLen = -1 }, "--queue-len"},
		{func(c *serverConfig) { c.QlogDir = filepath.Join(dir, "none") }, "--qlog-dir"},
		{func(c *serverConfig) { c.Pacer = "bbr" }, `--pacer "bbr"`},
		{func(c *serverConfig) { c.Pacer, c.WaveBurst = "wave", 0 }, "--wave-burst"},
		{func(c *serverConfig) { c.Pacer, c.WaveMinTxTime = "wave", -1 }, "--wave-min-tx-time"},
		{func(c *serverConfig) { c.Pacer, c.WaveBurst, c.WaveMaxBurst = "wave", 20, 10 }, "--wave-max-burst 10"},
		{func(c *serverConfig) { c.Pacer, c.WaveTrainDivisor = "wave", 0 }, "--wave-train-rtt-divisor 0"},
		{func(c *serverConfig) { c.Pacer, c.WaveTrainDivisor = "wave", 2000 }, "--wave-train-rtt-divisor 2000"},
		{func(c *serverConfig) { c.Pacer, c.WaveQueueWindow = "wave", time.Millisecond }, "--wave-queue-window 1ms"},
		{func(c *serverConfig) { c.Pacer, c.WaveQueueBDP = "wave", 0.1 }, "--wave-queue-bdp 0.1"},
		{func(c *serverConfig) { c.Pacer, c.WaveQueueDelay = "wave", -time.Second }, "--wave-queue-delay -1s"},
		{func(c *serverConfig) { c.TUNOffload = "maybe" }, "--tun-offload"},
		{func(c *serverConfig) { c.AddressHold = -1 }, "--address-hold"},
		{func(c *serverConfig) { c.MaxHeldAddresses = -1 }, "--max-held-addresses"},
	} {
		c := base()
		tc.mod(&c)
		if _, err := c.check(zap.NewNop()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want an error naming %s", err, tc.want)
		}
	}
}

func newKeysCmdRun(t *testing.T, dir string) error {
	t.Helper()
	cmd := newKeysCmd()
	cmd.SetArgs([]string{"--out", dir, "--server-name", "localhost", "--client", "phone-1"})
	cmd.SetOut(&strings.Builder{})
	return cmd.Execute()
}

func TestKeysFileModesAndNoOverwrite(t *testing.T) {
	dir := t.TempDir()
	if err := newKeysCmdRun(t, dir); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"ca.key": 0o600, "server.key": 0o600, "phone-1.key": 0o600, "ca.crt": 0o644, "phone-1.crt": 0o644} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), mode)
		}
	}
	if err := newKeysCmdRun(t, dir); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second run: %v, want a refusal to overwrite", err)
	}
}

func TestServerCollector(t *testing.T) {
	dir := t.TempDir()
	if err := newKeysCmdRun(t, dir); err != nil {
		t.Fatal(err)
	}
	c := defaultServerConfig()
	c.Cert, c.Key, c.ClientCA = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.crt")
	c.Routes = []string{"198.51.100.0/24"}
	sc, err := c.check(zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := tunnel.NewServer(sc, tun.NewChannelTUN(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&serverCollector{srv: srv})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, mf := range mfs {
		got[mf.GetName()] = len(mf.GetMetric())
	}
	for name, n := range map[string]int{
		"m2ho_tunnel_connections_total": 2, "m2ho_tunnel_sessions_total": 2, "m2ho_tunnel_sessions_open": 1,
		"m2ho_tunnel_packets_total": 2, "m2ho_tunnel_bytes_total": 2, "m2ho_tunnel_drops_total": 10,
		"m2ho_tunnel_packet_too_big_total": 1, "m2ho_tunnel_mss_clamped_total": 1,
		"m2ho_tunnel_hints_total": 3, "m2ho_tunnel_hints_rejected_total": 1,
		"m2ho_tunnel_peer_migrations_total": 1, "m2ho_tunnel_addresses_resumed_total": 1,
		"m2ho_tunnel_sessions_superseded_total": 1, "m2ho_tunnel_addresses_held": 1,
	} {
		if got[name] != n {
			t.Errorf("%s: %d series, want %d", name, got[name], n)
		}
	}
}

// TestCPUProfileFlag: the daemons' hidden --cpu-profile writes a profile
// that pprof can read once stopped, and a path that cannot be created is
// an error naming the flag.
func TestCPUProfileFlag(t *testing.T) {
	for _, name := range []string{"run", "server"} {
		var cmd interface{ Flags() *pflag.FlagSet }
		if name == "run" {
			cmd = newRunCmd(&globalFlags{})
		} else {
			cmd = newServerCmd(&globalFlags{})
		}
		if f := cmd.Flags().Lookup("cpu-profile"); f == nil || !f.Hidden {
			t.Errorf("m2ho %s: --cpu-profile missing or not hidden", name)
		}
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "no", "such", "dir", "p.prof")); err == nil || !strings.Contains(err.Error(), "--cpu-profile") {
		t.Fatalf("bad path: %v", err)
	}
	path := filepath.Join(t.TempDir(), "p.prof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// pprof's format: a gzip-compressed protocol buffer.
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("profile is not gzip: %v", err)
	}
	if raw, err := io.ReadAll(zr); err != nil || len(raw) == 0 {
		t.Fatalf("profile body: %d bytes, %v", len(raw), err)
	}
}
