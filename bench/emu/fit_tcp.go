package emu

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// What the measured TCP CUBIC flows did on each cell type, from the M2HO
// artifact's iperf3 sender logs (the server side of a download: per 0.1 s
// interval the bytes written, the retransmitted segments, and the
// kernel's sRTT and snd_cwnd at the interval's end), each interval typed
// by the XCAL log of its drive. It answers why CUBIC gets less than the
// UDP capacity on sub-6: is the bottleneck queue full (then the capacity
// was lower) or empty (then something idles the link), and are the
// losses at handovers or between them. CALIBRATION.md, "Why CUBIC gets
// 68 % of sub-6".

// SenderSample is one interval of an iperf3 -J sender log.
type SenderSample struct {
	Start, End  time.Duration // since the test started
	Bytes       int64
	Retransmits int64
	RTT         time.Duration // tcp_info sRTT at the interval's end (0: none)
	Cwnd        int64         // snd_cwnd at the interval's end, bytes
}

// SenderLog is a parsed iperf3 -J sender log.
type SenderLog struct {
	Start   time.Time // start.timestamp.timesecs (zero: absent)
	Samples []SenderSample
}

// ParseSenderLog reads an iperf3 -J log of a TCP sender (first stream of
// each interval). An interval out of order or with negative counts is an
// error naming it.
func ParseSenderLog(name string, r io.Reader) (*SenderLog, error) {
	var doc struct {
		Start     iperfStart `json:"start"`
		Intervals []struct {
			Streams []struct {
				Start       float64 `json:"start"`
				End         float64 `json:"end"`
				Bytes       float64 `json:"bytes"`
				Retransmits int64   `json:"retransmits"`
				RTT         int64   `json:"rtt"`
				SndCwnd     int64   `json:"snd_cwnd"`
			} `json:"streams"`
		} `json:"intervals"`
	}
	if err := decodeJSONLog(name, r, &doc); err != nil {
		return nil, err
	}
	if len(doc.Intervals) == 0 {
		return nil, fmt.Errorf("%s: intervals: none (not an iperf3 -J log?)", name)
	}
	out := &SenderLog{}
	if ts := doc.Start.Timestamp.Timesecs; ts > 0 {
		out.Start = time.Unix(ts, 0).UTC()
	}
	var prev time.Duration
	for i, iv := range doc.Intervals {
		if len(iv.Streams) == 0 {
			return nil, fmt.Errorf("%s: intervals[%d].streams: empty", name, i)
		}
		s := iv.Streams[0]
		if math.IsNaN(s.Start) || math.IsNaN(s.End) || s.Start < 0 || s.End <= s.Start || s.End > 1e7 || s.Bytes < 0 || s.Bytes > 1e15 || math.IsNaN(s.Bytes) ||
			s.Retransmits < 0 || s.RTT < 0 || s.SndCwnd < 0 {
			return nil, fmt.Errorf("%s: intervals[%d].streams[0]: start %v end %v bytes %v retransmits %d rtt %d snd_cwnd %d out of range",
				name, i, s.Start, s.End, s.Bytes, s.Retransmits, s.RTT, s.SndCwnd)
		}
		st, en := time.Duration(s.Start*float64(time.Second)), time.Duration(s.End*float64(time.Second))
		if en <= prev {
			return nil, fmt.Errorf("%s: intervals[%d].streams[0].end: %v is not after the previous interval", name, i, s.End)
		}
		prev = en
		out.Samples = append(out.Samples, SenderSample{Start: st, End: en, Bytes: int64(s.Bytes), Retransmits: s.Retransmits,
			RTT: time.Duration(s.RTT) * time.Microsecond, Cwnd: s.SndCwnd})
	}
	return out, nil
}

// Throughput is the log's bytes as a series with its start time, the
// shape AlignDrive takes (its vertical handovers' steps refine the
// alignment as a UDP log's do).
func (l *SenderLog) Throughput() (*IperfUDP, error) {
	ends := make([]time.Duration, len(l.Samples))
	segs := make([]int64, len(l.Samples))
	for i, s := range l.Samples {
		ends[i], segs[i] = s.End, s.Bytes
	}
	ser, err := NewSeries(ends, segs)
	if err != nil {
		return nil, err
	}
	return &IperfUDP{Series: ser, Start: l.Start}, nil
}

// HandoverWindow is the span around a handover command whose intervals
// count as "at the handover" in TCPStats: from 0.5 s before the command
// (the preparation, the source's last HARQ rounds) to 1.5 s after it
// (interruption, the forwarded queue, and the sender's recovery, which
// iperf3 reports at the end of the 0.1 s interval it happened in).
var HandoverWindow = [2]time.Duration{-500 * time.Millisecond, 1500 * time.Millisecond}

