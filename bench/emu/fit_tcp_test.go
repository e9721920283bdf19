package emu

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// measuredSenderLogs pairs each artifact sender log with the XCAL log of
// its drive (aligned by timestamps, the closest start of its directory).
func measuredSenderLogs(t *testing.T) ([]*SenderLog, []ServingTimeline, []string) {
	root := filepath.Join(testDataDir(), "m2ho-mobicom24", "measurements")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("shared data absent (%s): the recorded constants stand in", root)
	}
	a, _ := filepath.Glob(filepath.Join(root, "*", "*", "iperf-sender-tcp-*.log"))
	b, _ := filepath.Glob(filepath.Join(root, "*", "*", "iperf-server-tcp-*.log"))
	var logs []*SenderLog
	var tls []ServingTimeline
	var names []string
	for _, p := range append(a, b...) {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ParseSenderLog(p, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		th, err := l.Throughput()
		if err != nil {
			t.Fatal(err)
		}
		xs, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "*.csv"))
		best, bestStart := -1, math.Inf(1)
		var tl ServingTimeline
		for i, x := range xs {
			evs := xcalEvents(t, x)
			if len(evs) == 0 {
				continue
			}
			since, al := AlignDrive(evs, th)
			if al.Mode != AlignTimestamps || math.Abs(al.XCALStartS) >= bestStart {
				continue
			}
			best, bestStart = i, math.Abs(al.XCALStartS)
			tl = NewServingTimeline(evs, since)
		}
		if best < 0 {
			t.Logf("%s: no XCAL log of its drive", filepath.Base(p))
			continue
		}
		logs, tls, names = append(logs, l), append(tls, tl), append(names, filepath.Base(p)+" / "+filepath.Base(xs[best]))
	}
	return logs, tls, names
}

