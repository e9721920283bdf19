//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/m2ho/m2ho/bench/netns"
	"github.com/m2ho/m2ho/signaling"
)

// quicMigrationRace is why the tests that migrate a QUIC connection in the
// test binary itself skip under -race (proxy/tunnel/README.md, "Costs and
// limits"). The daemon tests need no skip: m2hoBinary builds without -race.
const quicMigrationRace = "quic-go v0.65 races on migration: Conn.switchToNewPath (connection.go:940, run loop, on Path.Switch) replaces c.conn without connStateMutex while Conn.ConnectionState (connection.go:790, from http3's control-stream goroutine, http3/conn.go:261) reads c.conn.capabilities(); inside quic-go, no quic-go issue found for it (the same unguarded-field class as quic-go#4228); tested without -race"

// iperfPort is the iperf3 server's port in the tunnel tests.
const iperfPort = 5302

// iperfDoc is the part of `iperf3 -c -J --get-server-output` the tunnel
// tests read beyond netns.ParseIperf3's summary: whether the sender
// reported retransmits at all, and the receiver's per-interval bytes.
type iperfDoc struct {
	End struct {
		SumSent struct {
			Retransmits *int64 `json:"retransmits"`
		} `json:"sum_sent"`
	} `json:"end"`
	// Intervals are the client's own (the receiver's with -R).
	Intervals []iperfInterval `json:"intervals"`
	// ServerOutputJSON is the server's report (the receiver's without -R).
	ServerOutputJSON *struct {
		Intervals []iperfInterval `json:"intervals"`
	} `json:"server_output_json"`
}

type iperfInterval struct {
	Sum struct {
		Start float64 `json:"start"`
		End   float64 `json:"end"`
		Bytes int64   `json:"bytes"`
	} `json:"sum"`
}

// iperfClient is one iperf3 client run from the laptop against a one-shot
// server in the server namespace.
type iperfClient struct {
	t       *testing.T
	cmd     *exec.Cmd
	srv     *exec.Cmd
	started time.Time // before the client process started: every interval starts later
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	done    chan error
}

