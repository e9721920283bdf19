package tunnel

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/m2ho/m2ho/proxy/wave"
	"github.com/m2ho/m2ho/signaling"
)

// rateRecordingPacer applies the executed hints it gets to a Wave pacer,
// as the server's wave pacer does, and keeps them.
type rateRecordingPacer struct {
	PassThrough
	mu    sync.Mutex
	hints []Hint
	wp    *wave.Pacer
}

func (r *rateRecordingPacer) Hint(now time.Time, h Hint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hints = append(r.hints, h)
	if h.Kind == HintExecuted {
		r.wp.OnHandoverExecuted(now, h.CellType.String(), h.CEst)
	}
}

// The executed hint carries the tunnel's downlink delivery rate as the
// phone measured it (M2HO's per-RTT estimator over the datagrams it
// received after the handover), not 0: the M2HO controller's own c_est is
// 0 at "executed" (it restarts its estimate at the random access) and it
// never sees tunnelled flows. Before RateMeter every executed hint said
// c_est 0 (the server counted HintsNoRate and kept its old rate).
func TestExecutedHintCarriesDeliveredRate(t *testing.T) {
	wp, err := wave.New(wave.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rp := &rateRecordingPacer{wp: wp}
	h := startServer(t, newPKI(t, "phone-1"), func(c *ServerConfig) { c.NewPacer = func(string) Pacer { return rp } })
	c := mustDial(t, h, func(c *ClientConfig) { c.HintRateWait = 10 * time.Second })
	me := netip.AddrPortFrom(c.Addresses()[0].Addr(), 40000)

	// The downlink: batches of 10 packets every 10 ms (~1.2 MB/s), while
	// the test drains the client.
	const batch, gap = 10, 10 * time.Millisecond
	pkts := stream(b4, me, 4000, 1200, 5)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(gap)
		defer tk.Stop()
		for i := 0; i+batch <= len(pkts); i += batch {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			for _, p := range pkts[i : i+batch] {
				h.dev.Inbound <- p
			}
		}
	}()
	go func() {
		defer wg.Done()
		bufs, sizes := make([][]byte, 16), make([]int, 16)
		for i := range bufs {
			bufs[i] = make([]byte, 2000)
		}
		for {
			if _, err := c.Read(bufs, sizes, 0); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); c.Close(); wg.Wait() }()

	eventually(t, "downlink flowing with an RTT estimate", func() bool {
		return c.Stats().PacketsDown >= 5*batch && c.ConnectionStats().SmoothedRTT > 0
	})
	b0, t0 := c.Stats().BytesDown, time.Now()
	if err := c.SendHint(Hint{Kind: HintExecuted, CellType: signaling.CellSub6}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the executed hint at the pacer", func() bool { rp.mu.Lock(); defer rp.mu.Unlock(); return len(rp.hints) == 1 })
	// the delivered rate over the same stretch, measured independently
	time.Sleep(20 * gap)
	delivered := float64(c.Stats().BytesDown-b0) / time.Since(t0).Seconds()

	rp.mu.Lock()
	got := rp.hints[0].CEst
	rp.mu.Unlock()
	// One interval (the loopback RTT is below rateMinInterval, which is
	// below the gap) closes at the batch after the one that opened it, as
	// long as a batch arrives within rateMinInterval: it holds one batch's
	// bytes over one batch gap, which a loaded host stretches or shrinks
	// by up to a gap; the bound is that quantisation, a factor of 2.
	t.Logf("c_est %.0f B/s, delivered %.0f B/s (tunnel RTT %v)", got, delivered, c.ConnectionStats().SmoothedRTT)
	if !(got > delivered/2 && got < 2*delivered) {
		t.Fatalf("executed hint c_est = %.0f B/s, delivered %.0f B/s: want within a factor 2", got, delivered)
	}
	if st := c.Stats(); st.HintsRateMeasured != 1 || st.HintsRateUnknown != 0 {
		t.Fatalf("client counters: measured %d, unknown %d", st.HintsRateMeasured, st.HintsRateUnknown)
	}
	if n := wp.State().Counters.HintsNoRate; n != 0 {
		t.Fatalf("the pacer counted %d executed hints without a rate", n)
	}

	// the per-datagram receive path's part: no allocation
	if n := testing.AllocsPerRun(200, func() {
		c.rate.Sample(time.Now(), 1200, c.ConnectionStats().SmoothedRTT)
	}); n != 0 {
		t.Fatalf("RateMeter.Sample with the connection's RTT: %v allocations per datagram", n)
	}
}

// Without any delivery within HintRateWait the hint goes with c_est 0
// (unknown), counted.
func TestExecutedHintWithoutDeliveryIsUnknown(t *testing.T) {
	rp := &recordingPacer{}
	h := startServer(t, newPKI(t, "phone-1"), func(c *ServerConfig) { c.NewPacer = func(string) Pacer { return rp } })
	c := mustDial(t, h, func(c *ClientConfig) { c.HintRateWait = 30 * time.Millisecond })
	if err := c.SendHint(Hint{Kind: HintExecuted, CellType: signaling.CellMmWave}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the executed hint at the pacer", func() bool { rp.mu.Lock(); defer rp.mu.Unlock(); return len(rp.hints) == 1 })
	if rp.hints[0].CEst != 0 {
		t.Fatalf("c_est %v without any delivery", rp.hints[0].CEst)
	}
	if st := c.Stats(); st.HintsRateMeasured != 0 || st.HintsRateUnknown != 1 {
		t.Fatalf("client counters: measured %d, unknown %d", st.HintsRateMeasured, st.HintsRateUnknown)
	}
}

// RateMeter: M2HO's per-RTT rule, Restart forgets, Fresh fires at the first closed interval.
func TestRateMeterRestart(t *testing.T) {
	var m RateMeter
	t0 := time.Unix(0, 0)
	fresh := m.Restart()
	m.Sample(t0, 1000, 10*time.Millisecond)
	m.Sample(t0.Add(5*time.Millisecond), 1000, 10*time.Millisecond)
	select {
	case <-fresh:
		t.Fatal("fresh before an RTT-long interval closed")
	default:
	}
	m.Sample(t0.Add(10*time.Millisecond), 1000, 10*time.Millisecond)
	select {
	case <-fresh:
	default:
		t.Fatal("not fresh after the first interval closed")
	}
	if r := m.Rate(); r != 2000/0.010 {
		t.Fatalf("rate %v, want 2 packets per 10 ms", r)
	}
	m.Restart()
	if m.Rate() != 0 {
		t.Fatal("Restart kept the old cell's rate")
	}
	if n := testing.AllocsPerRun(100, func() { m.Sample(t0, 1200, time.Millisecond) }); n != 0 {
		t.Fatalf("Sample: %v allocations", n)
	}
}

// An RTT below rateMinInterval measures over rateMinInterval: a 10-packet
// bunch spread over 1 ms with a 0.2 ms RTT, every 10 ms, is 1.2 MB/s, not
// the bunch's 12 MB/s (what the RTT-long interval read: 5 packets in
// 0.5 ms).
func TestRateMeterMinInterval(t *testing.T) {
	var m RateMeter
	t0 := time.Unix(0, 0)
	m.Restart()
	for b := range 3 {
		for i := range 10 {
			m.Sample(t0.Add(time.Duration(b)*10*time.Millisecond+time.Duration(i)*100*time.Microsecond), 1200, 200*time.Microsecond)
		}
	}
	if r := m.Rate(); r < 0.6e6 || r > 2.4e6 {
		t.Fatalf("rate %.0f B/s over 10-packet bunches every 10 ms (1.2 MB/s): the interval followed the 0.2 ms RTT", r)
	}
}
