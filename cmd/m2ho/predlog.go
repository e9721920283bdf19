package main

import (
	"strconv"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
)

// predHeader names the columns of --prediction-log: one line per episode
// of the controller outside Stable (a prediction's clamp, a command's,
// Smoothing), written when it ends. start/end: entering Preparation and
// returning to Stable (or the next episode's start); command: the
// handover command (0: none came); outcome: confirmed, unpredicted (a
// command without prediction), withdrawn-timeout, withdrawn-a1, or ended
// (Stable for another reason: signal lost); type and target: the
// prediction's (the command's when unpredicted); serving: the data
// cell's type when it began; clamp_B: ŝ_max the flows shared when it
// began (0: none, an unclamped mmWave → mmWave); reports: the kinds of
// report the predictions rested on (lte-a3a5, nr-a3a5, lte-b1, nr-a2,
// joined by '+'; "-": none, an unpredicted command or a classic rule set).
const predHeader = "start_unix_ns\tend_unix_ns\tcommand_unix_ns\toutcome\ttype\ttarget\tserving\tclamp_B\treports\n"

// predLog is an m2ho.Observer in front of another that writes each
// episode to --prediction-log, so that what a prediction cost or saved
// can be read against a baseline over the same moments (the bench's
// "Prediction episodes"). hint reads the controller's state; the
// controller calls the observer under the engine's lock, so it may.
type predLog struct {
	*tsvLog
	next m2ho.Observer
	hint func() m2ho.Hint

	open       bool
	start, cmd time.Time
	outcome    string
	typ        signaling.HOType
	target     string
	serving    signaling.CellType
	clamp      int
	reports    m2ho.Reports
	end        time.Time
	fill       func([]byte) []byte

	// The last prediction or unpredicted command, for the episode it
	// opens (the controller reports it before its transition).
	lastAt      time.Time
	lastTyp     signaling.HOType
	lastTarget  string
	lastReports m2ho.Reports
	lastCommand bool
}

func openPredLog(name string, next m2ho.Observer) (*predLog, error) {
	t, err := openTSVLog("--prediction-log", name, predHeader)
	if err != nil {
		return nil, err
	}
	l := &predLog{tsvLog: t, next: next}
	l.fill = func(b []byte) []byte {
		b = strconv.AppendInt(b, l.start.UnixNano(), 10)
		var cmd int64
		if !l.cmd.IsZero() {
			cmd = l.cmd.UnixNano()
		}
		b = appendInts(b, l.end.UnixNano(), cmd)
		b = append(b, '\t')
		b = append(b, l.outcome...)
		b = append(b, '\t')
		b = append(b, l.typ.String()...)
		b = append(b, '\t')
		b = appendField(b, l.target)
		b = append(b, '\t')
		b = append(b, l.serving.String()...)
		b = appendInts(b, int64(l.clamp))
		b = append(b, '\t')
		return l.reports.Append(b)
	}
	return l, nil
}

func (l *predLog) close(now time.Time) {
	if !l.open {
		return
	}
	l.open, l.end = false, now
	l.mu.Lock()
	l.write(l.fill)
	l.mu.Unlock()
}

func (l *predLog) Transition(now time.Time, from, to m2ho.State, why string) {
	switch to {
	case m2ho.Preparation:
		if from == m2ho.Preparation {
			break
		}
		l.close(now)
		var h m2ho.Hint
		if l.hint != nil {
			h = l.hint()
		}
		l.open, l.start, l.cmd, l.outcome = true, now, time.Time{}, "ended"
		l.serving, l.clamp = h.Serving.Type, h.SMax
		l.typ, l.target, l.reports = 0, h.Target.ID, 0
		if l.lastAt.Equal(now) {
			l.typ, l.target, l.reports = l.lastTyp, l.lastTarget, l.lastReports
			if l.lastCommand {
				l.outcome, l.cmd = "unpredicted", now
			}
		}
	case m2ho.Stable:
		l.close(now)
	}
	l.next.Transition(now, from, to, why)
}

func (l *predLog) Prediction(now time.Time, p m2ho.PredictionOutcome) {
	switch p.Kind {
	case m2ho.OutcomePredicted:
		l.lastAt, l.lastTyp, l.lastTarget, l.lastReports, l.lastCommand = now, p.Predicted, p.Target.ID, p.Reports, false
	case m2ho.OutcomeUnpredicted:
		// A command in Preparation without a live prediction (the
		// clamp of an expired one still held) belongs to this episode;
		// one in Stable or Smoothing opens the next.
		l.lastAt, l.lastTyp, l.lastTarget, l.lastReports, l.lastCommand = now, p.Actual, p.Target.ID, 0, true
		if l.open && l.cmd.IsZero() {
			l.outcome, l.cmd = "unpredicted", now
		}
	case m2ho.OutcomeConfirmed:
		l.outcome, l.cmd = "confirmed", now
		l.reports |= p.Reports
	case m2ho.OutcomeWithdrawn:
		if l.cmd.IsZero() {
			l.outcome = "withdrawn-" + p.Reason.String()
		}
		l.reports |= p.Reports
	}
	l.next.Prediction(now, p)
}

func (l *predLog) SignalLost(now time.Time)                      { l.next.SignalLost(now) }
func (l *predLog) SignalRestored(now time.Time)                  { l.next.SignalRestored(now) }
func (l *predLog) SignalStale(now time.Time, late time.Duration) { l.next.SignalStale(now, late) }
func (l *predLog) SignalFresh(now time.Time)                     { l.next.SignalFresh(now) }
