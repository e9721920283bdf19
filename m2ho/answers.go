package m2ho

import (
	"fmt"
	"math"

	"github.com/m2ho/m2ho/signaling"
)

// How often the network answers each kind of report within its stream's
// deadline, learned per kind and per type of the data cell the report was
// sent from, and kept in the SMaxDB with the buffers (it is what the
// phone learned of the network, and is carried across drives the same
// way). The controller does not clamp for a prediction that rests only on
// kinds the network rarely answers in time (Config.AnswerRates).
//
// Why. §4.3's clamp pays for itself when the command follows: it costs
// throughput from the report to the command and saves the target's
// overflow. A report the network does not answer costs the clamp to the
// stream's deadline and saves nothing. Networks differ in exactly this:
// on some an mmWave A2 is answered by an SN release at once (SIGCOMM'22,
// "Vivisecting mobility management in 5G": SCG release p50 60 ms), on the
// February 2023 drives each of the nine mmWave A2s was answered 1.43-1.81
// s later by an LTE B1 and an anchor handover adding a sub-6 cell, never
// within the deadline, and the A2's clamp cost 1.2-1.4 % of a drive's
// bytes (README, session 27). The rate is learned, not configured, so a
// network that answers keeps its clamps.
//
// Counted per stream (streams.go): answered when a handover of the kind
// the stream waits for comes while it is live; unanswered when it expires.
// A stream an A1 takes back (the serving cell recovered), or that another
// kind of handover ends, says nothing about its kind and is not counted.

// answerDecay weighs history: each new sample first scales both counts by
// it, so a count is worth about 1/(1−answerDecay) = 16 recent samples and
// a network that starts answering is relearned after a few answers.
const answerDecay = 15.0 / 16

// answerRateMin is the answered share, Laplace-smoothed ((a+1)/(a+u+2)),
// under which a kind counts as rarely answered. With no answer at all it
// takes four unanswered streams in a row (1/5.63 with the decay; three
// give 1/4.82): one drive's A2, or two, decide nothing.
const answerRateMin = 1.0 / 5

// numSourceTypes indexes the data cell's type (signaling.CellType).
const numSourceTypes = int(signaling.CellLTE) + 1

type answerCount struct{ answered, unanswered float64 }

func (c *answerCount) add(answered bool) {
	c.answered *= answerDecay
	c.unanswered *= answerDecay
	if answered {
		c.answered++
	} else {
		c.unanswered++
	}
}

func (c answerCount) share() float64 {
	return (c.answered + 1) / (c.answered + c.unanswered + 2)
}

// rare reports whether the kind is rarely answered in time.
func (c answerCount) rare() bool { return c.share() < answerRateMin }

// answerEntry is the stored form of one kind's counts (omitted when the
// table is empty, so files from before it read and write unchanged).
type answerEntry struct {
	Report     string  `json:"report"`  // lte-a3a5, nr-a3a5, lte-b1, nr-a2
	Serving    string  `json:"serving"` // the data cell's type: sub6, mmwave, lte, unknown
	Answered   float64 `json:"answered"`
	Unanswered float64 `json:"unanswered"`
}

// AnswerCount is one kind's learned counts (SMaxDB.AnswerCounts).
type AnswerCount struct {
	Report     Reports            // one kind
	Serving    signaling.CellType // the data cell's type when the report was sent
	Answered   float64            // decayed count of streams answered within their deadline
	Unanswered float64            // decayed count of streams that expired
	Rare       bool               // rarely answered: no clamp for a prediction resting only on it
}

// Share is the answered share the rule judges, Laplace-smoothed:
// (answered+1)/(answered+unanswered+2); rare when under answerRateMin.
func (a AnswerCount) Share() float64 {
	return answerCount{a.Answered, a.Unanswered}.share()
}

// observeAnswer records one stream's end: answered within its deadline
// or expired.
func (db *SMaxDB) observeAnswer(k answerKind, src signaling.CellType, answered bool) {
	if db == nil || int(src) >= numSourceTypes {
		return
	}
	db.mu.Lock()
	db.answers[k][src].add(answered)
	db.gen++
	db.mu.Unlock()
}

// rarelyAnswered reports whether reports of kind k sent from a data cell
// of type src are rarely answered in time.
func (db *SMaxDB) rarelyAnswered(k answerKind, src signaling.CellType) bool {
	if db == nil || int(src) >= numSourceTypes {
		return false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.answers[k][src].rare()
}

// AnswerCounts lists the kinds with any count, in a stable order (kind,
// then the data cell's type).
func (db *SMaxDB) AnswerCounts() []AnswerCount {
	if db == nil {
		return nil
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	var out []AnswerCount
	db.eachAnswer(func(k answerKind, t signaling.CellType, c answerCount) {
		out = append(out, AnswerCount{Report: 1 << k, Serving: t, Answered: c.answered, Unanswered: c.unanswered, Rare: c.rare()})
	})
	return out
}

// answerEntries is the stored form of the table (db.mu held).
func (db *SMaxDB) answerEntries() []answerEntry {
	var out []answerEntry
	db.eachAnswer(func(k answerKind, t signaling.CellType, c answerCount) {
		out = append(out, answerEntry{Report: reportNames[k], Serving: cellTypeName(t), Answered: c.answered, Unanswered: c.unanswered})
	})
	return out
}

// eachAnswer calls f for each kind with any count, in a stable order
// (db.mu held).
func (db *SMaxDB) eachAnswer(f func(answerKind, signaling.CellType, answerCount)) {
	for k := range db.answers {
		for t, c := range db.answers[k] {
			if c.answered != 0 || c.unanswered != 0 {
				f(answerKind(k), signaling.CellType(t), c)
			}
		}
	}
}

// loadAnswers reads the stored table; errors name the entry and field.
func (db *SMaxDB) loadAnswers(es []answerEntry) error {
	var seen [numAnswerKinds][numSourceTypes]bool
	for i, e := range es {
		k := -1
		for j, n := range reportNames {
			if n == e.Report {
				k = j
			}
		}
		if k < 0 {
			return fmt.Errorf("answers[%d].report %q is not lte-a3a5, nr-a3a5, lte-b1 or nr-a2", i, e.Report)
		}
		t, ok := parseCellType(e.Serving)
		if !ok {
			return fmt.Errorf("answers[%d].serving %q is not sub6, mmwave, lte or unknown", i, e.Serving)
		}
		for _, v := range []struct {
			name string
			x    float64
		}{{"answered", e.Answered}, {"unanswered", e.Unanswered}} {
			// A decayed count never exceeds 1/(1−answerDecay).
			if math.IsNaN(v.x) || v.x < 0 || v.x > 1/(1-answerDecay) {
				return fmt.Errorf("answers[%d].%s %v is not a count between 0 and %v", i, v.name, v.x, 1/(1-answerDecay))
			}
		}
		if seen[k][t] {
			return fmt.Errorf("answers[%d]: %s from %s is listed twice", i, e.Report, e.Serving)
		}
		seen[k][t] = true
		db.answers[k][t] = answerCount{e.Answered, e.Unanswered}
	}
	return nil
}
