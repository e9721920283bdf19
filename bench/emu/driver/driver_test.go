package driver

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/m2ho/m2ho/bench/emu"
	"github.com/m2ho/m2ho/proxy/packettest"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/tun"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// seg builds a TCP ACK segment src → dst with n bytes of payload.
func seg(src, dst string, n int) []byte {
	return packettest.TCP{Src: netip.MustParseAddrPort(src), Dst: netip.MustParseAddrPort(dst), Seq: 1, Ack: 1,
		Flags: packettest.ACK, Window: 100, Payload: make([]byte, n)}.Build()
}

func testModel(t *testing.T) *emu.Model {
	cfg := emu.DefaultConfig()
	cfg.Cells = []emu.CellSpec{
		{ID: "c1", Type: signaling.CellSub6, Capacity: emu.Mbps(50), Buffer: 1 << 20},
		{ID: "m1", Type: signaling.CellMmWave, Capacity: emu.Mbps(100), Buffer: 1 << 20},
	}
	cfg.Schedule = emu.Schedule{Start: "c1",
		Handovers:   []emu.Handover{{At: time.Second, To: "m1", Lead: 100 * time.Millisecond}, {At: 2 * time.Second, To: "c1", Lead: 50 * time.Millisecond}},
		FalseAlarms: []emu.FalseAlarm{{At: 2500 * time.Millisecond}}}
	m, err := emu.New(cfg, t0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWriteOutputs(t *testing.T) {
	m := testModel(t)
	dir := t.TempDir()
	res := &Result{
		Handovers:   m.HandoverRecords(3 * time.Second),
		FalseAlarms: m.FalseAlarmRecords(3 * time.Second),
		Capacity:    m.CapacityBins(100*time.Millisecond, 300*time.Millisecond),
		Summary:     emu.Summary{Scenario: "t", Scale: 0.5, Valid: true, Handovers: 2, LatePct: 0.25},
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
		"overflow_drops", "reorder_flushes", "flushed_holes", "false_alarms", "handovers", "dup_acks_up", "events_published", "events_dropped",
		"overflow_handovers", "handovers_from_mmwave", "overflow_handovers_from_mmwave", "flush_holes_p", "harq_fraction", "anchor_pauses", "mmwave_edges"} // drive: only for a replayed drive
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

// The batched interface over read and write: batches of 8, with the
// offload device's head-room, so a test crosses batch boundaries and
// offsets.
func (m *memIO) readBatch(bufs [][]byte, sizes []int, off int) (int, error) {
	for i, b := range bufs {
		n, err := m.read(b[off:])
		if n == 0 || err != nil {
			return i, err
		}
		sizes[i] = n
	}
	return len(bufs), nil
}

func (m *memIO) writeBatch(bufs [][]byte, off int) (int, error) {
	for i, b := range bufs {
		if err := m.write(b[off:]); err != nil {
			return i, err
		}
	}
	return len(bufs), nil
}

func (m *memIO) layout() tun.Layout {
	return tun.Layout{Headroom: tun.VirtioNetHdrLen, BufSize: bufSize}
}
func (m *memIO) batch() int { return 8 }

func TestDriverLoopInMemory(t *testing.T) {
	cfg := emu.DefaultConfig()
	cfg.RTT = 10 * time.Millisecond
	cfg.Cells = []emu.CellSpec{{ID: "c1", Type: signaling.CellSub6, Capacity: emu.Mbps(120), Buffer: 1 << 20}}
	cfg.Schedule = emu.Schedule{Start: "c1"}
	cfg.Duration = time.Second
	ue, _ := emu.ParsePrefixes([]string{"10.77.1.0/24"})
	io := &memIO{}
	d, err := newDriver(DriverConfig{Scenario: &emu.Scenario{Name: "mem", Config: cfg}, OutDir: t.TempDir(), UENets: ue}, io)
	if err != nil {
		t.Fatal(err)
	}
	m, err := emu.New(cfg, t0, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.m = m
	down := seg("10.77.3.2:5201", "10.77.1.2:40000", 1400)
	up := seg("10.77.1.2:40000", "10.77.3.2:5201", 0)
	mcast := seg("[fe80::1]:5201", "[ff02::16]:40000", 8) // multicast: not carried
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

func TestMeasuredScenarioBuildsModel(t *testing.T) {
	dir := DataDir("")
	if _, err := os.Stat(filepath.Join(dir, "m2ho-mobicom24")); err != nil {
		t.Skipf("shared data not found at %s (set M2HO_SHARED_DATA)", dir)
	}
	xcal := func(path string) ([]signaling.Event, error) {
		evs, _, _, err := ReadXCAL(path)
		return evs, err
	}
	s, err := Builtin("measured", emu.LoadOptions{XCAL: xcal})
	if err != nil {
		t.Fatal(err)
	}
	m, err := emu.New(s.Config, t0, 0)
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

func (o *orderIO) writeBatch(bufs [][]byte, off int) (int, error) {
	for i, b := range bufs {
		o.sentAtWrite = append(o.sentAtWrite, o.pub.sent.Load())
		if err := o.memIO.write(b[off:]); err != nil {
			return i, err
		}
	}
	return len(bufs), nil
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
	cfg := emu.DefaultConfig()
	cfg.Cells = []emu.CellSpec{{ID: "c1", Type: signaling.CellSub6, Capacity: emu.Mbps(100), Buffer: 1 << 20}}
	cfg.Schedule = emu.Schedule{Start: "c1"}
	cfg.Duration = time.Second
	dev := &orderIO{}
	d, err := newDriver(DriverConfig{Scenario: &emu.Scenario{Name: "order", Config: cfg}, OutDir: t.TempDir(), SignalSocket: sock}, dev)
	if err != nil {
		t.Fatal(err)
	}
	defer d.closeFiles()
	// The order is what this test checks; the 2 ms real-time bound on the
	// wait would make it depend on how busy the machine is.
	d.commandWait = time.Minute
	dev.pub = d.pub
	go d.pub.run()
	defer d.pub.close(time.Second)
	pkt := seg("10.77.3.2:5201", "10.77.1.2:40000", 1400)
	for i, kind := range []signaling.Kind{signaling.KindReport, signaling.KindHOCommand} {
		id := d.pool.get()
		d.pool.size[id] = int32(copy(d.pool.buf(id), pkt))
		d.out = append(d.out, emu.Delivery{ID: uint64(id), Size: len(pkt), Dir: emu.Down, Due: time.Now().Add(time.Hour)})
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
