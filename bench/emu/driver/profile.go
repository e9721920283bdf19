package driver

import (
	"math"
	"runtime/metrics"
	"time"

	"github.com/m2ho/m2ho/bench/emu"
)

// phase is a part of the packet loop.
type phase uint8

const (
	phOther     phase = iota // bookkeeping between the parts below
	phSleep                  // in ppoll before the deadline
	phWake                   // after the deadline until the loop runs again
	phStep                   // the model: Step and Enqueue (its log lines included)
	phEvents                 // the event log and the publisher's queue
	phCmdWait                // waiting for a handover command to reach the proxy
	phWriteDown              // TUN writes of downlink deliveries
	phWriteUp                // TUN writes of uplink deliveries
	phRead                   // TUN reads
	phFiles                  // output file writes (bufio flushes)
	phUnknown                // late time older than the profile's memory
	nPhases
)

var phaseNames = [nPhases]string{"other", "sleep", "wake", "model", "events", "command_wait", "write_down", "write_up", "read", "files", "unknown"}

// phaseRec is a finished phase, in ns from the loop's start.
type phaseRec struct {
	kind       phase
	start, end int64
}

// profRing is how many finished phases the profile remembers for the
// late-time attribution: enough for many loop iterations (a delivery is
// late by milliseconds, an iteration takes microseconds to a few ms).
const profRing = 1024

// lateWalk bounds how many phases one late delivery's attribution looks
// at; older late time counts as unknown.
const lateWalk = 256

// profile is the packet loop's timeline: the phases it went through and
// the late deliveries' attribution to them. Every method takes the time
// (ns from the loop's start); nothing reads a clock, so tests drive it
// with made-up times. It allocates nothing after newProfile.
type profile struct {
	cur      phase
	curStart int64
	ring     [profRing]phaseRec
	n        int // records ever pushed

	stats     [nPhases]emu.PhaseStat
	lateNs    [nPhases]int64
	latePkts  [nPhases]int64
	flushes   int64
	flushPkts int64
	flushMax  int64

	// per second: late deliveries per dominant cause, deliveries, GC
	// cycles completed
	secLate  [][nPhases]int32
	secDeliv []int64
	secGC    []int64

	gcSample []metrics.Sample
	gcLast   uint64
	gcSec    int
}

func newProfile(dur time.Duration) *profile {
	n := int(dur/time.Second) + 2
	p := &profile{secLate: make([][nPhases]int32, n), secDeliv: make([]int64, n), secGC: make([]int64, n),
		gcSample: []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}}
	metrics.Read(p.gcSample)
	if p.gcSample[0].Value.Kind() == metrics.KindUint64 {
		p.gcLast = p.gcSample[0].Value.Uint64()
	}
	return p
}

// mark ends the current phase at now and starts k; it returns the phase
// that ended.
func (p *profile) mark(k phase, now int64) phase {
	prev := p.cur
	p.push(prev, p.curStart, now)
	p.cur, p.curStart = k, now
	return prev
}

func (p *profile) push(k phase, start, end int64) {
	if end < start {
		end = start
	}
	d := end - start
	s := &p.stats[k]
	s.Calls++
	s.TotalMs += float64(d) / 1e6
	s.MaxMs = math.Max(s.MaxMs, float64(d)/1e6)
	s.Hist[bucket(d)]++
	p.ring[p.n%profRing] = phaseRec{k, start, end}
	p.n++
}

// slept records a wait that began at from with the given deadline and
// returned at now: up to the deadline it is sleep, past it the loop was
// late to wake (a timer's slack, a CPU taken by others, a stop of the
// world). The loop then is in phOther.
func (p *profile) slept(from, deadline, now int64) {
	p.push(p.cur, p.curStart, from)
	if now > deadline && deadline >= from {
		p.push(phSleep, from, deadline)
		p.push(phWake, deadline, now)
	} else {
		p.push(phSleep, from, now)
	}
	p.cur, p.curStart = phOther, now
}

func bucket(d int64) int {
	for i, lim := range [...]int64{10e3, 30e3, 100e3, 300e3, 1e6, 3e6, 10e6} {
		if d < lim {
			return i
		}
	}
	return 7
}

// late attributes one delivery due at due and written at w (both ns from
// the loop's start, w > due): the span [due, w] is split over the
// phases it overlaps (the current one, still open, up to w), and the
// delivery counts for the phase with the largest share.
func (p *profile) late(due, w int64) {
	var share [nPhases]int64
	covered := int64(0)
	if p.curStart < w {
		o := w - max(p.curStart, due)
		if o > 0 {
			share[p.cur] += o
			covered += o
		}
	}
	// a late delivery's span is the stall and the few phases after it:
	// the walk is bounded so that a long stall's many late deliveries do
	// not make the loop later still
	oldest := p.n - lateWalk
	for i := p.n - 1; i >= 0 && i >= oldest; i-- {
		r := &p.ring[i%profRing]
		if r.end <= due {
			break
		}
		if o := min(r.end, w) - max(r.start, due); o > 0 {
			share[r.kind] += o
			covered += o
		}
	}
	if rest := (w - due) - covered; rest > 0 && p.n > lateWalk {
		share[phUnknown] += rest
	}
	best := phOther
	for k := range share {
		p.lateNs[k] += share[k]
		if share[k] > share[best] {
			best = phase(k)
		}
	}
	p.latePkts[best]++
	if s := int(due / 1e9); s >= 0 && s < len(p.secLate) {
		p.secLate[s][best]++
	}
}

