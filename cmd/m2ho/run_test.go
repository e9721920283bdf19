package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/spf13/cobra"
)

// resolveRun runs `m2ho run args...` up to the point where the daemon
// would start and returns the configuration it would have used.
func resolveRun(t *testing.T, args ...string) (runConfig, error) {
	t.Helper()
	var got runConfig
	cmd := newRunCmdWith(&globalFlags{}, func(_ *cobra.Command, c runConfig) error {
		got = c
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	return got, err
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// configs/phone.yaml is the documented example: it must load, set every
// key the daemon has, and pass the same checks as flags.
func TestPhoneYAMLLoads(t *testing.T) {
	path := filepath.Join("..", "..", "configs", "phone.yaml")
	c, err := resolveRun(t, "--config", path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	want := runConfig{
		TUN: "m2ho0", MTU: 1500, TUNOffload: "auto", TetherIf: "usb0", UplinkIf: "rmnet0", TetherNets: []string{},
		Table: 100, Socket: "/run/m2ho/signal.sock", SignalTimeout: 5 * time.Second, SignalStale: 200 * time.Millisecond,
		Flows:       []string{"tcp dst-port 443 mode=m2ho", "tcp dst net 192.0.2.0/24 mode=pass"},
		DefaultMode: "m2ho", MetricsAddr: "127.0.0.1:9477", SMaxDB: "/var/lib/m2ho/smax.json",
		Estimator: "perrtt", SmoothingBound: 150 * time.Millisecond, Lambda: 2,
		MaxFlows: 16384, FlowIdle: 2 * time.Minute, StableRate: true, Eqn2InFlight: true, InFlightPeers: true, Predictor: "streams", Eqn2Bound: "rate", RampQueue: 2.0 / 3, RampPairRate: true,
		SlotPipe: true, SlotStart: true, OWDPathBase: true, MmWaveClamp: true, FirstQueue: true, BurstDefault: true, AnchorKeeps: true, AnswerRates: true, MmWaveA2Hold: 2500 * time.Millisecond,
		TunnelCA: "/etc/m2ho/pki/ca.crt", TunnelCert: "/etc/m2ho/pki/phone-1.crt", TunnelKey: "/etc/m2ho/pki/phone-1.key",
		TunnelHints: true, TunnelHintRateWait: 150 * time.Millisecond, TunnelReaderYield: true, TunnelRecvWait: true, TunnelFullPackets: true,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("phone.yaml gave\n %+v\nwant\n %+v", c, want)
	}
	if _, _, _, err := c.check(); err != nil {
		t.Errorf("phone.yaml does not pass the checks: %v", err)
	}
	// Every key the daemon knows appears in the example.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range configKeys() {
		if !strings.Contains(string(b), "\n"+k+":") {
			t.Errorf("phone.yaml does not show key %q", k)
		}
	}
}

func TestConfigFlagsWin(t *testing.T) {
	path := filepath.Join("..", "..", "configs", "phone.yaml")
	c, err := resolveRun(t, "--config", path, "--tun", "m2hoX", "--mtu", "1400",
		"--flow", "tcp port 80 mode=pass", "--signal-timeout", "2s", "--signal-stale", "120ms", "--stable-rate=false", "--eqn2-bound", "envelope", "--answer-rates=false")
	if err != nil {
		t.Fatal(err)
	}
	if c.TUN != "m2hoX" || c.MTU != 1400 || c.SignalTimeout != 2*time.Second || c.SignalStale != 120*time.Millisecond || c.StableRate || c.Eqn2Bound != "envelope" || c.AnswerRates {
		t.Errorf("flags lost against the file: %+v", c)
	}
	if !reflect.DeepEqual(c.Flows, []string{"tcp port 80 mode=pass"}) {
		t.Errorf("--flow replaced the file's rules with %q", c.Flows)
	}
	// Keys not given as flags still come from the file.
	if c.TetherIf != "usb0" || c.UplinkIf != "rmnet0" || c.SMaxDB != "/var/lib/m2ho/smax.json" {
		t.Errorf("file keys not applied: %+v", c)
	}
	// A flag given with its default value still wins over the file.
	c, err = resolveRun(t, "--config", writeFile(t, "c.yaml", "mtu: 9000\n"), "--mtu", "1500")
	if err != nil || c.MTU != 1500 {
		t.Errorf("--mtu 1500 (the default) against mtu: 9000 in the file: got %d, %v", c.MTU, err)
	}
	// Without the flag the file wins over the default.
	c, err = resolveRun(t, "--config", writeFile(t, "c.yaml", "mtu: 9000\nsignal-timeout: 250ms\nsignal-stale: 100ms\n"))
	if err != nil || c.MTU != 9000 || c.SignalTimeout != 250*time.Millisecond || c.SignalStale != 100*time.Millisecond {
		t.Errorf("file over defaults: got mtu %d signal-timeout %v signal-stale %v, %v", c.MTU, c.SignalTimeout, c.SignalStale, err)
	}
	// An empty file changes nothing.
	c, err = resolveRun(t, "--config", writeFile(t, "c.yaml", ""))
	if err != nil || !reflect.DeepEqual(c, defaultRunConfig()) {
		t.Errorf("empty file: got %+v, %v", c, err)
	}
}

// Bad input names where it is: file:line and key, or the flag.
func TestRunConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string // config file text, "" for none
		args []string
		want []string // substrings of the error
	}{
		{"unknown key", "tun: x\nbogus-key: 1\n", nil, []string{"c.yaml:2:", `unknown key "bogus-key"`}},
		{"bad int", "tun: x\nmtu: abc\n", nil, []string{"c.yaml:2:", "mtu:"}},
		{"bad duration", "signal-timeout: soon\n", nil, []string{"c.yaml:1:", "signal-timeout:"}},
		{"duplicate key", "mtu: 1400\nmtu: 1500\n", nil, []string{"c.yaml:2:", `"mtu" given twice`}},
		{"not a mapping", "- a\n- b\n", nil, []string{"c.yaml:1:", "mapping"}},
		{"yaml syntax", "tun: [x\n", nil, []string{"c.yaml"}},
		{"unknown flag", "", []string{"--bogus"}, []string{"--bogus"}},
		{"missing file", "", []string{"--config", "/nonexistent/m2ho.yaml"}, []string{"--config", "/nonexistent/m2ho.yaml"}},
	} {
		args := tc.args
		if tc.file != "" {
			args = append([]string{"--config", writeFile(t, "c.yaml", tc.file)}, args...)
		}
		_, err := resolveRun(t, args...)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tc.name, err, w)
			}
		}
	}
}