// EmptyQueueSlack: an interval whose sRTT is within this of the type's
// base RTT (BaseRTTByType, the minimum ping) had (almost) no standing
// queue at the bottleneck.
const EmptyQueueSlack = 10 * time.Millisecond

// BaseRTTByType is the minimum ping of the artifact's udp-ping logs per
// type (CALIBRATION.md, "Base RTT and buffers per cell type").
var BaseRTTByType = map[signaling.CellType]time.Duration{signaling.CellSub6: 27100 * time.Microsecond, signaling.CellMmWave: 26800 * time.Microsecond}

// TCPHandover is one handover as a measured TCP sender saw it.
type TCPHandover struct {
	Key     string        // sub6-sub6, sub6-mmwave, mmwave-sub6, mmwave-mmwave
	Command time.Duration // on the sender log's timeline
	// SRTT and Cwnd of the last interval ending at or before the
	// command; Queue = Cwnd·(1 - RTTMin/SRTT), the bytes standing in the
	// bottleneck queue then (Little's law, RTTMin the type's minimum sRTT).
	SRTT  time.Duration
	Cwnd  int64
	Queue int64
	// Retx are the retransmitted segments of the intervals ending in
	// (command, command+HandoverWindow[1]]; Cut: the smallest cwnd among
	// them is more than 20 % below Cwnd.
	Retx int64
	Cut  bool
}

// TailDrop is a cwnd cut between handovers (outside every
// HandoverWindow) with at most 2 segments retransmitted: one loss, the
// signature of a drop-tail buffer overflowing (a burst of random or
// blockage losses retransmits more). Its queue is the buffer as the flow
// found it when it overflowed.
type TailDrop struct {
	At    time.Duration
	SRTT  time.Duration // of the interval before the cut
	Cwnd  int64         // of the interval before the cut
	Queue int64         // Cwnd·(1 - RTTMin/SRTT)
	// Delay is SRTT - RTTMin: the queueing delay at the overflow.
	Delay time.Duration
	// Mbps = Cwnd / SRTT: with the queue full, the rate the link gave the
	// flow then (its capacity for this flow at that moment).
	Mbps float64
}

// TCPStats is what TCPSenderStats measures on one cell type.
type TCPStats struct {
	Intervals int     // 0.1 s intervals typed to this type
	Seconds   float64 // their length
	Mbps      float64 // mean goodput (bytes written by the sender) over them
	// sRTT quantiles of the intervals with a sample.
	RTTMin, RTTP10, RTTP50, RTTP90 time.Duration
	// EmptyQueueShare: intervals whose sRTT is within EmptyQueueSlack of
	// the base RTT (no standing queue), among those with a sample.
	EmptyQueueShare float64
	// InflightP50 is the median over 1 s windows of one type, outside
	// every HandoverWindow, of rate · mean sRTT / mean snd_cwnd (Little's
	// law): ~1 when the flow has a full cwnd in flight (cwnd-limited),
	// well below 1 when the receive window or the send buffer holds it
	// back. (0.1 s intervals are too short: iperf3 counts the bytes when
	// its 128 KB writes return, in bursts of ~1.3 MB on sub-6.)
	InflightP50 float64
	Windows     int // 1 s windows behind InflightP50
	// Retransmitted segments and cwnd cuts (snd_cwnd more than 20 %
	// below the previous interval's): all, and outside every
	// HandoverWindow, with the seconds outside.
	Retx, RetxOutside int64
	Cuts, CutsOutside int
	SecondsOutside    float64
	TailDrops         []TailDrop
	// QueueP50 and DelayP50: medians of TailDrops' Queue and Delay.
	QueueP50 int64
	DelayP50 time.Duration
	// RateP50: median of TailDrops' Mbps.
	RateP50 float64

	rtts  []time.Duration
	infl  []float64
	bytes int64
}