// delivered counts n deliveries written at w.
func (p *profile) delivered(w int64, n int) {
	if s := int(w / 1e9); s >= 0 && s < len(p.secDeliv) {
		p.secDeliv[s] += int64(n)
	}
}

func (p *profile) flushed(n int) {
	if n == 0 {
		return
	}
	p.flushes++
	p.flushPkts += int64(n)
	p.flushMax = max(p.flushMax, int64(n))
}

// tick reads the GC cycle count once a second (at now); reading one
// counter allocates nothing.
func (p *profile) tick(now int64) {
	s := int(now / 1e9)
	if s == p.gcSec || s >= len(p.secGC) {
		return
	}
	metrics.Read(p.gcSample)
	if p.gcSample[0].Value.Kind() == metrics.KindUint64 {
		c := p.gcSample[0].Value.Uint64()
		p.secGC[p.gcSec] += int64(c - p.gcLast)
		p.gcLast = c
	}
	p.gcSec = s
}

// result is the profile as emulator.json reports it; gc is the runtime's
// collection over the run (gcStat at the start and the end).
func (p *profile) result(gc emu.GCStat) *emu.LoopProfile {
	lp := &emu.LoopProfile{LateByCause: map[string]emu.LateCause{}, Phases: map[string]emu.PhaseStat{}, GC: gc, FlushMaxPackets: p.flushMax}
	if p.flushes > 0 {
		lp.FlushMeanPackets = float64(p.flushPkts) / float64(p.flushes)
	}
	for k := range nPhases {
		if p.stats[k].Calls > 0 {
			lp.Phases[phaseNames[k]] = p.stats[k]
		}
		if p.latePkts[k] > 0 || p.lateNs[k] > 0 {
			lp.LateByCause[phaseNames[k]] = emu.LateCause{Packets: p.latePkts[k], Ms: float64(p.lateNs[k]) / 1e6}
		}
	}
	for s := range p.secLate {
		var n int64
		best := 0
		for k, c := range p.secLate[s] {
			n += int64(c)
			if c > p.secLate[s][best] {
				best = k
			}
		}
		if n > 0 {
			lp.LateSeconds = append(lp.LateSeconds, emu.LateSecond{Second: s, Late: n, Delivered: p.secDeliv[s], Cause: phaseNames[best], GCCycles: p.secGC[s]})
		}
	}
	return lp
}

// gcNow reads the runtime's GC totals (it allocates: call it at the
// start and the end of a run only).
func gcNow() (cycles, allocated uint64, pauses *metrics.Float64Histogram) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"}, {Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		cycles = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		allocated = s[1].Value.Uint64()
	}
	if s[2].Value.Kind() == metrics.KindFloat64Histogram {
		pauses = s[2].Value.Float64Histogram()
	}
	return
}

// gcBetween is the collection between two gcNow readings.
func gcBetween(c0, a0 uint64, h0 *metrics.Float64Histogram, c1, a1 uint64, h1 *metrics.Float64Histogram) emu.GCStat {
	g := emu.GCStat{Cycles: int64(c1 - c0), AllocatedBytes: int64(a1 - a0)}
	if h1 == nil {
		return g
	}
	for i, c := range h1.Counts {
		if h0 != nil && i < len(h0.Counts) {
			c -= h0.Counts[i]
		}
		if c == 0 {
			continue
		}
		g.Pauses += int64(c)
		lo, hi := h1.Buckets[i], h1.Buckets[i+1]
		if lo >= 1e-3 {
			g.PausesOver1ms += int64(c)
		}
		if !math.IsInf(hi, 1) {
			g.MaxPauseMs = math.Max(g.MaxPauseMs, hi*1e3)
		} else {
			g.MaxPauseMs = math.Max(g.MaxPauseMs, lo*1e3)
		}
	}
	return g
}

// timedWriter charges an output file's writes to phFiles.
type timedWriter struct {
	w interface{ Write([]byte) (int, error) }
	d *Driver
}

func (t *timedWriter) Write(b []byte) (int, error) {
	prev := t.d.prof.mark(phFiles, t.d.since())
	n, err := t.w.Write(b)
	t.d.prof.mark(prev, t.d.since())
	return n, err
}
