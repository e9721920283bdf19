// Package signaling holds the one event model the rest of m2ho consumes:
// what the UE's radio reports about measurements, handover commands, random
// access and MAC scheduling, each stamped with the time it happened.
//
// Readers turn real tools' exports (XCAL CSV) and the project's own
// JSON-lines format into Events; writers produce JSON lines. The model is a
// flat value type so that feeding it through the controller allocates
// nothing.
package signaling

import "time"

// Kind says which of the four signalling messages an Event carries.
type Kind uint8

const (
	KindUnknown      Kind = iota
	KindReport            // RRC measurement report (step 2 of a handover)
	KindHOCommand         // RRC reconfiguration with mobility (step 4)
	KindRandomAccess      // MAC random access outcome (step 8 when reason is handover)
	KindMACSlot           // one downlink MAC slot's scheduling for this UE
)

// CellType is what kind of radio a cell is; it decides Algorithm 1's rules
// and the ŝ_max fall-backs.
type CellType uint8

const (
	CellUnknown CellType = iota
	CellSub6             // NR FR1 (e.g. n77)
	CellMmWave           // NR FR2 (n257, n258, n260, n261)
	CellLTE              // LTE (anchor in NSA); counts as sub-6 for prediction
)

// IsSub6 reports whether Algorithm 1 treats the cell as sub-6 (LTE included).
func (t CellType) IsSub6() bool { return t == CellSub6 || t == CellLTE }

// MeasEvent is the 3GPP measurement event that triggered a report.
type MeasEvent uint8

const (
	MeasUnknown  MeasEvent = iota
	MeasA1                 // serving better than threshold
	MeasA2                 // serving worse than threshold
	MeasA3                 // neighbour offset better than serving
	MeasA4                 // neighbour better than threshold
	MeasA5                 // serving worse than th1 and neighbour better than th2
	MeasA6                 // neighbour offset better than SCell
	MeasB1                 // inter-RAT neighbour better than threshold
	MeasB2                 // serving worse than th1, inter-RAT neighbour better than th2
	MeasPeriodic           // periodical report (no event)
)

// HOKind is what a handover command does to the UE's connection.
type HOKind uint8

const (
	HOUnknown    HOKind = iota
	HOIntraNR           // NR (SA or PCell) handover to another NR cell
	HOLTEAnchor         // LTE anchor (MCG) handover, NR leg kept or changed
	HOSNChange          // NSA secondary node (PSCell) change
	HOSNRelease         // NSA secondary node released: data falls back to LTE
	HOSNAddition        // NSA secondary node added: data moves onto NR
)

// RAReason is why random access was triggered.
type RAReason uint8

const (
	RAUnknown           RAReason = iota
	RAHandover                   // random access to the handover target
	RAConnectionRequest          // initial access / SN addition
	RAULData                     // uplink data arrival
	RAOther
)

// RAResult is the outcome of one random access attempt.
type RAResult uint8

const (
	RAResultUnknown RAResult = iota
	RASuccess
	RAFailure
	RAAborted
)

// Cell identifies a cell as the log names it. ID is the cell's identity in
// the log (an NR PCI, an LTE cell id, or an emulator's name); "" means the
// log did not say. RSRP/RSRQ are in dBm/dB; HasSignal says they are set.
type Cell struct {
	ID        string
	Type      CellType
	RSRP      float64
	RSRQ      float64
	HasSignal bool
}

// Event is one signalling message. Only the fields of its Kind are
// meaningful; the others are zero.
type Event struct {
	Time time.Time
	Kind Kind

	// KindReport: the event and the cells it names. Neighbor.Type is
	// CellUnknown when the report names no neighbour.
	Meas     MeasEvent
	Serving  Cell
	Neighbor Cell

	// KindHOCommand: what kind of handover and where to.
	HO     HOKind
	Target Cell
	// Inferred marks a handover the reader inferred from what followed
	// it rather than read from a command row (XCAL.md: SN releases and
	// LTE handovers without SCG configuration, which XCAL does not
	// export); it has executed by Time. JSON lines carry it as
	// "inferred":true (FORMAT.md).
	Inferred bool

	// KindRandomAccess.
	RAReason RAReason
	RAResult RAResult

	// KindMACSlot: fraction of the slot's resource blocks given to this UE
	// (0..1) and the bytes it delivered; Serving names the serving cell
	// when the source knows it.
	RBRatio float64
	Bytes   int
}
