package emu

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// ipv4 builds an IPv4 packet src → dst carrying proto and payload.
func ipv4(src, dst string, proto byte, payload []byte) []byte {
	p := make([]byte, 20+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
	p[8], p[9] = 64, proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(p[12:16], s[:])
	copy(p[16:20], d[:])
	copy(p[20:], payload)
	return p
}

func ipv6(src, dst string, proto byte, payload []byte) []byte {
	p := make([]byte, 40+len(payload))
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:6], uint16(len(payload)))
	p[6], p[7] = proto, 64
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(p[8:24], s[:])
	copy(p[24:40], d[:])
	copy(p[40:], payload)
	return p
}

// tcpSeg is a TCP header (no options) plus data.
func tcpSeg(sp, dp uint16, ack uint32, flags byte, win uint16, data int) []byte {
	h := make([]byte, 20+data)
	binary.BigEndian.PutUint16(h[0:2], sp)
	binary.BigEndian.PutUint16(h[2:4], dp)
	binary.BigEndian.PutUint32(h[8:12], ack)
	h[12] = 5 << 4
	h[13] = flags
	binary.BigEndian.PutUint16(h[14:16], win)
	return h
}

const flagACK, flagSYN, flagFIN = 0x10, 0x02, 0x01

func TestClassifierDir(t *testing.T) {
	ue, err := ParsePrefixes([]string{"10.77.1.0/24,10.77.2.0/24", "fd77:1::/64", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	c := Classifier{UE: ue}
	for _, tc := range []struct {
		name string
		p    []byte
		dir  Dir
		ok   bool
	}{
		{"to laptop", ipv4("10.77.3.2", "10.77.1.2", 6, nil), Down, true},
		{"to phone", ipv4("10.77.3.2", "10.77.2.1", 6, nil), Down, true},
		{"to host prefix", ipv4("10.77.3.2", "192.0.2.7", 17, nil), Down, true},
		{"beside host prefix", ipv4("10.77.3.2", "192.0.2.8", 17, nil), Up, true},
		{"to server", ipv4("10.77.1.2", "10.77.3.2", 6, nil), Up, true},
		{"v6 to laptop", ipv6("fd77:3::2", "fd77:1::2", 6, nil), Down, true},
		{"v6 to server", ipv6("fd77:1::2", "fd77:3::2", 6, nil), Up, true},
		{"v6 multicast", ipv6("fe80::1", "ff02::16", 58, nil), 0, false},
		{"v6 link-local", ipv6("fe80::1", "fe80::2", 58, nil), 0, false},
		{"v4 multicast", ipv4("10.77.1.2", "224.0.0.251", 17, nil), 0, false},
		{"truncated", ipv4("10.77.1.2", "10.77.3.2", 6, nil)[:19], 0, false},
		{"not ip", []byte{0x00, 1, 2, 3}, 0, false},
		{"empty", nil, 0, false},
	} {
		d, ok := c.Dir(tc.p)
		if d != tc.dir || ok != tc.ok {
			t.Errorf("%s: got %v %v, want %v %v", tc.name, d, ok, tc.dir, tc.ok)
		}
	}
	if _, err := ParsePrefixes([]string{"10.77.1.0/33"}); err == nil || !strings.Contains(err.Error(), "10.77.1.0/33") {
		t.Errorf("bad prefix error %v", err)
	}
}

func TestRoutePrefixes(t *testing.T) {
	out := "10.77.1.0/24 via 10.77.2.1 proto static\n10.77.2.0/24 proto kernel scope link src 10.77.2.2\ndefault via 10.77.2.1\n" +
		"fd77:2::/64 proto kernel metric 256 pref medium\nfe80::/64 proto kernel metric 256 pref medium\n" +
		"198.51.100.4 via 10.77.2.1\nmulticast ff00::/8 table local\nnonsense\n"
	got := FormatPrefixes(RoutePrefixes(out))
	if want := "10.77.1.0/24,10.77.2.0/24,fd77:2::/64,198.51.100.4/32"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestDupAckCounter(t *testing.T) {
	const lap, srv = "10.77.1.2", "10.77.3.2"
	ack := func(a uint32, win uint16) []byte { return ipv4(lap, srv, 6, tcpSeg(40000, 5201, a, flagACK, win, 0)) }
	steps := []struct {
		name string
		p    []byte
		dup  bool
	}{
		{"first ack of the flow", ack(1000, 500), false},
		{"duplicate", ack(1000, 500), true},
		{"duplicate again", ack(1000, 500), true},
		{"window update is not a dup", ack(1000, 600), false},
		{"dup after window update", ack(1000, 600), true},
		{"new ack", ack(2000, 600), false},
		{"data carrying the same ack", ipv4(lap, srv, 6, tcpSeg(40000, 5201, 2000, flagACK, 600, 100)), false},
		{"pure ack after it", ack(2000, 600), true},
		{"FIN is not a dup", ipv4(lap, srv, 6, tcpSeg(40000, 5201, 2000, flagACK|flagFIN, 600, 0)), false},
		{"other flow first", ipv4(lap, srv, 6, tcpSeg(40001, 5201, 2000, flagACK, 600, 0)), false},
		{"SYN", ipv4(lap, srv, 6, tcpSeg(40002, 5201, 0, flagSYN, 600, 0)), false},
		{"no ACK flag", ipv4(lap, srv, 6, tcpSeg(40000, 5201, 2000, 0, 600, 0)), false},
		{"udp", ipv4(lap, srv, 17, make([]byte, 20)), false},
		{"truncated tcp", ipv4(lap, srv, 6, make([]byte, 10)), false},
		{"v6 first", ipv6("fd77:1::2", "fd77:3::2", 6, tcpSeg(40000, 5201, 7, flagACK, 9, 0)), false},
		{"v6 dup", ipv6("fd77:1::2", "fd77:3::2", 6, tcpSeg(40000, 5201, 7, flagACK, 9, 0)), true},
	}
	var c DupAckCounter
	want := int64(0)
	for _, s := range steps {
		if got := c.Observe(s.p); got != s.dup {
			t.Errorf("%s: dup %v, want %v", s.name, got, s.dup)
		}
		if s.dup {
			want++
		}
	}
	if c.Dups != want {
		t.Errorf("Dups %d, want %d", c.Dups, want)
	}
	p := ack(2000, 600)
	if a := testing.AllocsPerRun(1000, func() { c.Observe(p) }); a != 0 {
		t.Errorf("Observe allocates %v per packet", a)
	}
	full := DupAckCounter{MaxFlows: 1}
	full.Observe(ack(1, 1))
	other := ipv4(lap, srv, 6, tcpSeg(1, 2, 5, flagACK, 1, 0))
	full.Observe(other)
	if full.Observe(other) || full.Dups != 0 {
		t.Error("a flow beyond MaxFlows was tracked")
	}
}

func FuzzDupAckCounter(f *testing.F) {
	f.Add(ipv4("10.0.0.1", "10.0.0.2", 6, tcpSeg(1, 2, 3, flagACK, 4, 0)))
	f.Add(ipv6("fd00::1", "fd00::2", 6, tcpSeg(1, 2, 3, flagACK, 4, 0)))
	f.Add([]byte{0x4f, 0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		var c DupAckCounter
		c.Observe(p)
		c.Observe(p)
		(&Classifier{}).Dir(p)
	})
}

func testModel(t *testing.T) *Model {
	cfg := DefaultConfig()
	cfg.Cells = []CellSpec{
		{ID: "c1", Type: signaling.CellSub6, Capacity: Mbps(50), Buffer: 1 << 20},
		{ID: "m1", Type: signaling.CellMmWave, Capacity: Mbps(100), Buffer: 1 << 20},
	}
	cfg.Schedule = Schedule{Start: "c1",
		Handovers:   []Handover{{At: time.Second, To: "m1", Lead: 100 * time.Millisecond}, {At: 2 * time.Second, To: "c1", Lead: 50 * time.Millisecond}},
		FalseAlarms: []FalseAlarm{{At: 2500 * time.Millisecond}}}
	m, err := New(cfg, t0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRecordsAndCapacityBins(t *testing.T) {
	m := testModel(t)
	// 33 ms command→execution + 27 ms interruption: blocked 60 ms.
	hos := m.HandoverRecords(3 * time.Second)
	if len(hos) != 2 || hos[0].Report != 900*time.Millisecond || hos[0].Command != time.Second || hos[0].RA != 1060*time.Millisecond ||
		hos[0].TypeName() != "sub6-to-mmwave" || hos[1].TypeName() != "mmwave-to-sub6" || hos[1].From.ID != "m1" {
		t.Fatalf("handovers %+v", hos)
	}
	if n := len(m.HandoverRecords(1500 * time.Millisecond)); n != 1 {
		t.Errorf("handovers by 1.5 s: %d", n)
	}
	if fa := m.FalseAlarmRecords(3 * time.Second); len(fa) != 1 || fa[0].Report != 2500*time.Millisecond || fa[0].A1 != 2620*time.Millisecond {
		t.Errorf("false alarms %+v", fa)
	}
	if fa := m.FalseAlarmRecords(2600 * time.Millisecond); len(fa) != 0 {
		t.Errorf("false alarm before its A1: %+v", fa)
	}
	bins := m.CapacityBins(100*time.Millisecond, 2950*time.Millisecond)
	if len(bins) != 30 {
		t.Fatalf("%d bins", len(bins))
	}
	for i, want := range map[int]struct {
		mbps float64
		cell string
	}{
		0: {50, "c1"}, 9: {50, "c1"},
		10: {40, "m1"}, // blocked 1.00-1.06, then 100 Mbps
		11: {100, "m1"}, 19: {100, "m1"},
		20: {20, "c1"}, // blocked 2.00-2.06, then 50 Mbps
		21: {50, "c1"},
		29: {50, "c1"}, // a short last bin is averaged over its own length
	} {
		if b := bins[i]; b.Mbps < want.mbps-1e-6 || b.Mbps > want.mbps+1e-6 || b.Cell.ID != want.cell || b.Start != time.Duration(i)*100*time.Millisecond {
			t.Errorf("bin %d: %+v, want %v Mbps on %s", i, b, want.mbps, want.cell)
		}
	}
	// A run cut during an interruption names the target, at 0 Mbps.
	cut := m.CapacityBins(100*time.Millisecond, 1030*time.Millisecond)
	if last := cut[len(cut)-1]; last.Mbps != 0 || last.Cell.ID != "m1" {
		t.Errorf("cut during a handover: %+v", last)
	}
}

func TestWriteOutputs(t *testing.T) {
	m := testModel(t)
	dir := t.TempDir()
	res := &Result{
		Handovers:   m.HandoverRecords(3 * time.Second),
		FalseAlarms: m.FalseAlarmRecords(3 * time.Second),
		Capacity:    m.CapacityBins(100*time.Millisecond, 300*time.Millisecond),
		Summary:     Summary{Scenario: "t", Scale: 0.5, Valid: true, Handovers: 2, LatePct: 0.25},
	}
	if err := WriteOutputs(dir, res); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := read("handovers.tsv"), "report_s\tcommand_s\tra_s\tfrom\tto\ttype\toverflow_drops\tflushed_holes\tflushed_early\n"+
		"0.900000\t1.000000\t1.060000\tc1\tm1\tsub6-to-mmwave\t0\t0\t0\n1.950000\t2.000000\t2.060000\tm1\tc1\tmmwave-to-sub6\t0\t0\t0\n"; got != want {
		t.Errorf("handovers.tsv:\n%s\nwant\n%s", got, want)
	}
	if got, want := read("falsealarms.tsv"), "report_s\ta1_s\n2.500000\t2.620000\n"; got != want {
		t.Errorf("falsealarms.tsv %q", got)
	}
	if got, want := read("capacity.tsv"), "t_s\tmbps\tcell\ttype\n0.000\t50.000\tc1\tsub6\n0.100\t50.000\tc1\tsub6\n0.200\t50.000\tc1\tsub6\n"; got != want {
		t.Errorf("capacity.tsv %q", got)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(read("emulator.json")), &raw); err != nil {
		t.Fatal(err)
	}
	keys := []string{"scenario", "scale", "start_unix_ns", "duration_s", "valid", "late_pct", "max_late_ms", "delivered_packets",
		"overflow_drops", "reorder_flushes", "flushed_holes", "false_alarms", "handovers", "dup_acks_up", "events_published", "events_dropped"}
	if len(raw) != len(keys) {
		t.Errorf("emulator.json has %d keys, want %d: %v", len(raw), len(keys), raw)
	}
	for _, k := range keys {
		if _, ok := raw[k]; !ok {
			t.Errorf("emulator.json lacks %q", k)
		}
	}
	if raw["scale"] != 0.5 || raw["valid"] != true || raw["handovers"] != 2.0 {
		t.Errorf("emulator.json %v", raw)
	}
}

// memIO is an in-memory packet device: reads pop rx, writes append to tx.
type memIO struct {
	rx [][]byte
	rh int
	tx [][]byte
	wb [][]byte // reusable write buffers
}

func (m *memIO) wait(time.Time) error { return nil }

func (m *memIO) read(b []byte) (int, error) {
	if m.rh == len(m.rx) {
		m.rx, m.rh = m.rx[:0], 0
		return 0, nil
	}
	m.rh++
	return copy(b, m.rx[m.rh-1]), nil
}

func (m *memIO) write(b []byte) error {
	if len(m.wb) > 0 {
		w := m.wb[len(m.wb)-1][:0]
		m.wb = m.wb[:len(m.wb)-1]
		m.tx = append(m.tx, append(w, b...))
		return nil
	}
	m.tx = append(m.tx, append([]byte(nil), b...))
	return nil
}

func TestDriverLoopInMemory(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RTT = 10 * time.Millisecond
	cfg.Cells = []CellSpec{{ID: "c1", Type: signaling.CellSub6, Capacity: Mbps(120), Buffer: 1 << 20}}
	cfg.Schedule = Schedule{Start: "c1"}
	cfg.Duration = time.Second
	ue, _ := ParsePrefixes([]string{"10.77.1.0/24"})
	io := &memIO{}
	d, err := newDriver(DriverConfig{Scenario: &Scenario{Name: "mem", Config: cfg}, OutDir: t.TempDir(), UENets: ue}, io)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, t0, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.m = m
	down := ipv4("10.77.3.2", "10.77.1.2", 6, tcpSeg(5201, 40000, 1, flagACK, 100, 1400))
	up := ipv4("10.77.1.2", "10.77.3.2", 6, tcpSeg(40000, 5201, 1, flagACK, 100, 0))
	mcast := ipv6("fe80::1", "ff02::16", 58, make([]byte, 8))
	// Per ms: one 1460-byte packet down (the link carries 15000 B/ms),
	// an ACK up (the same ACK, so all but the first are duplicates).
	step := func(ms int) {
		now := t0.Add(time.Duration(ms) * time.Millisecond)
		io.rx = append(io.rx, down, up)
		if err := d.ingest(now); err != nil {
			t.Fatal(err)
		}
		m.Step(now, &d.out, &d.ev)
		d.flush()
	}
	for ms := range 200 {
		step(ms)
	}
	io.rx = append(io.rx, mcast)
	step(200)
	// Downlink: 5 ms one-way + ≤1 slot; uplink 5 ms: everything sent by
	// 190 ms is out by 200 ms.
	var nd, nu int
	for _, p := range io.tx {
		switch {
		case bytes.Equal(p, down):
			nd++
		case bytes.Equal(p, up):
			nu++
		default:
			t.Fatalf("wrote a packet that was never sent: % x", p[:20])
		}
	}
	if nd < 190 || nu < 190 || nd > 201 || nu > 201 {
		t.Errorf("delivered %d down, %d up of 201 each", nd, nu)
	}
	if d.st.DupAcks != int64(nu-1) || d.st.Ignored != 1 || d.published == 0 {
		t.Errorf("stats %+v, published %d", d.st, d.published)
	}
	// Steady state: per packet in and out, nothing is allocated.
	io.wb = make([][]byte, 0, 4096)
	for range 4096 {
		io.wb = append(io.wb, make([]byte, 0, 2048))
	}
	io.tx = make([][]byte, 0, 4096)
	ms := 201
	allocs := testing.AllocsPerRun(500, func() {
		step(ms)
		ms++
		for _, p := range io.tx {
			io.wb = append(io.wb, p)
		}
		io.tx = io.tx[:0]
	})
	if allocs != 0 {
		t.Errorf("%v allocations per packet pair", allocs)
	}
	d.closeFiles()
}

func TestFromEventsSkipsNonHandovers(t *testing.T) {
	d := time.Date(0, 1, 1, 10, 0, 0, 0, time.UTC)
	evs := []signaling.Event{
		{Time: d, Kind: signaling.KindHOCommand, Target: signaling.Cell{ID: "a", Type: signaling.CellSub6}},
		{Time: d.Add(2 * time.Second), Kind: signaling.KindHOCommand, Target: signaling.Cell{ID: "a", Type: signaling.CellSub6}}, // same cell
		{Time: d.Add(4 * time.Second), Kind: signaling.KindHOCommand, Target: signaling.Cell{ID: "b", Type: signaling.CellMmWave}},
		{Time: d.Add(4*time.Second + 50*time.Millisecond), Kind: signaling.KindHOCommand, Target: signaling.Cell{ID: "c", Type: signaling.CellSub6}}, // too soon
		{Time: d.Add(6 * time.Second), Kind: signaling.KindHOCommand, Target: signaling.Cell{ID: "c", Type: signaling.CellSub6}},
	}
	s := FromEvents(evs, func(x time.Time) time.Duration { return x.Sub(d) }, time.Second)
	var got []string
	for _, h := range s.Handovers {
		got = append(got, h.To)
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Errorf("handovers to %v, want a,b,c", got)
	}
}

func TestMeasuredScenarioBuildsModel(t *testing.T) {
	dir := DataDir("")
	if _, err := os.Stat(filepath.Join(dir, "m2ho-mobicom24")); err != nil {
		t.Skipf("shared data not found at %s (set M2HO_SHARED_DATA)", dir)
	}
	xcal := func(path string) ([]signaling.Event, error) {
		evs, _, errs := signaling.ReadAll(path, signaling.FormatXCAL)
		for _, err := range errs {
			var pe *signaling.ParseError
			if !errors.As(err, &pe) {
				return nil, err
			}
		}
		return evs, nil
	}
	s, err := Builtin("measured", LoadOptions{XCAL: xcal})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(s.Config, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.HandoverRecords(s.Config.Duration)); n == 0 {
		t.Error("the measured drive has no handovers")
	}
}

// orderIO records, at each packet write, how many events the publisher
// had written to the signalling socket.
type orderIO struct {
	memIO
	pub         *publisher
	sentAtWrite []int64
}

func (o *orderIO) write(b []byte) error {
	o.sentAtWrite = append(o.sentAtWrite, o.pub.sent.Load())
	return o.memIO.write(b)
}

// TestFlushPublishesCommandBeforePackets: the packets of a step with a
// handover command (the reordering flush) are written only once the
// command is on the signalling socket, so the proxy can know of the
// command before the laptop's duplicate ACKs for the flushed holes reach
// it (as on a phone, where the UE flushes because it got the command).
func TestFlushPublishesCommandBeforePackets(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	cfg := DefaultConfig()
	cfg.Cells = []CellSpec{{ID: "c1", Type: signaling.CellSub6, Capacity: Mbps(100), Buffer: 1 << 20}}
	cfg.Schedule = Schedule{Start: "c1"}
	cfg.Duration = time.Second
	dev := &orderIO{}
	d, err := newDriver(DriverConfig{Scenario: &Scenario{Name: "order", Config: cfg}, OutDir: t.TempDir(), SignalSocket: sock}, dev)
	if err != nil {
		t.Fatal(err)
	}
	defer d.closeFiles()
	dev.pub = d.pub
	go d.pub.run()
	defer d.pub.close(time.Second)
	seg := ipv4("10.77.3.2", "10.77.1.2", 6, tcpSeg(5201, 40000, 1, flagACK, 100, 1400))
	for i, kind := range []signaling.Kind{signaling.KindReport, signaling.KindHOCommand} {
		id := d.pool.get()
		d.pool.size[id] = int32(copy(d.pool.buf(id), seg))
		d.out = append(d.out, Delivery{ID: uint64(id), Size: len(seg), Dir: Down, Due: time.Now().Add(time.Hour)})
		d.ev = append(d.ev, signaling.Event{Kind: kind, Time: t0})
		d.flush()
		if kind == signaling.KindHOCommand && dev.sentAtWrite[i] != int64(i+1) {
			t.Errorf("the flushed packet was written with %d of %d events on the socket", dev.sentAtWrite[i], i+1)
		}
	}
	if len(dev.tx) != 2 || d.published != 2 {
		t.Errorf("%d packets written, %d events published; want 2 and 2", len(dev.tx), d.published)
	}
}
