package emu

import (
	"fmt"
	"sort"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// ReplayLog derives a schedule that replays a real signalling log as it
// is: the handovers FromEvents finds (the commands that move the data to
// another cell) and its pauses (commands that keep it on the serving cell)
// carry the logged command and the logged random access that completed
// them, at their logged times, and every other event of the log
// (each report, re-sent ones included, A1s, commands that move no data,
// failed or aborted random access) is published unchanged at its logged
// time (Schedule.Replay). The predictor thus faces the log's real report
// stream, not one synthesized report per handover. Events placed before 0
// by since are left out.
func ReplayLog(evs []signaling.Event, since func(time.Time) time.Duration, maxLead time.Duration) Schedule {
	s := FromEvents(evs, since, maxLead)
	s.FalseAlarms = nil // the log's own reports and A1s are replayed instead
	// Handovers and pauses (commands that keep the data cell) in command
	// order: each takes its logged command and the random access after it.
	cmds := make([]*Handover, 0, len(s.Handovers)+len(s.Pauses))
	for i := range s.Handovers {
		cmds = append(cmds, &s.Handovers[i])
	}
	for i := range s.Pauses {
		cmds = append(cmds, &s.Pauses[i])
	}
	sort.SliceStable(cmds, func(i, j int) bool { return cmds[i].At < cmds[j].At })
	hi := 0   // next command to match
	cur := -1 // the last matched command, awaiting its random access
	for i := range evs {
		e := evs[i]
		t := since(e.Time)
		if t < 0 {
			continue
		}
		if e.Kind == signaling.KindHOCommand && hi < len(cmds) && cmds[hi].At == t {
			h := cmds[hi]
			ev := e
			h.Command, h.NoReport = &ev, true
			cur, hi = hi, hi+1
			continue
		}
		if e.Kind == signaling.KindRandomAccess && e.RAResult == signaling.RASuccess && cur >= 0 && cmds[cur].RAEvent == nil {
			h := cmds[cur]
			next := time.Duration(1 << 62)
			if cur+1 < len(cmds) {
				next = cmds[cur+1].At
			}
			if t > h.At && t < next && t-h.At <= MaxLoggedInterruption {
				ev := e
				h.RA, h.RAEvent = t, &ev
				continue
			}
		}
		s.Replay = append(s.Replay, ReplayEvent{At: t, Event: e})
	}
	return s
}

// MaxLoggedInterruption bounds the logged command → random access time a
// replayed handover takes as its interruption. A longer one is a failed or
// aborted random access (in the artifact's EN-DC logs: an SCG change whose
// random access aborts, an SCG failure, and an SN addition 1.2 s later);
// the data then falls back to the LTE leg of the split bearer instead of
// stopping, and the drive's capacity log already shows what that leg
// carried. Such a handover keeps the model's nominal interruption, and the
// late random access is replayed as a logged event.
const MaxLoggedInterruption = 500 * time.Millisecond

// AlignMode says how a drive's signalling log was placed against its
// capacity log.
type AlignMode string

const (
	// AlignTimestamps: the logs overlap in time; the XCAL device_time is
	// mapped onto the iperf3 log's start.timestamp.timesecs (the clock
	// difference rounded to whole hours removed: time zones), the XCAL
	// log starting within 5 min of the capacity log, then refined by
	// RefineShift.
	AlignTimestamps AlignMode = "timestamps"
	// AlignStarts: the logs do not overlap (or the capacity log has no
	// timestamp): the XCAL log's first row and the capacity log's first
	// interval are both put at 0.
	AlignStarts AlignMode = "starts"
	// AlignXCALOnly: no capacity log; the XCAL log's first row is at 0.
	AlignXCALOnly AlignMode = "xcal-only"
)

// DriveAlignment is how a measured drive was aligned, for the outputs.
type DriveAlignment struct {
	Mode AlignMode `json:"mode"`
	// ZoneS is the whole-quarter-hour clock difference removed (time
	// zones), ShiftS the refinement (events moved by it), both seconds.
	ZoneS  float64 `json:"zone_s"`
	ShiftS float64 `json:"shift_s"`
	// XCALStartS and XCALEndS are the signalling log's span on the run's
	// timeline, CapacityS the capacity log's length.
	XCALStartS float64 `json:"xcal_start_s"`
	XCALEndS   float64 `json:"xcal_end_s"`
	CapacityS  float64 `json:"capacity_s"`
	Text       string  `json:"text"`
}

// alignSlack is how far apart the starts of two logs of one drive may be.
const alignSlack = 5 * time.Minute

// AlignDrive places a signalling log on the run's timeline against a
// capacity log (nil: none), and says how (see AlignMode): when the
// timestamps put the two logs over each other, the run's 0 is the
// capacity log's start; otherwise both start at 0.
func AlignDrive(evs []signaling.Event, capLog *IperfUDP) (func(time.Time) time.Duration, DriveAlignment) {
	var a DriveAlignment
	if len(evs) == 0 {
		return func(time.Time) time.Duration { return 0 }, DriveAlignment{Mode: AlignXCALOnly, Text: "no events"}
	}
	first, last := evs[0].Time, evs[len(evs)-1].Time
	starts := SinceOrigin(first)
	if capLog == nil {
		a.Mode = AlignXCALOnly
		a.XCALEndS = last.Sub(first).Seconds()
		a.Text = "no capacity log: the XCAL log's first row is at 0 s; cells take the scenario's per-type capacities"
		return starts, a
	}
	a.CapacityS = capLog.Period().Seconds()
	if !capLog.Start.IsZero() {
		// Zones in whole hours: with quarter hours, logs of two drives
		// 20-40 min apart would be laid over each other.
		ts := sinceTimeOfDay(first, capLog.Start, time.Hour)
		f, l := ts(first), ts(last)
		// A log that starts more than alignSlack away from the other
		// is another drive, even when the quarter-hour rounding of the
		// clock zone happens to lay them over each other.
		if l >= 0 && f < capLog.Period() && f > -alignSlack && f < capLog.Period()+alignSlack {
			a.Mode = AlignTimestamps
			a.ZoneS = (first.Sub(capLog.Start) - f).Round(time.Hour).Seconds()
			for a.ZoneS >= 43200 {
				a.ZoneS -= 86400
			}
			for a.ZoneS < -43200 {
				a.ZoneS += 86400
			}
			sh, ok := RefineShift(capLog.Series, NewServingTimeline(evs, ts), 3*time.Second, 100*time.Millisecond)
			since := ts
			if ok && sh != 0 {
				since = func(t time.Time) time.Duration { return ts(t) + sh }
			}
			a.ShiftS = sh.Seconds()
			a.XCALStartS, a.XCALEndS = since(first).Seconds(), since(last).Seconds()
			a.Text = fmt.Sprintf("aligned by timestamps: XCAL device_time against the capacity log's start.timestamp.timesecs, %+.2f h of clock zone removed, refined by %+.1f s from the vertical handovers' capacity steps; XCAL spans %.1f-%.1f s of the %.1f s capacity log",
				a.ZoneS/3600, a.ShiftS, a.XCALStartS, a.XCALEndS, a.CapacityS)
			return since, a
		}
	}
	a.Mode = AlignStarts
	a.XCALEndS = last.Sub(first).Seconds()
	a.Text = fmt.Sprintf("aligned from both starts: the timestamps do not overlap, so the XCAL log's first row and the capacity log's first interval are both at 0 s (XCAL %.1f s, capacity %.1f s)", a.XCALEndS, a.CapacityS)
	return starts, a
}