// startIperf starts `iperf3 -s -1` in the server namespace bound to the
// server's address and, once it listens, `iperf3 -c ... -J` in the
// laptop for seconds (extra: more client flags, e.g. -R).
func startIperf(t *testing.T, c *netns.Chain, seconds int, extra ...string) *iperfClient {
	t.Helper()
	port := strconv.Itoa(iperfPort)
	ic := &iperfClient{t: t, done: make(chan error, 1)}
	ic.srv = c.Exec(netns.Server, "iperf3", "-s", "-1", "-J", "-B", c.ServerAddr4.String(), "-p", port)
	var srvOut lockedBuffer
	ic.srv.Stdout, ic.srv.Stderr = &srvOut, &srvOut
	if err := ic.srv.Start(); err != nil {
		t.Fatal(err)
	}
	srvDone := make(chan struct{})
	go func() { ic.srv.Wait(); close(srvDone) }()
	t.Cleanup(func() {
		select {
		case <-srvDone:
		case <-time.After(5 * time.Second):
			ic.srv.Process.Kill()
			<-srvDone
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, err := c.Exec(netns.Server, "ss", "-Hltn", "sport = :"+port).Output()
		if err == nil && strings.TrimSpace(string(out)) != "" {
			break
		}
		select {
		case <-srvDone:
			t.Fatalf("iperf3 -s exited at start-up: %s", srvOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("iperf3 -s not listening on %s after 10s: %s", port, srvOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	args := append([]string{"iperf3", "-c", c.ServerAddr4.String(), "-p", port, "-t", strconv.Itoa(seconds),
		"-i", "0.5", "-J", "--get-server-output"}, extra...)
	ic.cmd = c.Exec(netns.Laptop, args...)
	ic.cmd.Stdout, ic.cmd.Stderr = &ic.stdout, &ic.stderr
	ic.started = time.Now()
	if err := ic.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { ic.done <- ic.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-ic.done:
		default:
			ic.cmd.Process.Kill()
			<-ic.done
		}
	})
	return ic
}

// wait waits for the client (at most a minute) and parses its report:
// an iperf3 error, no received bytes or no retransmit count from the
// sender fail the test.
func (ic *iperfClient) wait(logs func() string) (netns.Iperf3Result, iperfDoc) {
	t := ic.t
	t.Helper()
	select {
	case err := <-ic.done:
		ic.done <- err // for the clean-up
		if err != nil {
			t.Fatalf("iperf3 -c: %v: %s\nJSON: %.2000s\n%s", err, ic.stderr.String(), ic.stdout.String(), logs())
		}
	case <-time.After(time.Minute):
		t.Fatalf("iperf3 -c still running after a minute\n%s", logs())
	}
	res, err := netns.ParseIperf3(ic.stdout.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, logs())
	}
	var doc iperfDoc
	if err := json.Unmarshal(ic.stdout.Bytes(), &doc); err != nil {
		t.Fatalf("iperf3 JSON: %v", err)
	}
	if res.ReceivedBytes <= 0 {
		t.Fatalf("iperf3: end.sum_received.bytes = %d: nothing went through\n%s", res.ReceivedBytes, logs())
	}
	if doc.End.SumSent.Retransmits == nil {
		t.Fatalf("iperf3: end.sum_sent.retransmits missing: the sender's TCP statistics did not come back")
	}
	return res, doc
}

// after is the receiver's intervals that began after at (wall clock):
// an interval's start is relative to the test's start, which came after
// ic.started, so these began after at for sure.
func (ic *iperfClient) after(ivs []iperfInterval, at time.Time) []iperfInterval {
	cut := at.Sub(ic.started).Seconds()
	var out []iperfInterval
	for _, iv := range ivs {
		if iv.Sum.Start >= cut {
			out = append(out, iv)
		}
	}
	return out
}

func tunnelArgs(c *netns.Chain, pki, mode string, extra ...string) []string {
	return append([]string{"--default-mode", mode,
		"--tunnel-server", netip.AddrPortFrom(c.ServerAddr4, 4433).String(), "--tunnel-server-name", "localhost",
		"--tunnel-ca", filepath.Join(pki, "ca.crt"), "--tunnel-cert", filepath.Join(pki, "phone-1.crt"),
		"--tunnel-key", filepath.Join(pki, "phone-1.key")}, extra...)
}

// TestTunnelIperfWithMigration is issue 10's CI test: a real iperf3
// upload (laptop -> server) through `m2ho run --default-mode quic` and
// `m2ho server`, with the phone's uplink address moving from 10.77.2.1 to
// 10.77.2.3 (old address removed, SIGHUP) once the tunnel has carried
// 3000 packets. It asserts, on counters only: iperf3 received bytes and
// the sender reported its retransmits; the phone migrated exactly once and
// never redialled, and the server saw its client move (its migration
// counter and log line name the new address), or, when quic-go could send
// no path probe (its window full of packets lost with the old address, a
// race this test lost once in CI: tunnel.ErrProbeNotSent), the phone
// redialled once from the new address and the server saw that second
// connection; and the receiver's intervals that began after the move
// carried bytes, the last full one too (the transfer did not stall).
func TestTunnelIperfWithMigration(t *testing.T) {
	needKernel(t, "iperf3", "ss")
	// No -race skip: the migrating QUIC client lives in the m2ho binary,
	// built without the race detector (m2hoBinary).
	c := newChain(t)
	run := nsRun(t, c)
	run(netns.Phone, "sysctl", "-q", "-w", "net.ipv4.conf."+netns.PhoneUplinkIf+".promote_secondaries=1")
	run(netns.Phone, "ip", "addr", "add", "10.77.2.3/24", "dev", netns.PhoneUplinkIf)
	pki := t.TempDir()
	if err := newKeysCmdRun(t, pki); err != nil {
		t.Fatal(err)
	}
	stopServer := startServerDaemon(t, c, pki)
	d := startDaemon(t, c, tunnelArgs(c, pki, "quic")...)
	logs := func() string { return "m2ho run:\n" + d.stderr.String() + "\nm2ho server:\n" + stopServer() }

	ic := startIperf(t, c, 6)
	if v, ok := d.waitMetric(`m2ho_tunnel_client_packets_total{dir="up"}`, func(v float64) bool { return v >= 3000 }, 4*time.Second); !ok {
		t.Fatalf("the tunnel carried %v packets up in 4 s, want 3000 before the address change\n%s", v, logs())
	}
	run(netns.Phone, "ip", "addr", "del", "10.77.2.1/24", "dev", netns.PhoneUplinkIf)
	d.cmd.Process.Signal(syscall.SIGHUP)
	// The tunnel moves by migration, or, when quic-go could send no path
	// probe (its window full of packets lost with the old address:
	// tunnel.ErrProbeNotSent, TestMigrateWithFullWindowOnLostPath), by a
	// redial from the new address at once. Which one is the race between
	// the address going and the probe being queued.
	var redialled bool
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m := d.metrics()
		if m[`m2ho_tunnel_client_migrations_total{outcome="ok"}`] >= 1 {
			break
		}
		if m[`m2ho_tunnel_client_migrations_total{outcome="redialled"}`] >= 1 && m[`m2ho_tunnel_client_redials_total{outcome="ok"}`] >= 1 {
			redialled = true
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("neither a migration nor a redial 10 s after the address change\n%s", logs())
		}
	}
	migrated := time.Now()
	upAtMigration := d.metrics()[`m2ho_tunnel_client_packets_total{dir="up"}`]

	res, doc := ic.wait(logs)
	t.Logf("iperf3: %d bytes received in %.1f s (%.1f Mbit/s, indicative only: loaded shared machine), %d retransmits",
		res.ReceivedBytes, res.Seconds, res.BitsPerSecond/1e6, res.Retransmits)
	if doc.ServerOutputJSON == nil || len(doc.ServerOutputJSON.Intervals) == 0 {
		t.Fatalf("iperf3 JSON without the server's intervals (--get-server-output): %.2000s", ic.stdout.String())
	}
	post := ic.after(doc.ServerOutputJSON.Intervals, migrated)
	var postBytes int64
	var lastFull *iperfInterval
	for i, iv := range post {
		postBytes += iv.Sum.Bytes
		if iv.Sum.End-iv.Sum.Start >= 0.4 {
			lastFull = &post[i]
		}
	}
	if lastFull == nil {
		t.Fatalf("no full receiver interval began after the migration (%.1f s after the client started): the test's -t is too short for this machine\nintervals: %+v",
			migrated.Sub(ic.started).Seconds(), doc.ServerOutputJSON.Intervals)
	}
	if postBytes == 0 || lastFull.Sum.Bytes == 0 {
		t.Errorf("after the migration the receiver got %d bytes, %d in its last full interval [%.1f, %.1f] s: the transfer stalled\nintervals: %+v",
			postBytes, lastFull.Sum.Bytes, lastFull.Sum.Start, lastFull.Sum.End, doc.ServerOutputJSON.Intervals)
	}
	t.Logf("migrated %.1f s after iperf3 -c started; %d receiver intervals after it, %d bytes (last full interval %d bytes)",
		migrated.Sub(ic.started).Seconds(), len(post), postBytes, lastFull.Sum.Bytes)
	m := d.metrics()
	var drops []string
	for k, v := range m {
		if strings.HasPrefix(k, "m2ho_tunnel_client_drops_total") && v > 0 {
			drops = append(drops, fmt.Sprintf("%s %v", k, v))
		}
	}
	// The inner TCP's retransmits against the phone's tunnelled packets and
	// the server's (in its stop line): DATAGRAMs quic-go discards beyond its
	// receive queue (128) are counted nowhere else.
	t.Logf("phone: tunnel packets up %v, drops %v; QUIC packets sent %v, lost %v", m[`m2ho_tunnel_client_packets_total{dir="up"}`], drops,
		m[`m2ho_tunnel_client_quic_packets_total{event="sent"}`], m[`m2ho_tunnel_client_quic_packets_total{event="lost"}`])
	if v := m[`m2ho_tunnel_client_packets_total{dir="up"}`]; v <= upAtMigration {
		t.Errorf("tunnel packets up %v at the end, %v at the migration: nothing went up after it", v, upAtMigration)
	}
	d.stop()
	out := stopServer()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "server stopped") {
			t.Logf("%s", l)
		}
	}
	if redialled {
		t.Logf("quic-go could not probe the new path (its window was full of packets lost with the old address): the tunnel redialled")
		if v := m[`m2ho_tunnel_client_redials_total{outcome="ok"}`]; v != 1 {
			t.Errorf("redials %v, want 1", v)
		}
		if v := m[`m2ho_tunnel_client_migrations_total{outcome="ok"}`]; v != 0 {
			t.Errorf("phone migrations %v besides the redial, want 0", v)
		}
		if !strings.Contains(out, "server stopped: 2 connection(s)") || !strings.Contains(out, `"remote": "10.77.2.3:`) {
			t.Errorf("the server did not see the second connection from 10.77.2.3:\n%s", out)
		}
		return
	}
	if v := m[`m2ho_tunnel_client_migrations_total{outcome="ok"}`]; v != 1 {
		t.Errorf("phone migrations %v, want 1", v)
	}
	if v := m[`m2ho_tunnel_client_redials_total{outcome="ok"}`]; v != 0 {
		t.Errorf("redials %v: the connection should have survived the address change", v)
	}
	if !strings.Contains(out, "client migrations 1\n") {
		t.Errorf("the server did not count one client migration:\n%s", out)
	}
	if !strings.Contains(out, "client migrated") || !strings.Contains(out, "10.77.2.3:") {
		t.Errorf("the server's log does not show its client moving to 10.77.2.3:\n%s", out)
	}
}

