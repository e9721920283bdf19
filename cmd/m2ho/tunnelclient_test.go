package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/proxy/tunnel"
	"github.com/m2ho/m2ho/signaling"
)

type hintSink struct {
	mu    sync.Mutex
	hints []tunnel.Hint
}

func (s *hintSink) SendHint(h tunnel.Hint) error {
	s.mu.Lock()
	s.hints = append(s.hints, h)
	s.mu.Unlock()
	return nil
}

func TestHintForwarderMapsTransitions(t *testing.T) {
	f := newHintForwarder(m2ho.NopObserver{}, zap.NewNop())
	var st m2ho.Hint
	f.ctrlHint = func() m2ho.Hint { return st }
	now := time.Unix(0, 0)
	target := signaling.Cell{ID: "B", Type: signaling.CellMmWave}
	st = m2ho.Hint{State: m2ho.Preparation, SMax: 900_000, Target: target}
	f.Transition(now, m2ho.Stable, m2ho.Preparation, "handover predicted")
	st = m2ho.Hint{State: m2ho.Stable}
	f.Transition(now, m2ho.Preparation, m2ho.Stable, "A1")
	st = m2ho.Hint{State: m2ho.Preparation, SMax: 500_000, Target: target}
	f.Transition(now, m2ho.Stable, m2ho.Preparation, "handover predicted")
	st = m2ho.Hint{State: m2ho.Smoothing, CEst: 4e7, Target: target}
	f.Transition(now, m2ho.Preparation, m2ho.Smoothing, "random access success")
	f.Transition(now, m2ho.Smoothing, m2ho.Stable, "released") // no hint
	sink := &hintSink{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.run(ctx, sink); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sink.mu.Lock()
		n := len(sink.hints)
		sink.mu.Unlock()
		if n >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	want := []tunnel.Hint{
		{Kind: tunnel.HintPredicted, TargetCell: "B", CellType: signaling.CellMmWave, SMax: 900_000},
		{Kind: tunnel.HintWithdrawn},
		{Kind: tunnel.HintPredicted, TargetCell: "B", CellType: signaling.CellMmWave, SMax: 500_000},
		{Kind: tunnel.HintExecuted, TargetCell: "B", CellType: signaling.CellMmWave, CEst: 4e7},
	}
	if len(sink.hints) != len(want) {
		t.Fatalf("got %d hints %+v, want %d", len(sink.hints), sink.hints, len(want))
	}
	for i := range want {
		if sink.hints[i] != want[i] {
			t.Errorf("hint %d: %+v, want %+v", i, sink.hints[i], want[i])
		}
	}
}

func TestHintForwarderNeverBlocks(t *testing.T) {
	f := newHintForwarder(m2ho.NopObserver{}, zap.NewNop())
	f.ctrlHint = func() m2ho.Hint { return m2ho.Hint{SMax: 1} }
	for range 100 { // nobody drains: the queue of 64 fills, the rest is counted
		f.Transition(time.Time{}, m2ho.Stable, m2ho.Preparation, "")
	}
	if d := f.dropped.Load(); d != 36 {
		t.Fatalf("dropped %d, want 36", d)
	}
}

func TestTunnelFlagsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	if err := newKeysCmdRun(t, dir); err != nil {
		t.Fatal(err)
	}
	ok := tunnelFlags{Server: "127.0.0.1:4433", CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "phone-1.crt"), Key: filepath.Join(dir, "phone-1.key")}
	if cc, err := ok.clientConfig(zap.NewNop()); err != nil || cc.CountDrops {
		t.Fatalf("%v; CountDrops %v without --tunnel-count-drops", err, cc.CountDrops)
	}
	// --tunnel-count-drops (or its YAML key) reaches ClientConfig.CountDrops.
	rc, err := resolveRun(t, "--tunnel-count-drops")
	if err != nil {
		t.Fatal(err)
	}
	counting := ok
	counting.CountDrops = rc.tunnel().CountDrops
	if cc, err := counting.clientConfig(zap.NewNop()); err != nil || !cc.CountDrops {
		t.Fatalf("--tunnel-count-drops: %v; CountDrops %v", err, cc.CountDrops)
	}
	// --tunnel-hint-rate-wait reaches ClientConfig.HintRateWait: the
	// default as given, 0 as "no wait" (negative there; 0 would be the
	// default).
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, tunnel.DefaultHintRateWait},
		{[]string{"--tunnel-hint-rate-wait", "700ms"}, 700 * time.Millisecond},
		{[]string{"--tunnel-hint-rate-wait", "0"}, -1},
	} {
		rc, err := resolveRun(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		f := ok
		f.HintRateWait = rc.tunnel().HintRateWait
		if cc, err := f.clientConfig(zap.NewNop()); err != nil || cc.HintRateWait != tc.want {
			t.Errorf("%v: %v; HintRateWait %v, want %v", tc.args, err, cc.HintRateWait, tc.want)
		}
	}
	// --tunnel-full-packets (on by default) reaches
	// ClientConfig.NoFullPackets.
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--tunnel-full-packets=false"}, true}} {
		rc, err := resolveRun(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		f := ok
		f.NoFullPackets = rc.tunnel().NoFullPackets
		if cc, err := f.clientConfig(zap.NewNop()); err != nil || cc.NoFullPackets != tc.want {
			t.Errorf("%v: %v; NoFullPackets %v, want %v", tc.args, err, cc.NoFullPackets, tc.want)
		}
	}
	for _, tc := range []struct {
		mod  func(*tunnelFlags)
		want string
	}{
		{func(f *tunnelFlags) { f.Server = "" }, "--tunnel-server"},
		{func(f *tunnelFlags) { f.Key = "" }, "--tunnel-key"},
		{func(f *tunnelFlags) { f.CA = f.Cert + ".none" }, "--tunnel-ca"},
		{func(f *tunnelFlags) { f.Key = f.CA }, "--tunnel-cert/--tunnel-key"},
	} {
		f := ok
		tc.mod(&f)
		if _, err := f.clientConfig(zap.NewNop()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want an error naming %s", err, tc.want)
		}
	}
}