// TCPSenderStats types every interval of a sender log by tl (the serving
// type at the interval's middle) and accumulates it into acc (per type,
// created as needed); the handovers tl commands within the log go to
// hos. Call Finish on each type when every log is in.
func TCPSenderStats(l *SenderLog, tl ServingTimeline, acc map[signaling.CellType]*TCPStats, hos *[]TCPHandover) {
	if len(l.Samples) == 0 {
		return
	}
	near := func(t time.Duration) bool {
		for _, c := range tl.at {
			if t >= c+HandoverWindow[0] && t <= c+HandoverWindow[1] {
				return true
			}
		}
		return false
	}
	span := l.Samples[len(l.Samples)-1].End
	for i, c := range tl.at {
		if c < 0 || c > span {
			continue
		}
		from := tl.first
		if i > 0 {
			from = tl.types[i-1]
		}
		h := TCPHandover{Key: CellTypeName(from) + "-" + CellTypeName(tl.types[i]), Command: c, Cwnd: -1}
		minCwnd := int64(math.MaxInt64)
		for _, s := range l.Samples {
			if s.End <= c {
				h.SRTT, h.Cwnd = s.RTT, s.Cwnd
			} else if s.End <= c+HandoverWindow[1] {
				h.Retx += s.Retransmits
				if s.Cwnd > 0 {
					minCwnd = min(minCwnd, s.Cwnd)
				}
			}
		}
		if h.Cwnd <= 0 || h.SRTT <= 0 || minCwnd == math.MaxInt64 {
			continue // the command came before the flow's first sample, or at its end
		}
		h.Cut = float64(minCwnd) < 0.8*float64(h.Cwnd)
		*hos = append(*hos, h)
	}
	var prev SenderSample
	for i, s := range l.Samples {
		ty := tl.At((s.Start + s.End) / 2)
		a := get(acc, ty)
		out := !near(s.Start) && !near(s.End)
		d := (s.End - s.Start).Seconds()
		a.Intervals++
		a.Seconds += d
		a.bytes += s.Bytes
		a.Retx += s.Retransmits
		if out {
			a.SecondsOutside += d
			a.RetxOutside += s.Retransmits
		}
		if s.RTT > 0 {
			a.rtts = append(a.rtts, s.RTT)
		}
		if i > 0 && s.Cwnd > 0 && prev.Cwnd > 0 && float64(s.Cwnd) < 0.8*float64(prev.Cwnd) {
			a.Cuts++
			if out {
				a.CutsOutside++
				if s.Retransmits+prev.Retransmits <= 2 && prev.RTT > 0 && tl.At((prev.Start+prev.End)/2) == ty {
					a.TailDrops = append(a.TailDrops, TailDrop{At: s.End, SRTT: prev.RTT, Cwnd: prev.Cwnd})
				}
			}
		}
		prev = s
	}
	// 1 s windows of ten intervals of one type, outside every handover window
	for i := 0; i+10 <= len(l.Samples); i += 10 {
		w := l.Samples[i : i+10]
		ty := tl.At((w[0].Start + w[0].End) / 2)
		ok := true
		var bytes, cw int64
		var rtt time.Duration
		for _, s := range w {
			if tl.At((s.Start+s.End)/2) != ty || near(s.Start) || near(s.End) || s.RTT <= 0 || s.Cwnd <= 0 {
				ok = false
				break
			}
			bytes += s.Bytes
			cw += s.Cwnd
			rtt += s.RTT
		}
		if !ok || cw == 0 {
			continue
		}
		a := get(acc, ty)
		secs := (w[9].End - w[0].Start).Seconds()
		a.infl = append(a.infl, float64(bytes)/secs*(rtt/10).Seconds()/(float64(cw)/10))
	}
}

func get(acc map[signaling.CellType]*TCPStats, t signaling.CellType) *TCPStats {
	a := acc[t]
	if a == nil {
		a = &TCPStats{}
		acc[t] = a
	}
	return a
}

// Finish computes type t's quantiles and shares, and the queues of its
// tail drops.
func (a *TCPStats) Finish(t signaling.CellType) {
	if a.Seconds > 0 {
		a.Mbps = float64(a.bytes) * 8 / a.Seconds / 1e6
	}
	if len(a.rtts) == 0 {
		return
	}
	slices.Sort(a.rtts)
	a.RTTMin, a.RTTP10, a.RTTP50, a.RTTP90 = a.rtts[0], quantileOf(a.rtts, 0.1), quantileOf(a.rtts, 0.5), quantileOf(a.rtts, 0.9)
	empty := 0
	for _, r := range a.rtts {
		if r <= BaseRTTByType[t]+EmptyQueueSlack {
			empty++
		}
	}
	a.EmptyQueueShare = float64(empty) / float64(len(a.rtts))
	if len(a.infl) > 0 {
		slices.Sort(a.infl)
		a.InflightP50, a.Windows = a.infl[len(a.infl)/2], len(a.infl)
		if len(a.infl)%2 == 0 {
			a.InflightP50 = (a.infl[len(a.infl)/2-1] + a.infl[len(a.infl)/2]) / 2
		}
	}
	var qs []int64
	var ds []time.Duration
	var rs []float64
	for i := range a.TailDrops {
		td := &a.TailDrops[i]
		td.Delay = max(0, td.SRTT-a.RTTMin)
		td.Queue = int64(float64(td.Cwnd) * td.Delay.Seconds() / td.SRTT.Seconds())
		td.Mbps = float64(td.Cwnd) * 8 / td.SRTT.Seconds() / 1e6
		qs, ds, rs = append(qs, td.Queue), append(ds, td.Delay), append(rs, td.Mbps)
	}
	if len(qs) > 0 {
		slices.Sort(qs)
		slices.Sort(ds)
		slices.Sort(rs)
		a.QueueP50, a.DelayP50, a.RateP50 = quantileOf(qs, 0.5), quantileOf(ds, 0.5), rs[int(0.5*float64(len(rs)-1)+0.5)]
	}
}

