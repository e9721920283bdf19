package emu

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// HandoverRecord is one handover of a run, as handovers.tsv lists it.
// Times are offsets from the model's start.
type HandoverRecord struct {
	Report, Command, RA time.Duration
	From, To            signaling.Cell
	// OverflowDrops are the downlink tail drops from this command to the
	// next; FlushedHoles and FlushedEarly the packets missing at this
	// handover's flush and those delivered past them (Finding 2).
	OverflowDrops, FlushedHoles, FlushedEarly int64
	// TargetDrops are the drops of OverflowDrops from the command until
	// one RTT after random access (Finding 3: the target's overflow);
	// Counters.OverflowHandovers counts the handovers where it is > 0.
	TargetDrops int64
}

// TypeName is the handover's type in the bench's words: horizontal,
// sub6-to-mmwave or mmwave-to-sub6 (LTE counts as sub-6).
func (h HandoverRecord) TypeName() string { return HOTypeName(h.From.Type, h.To.Type) }

// HOTypeName names the type of a handover from a cell of type from to one
// of type to, as the output files spell it (signaling.HOType's names).
func HOTypeName(from, to signaling.CellType) string {
	return signaling.ClassifyHO(from, to).String()
}

// FalseAlarmRecord is a measurement report withdrawn by an A1.
type FalseAlarmRecord struct{ Report, A1 time.Duration }

// CapacityBin is the serving cell's delivery capacity over one bin.
type CapacityBin struct {
	Start time.Duration
	Mbps  float64        // 0 while the downlink is blocked by a handover
	Cell  signaling.Cell // the cell serving at the end of the bin
}

// HandoverRecords lists the handovers whose command came by until (an
// offset from the start): exactly the handover commands the model has
// emitted once it was stepped to until (pauses, Schedule.Pauses, are not
// handovers).
func (m *Model) HandoverRecords(until time.Duration) []HandoverRecord {
	var out []HandoverRecord
	for _, p := range m.plans {
		if p.cmd > until {
			break // plans are in command order
		}
		if p.keep {
			continue // a pause of the link, not a handover
		}
		out = append(out, HandoverRecord{Report: p.report, Command: p.cmd, RA: p.ra,
			From: m.cells[p.from].sig, To: m.cells[p.to].sig,
			OverflowDrops: p.drops, FlushedHoles: p.holes, FlushedEarly: p.early, TargetDrops: p.targetDrops})
	}
	return out
}

// FalseAlarmRecords lists the false alarms whose A1 came by until, in
// report order; for one that ends in silence, A1 is its last re-send.
func (m *Model) FalseAlarmRecords(until time.Duration) []FalseAlarmRecord {
	var out []FalseAlarmRecord
	for _, a := range m.alarms {
		if a.to <= until {
			out = append(out, FalseAlarmRecord{Report: a.from, A1: a.to})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Report < out[j].Report })
	return out
}

// segment is a stretch of time with one serving cell; cell -1 means the
// downlink is blocked (handover command until random access).
type segment struct {
	from, to time.Duration
	cell     int
}

func (m *Model) segments(until time.Duration) []segment {
	var segs []segment
	serving := m.serving
	if len(m.plans) > 0 {
		serving = m.plans[0].from
	}
	t := time.Duration(0)
	for _, p := range m.plans {
		if p.cmd >= until {
			break
		}
		if p.cmd > t {
			segs = append(segs, segment{t, p.cmd, serving})
		}
		segs = append(segs, segment{max(t, p.cmd), min(p.ra, until), -1})
		t, serving = min(p.ra, until), p.to
	}
	if t < until {
		segs = append(segs, segment{t, until, serving})
	}
	return segs
}

// CapacityBins is the downlink capacity the serving cell offered in each
// bin of length bin from 0 to until (the last bin may be shorter and is
// averaged over its own length): the scaled capacity of the cell serving
// at each instant, 0 from a handover command until random access (the
// model serves no downlink then), the same capacity the mahimahi log's `#`
// lines carry.
func (m *Model) CapacityBins(bin, until time.Duration) []CapacityBin {
	if bin <= 0 || until <= 0 {
		return nil
	}
	segs := m.segments(until)
	var out []CapacityBin
	si := 0
	for a := time.Duration(0); a < until; a += bin {
		b := min(a+bin, until)
		var bytes int64
		cell, blockedAt := -1, -1
		for si < len(segs) && segs[si].to <= a {
			si++
		}
		for j := si; j < len(segs) && segs[j].from < b; j++ {
			s := segs[j]
			if s.cell < 0 {
				cell, blockedAt = -1, j
				continue
			}
			cell = s.cell
			bytes += m.cells[s.cell].Capacity.Bytes(max(s.from, a), min(s.to, b))
		}
		if cell < 0 { // blocked at the end of the bin: name the target
			cell = m.serving
			for j := blockedAt + 1; blockedAt >= 0 && j < len(segs); j++ {
				if segs[j].cell >= 0 {
					cell = segs[j].cell
					break
				}
			}
			if blockedAt >= 0 && blockedAt+1 >= len(segs) {
				// the run ended during the handover: its target
				for _, p := range m.plans {
					if p.cmd <= segs[blockedAt].from {
						cell = p.to
					}
				}
			}
		}
		out = append(out, CapacityBin{Start: a, Mbps: float64(bytes) * 8 / (b - a).Seconds() / 1e6, Cell: m.cells[cell].sig})
	}
	return out
}