// TestTunnelIperfQUICM2HO runs an iperf3 download (-R: the server sends,
// the laptop's ACKs go up) through `m2ho run --default-mode quic+m2ho`:
// M2HO's verdicts apply to the inner TCP's uplink ACKs before they enter
// the tunnel. As in TestRunStableRate, a handover from mmWave to sub-6
// arms Eqn 2 (M2HO MobiCom'24 §4.5) and λ = 0.5 makes it bind on this
// fast path, so the controller must rewrite windows of the tunnelled
// flow; the packets must have gone through the tunnel both ways.
func TestTunnelIperfQUICM2HO(t *testing.T) {
	needKernel(t, "iperf3", "ss")
	c := newChain(t)
	pki := t.TempDir()
	if err := newKeysCmdRun(t, pki); err != nil {
		t.Fatal(err)
	}
	stopServer := startServerDaemon(t, c, pki)
	d := startDaemon(t, c, tunnelArgs(c, pki, "quic+m2ho", "--lambda", "0.5", "--signal-timeout", "2s")...)
	logs := func() string { return "m2ho run:\n" + d.stderr.String() + "\nm2ho server:\n" + stopServer() }
	f := dialFeeder(t, d)
	f.send(t, signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNChange,
		Serving: signaling.Cell{ID: "m1", Type: signaling.CellMmWave}, Target: cell88},
		signaling.Event{Kind: signaling.KindRandomAccess, RAReason: signaling.RAHandover, RAResult: signaling.RASuccess})
	f.send(t, periodic(cell88))
	if v, ok := d.waitMetric(`m2ho_state_entries_total{state="stable"}`, func(v float64) bool { return v >= 1 }, 5*time.Second); !ok {
		t.Fatalf("no return to Stable after the handover (%v)\n%s", v, logs())
	}
	// Serving-cell reports keep the signalling alive during the transfer.
	stopFeed := f.keepAlive(t, 100*time.Millisecond)
	ic := startIperf(t, c, 4, "-R")
	res, _ := ic.wait(logs)
	stopFeed()
	t.Logf("iperf3 -R: %d bytes received in %.1f s (%.1f Mbit/s, indicative only: loaded shared machine), %d retransmits",
		res.ReceivedBytes, res.Seconds, res.BitsPerSecond/1e6, res.Retransmits)
	m := d.metrics()
	// The download's data came out of the tunnel, its ACKs went into it.
	minPackets := float64(res.ReceivedBytes / 1280)
	if v := m[`m2ho_tunnel_client_packets_total{dir="down"}`]; v < minPackets {
		t.Errorf("tunnel packets down %v, want >= %v: the download did not come through the tunnel", v, minPackets)
	}
	if v := m[`m2ho_tunnel_client_packets_total{dir="up"}`]; v == 0 {
		t.Errorf("no tunnel packets up: the laptop's ACKs did not go through the tunnel")
	}
	if v := m[`m2ho_window_rewrites_total{reason="stable-rate"}`]; v == 0 {
		t.Errorf("no stable-rate window rewrites: M2HO's verdicts were not applied to the tunnelled flow's ACKs\nmetrics: %v", m)
	}
	if m["m2ho_signal_lost"] != 0 {
		t.Errorf("signal lost during the transfer: the rewrites' absence would mean nothing")
	}
	d.stop()
	if out := stopServer(); !strings.Contains(out, "server stopped: 1 connection(s), 1 session(s)") {
		t.Errorf("server output:\n%s", out)
	}
}
