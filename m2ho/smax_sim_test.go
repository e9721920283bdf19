package m2ho

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// ackClockedCell simulates one cell's queue for one UE at slot
// granularity: service capB bytes per slot, tail drop at buf bytes, and a
// window-based sender that is ACK-clocked over the round trip rttSlots:
// what the UE received in slot k−rttSlots arrives again in slot k,
// multiplied by growth while the window is below ssthresh (slow start:
// 2), and by 1 above (a flat CUBIC plateau). The first window arrives as
// one flight at twice the cell's rate. It feeds each slot to a burst
// detector and returns the bursts' S (the paper's s_b), the corrected
// estimates ŝ_b (arrival rate: the cycle's mean only, no c_est), and the
// largest queue the cell ever held.
func ackClockedCell(capB, buf int64, rttSlots, slots int, w0, ssthresh int64, each func(now time.Time, rb float64, bytes int)) (paper, fixed []int, maxQ int64) {
	const slot = 500 * time.Microsecond
	served := make([]int64, slots)
	var q, inFlightWin int64
	var d burstDetector
	win := w0
	first := w0
	for k := range slots {
		var arr int64
		if first > 0 { // the initial flight, at 2·capB per slot
			a := min(first, 2*capB)
			arr, first = a, first-a
		}
		if k >= rttSlots {
			back := served[k-rttSlots]
			if win < ssthresh {
				arr += 2 * back
				win += back
			} else {
				arr += back
			}
		}
		inFlightWin += arr
		acc := min(arr, buf-q)
		q += acc
		maxQ = max(maxQ, q)
		s := min(q, capB)
		// The emulator's partial slot: under 40 % once the queue is short.
		if q < capB && q*10 > capB*4 {
			s = q - capB*3/10
		}
		q -= s
		served[k] = s
		rb := float64(s) / float64(capB)
		if each != nil {
			each(t0.Add(time.Duration(k+1)*slot), rb, int(s))
		}
		if b, ok := d.slot(t0.Add(time.Duration(k+1)*slot), rb, int(s), time.Duration(rttSlots)*slot); ok {
			paper = append(paper, int(b.bytes))
			fixed = append(fixed, b.backlog(0))
		}
	}
	return paper, fixed, maxQ
}

// ŝ_max is a lower bound of the buffer (§4.3): on an ACK-clocked sender
// whose window stays under the BDP, bytes keep arriving at about the
// cell's rate while it drains, so the paper's s_b (all bytes served in
// the burst) grows with the window, not with the buffer, and exceeds
// it; the corrected ŝ_b = S − arrival·D does not.
func TestSMaxNotAboveBuffer(t *testing.T) {
	const capB = 5000 // 10 MB/s in 0.5 ms slots
	const rtt = 80    // slots: 40 ms, BDP 400 KB
	tests := []struct {
		name          string
		buf           int64
		w0, ssthresh  int64
		wantPaperOver bool // the paper's s_b exceeds the buffer here
	}{
		{"window 0.9 BDP, buffer 0.5 BDP", 200_000, 360_000, 0, true},
		{"window 0.6 BDP, buffer 0.3 BDP", 120_000, 240_000, 0, true},
		{"slow start to 0.8 BDP, buffer 0.5 BDP", 200_000, 20_000, 320_000, true},
		{"window 0.3 BDP, buffer 1 BDP", 400_000, 120_000, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The same slots through the controller, as MAC slot events
			// of sub-6 cell A: what it records is ŝ_max(A).
			db := NewSMaxDB()
			c := New(Config{SMaxDB: db})
			c.lastRTT = rtt * 500 * time.Microsecond // as if a flow had measured it
			A := cell(sub6, "A")
			slot := func(now time.Time, rb float64, b int) {
				c.OnEvent(now, &signaling.Event{Kind: signaling.KindMACSlot, RBRatio: rb, Bytes: b, Serving: A})
			}
			paper, fixed, maxQ := ackClockedCell(capB, tc.buf, rtt, 4000, tc.w0, tc.ssthresh, slot)
			if len(fixed) < 5 {
				t.Fatalf("only %d bursts", len(fixed))
			}
			pMax, fMax := 0, 0
			for i := range fixed {
				pMax, fMax = max(pMax, paper[i]), max(fMax, fixed[i])
			}
			t.Logf("bursts %d, paper s_b max %d, corrected max %d, buffer %d, max queue %d", len(fixed), pMax, fMax, tc.buf, maxQ)
			if int64(fMax) > tc.buf {
				t.Fatalf("corrected ŝ_b %d exceeds the buffer %d", fMax, tc.buf)
			}
			if v, _ := db.Get(A); int64(v) > tc.buf {
				t.Fatalf("controller's ŝ_max(A) %d exceeds the buffer %d", v, tc.buf)
			}
			if tc.wantPaperOver && int64(pMax) <= tc.buf {
				t.Fatalf("the paper's s_b %d does not exceed the buffer %d: the case tests nothing", pMax, tc.buf)
			}
		})
	}
}