// quic modes need --tunnel-server, and with it the keys; the error names
// the flag.
func TestRunCheckTunnelModes(t *testing.T) {
	dir := t.TempDir()
	if err := newKeysCmdRun(t, dir); err != nil {
		t.Fatal(err)
	}
	base := defaultRunConfig()
	base.NoRouting, base.TetherNets = true, []string{"192.168.42.0/24"}
	keys := func(c *runConfig) {
		c.TunnelServer = "127.0.0.1:4433"
		c.TunnelCA, c.TunnelCert, c.TunnelKey = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "phone-1.crt"), filepath.Join(dir, "phone-1.key")
	}
	for _, tc := range []struct {
		name string
		mod  func(*runConfig)
		want string // "" means no error
	}{
		{"default quic without server", func(c *runConfig) { c.DefaultMode = "quic" }, "--default-mode quic: mode quic needs --tunnel-server"},
		{"rule quic+m2ho without server", func(c *runConfig) { c.Flows = []string{"tcp dst-port 443 mode=quic+m2ho"} }, "--flow 1 (tcp dst-port 443 mode=quic+m2ho): mode quic+m2ho needs --tunnel-server"},
		{"server without keys", func(c *runConfig) { c.DefaultMode = "quic"; c.TunnelServer = "127.0.0.1:4433" }, "--tunnel-ca, --tunnel-cert and --tunnel-key"},
		{"bad key", func(c *runConfig) { keys(c); c.DefaultMode = "quic"; c.TunnelKey = c.TunnelCA }, "--tunnel-cert/--tunnel-key"},
		{"quic with keys", func(c *runConfig) { keys(c); c.DefaultMode = "quic" }, ""},
		{"quic+m2ho rule with keys", func(c *runConfig) { keys(c); c.Flows = []string{"tcp mode=quic+m2ho"} }, ""},
		{"no quic mode: keys not needed", func(c *runConfig) { c.TunnelServer = "127.0.0.1:4433" }, ""},
	} {
		c := base
		tc.mod(&c)
		_, _, _, err := c.check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
