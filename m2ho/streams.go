package m2ho

import (
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// Streams is the stream rule set: Algorithm 1's idea (the UE's own reports
// tell what the network will decide, M2HO MobiCom'24 §4.2) reworked for
// how networks configure reporting (TS 38.331 / 36.331 §5.5.4):
//
//   - A report belongs to a stream keyed by (RAT, event, serving cell,
//     neighbour cell). With reportAmount > 1 the UE re-sends the same event
//     every reportInterval while its condition holds: a re-send extends
//     its stream, it is not a new prediction.
//   - Each stream has its own deadline: its last report plus the answer
//     time of its kind (the time the network takes to send the command
//     after the report it acts on), learned per kind with a prior.
//   - A prediction (an episode) is live while any stream is; it is
//     confirmed by any handover, logged or inferred by the reader, and
//     every handover ends every stream (a reconfiguration with sync
//     removes the UE's reporting entries, §5.5.6.1).
//   - An A1 withdraws only the streams of its own RAT and serving cell
//     whose trigger was the serving cell getting worse (A2, A5).
//   - Answer times are learned from every handover a stream of the
//     answering kind preceded, live or expired less than maxAnswer before
//     (a network slower than the prior is learned too).
//   - Reports answered by what XCAL does not export (an mmWave A2 or an NR
//     A3 answered by an SN release, an LTE A3 by a handover without SCG
//     configuration) are confirmed by the handover the reader infers
//     (signaling.Event.Inferred, XCAL.md). When that evidence comes only
//     after the episode timed out (no system-information read exported:
//     the release shows at the next B1), the inferred handover still
//     confirms the last timed-out episode since the previous handover if
//     it had a stream of the kind that announces it (NR streams for a
//     release, LTE A3/A5 for an anchor handover): Outcome.Chained. The SN
//     addition after a release is a handover of its own, announced by its
//     B1.
//
// Which reports predict what:
//
//	LTE A3, A5            LTE anchor handover (the NR leg kept)
//	NR A3, A5             SN (PSCell) change, to the neighbour's type; A5
//	                      on any serving type (also mmWave), neighbour of
//	                      unknown type taken on the serving frequency
//	NR A2                 SN release (data falls back to LTE), any NR type
//	LTE B1                SN addition, from the last NR cell's type
//	A1, A4, A6, B2, periodic, unknown: no prediction
//
// NR reports are judged even when the serving cell's type is not known yet
// (the start of a log): an A3 is then a horizontal move of unknown type.
var Streams Rules = streamRules{}

type streamRules struct{}

func (streamRules) Name() string { return "streams" }

// answerKind is the kind of network answer a stream waits for; each has
// its own answer time.
type answerKind uint8

const (
	answerAnchor   answerKind = iota // LTE A3/A5 → LTE anchor handover
	answerChange                     // NR A3/A5 → SN change
	answerAddition                   // B1 → SN addition
	answerRelease                    // NR A2 → SN release
	numAnswerKinds
)

// Reports is the set of report kinds an episode's predictions rested on
// (Outcome.Reports; Streams only, zero for the classic rule sets), one bit
// per answer kind: which reports announced the handover, so that what
// each kind of report costs or saves can be told apart (the bench's
// Prediction episodes; an mmWave A2 is answered at once on some
// networks, 1.5 s later after a B1 on others).
type Reports uint8

// The report kinds (Streams' table).
const (
	ReportsLTEA3A5 Reports = 1 << answerAnchor   // LTE A3/A5: anchor handover
	ReportsNRA3A5  Reports = 1 << answerChange   // NR A3/A5: SN change
	ReportsLTEB1   Reports = 1 << answerAddition // LTE B1: SN addition
	ReportsNRA2    Reports = 1 << answerRelease  // NR A2: SN release
)

var reportNames = [numAnswerKinds]string{"lte-a3a5", "nr-a3a5", "lte-b1", "nr-a2"}

// Append appends the kinds' names joined by '+', "-" for none.
func (r Reports) Append(b []byte) []byte {
	if r == 0 {
		return append(b, '-')
	}
	first := true
	for k, name := range reportNames {
		if r&(1<<k) == 0 {
			continue
		}
		if !first {
			b = append(b, '+')
		}
		b, first = append(b, name...), false
	}
	return b
}

func (r Reports) String() string { return string(r.Append(nil)) }

// answerPrior is each kind's answer time (last report → command) before
// any was measured, as a mean and mean deviation, and the floor of its
// deadline margin. From TS 38.331/36.331 behaviour and the SIGCOMM'22
// "Vivisecting mobility management in 5G" preparation durations (report →
// command over four operators' drives, p50 / p90 / p95): NSA PCell 69 /
// 279 / 2061 ms (LTE-only PCell 52 / 98 / 131 ms), SCG modification 55 /
// 88 / 103 ms, SCG addition 64 / 146 / 232 ms (and 150-450 ms after the
// last B1 on networks that wait for several), SCG release 60 / 985 / 2902
// ms. The floor keeps a kind's deadline above its usual tail even after a
// run of fast answers: a network's tail does not show in a few samples.
var answerPrior = [numAnswerKinds]struct{ mean, dev, floor time.Duration }{
	answerAnchor:   {120 * time.Millisecond, 80 * time.Millisecond, 500 * time.Millisecond},
	answerChange:   {60 * time.Millisecond, 30 * time.Millisecond, 150 * time.Millisecond},
	answerAddition: {200 * time.Millisecond, 70 * time.Millisecond, 450 * time.Millisecond},
	answerRelease:  {150 * time.Millisecond, 50 * time.Millisecond, 400 * time.Millisecond},
}

// A stream's deadline is its last report + mean + answerDevs·dev of its
// kind's answer time, at least the kind's floor and resendFloor, at most
// maxAnswer. resendFloor is above 480 ms, the longest reportInterval
// (TS 38.331 ReportInterval ms120..ms480 as configured for handover
// events) short enough to matter: a multi-shot re-send then always finds
// its stream live, from the first re-send on (later ones also by the
// stream's measured interval).
const (
	answerDevs  = 4
	resendFloor = 500 * time.Millisecond
	maxAnswer   = 1500 * time.Millisecond
)

// DefaultMmWaveA2Hold is how long an NR A2 from an mmWave data cell keeps
// its prediction live at least (Predictor.SetMmWaveA2Hold): an A2 on
// mmWave says the mmWave link is at its edge, and the network's answer
// may be an SCG release at once (SIGCOMM'22: SCG release p50 60 ms, but
// p90 985 ms) or, as on every mmWave A2 of the February 2023 drives, the
// SCG lost and a sub-6 cell added after an LTE B1 1.43-2.1 s later
// (bench/emu/CALIBRATION.md). Meanwhile the mmWave cell carries a tenth
// of its rate (the measured edge, 0.06-0.12 of its mean in the last
// 2.5 s before the command) while a window of mmWave size queues in its
// buffer and is forwarded, at the command, into a sub-6 buffer that
// cannot hold it. With the release kind's deadline alone (0.5 s) the
// clamp was lifted a second before the B1, whose 60 ms lead then came
// too late to drain that queue. 2.5 s covers the drives' A2 → command
// times; an A1 on the A2's cell (the link recovered) still withdraws it.
const DefaultMmWaveA2Hold = 2500 * time.Millisecond

// SetMmWaveA2Hold sets how long an NR A2 from an mmWave data cell keeps
// its stream live at least (DefaultMmWaveA2Hold; 0: its kind's learned
// deadline alone, as a network that releases at once). The classic rule
// sets ignore it.
func (p *Predictor) SetMmWaveA2Hold(d time.Duration) { p.a2Hold = max(d, 0) }

// maxStreams bounds the live streams (a UE has a handful of measIds);
// past it the stream closest to its deadline is replaced.
const maxStreams = 8

// answerTime is a learned answer time, smoothed as RFC 6298 smooths RTT
// (gain 1/8 for the mean, 1/4 for the deviation), starting at the prior.
type answerTime struct{ mean, dev, floor time.Duration }

func (a *answerTime) add(d time.Duration) {
	if d < 0 {
		return
	}
	diff := d - a.mean
	if diff < 0 {
		diff = -diff
	}
	a.dev += (diff - a.dev) / 4
	a.mean += (d - a.mean) / 8
}

func (a *answerTime) margin() time.Duration {
	m := a.mean + answerDevs*a.dev
	return min(max(m, a.floor, resendFloor), maxAnswer)
}

type stream struct {
	lte             bool
	meas            signaling.MeasEvent
	serving, nbr    string // cell IDs as the report names them
	kind            answerKind
	first, last, dl time.Time
	interval        time.Duration // between its last two reports
	typ             signaling.HOType
	target          signaling.Cell
	src             signaling.CellType // the data cell's type at its first report (answers.go)
}

type streamState struct {
	s      [maxStreams]stream
	n      int
	latest int // index of the stream updated last
	ans    [numAnswerKinds]answerTime
	// book learns how often each kind is answered in time (answers.go);
	// nil: not learned.
	book *SMaxDB
	// expired is, per kind, the last report of the latest stream that
	// expired since the last handover: a command that comes later still
	// teaches its answer time, or a network slower than the prior could
	// never be learned.
	expired [numAnswerKinds]time.Time

	kinds uint8 // answer kinds of the live episode's streams (bit per kind)
	// chain is the last episode withdrawn by timeout since the last
	// handover: an inferred handover it announced confirms it late.
	chain struct {
		valid  bool
		at     time.Time
		typ    signaling.HOType
		target signaling.Cell
		kinds  uint8
	}
}

func (st *streamState) init(streamRules) {
	for k := range st.ans {
		st.ans[k] = answerTime{answerPrior[k].mean, answerPrior[k].dev, answerPrior[k].floor}
	}
}

func (st *streamState) clear() {
	st.n = 0
	st.kinds = 0
	st.expired = [numAnswerKinds]time.Time{}
	st.chain.valid = false
}

// chained reports whether an inferred handover of kind ho confirms the
// episode in chain: an SN release one with an NR stream (an A2, or an
// A3/A5 answered by release and re-addition), an LTE handover without SCG
// configuration one with an LTE A3/A5 stream.
func (st *streamState) chained(ho signaling.HOKind) bool {
	if !st.chain.valid {
		return false
	}
	switch ho {
	case signaling.HOSNRelease:
		return st.chain.kinds&(1<<answerRelease|1<<answerChange) != 0
	case signaling.HOLTEAnchor:
		return st.chain.kinds&(1<<answerAnchor) != 0
	}
	return false
}

// deadline is when the last live stream expires.
func (st *streamState) deadline() time.Time {
	var d time.Time
	for i := 0; i < st.n; i++ {
		if st.s[i].dl.After(d) {
			d = st.s[i].dl
		}
	}
	return d
}

func (st *streamState) remove(i int) {
	st.n--
	st.s[i] = st.s[st.n]
	if st.latest == st.n {
		st.latest = i
	}
}

// answered learns the answer time of each live stream the handover of
// kind ho answers; with none live, of the kind's stream that expired last,
// if within maxAnswer.
func (st *streamState) answered(now time.Time, ho signaling.HOKind) {
	var seen [numAnswerKinds]bool
	for i := 0; i < st.n; i++ {
		s := &st.s[i]
		if answers(ho, s.kind) {
			st.ans[s.kind].add(now.Sub(s.last))
			seen[s.kind] = true
			st.book.observeAnswer(s.kind, s.src, true)
		}
	}
	for k := range st.expired {
		if last := st.expired[k]; !seen[k] && !last.IsZero() && answers(ho, answerKind(k)) && now.Sub(last) <= maxAnswer {
			st.ans[k].add(now.Sub(last))
		}
	}
}

func answers(ho signaling.HOKind, k answerKind) bool {
	switch ho {
	case signaling.HOLTEAnchor:
		return k == answerAnchor
	case signaling.HOSNChange, signaling.HOIntraNR:
		return k == answerChange
	case signaling.HOSNAddition:
		return k == answerAddition
	case signaling.HOSNRelease:
		return k == answerRelease
	}
	return false
}

// AnswerTimes returns the Streams rule set's learned answer time (mean)
// and deadline margin per kind: anchor, change, addition, release. Zero
// for the classic rule sets.
func (p *Predictor) AnswerTimes() (mean, margin [numAnswerKinds]time.Duration) {
	if p.judge != nil {
		return
	}
	for k := range p.st.ans {
		mean[k], margin[k] = p.st.ans[k].mean, p.st.ans[k].margin()
	}
	return
}

// SetAnswerBook has the stream rule set learn, in db, how often the
// network answers each kind of report within its stream's deadline
// (answers.go); nil stops it. The classic rule sets learn nothing.
func (p *Predictor) SetAnswerBook(db *SMaxDB) { p.st.book = db }

// Unanswered reports whether the live prediction rests only on kinds of
// report the network rarely answers in time, as learned (SetAnswerBook):
// every live stream's kind, from its data cell's type. False with no
// live prediction, no book or a classic rule set.
func (p *Predictor) Unanswered() bool {
	if !p.live || p.judge != nil || p.st.book == nil || p.st.n == 0 {
		return false
	}
	for i := 0; i < p.st.n; i++ {
		if s := &p.st.s[i]; !p.st.book.rarelyAnswered(s.kind, s.src) {
			return false
		}
	}
	return true
}

// tickStreams expires streams whose deadline is not after now; the
// episode is withdrawn when the last one goes.
func (p *Predictor) tickStreams(now time.Time) Outcome {
	if !p.live {
		return Outcome{}
	}
	var last time.Time
	for i := 0; i < p.st.n; {
		if s := &p.st.s[i]; !now.Before(s.dl) {
			if s.dl.After(last) {
				last = s.dl
			}
			if s.last.After(p.st.expired[s.kind]) {
				p.st.expired[s.kind] = s.last
			}
			p.st.book.observeAnswer(s.kind, s.src, false)
			p.st.remove(i)
			continue
		}
		i++
	}
	if p.st.n > 0 {
		p.refreshLatest()
		return Outcome{}
	}
	c := &p.st.chain
	c.valid, c.at, c.typ, c.target, c.kinds = true, p.predAt, p.predTyp, p.target, p.st.kinds
	return p.withdraw(last, WithdrawTimeout)
}

// refreshLatest points the live prediction at the stream updated last.
func (p *Predictor) refreshLatest() {
	if p.st.latest >= p.st.n {
		p.st.latest = 0
	}
	for i := 0; i < p.st.n; i++ {
		if p.st.s[i].last.After(p.st.s[p.st.latest].last) {
			p.st.latest = i
		}
	}
	s := &p.st.s[p.st.latest]
	p.predTyp, p.target = s.typ, s.target
}

// reportLTE says whether a report was measured on LTE. The readers type
// an LTE report's serving cell; one of unknown type that names a cell is
// an NR report whose PSCell type is not known yet; one that names nothing
// is the data cell's (B1 always LTE's).
func reportLTE(rs signaling.CellType, ev *signaling.Event) bool {
	switch {
	case ev.Serving.Type != signaling.CellUnknown:
		return ev.Serving.Type == signaling.CellLTE
	case ev.Serving.ID != "":
		return false
	case ev.Meas == signaling.MeasB1 || ev.Meas == signaling.MeasB2:
		return true
	}
	return rs == signaling.CellLTE
}

func (p *Predictor) reportStreams(now time.Time, rs signaling.CellType, ev *signaling.Event) Outcome {
	lte := reportLTE(rs, ev)
	if !lte && rs == signaling.CellLTE {
		rs = signaling.CellUnknown // an NR report before its cell's type is known
	}
	if ev.Meas == signaling.MeasA1 {
		return p.withdrawA1(now, lte, ev.Serving.ID)
	}
	kind, typ, target, ok := p.judgeStream(lte, rs, ev)
	if !ok {
		return Outcome{}
	}
	i := p.st.find(lte, ev)
	if i < 0 {
		i = p.st.add()
		p.st.s[i] = stream{lte: lte, meas: ev.Meas, serving: ev.Serving.ID, nbr: ev.Neighbor.ID, kind: kind, first: now, src: p.serving}
	} else {
		p.st.s[i].interval = now.Sub(p.st.s[i].last)
	}
	s := &p.st.s[i]
	// A multi-shot stream stays live until its next re-send is overdue
	// (reportInterval with a quarter's slack) if that is later than the
	// answer time: a re-send is the same prediction.
	margin := max(p.st.ans[kind].margin(), min(s.interval+s.interval/4, maxAnswer))
	if ev.Meas == signaling.MeasA2 && !lte && s.src == signaling.CellMmWave {
		margin = max(margin, p.a2Hold)
	}
	s.last, s.dl, s.typ, s.target = now, now.Add(margin), typ, target
	p.st.latest = i
	p.predTyp, p.target = typ, target
	if p.live {
		p.st.kinds |= 1 << kind
		return Outcome{}
	}
	p.st.kinds = 1 << kind
	p.live, p.predAt = true, now
	return Outcome{Kind: OutcomePredicted, At: now, PredictedAt: now, Predicted: typ, Target: target, Reports: Reports(p.st.kinds)}
}

func (st *streamState) find(lte bool, ev *signaling.Event) int {
	for i := 0; i < st.n; i++ {
		s := &st.s[i]
		if s.lte == lte && s.meas == ev.Meas && s.serving == ev.Serving.ID && s.nbr == ev.Neighbor.ID {
			return i
		}
	}
	return -1
}

// add returns a free slot, replacing the stream closest to its deadline
// when all are in use.
func (st *streamState) add() int {
	if st.n < maxStreams {
		st.n++
		return st.n - 1
	}
	j := 0
	for i := 1; i < st.n; i++ {
		if st.s[i].dl.Before(st.s[j].dl) {
			j = i
		}
	}
	return j
}

// withdrawA1 removes the streams an A1 contradicts: same RAT, same serving
// cell, triggered by the serving cell getting worse (A2, A5). An LTE A1
// says nothing about an NR leg or a B1; an NR A1 nothing about LTE.
func (p *Predictor) withdrawA1(now time.Time, lte bool, serving string) Outcome {
	if !p.live {
		return Outcome{}
	}
	removed := false
	for i := 0; i < p.st.n; {
		s := &p.st.s[i]
		if s.lte == lte && s.serving == serving && (s.meas == signaling.MeasA2 || s.meas == signaling.MeasA5) {
			p.st.remove(i)
			removed = true
			continue
		}
		i++
	}
	if !removed {
		return Outcome{}
	}
	if p.st.n > 0 {
		p.refreshLatest()
		return Outcome{}
	}
	return p.withdraw(now, WithdrawA1)
}

// judgeStream is the Streams rule table (see Streams).
func (p *Predictor) judgeStream(lte bool, rs signaling.CellType, ev *signaling.Event) (answerKind, signaling.HOType, signaling.Cell, bool) {
	nb := ev.Neighbor
	switch {
	case lte && (ev.Meas == signaling.MeasA3 || ev.Meas == signaling.MeasA5):
		// An anchor handover keeps the NR leg when there is one: the
		// data cell's type is the target's.
		src := p.serving
		if src == signaling.CellUnknown {
			src = signaling.CellLTE
		}
		target := signaling.Cell{Type: src}
		return answerAnchor, signaling.ClassifyHO(src, src), target, true
	case lte && ev.Meas == signaling.MeasB1:
		// The source of an SN addition is the last NR cell the data was
		// on (the readers' convention, XCAL.md), LTE if none yet.
		src := p.lastNR
		if src == signaling.CellUnknown {
			src = signaling.CellLTE
		}
		return answerAddition, signaling.ClassifyHO(src, nb.Type), nb, true
	case lte:
		return 0, 0, signaling.Cell{}, false
	case ev.Meas == signaling.MeasA3 || ev.Meas == signaling.MeasA5:
		if nb.Type == signaling.CellUnknown {
			// A3 is configured per frequency; an A5 whose neighbour
			// is not known is taken on the serving frequency too.
			nb.Type = rs
		}
		t := signaling.ClassifyHO(rs, nb.Type)
		if rs == signaling.CellUnknown && nb.Type == signaling.CellUnknown {
			t = signaling.HOHorizontal // same frequency, type not known yet
		}
		return answerChange, t, nb, true
	case ev.Meas == signaling.MeasA2:
		src := rs
		if src == signaling.CellUnknown {
			src = p.lastNR
		}
		return answerRelease, signaling.ClassifyHO(src, signaling.CellLTE), signaling.Cell{Type: signaling.CellLTE}, true
	}
	return 0, 0, signaling.Cell{}, false
}
