package wave

import (
	"testing"
	"time"
)

// The real stack's ACK trains (bench low-bdp and high-bdp, 50 Mbit/s, on
// this shared 2-core host, quic-wave before the ATD filter): a 10-packet
// burst leaves the emulated 50 Mbit/s bottleneck 2.16 ms long, but the
// dispersion the server's quic-go tracer timestamps had a median of
// 5.5 ms (10th percentile 2.9 ms, 95th 23 ms, 1005 bursts; under heavier
// load medians of 10-30 ms): the ACK frames are stamped when the
// server's connection goroutine gets to them, after the phone's got to
// the data, on processes that share two cores with the emulator and the
// iperf3 ends. Trains come back stretched far more often than
// compressed. Wave's tracking (TxTime = the last train's ATD + ΔRTT/2)
// then sets the rate from whatever the last train measured: the pacer ran
// at ~10 Mbit/s of 50.
//
// Two noise models on virtual time:
//   - stall: the receiver's goroutine is off the CPU for up to 8 ms at one
//     packet arrival in four, and handles the backlog as one batch with
//     one ACK frame (as quic-go does): trains stretched (median 2.4×)
//     or merged;
//   - jitter: each ACK frame reaches the sender up to 2 ms late, order
//     kept.
//
// Figures at low BDP (bulk / inner TCP with the QueueLimit queue, % of
// C): the last train alone (ATDWindow 1, Wave's published rule) 82 / 82
// (stall), 81 / 79 (jitter), 75 / 74 and 81 / 75 before the held-ACK
// trim; the ATD filter (ATDWindow 16) 87 / 91 and 87 / 90. The test
// fails with ATDWindow 1.

type noise struct {
	name string
	set  func(s *tsim)
}

var trainNoises = []noise{
	{"stall", func(s *tsim) { s.rxStall, s.rxStallEvery = 8*time.Millisecond, 4 }},
	{"jitter", func(s *tsim) { s.ackJitter = 2 * time.Millisecond }},
}

// TestNoisyTrainsKeepRate: with noisy ACK trains at low BDP (bench
// low-bdp: 50 Mbit/s, 10 ms, 1 MB) Wave must keep near the capacity and
// still cut the RTT against quic-go's default under the same noise.
func TestNoisyTrainsKeepRate(t *testing.T) {
	longSim(t)
	C := 50 * mbit
	steps := []rateStep{{0, C, 5 * time.Millisecond}}
	const end, from = 20 * time.Second, 5 * time.Second
	for _, nz := range trainNoises {
		for _, tcp := range []bool{false, true} {
			s := runNoisyWave(t, Config{}, steps, 1<<20, nz, tcp, end)
			q := newTsim(t, steps, 1<<20, newRenoSender(), tcp)
			nz.set(q)
			q.run(end)
			g, r, rq := s.goodputOver(from, end), s.rtt(from, end), q.rtt(from, end)
			t.Logf("%s %s: wave %s", nz.name, appName(tcp), s.summary(from, end, C))
			t.Logf("%s %s: quic %s", nz.name, appName(tcp), q.summary(from, end, C))
			if g < 0.84*C {
				t.Errorf("%s %s: Wave delivers %.1f Mbit/s, %.0f%% of C: want >= 84%%", nz.name, appName(tcp), g/mbit, 100*g/C)
			}
			if r > rq*6/10 {
				t.Errorf("%s %s: Wave's mean RTT %v vs quic's %v: want >= 40%% lower", nz.name, appName(tcp), r, rq)
			}
		}
	}
}

// TestNoisyTrainsHighBDP: the same noise at high BDP (bench high-bdp:
// 50 Mbit/s, 600 ms, 4 MB) with an inner TCP and the QueueLimit queue.
// With Wave's 10-packet bursts a 2.16 ms train carries milliseconds of
// noise; the ATD filter reads the path 1.5-2× slow, the queue bound
// follows the estimate and drops the inner TCP's segments (35 % and 18 %
// of C with TrainRTTDivisor -1). With the train-resolution floor the
// bursts grow to trains of up to min_rtt/8 (see "Train resolution").
// Bulk transfers are logged, not asserted: under the stall model Wave
// stays at about half of C with either rule (50 and 54 %: a queue
// stands, mean RTT 680-770 ms against 600, until ΔRTT passes β and an
// adjustment restarts Wave); under jitter 93 % against 57 %.
func TestNoisyTrainsHighBDP(t *testing.T) {
	longSim(t)
	C := 50 * mbit
	steps := []rateStep{{0, C, 300 * time.Millisecond}}
	const end, from = 30 * time.Second, 10 * time.Second
	for _, nz := range trainNoises {
		for _, tcp := range []bool{false, true} {
			got := map[int]float64{}
			for _, div := range []int{DefaultTrainRTTDivisor, -1} {
				// The subject is train resolution, so the queue bound
				// is the full two estimates (the delay cap off): the
				// model's inner TCP is Reno, which halves and needs a
				// whole BDP of queue (TestTargetHighBDP has the cap).
				s := runNoisyWave(t, Config{TrainRTTDivisor: div, QueueDelay: -1}, steps, 4<<20, nz, tcp, end)
				got[div] = s.goodputOver(from, end)
				t.Logf("%s %s TrainRTTDivisor %d: %s", nz.name, appName(tcp), div, s.summary(from, end, C))
			}
			if !tcp {
				continue
			}
			if g := got[DefaultTrainRTTDivisor]; g < 0.9*C {
				t.Errorf("%s inner TCP: Wave delivers %.1f Mbit/s, %.0f%% of C: want >= 90%%", nz.name, g/mbit, 100*g/C)
			}
			if g := got[-1]; g > 0.6*C {
				t.Errorf("%s inner TCP without the resolution floor: %.0f%% of C; the test no longer shows what the floor is for", nz.name, 100*g/C)
			}
		}
	}
}

// runNoisyWave runs Wave (cfg) over steps with a buf-byte bottleneck
// buffer under the noise nz until end; with an inner TCP the tunnel
// queue is bounded at Wave's BDP estimate (QueueLimit), as on the server.
func runNoisyWave(t *testing.T, cfg Config, steps []rateStep, buf int, nz noise, tcp bool, end time.Duration) *tsim {
	s := newTsim(t, steps, buf, newWaveSender(t, cfg), tcp)
	s.bdpQueue = tcp
	nz.set(s)
	s.run(end)
	return s
}