// CellInfo is one cell of a run as the model built it: its buffer and
// slot after --scale, for the bench to set the controller's buffer
// estimates against.
type CellInfo struct {
	ID          string `json:"id"`
	Type        string `json:"type"` // mmwave or sub6
	BufferBytes int64  `json:"buffer_bytes"`
}

// Cells lists the cells the model knows (declared, and those made from
// the defaults for the schedule), in creation order.
func (m *Model) Cells() []CellInfo {
	out := make([]CellInfo, len(m.cells))
	for i, c := range m.cells {
		out[i] = CellInfo{ID: c.ID, Type: CellTypeName(c.Type), BufferBytes: c.Buffer}
	}
	return out
}

// Summary is emulator.json, the run's contract with the bench.
type Summary struct {
	Scenario         string  `json:"scenario"`
	Scale            float64 `json:"scale"`
	StartUnixNS      int64   `json:"start_unix_ns"`
	DurationS        float64 `json:"duration_s"`
	Valid            bool    `json:"valid"`
	LatePct          float64 `json:"late_pct"`
	MaxLateMs        float64 `json:"max_late_ms"`
	DeliveredPackets int64   `json:"delivered_packets"`
	OverflowDrops    int64   `json:"overflow_drops"`
	ReorderFlushes   int64   `json:"reorder_flushes"`
	FlushedHoles     int64   `json:"flushed_holes"`
	FalseAlarms      int64   `json:"false_alarms"`
	Handovers        int64   `json:"handovers"`
	// AnchorPauses are the link's pauses at commands that keep the data
	// cell (LTE anchor handovers; not in Handovers).
	AnchorPauses int64 `json:"anchor_pauses"`
	// MmWaveEdges are the mmWave → sub-6 handovers whose source cell's
	// capacity fell by the edge profile before them (mmwave_edge).
	MmWaveEdges     int64 `json:"mmwave_edges"`
	DupAcksUp       int64 `json:"dup_acks_up"`
	EventsPublished int64 `json:"events_published"`
	EventsDropped   int64 `json:"events_dropped"`
	// Per-handover findings (the calibration report's frequencies):
	// handovers whose flush had holes are ReorderFlushes; these count
	// handovers with a target-buffer overflow (command until one RTT after
	// random access), those from an mmWave source, and of those the ones
	// with an overflow.
	OverflowHandovers  int64 `json:"overflow_handovers"`
	FromMmWave         int64 `json:"handovers_from_mmwave"`
	OverflowFromMmWave int64 `json:"overflow_handovers_from_mmwave"`
	// Model settings the report needs: the per-handover flush-hole
	// probability (0: off) and the per-packet HARQ fraction.
	FlushHolesP  float64 `json:"flush_holes_p"`
	HARQFraction float64 `json:"harq_fraction"`
	// Drive is set for a replayed measured drive.
	Drive *Drive `json:"drive,omitempty"`
	// Loop is the real-time driver's profile: where its time went and
	// the late deliveries' causes.
	Loop *LoopProfile `json:"loop,omitempty"`
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 6, 64) }

// CellTypeName is a cell type as the output files spell it: mmwave, or
// sub6 (LTE included).
func CellTypeName(t signaling.CellType) string {
	if t == signaling.CellMmWave {
		return "mmwave"
	}
	return "sub6"
}

// WriteCapacityTSV writes capacity.tsv: `t_s mbps cell type`, one row per
// bin, t_s the bin's start.
func WriteCapacityTSV(w io.Writer, bins []CapacityBin) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("t_s\tmbps\tcell\ttype\n")
	for _, b := range bins {
		fmt.Fprintf(bw, "%s\t%.3f\t%s\t%s\n", strconv.FormatFloat(b.Start.Seconds(), 'f', 3, 64), b.Mbps, b.Cell.ID, CellTypeName(b.Cell.Type))
	}
	return bw.Flush()
}

// WriteHandoversTSV writes handovers.tsv: `report_s command_s ra_s from
// to type`.
func WriteHandoversTSV(w io.Writer, hs []HandoverRecord) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("report_s\tcommand_s\tra_s\tfrom\tto\ttype\toverflow_drops\tflushed_holes\tflushed_early\n")
	for _, h := range hs {
		fmt.Fprintf(bw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", secs(h.Report), secs(h.Command), secs(h.RA), h.From.ID, h.To.ID, h.TypeName(),
			h.OverflowDrops, h.FlushedHoles, h.FlushedEarly)
	}
	return bw.Flush()
}

// WriteFalseAlarmsTSV writes falsealarms.tsv: `report_s a1_s`.
func WriteFalseAlarmsTSV(w io.Writer, fs []FalseAlarmRecord) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("report_s\ta1_s\n")
	for _, f := range fs {
		fmt.Fprintf(bw, "%s\t%s\n", secs(f.Report), secs(f.A1))
	}
	return bw.Flush()
}

// WriteSummary writes emulator.json, indented, with a final newline.
func WriteSummary(w io.Writer, s Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