// QueueAt fills h.Queue from the type's minimum sRTT.
func (h *TCPHandover) QueueAt(rttMin time.Duration) {
	if h.SRTT > rttMin {
		h.Queue = int64(float64(h.Cwnd) * (h.SRTT - rttMin).Seconds() / h.SRTT.Seconds())
	}
}

// quantileOf is the nearest-rank quantile of sorted xs (the median of an
// even count is the upper middle).
func quantileOf[T int64 | time.Duration](xs []T, p float64) T {
	return xs[int(p*float64(len(xs)-1)+0.5)]
}

// MeasuredTCP is what TCPSenderStats finds in the artifact's five sender
// logs (iperf-sender-tcp-{1..4} of 2023-02-13 with {1..4}-ho.csv,
// iperf-server-tcp-2 of 2023-02-06 with 2-ho-events.csv), recorded for
// machines without the shared data (TestMeasuredTCPSenderStats refits it).
var MeasuredTCP = map[signaling.CellType]MeasuredTCPType{
	signaling.CellSub6: {Seconds: 239.4, Mbps: 114.8, RTTP10: 53.5, RTTP50: 75.8, RTTP90: 125.2, EmptyQueueShare: 0.030,
		InflightP50: 0.99, CutsOutsidePerMin: 5.7, TailDrops: 16, QueueP50KB: 1387, DelayP50: 134.9, RateP50: 79.5},
	signaling.CellMmWave: {Seconds: 180.9, Mbps: 531.0, RTTP10: 33.0, RTTP50: 35.7, RTTP90: 67.6, EmptyQueueShare: 0.630,
		InflightP50: 0.93, CutsOutsidePerMin: 2.9, TailDrops: 7, QueueP50KB: 1804, DelayP50: 120.1, RateP50: 140.0},
}

// MeasuredTCPType is one type's row of MeasuredTCP (RTTs and DelayP50 in
// ms).
type MeasuredTCPType struct {
	Seconds, Mbps                float64
	RTTP10, RTTP50, RTTP90       float64
	EmptyQueueShare, InflightP50 float64
	CutsOutsidePerMin            float64
	TailDrops                    int
	QueueP50KB, DelayP50         float64
	RateP50                      float64 // Mbit/s at the tail drops (cwnd / sRTT)
}

// MeasuredHandoverCuts: per handover type, of the handovers in the same
// sender logs, how many had a cwnd cut (20 %) within 1.5 s of the command
// (TCPHandover.Cut), and how many there were. A cut there is any of
// Findings 2 and 3 or a congestion loss that happened to fall there; the
// logs do not tell them apart.
var MeasuredHandoverCuts = map[string][2]int{"sub6-sub6": {6, 22}, "sub6-mmwave": {0, 4}, "mmwave-sub6": {3, 5}, "mmwave-mmwave": {1, 15}}

// Sub6ByLevel picks the sub-6 intervals of a capacity log that has no
// XCAL log of its drive by their level: runs of at least minRun intervals
// under maxMbps (mmWave in the artifact's logs runs at 0.4-1.7 Gbit/s,
// sub-6 at 0.05-0.3), without the log's first skip intervals (iperf3's
// start) and the interval at each end of a run next to a faster one (a
// vertical handover inside it). It returns their Mbit/s. A blockage dip
// of mmWave shorter than minRun is left out with the mmWave around it.
func Sub6ByLevel(s *Series, interval time.Duration, maxMbps float64, minRun, skip int) []float64 {
	var v []float64
	for t := time.Duration(0); t+interval <= s.Period(); t += interval {
		v = append(v, float64(s.Bytes(t, t+interval))*8/interval.Seconds()/1e6)
	}
	var out []float64
	for i := skip; i < len(v); {
		if v[i] >= maxMbps {
			i++
			continue
		}
		j := i
		for j < len(v) && v[j] < maxMbps {
			j++
		}
		lo, hi := i, j // run [i, j)
		if lo > skip {
			lo++
		}
		if hi < len(v) {
			hi--
		}
		if j-i >= minRun && hi > lo {
			out = append(out, v[lo:hi]...)
		}
		i = j
	}
	return out
}