// check refuses what cannot run, before touching the system, naming the
// flag and (for rules) the token.
func TestRunConfigCheck(t *testing.T) {
	base := func() runConfig {
		c := defaultRunConfig()
		c.TetherIf, c.UplinkIf = "usb0", "rmnet0"
		return c
	}
	good := base()
	if _, _, _, err := good.check(); err != nil {
		t.Fatalf("a good config fails: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*runConfig)
		want []string
	}{
		{"no interfaces", func(c *runConfig) { c.TetherIf, c.UplinkIf = "", "" }, []string{"--tether-if", "--uplink-if"}},
		{"no-routing without nets", func(c *runConfig) { c.NoRouting, c.TetherIf = true, "" }, []string{"--no-routing", "--tether-net"}},
		{"bad rule token", func(c *runConfig) { c.Flows = []string{"tcp dst-prot 443 mode=m2ho"} }, []string{"--flow", "dst-prot"}},
		{"bad mode", func(c *runConfig) { c.DefaultMode = "fast" }, []string{"--default-mode", "fast"}},
		{"bad estimator", func(c *runConfig) { c.Estimator = "per-rtt" }, []string{"--estimator", "per-rtt"}},
		{"smoothing at RTO", func(c *runConfig) { c.SmoothingBound = 200 * time.Millisecond }, []string{"--smoothing-bound"}},
		{"signal timeout", func(c *runConfig) { c.SignalTimeout = 0 }, []string{"--signal-timeout"}},
		{"signal stale zero", func(c *runConfig) { c.SignalStale = 0 }, []string{"--signal-stale 0s"}},
		{"signal stale at normal lag", func(c *runConfig) { c.SignalStale = 20 * time.Millisecond }, []string{"--signal-stale 20ms", "(20ms"}},
		{"signal stale past timeout", func(c *runConfig) { c.SignalStale = 5 * time.Second }, []string{"--signal-stale 5s", "--signal-timeout 5s"}},
		{"lambda", func(c *runConfig) { c.Lambda = -1 }, []string{"--lambda"}},
		{"mtu", func(c *runConfig) { c.MTU = 100 }, []string{"--mtu 100"}},
		{"max flows", func(c *runConfig) { c.MaxFlows = 0 }, []string{"--max-flows"}},
		{"flow idle", func(c *runConfig) { c.FlowIdle = 0 }, []string{"--flow-idle"}},
		{"socket", func(c *runConfig) { c.Socket = "" }, []string{"--socket"}},
		{"eqn2 bound", func(c *runConfig) { c.Eqn2Bound = "lowest" }, []string{"--eqn2-bound", "lowest"}},
		{"ramp queue zero", func(c *runConfig) { c.RampQueue = 0 }, []string{"--ramp-queue 0"}},
		{"ramp queue above 1", func(c *runConfig) { c.RampQueue = 1.5 }, []string{"--ramp-queue 1.5"}},
		{"hint rate wait negative", func(c *runConfig) { c.TunnelHintRateWait = -time.Millisecond }, []string{"--tunnel-hint-rate-wait"}},
		{"hint rate wait long", func(c *runConfig) { c.TunnelHintRateWait = 3 * time.Second }, []string{"--tunnel-hint-rate-wait", "3s"}},
	} {
		c := base()
		tc.mod(&c)
		_, _, _, err := c.check()
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tc.name, err, w)
			}
		}
	}
	// Every estimator bwe knows is accepted by its listed name.
	c := base()
	c.Estimator = defaultRunConfig().Estimator
	if _, _, _, err := c.check(); err != nil {
		t.Errorf("the default estimator %q is refused: %v", c.Estimator, err)
	}
}

// --mmwave-a2-hold 0 turns the hold off; m2ho.Config reads 0 as its
// default, so the flag's 0 must reach the controller as negative.
func TestMmWaveA2HoldFlag(t *testing.T) {
	for _, tc := range []struct {
		flag, want time.Duration
	}{{0, -1}, {-time.Second, -1}, {2500 * time.Millisecond, 2500 * time.Millisecond}, {time.Second, time.Second}} {
		if got := a2Hold(tc.flag); got != tc.want {
			t.Errorf("--mmwave-a2-hold %v: Config.MmWaveA2Hold %v, want %v", tc.flag, got, tc.want)
		}
	}
	c, err := resolveRun(t, "--mmwave-a2-hold", "0s")
	if err != nil || c.MmWaveA2Hold != 0 {
		t.Fatalf("--mmwave-a2-hold 0s: %v, %v", c.MmWaveA2Hold, err)
	}
	if c := defaultRunConfig(); c.MmWaveA2Hold != m2ho.DefaultMmWaveA2Hold {
		t.Errorf("default --mmwave-a2-hold %v, want %v", c.MmWaveA2Hold, m2ho.DefaultMmWaveA2Hold)
	}
}