// The recorded MeasuredTCP and MeasuredHandoverCuts are what
// TCPSenderStats finds in the artifact's sender logs.
func TestMeasuredTCPSenderStats(t *testing.T) {
	logs, tls, names := measuredSenderLogs(t)
	if len(logs) != 5 {
		t.Fatalf("%d sender logs with an XCAL log of their drive (%v), want 5", len(logs), names)
	}
	acc := map[signaling.CellType]*TCPStats{}
	var hos []TCPHandover
	for i, l := range logs {
		TCPSenderStats(l, tls[i], acc, &hos)
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	for ty, want := range MeasuredTCP {
		a := acc[ty]
		a.Finish(ty)
		got := MeasuredTCPType{Seconds: a.Seconds, Mbps: a.Mbps, RTTP10: ms(a.RTTP10), RTTP50: ms(a.RTTP50), RTTP90: ms(a.RTTP90),
			EmptyQueueShare: a.EmptyQueueShare, InflightP50: a.InflightP50, CutsOutsidePerMin: float64(a.CutsOutside) / a.SecondsOutside * 60,
			TailDrops: len(a.TailDrops), QueueP50KB: float64(a.QueueP50) / 1000, DelayP50: ms(a.DelayP50), RateP50: a.RateP50}
		for _, c := range []struct {
			name      string
			got, want float64
			tol       float64
		}{{"seconds", got.Seconds, want.Seconds, 0.1}, {"Mbps", got.Mbps, want.Mbps, 0.1}, {"sRTT p10", got.RTTP10, want.RTTP10, 0.1},
			{"sRTT p50", got.RTTP50, want.RTTP50, 0.1}, {"sRTT p90", got.RTTP90, want.RTTP90, 0.1}, {"empty-queue share", got.EmptyQueueShare, want.EmptyQueueShare, 0.001},
			{"inflight/cwnd", got.InflightP50, want.InflightP50, 0.01}, {"cuts outside handovers per min", got.CutsOutsidePerMin, want.CutsOutsidePerMin, 0.05},
			{"tail drops", float64(got.TailDrops), float64(want.TailDrops), 0}, {"queue at tail drop p50 (KB)", got.QueueP50KB, want.QueueP50KB, 1},
			{"queueing delay at tail drop p50 (ms)", got.DelayP50, want.DelayP50, 0.1}, {"rate at tail drop p50 (Mbit/s)", got.RateP50, want.RateP50, 0.1}} {
			if math.Abs(c.got-c.want) > c.tol {
				t.Errorf("%v %s: %.4f, recorded %.4f", ty, c.name, c.got, c.want)
			}
		}
		t.Logf("%v: %+v", ty, got)
	}
	cuts := map[string][2]int{}
	for _, h := range hos {
		c := cuts[h.Key]
		if h.Cut {
			c[0]++
		}
		c[1]++
		cuts[h.Key] = c
	}
	if !reflect.DeepEqual(cuts, MeasuredHandoverCuts) {
		t.Errorf("cuts at handovers by type: %v, recorded %v", cuts, MeasuredHandoverCuts)
	}
}

// TCPSenderStats on a made-up log: a flow at 80 Mbit/s whose sRTT says a
// 40 ms queue, one tail drop between handovers and one cut right after
// the handover command.
func TestFitTCPSenderStats(t *testing.T) {
	l := &SenderLog{}
	const iv = 100 * time.Millisecond
	for i := range 200 {
		s := SenderSample{Start: time.Duration(i) * iv, End: time.Duration(i+1) * iv, Bytes: 1e6, RTT: 70 * time.Millisecond, Cwnd: 700000}
		switch i {
		case 49: // the queue at its fullest before the tail drop
			s.RTT = 130 * time.Millisecond
			s.Cwnd = 1300000
		case 50:
			s.Retransmits, s.Cwnd = 1, 600000
		case 151: // after the command at 15 s: a burst of losses
			s.Retransmits, s.Cwnd = 40, 300000
		}
		if i < 10 {
			s.RTT = 30 * time.Millisecond // the first second: empty queue
		}
		l.Samples = append(l.Samples, s)
	}
	tl := ServingTimeline{first: signaling.CellSub6, at: []time.Duration{15 * time.Second}, types: []signaling.CellType{signaling.CellSub6}}
	acc := map[signaling.CellType]*TCPStats{}
	var hos []TCPHandover
	TCPSenderStats(l, tl, acc, &hos)
	a := acc[signaling.CellSub6]
	a.Finish(signaling.CellSub6)
	if a.Intervals != 200 || math.Abs(a.Mbps-80) > 1e-9 || a.RTTMin != 30*time.Millisecond || a.RTTP50 != 70*time.Millisecond {
		t.Fatalf("intervals %d Mbps %v sRTT min %v p50 %v", a.Intervals, a.Mbps, a.RTTMin, a.RTTP50)
	}
	if a.EmptyQueueShare != 0.05 { // 10 of 200 within 10 ms of 27.1 ms
		t.Fatalf("empty-queue share %v", a.EmptyQueueShare)
	}
	// 1 s windows: 10 MB/s x 70 ms / 700 KB = 1
	if a.InflightP50 < 0.99 || a.InflightP50 > 1.01 {
		t.Fatalf("inflight/cwnd %v", a.InflightP50)
	}
	if a.Cuts != 2 || a.CutsOutside != 1 || len(a.TailDrops) != 1 {
		t.Fatalf("cuts %d outside %d tail drops %v", a.Cuts, a.CutsOutside, a.TailDrops)
	}
	td := a.TailDrops[0]
	// queue = 1.3 MB x (130-30)/130
	if td.Delay != 100*time.Millisecond || td.Queue != 1000000 || td.At != 5100*time.Millisecond {
		t.Fatalf("tail drop %+v", td)
	}
	if len(hos) != 1 || !hos[0].Cut || hos[0].Retx != 40 || hos[0].Key != "sub6-sub6" || hos[0].Cwnd != 700000 {
		t.Fatalf("handovers %+v", hos)
	}
}

// The same evening's UDP saturation logs (2023-02-13, 1 s intervals, no
// XCAL log of their drives), typed by level: the sub-6 capacity while the
// TCP sender logs of that evening ran at 114.8 Mbit/s with a standing
// queue.
func TestMeasuredSameEveningSub6Capacity(t *testing.T) {
	root := filepath.Join(testDataDir(), "m2ho-mobicom24", "measurements", "202302", "13")
	logs, _ := filepath.Glob(filepath.Join(root, "udp-bw-recv-*.log"))
	if len(logs) == 0 {
		t.Skipf("shared data absent (%s): CALIBRATION.md records 185.9 Mbit/s over 166 s", root)
	}
	var sum float64
	var n int
	for _, p := range logs {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		ip, err := ParseIperf3UDP(p, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range Sub6ByLevel(ip.Series, time.Second, 350, 5, 2) {
			sum += x
			n++
		}
	}
	if n != 166 || math.Abs(sum/float64(n)-185.9) > 0.05 {
		t.Fatalf("sub-6 by level: %d s at %.2f Mbit/s; CALIBRATION.md records 166 s at 185.9", n, sum/float64(n))
	}
}

func TestFitSub6ByLevel(t *testing.T) {
	mbps := []float64{50, 100, 200, 210, 1000, 1200, 190, 180, 170, 160, 150, 900, 100, 100}
	ends := make([]time.Duration, len(mbps))
	segs := make([]int64, len(mbps))
	for i, m := range mbps {
		ends[i], segs[i] = time.Duration(i+1)*time.Second, int64(m*1e6/8)
	}
	s, err := NewSeries(ends, segs)
	if err != nil {
		t.Fatal(err)
	}
	// skip 2; run [2,4) is 2 long (< 3); run [6,11) drops its two edges; run [12,14) too short
	got := Sub6ByLevel(s, time.Second, 350, 3, 2)
	if !reflect.DeepEqual(got, []float64{180, 170, 160}) {
		t.Fatalf("%v", got)
	}
}

// The built-in scenarios' sub-6 buffers are the measured one: the queue
// at the artifact's TCP tail drops (MeasuredTCP), and a replayed drive's
// default (MeasuredBufferSub6) is the same figure.
func TestMeasuredSub6BufferFromTailDrops(t *testing.T) {
	want := int64(MeasuredTCP[signaling.CellSub6].QueueP50KB * 1000)
	if MeasuredBufferSub6 != want {
		t.Fatalf("MeasuredBufferSub6 %d, the tail drops' median queue %d", MeasuredBufferSub6, want)
	}
	for _, name := range []string{"mixed-drive", "steady"} {
		sc, err := Builtin(name, LoadOptions{Duration: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range sc.Config.Cells {
			if c.Type == signaling.CellSub6 {
				n++
				if c.Buffer != want {
					t.Errorf("%s %s: buffer %d, want %d", name, c.ID, c.Buffer, want)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no sub-6 cell", name)
		}
	}
}

// ParseSenderLog refuses bad logs with an error naming the file, never
// panics, and what it accepts has increasing interval ends.
func FuzzParseSenderLog(f *testing.F) {
	f.Add(`{"start":{"timestamp":{"timesecs":1676356232}},"intervals":[{"streams":[{"start":0,"end":0.1,"bytes":1000,"retransmits":0,"rtt":51495,"snd_cwnd":22016}]}]}`)
	f.Add(`{"intervals":[{"streams":[{"start":0,"end":0.1,"bytes":1}]},{"streams":[{"start":0.1,"end":0.1,"bytes":1}]}]}`)
	f.Add(`{"intervals":[{"streams":[]}]}`)
	f.Add(`{"intervals":[{"streams":[{"start":-1e300,"end":0.1,"bytes":-1}]}]}`)
	f.Add(`{"intervals":`)
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseSenderLog("x.log", strings.NewReader(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "x.log") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		var prev time.Duration
		for i, x := range l.Samples {
			if x.End <= prev || x.Start < 0 || x.Bytes < 0 || x.RTT < 0 || x.Cwnd < 0 {
				t.Fatalf("sample %d accepted: %+v", i, x)
			}
			prev = x.End
		}
	})
}
