package emu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// Dir is a packet's direction through the emulated link.
type Dir uint8

const (
	Down Dir = iota // server → UE: through the cell buffer and the air
	Up              // UE → server: a delay + capacity pipe
)

func (d Dir) String() string {
	if d == Up {
		return "up"
	}
	return "down"
}

// SlotEvents says which MAC slots become signaling events.
type SlotEvents uint8

const (
	// SlotEventsBursts publishes non-empty slots and the first empty slot
	// after them: exactly what M2HO's burst detector needs.
	SlotEventsBursts SlotEvents = iota
	SlotEventsAll               // every processed slot (busy, or the empty one ending a burst; idle air is never walked)
	SlotEventsNone
)

// CellSpec is one cell of a scenario.
type CellSpec struct {
	ID       string
	Type     signaling.CellType
	Capacity Capacity
	Buffer   int64         // base-station buffer for this UE, bytes
	Slot     time.Duration // 0 = Config.SlotSub6 / SlotMmWave by type
}

// Config is a resolved scenario: everything the model needs, no files.
type Config struct {
	Cells []CellSpec
	// CellDefaults give capacity and buffer to cells a schedule names but
	// Cells does not declare (e.g. cells of a real log), by type.
	CellDefaults map[signaling.CellType]CellSpec
	// DefaultCapacity, when set, gives each cell made from CellDefaults a
	// capacity of its own (capacity_variation: measured without a
	// capacity log: a trace of the type's measured variability, seeded by
	// the scenario's seed and the cell's id), so the cells of a replayed
	// drive do not share one level and a horizontal handover can step. A
	// nil capacity keeps the default's.
	DefaultCapacity func(id string, typ signaling.CellType) (Capacity, error)

	RTT                  time.Duration // base RTT, split evenly into the one-way delays
	UplinkMbps           float64
	UplinkBuffer         int64
	SlotSub6, SlotMmWave time.Duration
	SlotEvents           SlotEvents
	BackgroundLoad       float64 // fraction of slots other UEs take

	// RTTByType, when set, gives the base RTT of each cell type (sub-6,
	// mmWave; LTE counts as sub-6): RTT is then their minimum (the wired
	// part) and a cell of a slower type adds the difference on its
	// downlink.
	RTTByType map[signaling.CellType]time.Duration

	HARQFraction float64 // per-packet model: fraction of packets needing a link-layer retransmission
	RetxDelay    Dist    // its extra delay
	// FlushHoles is the per-handover model of Finding 2: the probability
	// that a handover's flush has holes (M2HO MobiCom'24 §3.3: 18.4 %). For
	// each handover the model decides once, from the seed, whether one
	// transport block (every packet of one slot) failed its HARQ
	// transmission RetxDelay before the command, so its retransmission is
	// still pending at the command while the packets after it wait in the
	// reordering buffer. The rate per handover therefore does not depend
	// on capacity or --scale, unlike HARQFraction's per-packet draw.
	FlushHoles float64
	// Retx, when set, decides retransmissions instead of HARQFraction and
	// RetxDelay: deterministic fault injection for tests and replays. It
	// is asked once per air transmission of packet id.
	Retx func(id uint64) (extra time.Duration, retx bool)
	// HARQByPayload makes the driver decide each packet's retransmission
	// from its TCP payload (see PayloadRetx) instead of the model's random
	// stream: two runs sending the same bytes see the same link faults,
	// however differently their traffic interleaves.
	HARQByPayload bool

	Lead          Dist          // report → command
	CommandToExec time.Duration // command → start of the interruption
	// FlushDelay is how long after receiving the command the UE releases
	// the source's link layer and flushes its reordering buffer: it first
	// decodes and processes the reconfiguration (TS 38.331 §12 allows
	// 10 ms for an RRC reconfiguration; the logs show 33 ms from the
	// command to random access). The proxy reads the command from the
	// same UE, so it knows of it before the laptop sees the holes.
	FlushDelay   time.Duration
	Interruption time.Duration // hard interruption, no delivery either way
	A1After      time.Duration // report → A1 of a false alarm
	// AnchorPause stops the link at Schedule.Pauses (anchor handovers
	// that keep the data cell) from the command to the logged random
	// access (else CommandToExec+Interruption), as a handover does, but
	// with the queue kept in the same cell and no planned flush hole;
	// off, their events are published as signalling only.
	AnchorPause bool
	// MmWaveEdge, when set, lowers an mmWave cell's capacity by the
	// profile in the span before each handover from it down to sub-6 or
	// LTE (clipped at the start of the cell's dwell): the cell at its edge
	// (MeasuredMmWaveEdge, edge.go). A replay with a capacity log leaves
	// it nil: the log has the edge already.
	MmWaveEdge *EdgeProfile

	Schedule Schedule
	Duration time.Duration // informational: the run's length
	Seed     uint64

	// Scale multiplies every capacity and buffer (the bench's --scale);
	// 0 means 1.
	Scale float64
	// LateThreshold: a delivery handed out more than this after its due
	// time counts as late (the driver fell behind). 0 = 1 ms.
	LateThreshold time.Duration
}

// DefaultConfig holds the values from the M2HO paper's measurements.
func DefaultConfig() Config {
	return Config{
		RTT:           70 * time.Millisecond,
		UplinkMbps:    100,
		UplinkBuffer:  4 << 20,
		SlotSub6:      500 * time.Microsecond,
		SlotMmWave:    125 * time.Microsecond,
		RetxDelay:     Dist{Kind: "uniform", Min: 5 * time.Millisecond, Max: 10 * time.Millisecond},
		Lead:          DefaultLead,
		CommandToExec: 33 * time.Millisecond,
		FlushDelay:    5 * time.Millisecond,
		Interruption:  27 * time.Millisecond,
		A1After:       120 * time.Millisecond,
		AnchorPause:   true,
		Scale:         1,
	}
}

// Delivery is one packet leaving the model: delivered at the far end of
// its direction at Due, or dropped at Due.
type Delivery struct {
	ID      uint64
	Size    int
	Dir     Dir
	Sent    time.Time // when it was enqueued
	Due     time.Time // scheduled delivery (or drop) time; lateness = now - Due
	Dropped bool
}

// Counters are the model's running totals.
type Counters struct {
	Delivered      [2]int64 // packets, by Dir
	DeliveredBytes [2]int64
	OverflowDrops  int64 // downlink tail drops at a cell buffer
	OverflowBytes  int64
	HODrops        int64 // of OverflowDrops: while a handover was in progress (Finding 3)
	UplinkDrops    int64
	BadSize        int64 // packets refused for an impossible size
	HARQRetx       int64 // packets that needed a link-layer retransmission
	ReorderFlushes int64 // handover commands whose flush delivered packets past a hole (Finding 2)
	FlushedEarly   int64 // packets delivered at a flush ahead of a missing one
	FlushedHoles   int64 // packets missing at a flush, delivered later via the target
	HolesPlanned   int64 // handovers the per-handover model (FlushHoles) gave a hole
	// Finding 3 per handover: handovers with at least one overflow drop
	// from the command until one RTT after random access (what the
	// interruption piled up drains then), overall and from an mmWave
	// source.
	OverflowHandovers  int64
	FromMmWave         int64
	OverflowFromMmWave int64
	ReplayedEvents     int64 // logged signalling events replayed as they are (Schedule.Replay)
	AnchorPauses       int64 // pauses of the link at commands that keep the data cell (Schedule.Pauses)
	MmWaveEdges        int64 // mmWave → sub-6 handovers whose source cell's capacity fell before them (Config.MmWaveEdge)
	Reports            int64
	FalseAlarms        int64
	Handovers          [2][2]int64 // [from mmWave][to mmWave]: [0][0] sub-6→sub-6, [0][1] sub-6→mmWave, ...
	Late               int64       // deliveries handed out later than LateThreshold after Due
	MaxLate            time.Duration
}

type pkt struct {
	id   uint64
	size int64
	sent time.Duration
	t    time.Duration // stage time: wire exit (down) or air finish (up)
}

type uePkt struct {
	p    pkt
	recv time.Duration // when the UE's link layer has it (after any HARQ retx)
}

type cell struct {
	CellSpec
	sig      signaling.Cell
	extra    time.Duration // downlink delay on top of the wired RTT (RTTByType)
	slot     time.Duration
	q        ring[pkt]
	queued   int64 // bytes in q
	headSent int64 // bytes of q's head already on the air
}

type ctrlKind uint8

const (
	ctrlReport ctrlKind = iota
	ctrlA1
	ctrlCommand
	ctrlRA
	ctrlReplay   // a logged event published as it is
	ctrlAlarmEnd // the last report of a false alarm that ends in silence
)

type ctrl struct {
	t    time.Duration
	kind ctrlKind
	ho   int // handover plan for ctrlCommand / ctrlRA
	ev   signaling.Event
}

type hoPlan struct {
	report, cmd, exec, ra time.Duration
	from, to              int
	meas                  signaling.MeasEvent
	// holeAt >= 0: the per-handover model's failed transport block is the
	// first slot ending at or after holeAt (before cmd).
	holeAt time.Duration
	// What this handover did, counted from its command to the next:
	// tail drops at a cell buffer, and at its own flush the packets
	// missing (holes) and delivered past them (early). targetDrops are
	// the drops among them from the command (the forwarded queue
	// included) until one RTT after random access: the target's
	// overflow (Finding 3), the one count behind OverflowHandovers.
	drops, holes, early int64
	targetDrops         int64
	// keep: a pause (Schedule.Pauses), from == to; not a handover of
	// the records and counters, drops after it stay with the handover
	// before.
	keep bool
	// edge: the source cell's capacity fell before it (Config.MmWaveEdge)
	edge bool
}

type window struct{ from, to time.Duration }

// Model is the emulated 5G link. It is not safe for concurrent use; every
// method takes the current time and never reads a clock.
type Model struct {
	cfg   Config
	start time.Time
	now   time.Duration
	rng   *rand.Rand

	dDown, dUp time.Duration
	cells      []cell
	serving    int

	dlWire  ring[pkt]
	ue      ring[uePkt]
	ueLast  time.Duration
	fwd     ring[pkt]
	nextSlt time.Duration // end of the next slot to serve; -1 = idle
	busy    bool          // the last served slot carried data
	blocked time.Duration // downlink served again only from here (handover)
	inHO    bool

	ul         ring[pkt]
	ulDone     int // entries at ul's front whose air time is over
	ulAirBytes int64
	ulLast     time.Duration
	ulBuf      int64
	ulBps      float64

	ctrls   []ctrl
	ci      int
	plans   []hoPlan
	windows []window
	alarms  []window // false alarms: report → A1
	pending ring[Delivery]

	curPlan int // the last handover commanded (-1: none yet)

	lateThr time.Duration
	c       Counters
	// per-handover flush-hole model: the next plan with a hole, and the
	// end of the slot chosen as the hole (0 = not chosen yet)
	holePlan int
	holeSlot time.Duration
	logs     [2]*MMLog
	capNext  [2]time.Duration
}

const never = time.Duration(math.MaxInt64)

// New builds a model whose time zero is start. seed overrides cfg.Seed
// when non-zero; the same config and seed give the same run.
func New(cfg Config, start time.Time, seed uint64) (*Model, error) {
	if seed == 0 {
		seed = cfg.Seed
	}
	scale := cfg.Scale
	if scale == 0 {
		scale = 1
	}
	if scale < 0 || math.IsNaN(scale) || math.IsInf(scale, 0) {
		return nil, fmt.Errorf("scale: %v must be > 0", cfg.Scale)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"rtt", cfg.RTT}, {"handover.command_to_exec", cfg.CommandToExec}, {"handover.flush_delay", cfg.FlushDelay},
		{"handover.interruption", cfg.Interruption}, {"handover.a1_after", cfg.A1After}} {
		if d.v < 0 {
			return nil, fmt.Errorf("%s: negative", d.field)
		}
	}
	if cfg.FlushDelay > cfg.CommandToExec {
		return nil, fmt.Errorf("handover.flush_delay %v: after the execution (command_to_exec %v)", cfg.FlushDelay, cfg.CommandToExec)
	}
	if !(cfg.HARQFraction >= 0 && cfg.HARQFraction <= 1) {
		return nil, fmt.Errorf("errors.harq_fraction: %v must be in [0,1]", cfg.HARQFraction)
	}
	if !(cfg.BackgroundLoad >= 0 && cfg.BackgroundLoad < 1) {
		return nil, fmt.Errorf("slots.background_load: %v must be in [0,1)", cfg.BackgroundLoad)
	}
	if cfg.UplinkMbps <= 0 {
		return nil, fmt.Errorf("uplink.mbps: must be > 0")
	}
	if !(cfg.FlushHoles >= 0 && cfg.FlushHoles <= 1) {
		return nil, fmt.Errorf("errors.flush_holes: %v must be in [0,1]", cfg.FlushHoles)
	}
	for t, r := range cfg.RTTByType {
		if r <= 0 {
			return nil, fmt.Errorf("rtt_by_type.%s: must be > 0", typeName(t))
		}
	}
	if len(cfg.RTTByType) > 0 {
		cfg.RTT = minRTT(cfg.RTTByType)
	}
	if cfg.HARQFraction > 0 || cfg.FlushHoles > 0 {
		if err := cfg.RetxDelay.validate("errors.retx_delay"); err != nil {
			return nil, err
		}
	}
	if err := cfg.Lead.validate("handover.report_lead"); err != nil {
		return nil, err
	}
	if cfg.MmWaveEdge != nil {
		if err := cfg.MmWaveEdge.validate("mmwave_edge"); err != nil {
			return nil, err
		}
	}
	m := &Model{
		cfg:     cfg,
		start:   start,
		rng:     rand.New(rand.NewPCG(seed, 0x656d75)),
		dDown:   cfg.RTT / 2,
		dUp:     cfg.RTT - cfg.RTT/2,
		nextSlt: -1,
		ulBuf:   int64(float64(cfg.UplinkBuffer) * scale),
		ulBps:   cfg.UplinkMbps * 1e6 * scale,
		lateThr: cfg.LateThreshold,
		curPlan: -1,
	}
	if m.lateThr == 0 {
		m.lateThr = time.Millisecond
	}
	if m.ulBuf <= 0 {
		m.ulBuf = 1 << 20
	}
	for i, cs := range cfg.Cells {
		if _, err := m.addCell(cs, scale, fmt.Sprintf("cells[%d]", i)); err != nil {
			return nil, err
		}
	}
	sc := cfg.Schedule
	var err error
	if m.serving, err = m.cellFor(sc.Start, sc.StartType, scale, "schedule.start"); err != nil {
		return nil, err
	}
	if err := m.plan(sc, scale); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Model) addCell(cs CellSpec, scale float64, field string) (int, error) {
	if cs.ID == "" {
		return 0, fmt.Errorf("%s.id: empty", field)
	}
	for _, c := range m.cells {
		if c.ID == cs.ID {
			return 0, fmt.Errorf("%s.id: %q declared twice", field, cs.ID)
		}
	}
	if cs.Type == signaling.CellUnknown {
		return 0, fmt.Errorf("%s.type: unknown", field)
	}
	if cs.Capacity == nil {
		return 0, fmt.Errorf("%s.capacity: missing", field)
	}
	if cs.Buffer <= 0 {
		return 0, fmt.Errorf("%s.buffer: must be > 0 bytes", field)
	}
	c := cell{CellSpec: cs, sig: signaling.Cell{ID: cs.ID, Type: cs.Type}}
	if r, ok := m.cfg.RTTByType[dataType(cs.Type)]; ok && r > m.cfg.RTT {
		c.extra = r - m.cfg.RTT
	}
	if scale != 1 {
		c.Capacity = Scaled{C: cs.Capacity, F: scale}
		c.Buffer = int64(float64(cs.Buffer) * scale)
		if c.Buffer < 1 {
			c.Buffer = 1
		}
	}
	c.slot = cs.Slot
	if c.slot == 0 {
		switch cs.Type {
		case signaling.CellMmWave:
			c.slot = m.cfg.SlotMmWave
		case signaling.CellLTE:
			c.slot = time.Millisecond
		default:
			c.slot = m.cfg.SlotSub6
		}
	}
	if c.slot <= 0 {
		return 0, fmt.Errorf("%s.slot: must be > 0", field)
	}
	m.cells = append(m.cells, c)
	return len(m.cells) - 1, nil
}

// cellFor finds a declared cell or creates one from the defaults of typ.
func (m *Model) cellFor(id string, typ signaling.CellType, scale float64, field string) (int, error) {
	for i := range m.cells {
		if m.cells[i].ID == id {
			return i, nil
		}
	}
	if id == "" && len(m.cells) > 0 {
		return 0, nil
	}
	if typ == signaling.CellLTE {
		typ = signaling.CellSub6
	}
	d, ok := m.cfg.CellDefaults[typ]
	if !ok {
		return 0, fmt.Errorf("%s: cell %q is not declared and there are no cell defaults for type %s", field, id, typeName(typ))
	}
	d.ID, d.Type = id, typ
	if d.ID == "" {
		d.ID = typeName(typ) + "-0"
	}
	if m.cfg.DefaultCapacity != nil {
		c, err := m.cfg.DefaultCapacity(d.ID, typ)
		if err != nil {
			return 0, fmt.Errorf("%s: cell %q: %w", field, d.ID, err)
		}
		if c != nil {
			d.Capacity = c
		}
	}
	return m.addCell(d, scale, field)
}

func (m *Model) plan(sc Schedule, scale float64) error {
	hos := append([]Handover(nil), sc.Handovers...)
	sort.SliceStable(hos, func(i, j int) bool { return hos[i].At < hos[j].At })
	hos = m.mergePauses(hos, sc.Pauses)
	serving := m.serving
	var prevRA time.Duration = -1
	// the mmWave edges: per source cell, the commands that leave it for
	// sub-6 and when its dwell began
	var dwellFrom time.Duration
	edgeEnds, edgeStarts := map[int][]time.Duration{}, map[int][]time.Duration{}
	type change struct {
		t    time.Duration
		cell int
	}
	changes := []change{{-1 << 62, serving}}
	for i, h := range hos {
		field := fmt.Sprintf("schedule.handovers[%d]", i)
		keep := h.keep
		to := serving
		if !keep {
			var err error
			if to, err = m.cellFor(h.To, h.ToType, scale, field+".to"); err != nil {
				return err
			}
			if to == serving {
				return fmt.Errorf("%s.to: cell %q is already serving at %v", field, m.cells[to].ID, h.At)
			}
		}
		if h.At <= prevRA {
			return fmt.Errorf("%s.at: command at %v before the previous handover completes at %v", field, h.At, prevRA)
		}
		lead := h.Lead
		if lead <= 0 && !keep { // a pause draws nothing: the handovers' draws stay as without it
			lead = m.cfg.Lead.Draw(m.rng)
		}
		from := m.cells[serving].Type
		toT := m.cells[to].Type
		meas := h.Report
		if meas == signaling.MeasUnknown {
			switch {
			case sameKind(from, toT):
				meas = signaling.MeasA3
			case from == signaling.CellMmWave:
				meas = signaling.MeasA2
			case m.rng.IntN(2) == 0:
				meas = signaling.MeasB1
			default:
				meas = signaling.MeasA5
			}
		}
		p := hoPlan{report: h.At - lead, cmd: h.At, exec: h.At + m.cfg.CommandToExec, from: serving, to: to, meas: meas, holeAt: -1}
		p.ra = p.exec + m.cfg.Interruption
		if h.RA > h.At {
			// a logged random access: the interruption ends there
			p.ra = h.RA
			p.exec = max(h.At, h.RA-m.cfg.Interruption)
		}
		if p.report < 0 {
			p.report = 0
		}
		p.keep = keep
		if !keep && m.cfg.FlushHoles > 0 && m.rng.Float64() < m.cfg.FlushHoles {
			// The failed block went out d before the command, d within
			// the HARQ/RLC retransmission delay, so the retransmission
			// is still pending when the command comes.
			d := max(m.cfg.RetxDelay.Draw(m.rng), time.Microsecond)
			p.holeAt = max(h.At-d, prevRA+1, 0)
		}
		rep := signaling.Event{Kind: signaling.KindReport, Meas: meas, Serving: m.cells[serving].sig}
		if meas != signaling.MeasA2 && meas != signaling.MeasA1 {
			rep.Neighbor = m.cells[to].sig
		}
		m.plans = append(m.plans, p)
		k := len(m.plans) - 1
		cmdEv := signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOIntraNR, Serving: m.cells[serving].sig, Target: m.cells[to].sig}
		if keep {
			cmdEv.HO = signaling.HOLTEAnchor // the anchor changes, the NR cell stays
		}
		if h.Command != nil {
			cmdEv = *h.Command // the logged command, as it was
		}
		raEv := signaling.Event{Kind: signaling.KindRandomAccess, RAReason: signaling.RAHandover, RAResult: signaling.RASuccess, Serving: m.cells[to].sig}
		if h.RAEvent != nil {
			raEv = *h.RAEvent
		}
		switch {
		case h.NoReport:
		case len(h.Reports) > 0:
			for _, r := range h.Reports {
				at := p.report
				if r.Lead > 0 {
					at = h.At - r.Lead
				}
				if at <= prevRA || at < 0 {
					continue // the previous reconfiguration ended its reporting
				}
				e := signaling.Event{Kind: signaling.KindReport, Meas: r.Meas, Serving: m.cells[serving].sig}
				if r.LTE {
					e.Serving = lteAnchor
				}
				if r.Neighbor == NbTarget {
					e.Neighbor = m.cells[to].sig
				}
				m.ctrls = append(m.ctrls, ctrl{t: at, kind: ctrlReport, ev: e})
			}
		default:
			m.ctrls = append(m.ctrls, ctrl{t: p.report, kind: ctrlReport, ev: rep})
		}
		m.ctrls = append(m.ctrls,
			ctrl{t: p.cmd, kind: ctrlCommand, ho: k, ev: cmdEv},
			ctrl{t: p.ra, kind: ctrlRA, ho: k, ev: raEv})
		// The uplink stops at the command, not at execution: a command
		// with reconfigurationWithSync makes the UE leave the source at
		// once, so what it sends meanwhile (the duplicate ACKs the flush
		// provokes, Finding 2) waits in its buffer for the target.
		m.windows = append(m.windows, window{p.cmd, p.ra})
		changes = append(changes, change{p.cmd, to})
		if !keep {
			if from == signaling.CellMmWave && toT != signaling.CellMmWave && m.cfg.MmWaveEdge != nil {
				edgeEnds[serving] = append(edgeEnds[serving], p.cmd)
				edgeStarts[serving] = append(edgeStarts[serving], dwellFrom)
				m.plans[k].edge = true
			}
			dwellFrom = p.ra
		}
		serving, prevRA = to, p.ra
	}
	if m.cfg.MmWaveEdge != nil {
		for c, ends := range edgeEnds {
			m.cells[c].Capacity = newEdged(m.cells[c].Capacity, *m.cfg.MmWaveEdge, ends, edgeStarts[c])
		}
	}
	servingAt := func(t time.Duration) int {
		i := sort.Search(len(changes), func(i int) bool { return changes[i].t > t })
		return changes[i-1].cell
	}
	for i, fa := range sc.FalseAlarms {
		field := fmt.Sprintf("schedule.false_alarms[%d]", i)
		if fa.At < 0 {
			return fmt.Errorf("%s.at: negative", field)
		}
		s := servingAt(fa.At)
		st := m.cells[s].Type
		meas := fa.Report
		var nb = -1
		if fa.Neighbor != "" {
			for j := range m.cells {
				if m.cells[j].ID == fa.Neighbor {
					nb = j
				}
			}
		}
		if meas == signaling.MeasUnknown {
			switch {
			case st == signaling.CellMmWave:
				meas = signaling.MeasA2
			case nb >= 0 && !sameKind(m.cells[nb].Type, st):
				meas = signaling.MeasB1
			default:
				meas = signaling.MeasA3
			}
		}
		if nb < 0 && meas != signaling.MeasA2 {
			var cands []int
			for j := range m.cells {
				if j == s {
					continue
				}
				if (meas == signaling.MeasA3) == sameKind(m.cells[j].Type, st) {
					cands = append(cands, j)
				}
			}
			if len(cands) > 0 {
				nb = cands[m.rng.IntN(len(cands))]
			}
		}
		rep := signaling.Event{Kind: signaling.KindReport, Meas: meas, Serving: m.cells[s].sig}
		if nb >= 0 && meas != signaling.MeasA2 {
			rep.Neighbor = m.cells[nb].sig
		}
		if fa.Silent && (fa.Resends < 0 || (fa.Resends > 0 && fa.ResendEvery <= 0)) {
			return fmt.Errorf("%s: %d re-sends every %v (need >= 0 re-sends, and a gap > 0 with them)", field, fa.Resends, fa.ResendEvery)
		}
		end := fa.End(m.cfg.A1After)
		m.alarms = append(m.alarms, window{fa.At, end})
		if !fa.Silent {
			m.ctrls = append(m.ctrls,
				ctrl{t: fa.At, kind: ctrlReport, ho: -1, ev: rep},
				ctrl{t: end, kind: ctrlA1, ho: -1, ev: signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA1, Serving: m.cells[s].sig}})
			continue
		}
		// The measured behaviour: the report is re-sent at its interval,
		// then nothing follows; the last one counts the false alarm.
		for k := 0; k <= fa.Resends; k++ {
			kind := ctrlReport
			if k == fa.Resends {
				kind = ctrlAlarmEnd
			}
			m.ctrls = append(m.ctrls, ctrl{t: fa.At + time.Duration(k)*fa.ResendEvery, kind: kind, ho: -1, ev: rep})
		}
	}
	for _, r := range sc.Replay {
		if r.At < 0 {
			continue
		}
		m.ctrls = append(m.ctrls, ctrl{t: r.At, kind: ctrlReplay, ho: -1, ev: r.Event})
	}
	sort.SliceStable(m.ctrls, func(i, j int) bool { return m.ctrls[i].t < m.ctrls[j].t })
	m.holePlan = m.nextHole(0)
	return nil
}

// mergePauses puts the schedule's pauses (commands that keep the data
// cell) among its handovers (sorted), in command order, marked keep. A
// pause is left out when Config.AnchorPause is off, or when it would
// overlap a handover or another pause (the interruption of one must end
// before the next command); its logged command and random access are then
// published as signalling only, as they were.
func (m *Model) mergePauses(hos, pauses []Handover) []Handover {
	if len(pauses) == 0 {
		return hos
	}
	end := func(h Handover) time.Duration {
		if h.RA > h.At {
			return h.RA
		}
		return h.At + m.cfg.CommandToExec + m.cfg.Interruption
	}
	ps := append([]Handover(nil), pauses...)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].At < ps[j].At })
	out := make([]Handover, 0, len(hos)+len(ps))
	hi := 0
	lastEnd := time.Duration(-1)
	for _, p := range ps {
		for hi < len(hos) && hos[hi].At <= p.At {
			out = append(out, hos[hi])
			lastEnd = max(lastEnd, end(hos[hi]))
			hi++
		}
		next := time.Duration(1 << 62)
		if hi < len(hos) {
			next = hos[hi].At
		}
		if !m.cfg.AnchorPause || p.At <= lastEnd || end(p) >= next {
			if p.Command != nil {
				m.ctrls = append(m.ctrls, ctrl{t: p.At, kind: ctrlReplay, ho: -1, ev: *p.Command})
			}
			if p.RAEvent != nil {
				m.ctrls = append(m.ctrls, ctrl{t: p.RA, kind: ctrlReplay, ho: -1, ev: *p.RAEvent})
			}
			continue
		}
		p.keep = true
		out = append(out, p)
		lastEnd = end(p)
	}
	return append(out, hos[hi:]...)
}

func minRTT(by map[signaling.CellType]time.Duration) time.Duration {
	r := never
	for _, v := range by {
		r = min(r, v)
	}
	return r
}

// nextHole is the first plan from k on that has a hole, len(plans) if none.
func (m *Model) nextHole(k int) int {
	for k < len(m.plans) && m.plans[k].holeAt < 0 {
		k++
	}
	return k
}

// Start is the model's time zero.
func (m *Model) Start() time.Time { return m.start }

// Counters returns the running totals.
func (m *Model) Counters() Counters { return m.c }

// Serving is the cell currently serving the UE (the target from the
// handover command on).
func (m *Model) Serving() signaling.Cell { return m.cells[m.serving].sig }

// SetLog attaches a mahimahi-format log to one direction (nil detaches).
func (m *Model) SetLog(d Dir, l *MMLog) {
	m.logs[d] = l
	m.capNext[d] = m.now.Truncate(time.Millisecond)
}

// Enqueue hands the model a packet entering the link at now: Down from
// the server side, Up from the UE. The model keeps only (id, size); the
// caller keeps the payload until a Delivery with this id comes back
// (delivered or dropped). Every enqueued packet comes back exactly once.
func (m *Model) Enqueue(now time.Time, d Dir, id uint64, size int) {
	t := m.at(now)
	if m.logs[d] != nil {
		m.logs[d].Arrival(t, size)
	}
	p := pkt{id: id, size: int64(size), sent: t}
	if size <= 0 || size > 1<<16 {
		m.c.BadSize++
		m.pending.push(m.drop(p, d, t))
		return
	}
	if d == Down {
		p.t = t + m.dDown
		m.dlWire.push(p)
		return
	}
	m.advanceUL(t)
	if m.ulAirBytes+p.size > m.ulBuf {
		m.c.UplinkDrops++
		m.pending.push(m.drop(p, d, t))
		return
	}
	start := max(t, m.ulLast)
	tx := time.Duration(math.Ceil(float64(p.size) * 8 * 1e9 / m.ulBps))
	// No uplink transmission overlaps a handover interruption (Finding 1:
	// it is hard, both directions stop).
	i := sort.Search(len(m.windows), func(i int) bool { return m.windows[i].to > start })
	for ; i < len(m.windows) && m.windows[i].from < start+tx; i++ {
		start = max(start, m.windows[i].to)
	}
	p.t = start + tx
	m.ulLast = p.t
	m.ulAirBytes += p.size
	m.ul.push(p)
}

func (m *Model) at(now time.Time) time.Duration {
	t := now.Sub(m.start)
	if t < m.now {
		return m.now
	}
	return t
}

func (m *Model) drop(p pkt, d Dir, t time.Duration) Delivery {
	if m.logs[d] != nil {
		m.logs[d].Drop(t, 1, p.size)
	}
	return Delivery{ID: p.id, Size: int(p.size), Dir: d, Sent: m.start.Add(p.sent), Due: m.start.Add(t), Dropped: true}
}

func (m *Model) advanceUL(t time.Duration) {
	for m.ulDone < m.ul.n {
		p := m.ul.at(m.ulDone)
		if p.t > t {
			return
		}
		m.ulAirBytes -= p.size
		m.ulDone++
	}
}

// Step advances the model to now and appends, in time order, the packets
// due by now to out and the signalling events that happened by now to ev.
// Both slices are only appended to: reuse them (out = out[:0]) and the
// steady state allocates nothing.
func (m *Model) Step(now time.Time, out *[]Delivery, ev *[]signaling.Event) {
	t := m.at(now)
	for m.pending.n > 0 {
		m.emit(out, m.pending.pop(), t)
	}
	for {
		next, which := m.next()
		if which < 0 || next > t {
			break
		}
		if next < m.now {
			next = m.now
		}
		m.logCapacity(next)
		m.now = next
		switch which {
		case srcSlot:
			m.serveSlot(next, ev)
		case srcUE:
			u := m.ue.pop()
			due := max(u.recv, m.ueLast)
			m.ueLast = due
			m.deliver(out, u.p, Down, due, t)
		case srcWire:
			m.toCell(m.dlWire.pop(), next, t, out)
		case srcUL:
			m.advanceUL(next)
			p := m.ul.pop()
			m.ulDone--
			m.deliver(out, p, Up, p.t+m.dUp, t)
		case srcCtrl:
			c := &m.ctrls[m.ci]
			m.ci++
			m.control(c, next, t, out, ev)
		}
	}
	m.logCapacity(t)
	m.now = t
}

const (
	srcSlot = iota
	srcUE
	srcWire
	srcUL
	srcCtrl
)

// next is the earliest pending internal event; ties go to the lower
// source, so a slot ending at t is served before packets arriving at t
// (they wait for the next slot) and UE deliveries at t happen before a
// handover command at t flushes the rest.
func (m *Model) next() (time.Duration, int) {
	best, which := never, -1
	try := func(t time.Duration, w int) {
		if t < best {
			best, which = t, w
		}
	}
	if m.nextSlt >= 0 {
		try(m.nextSlt, srcSlot)
	}
	if m.ue.n > 0 {
		try(max(m.ue.front().recv, m.ueLast), srcUE)
	}
	if m.dlWire.n > 0 {
		try(m.dlWire.front().t, srcWire)
	}
	if m.ul.n > 0 {
		try(m.ul.front().t+m.dUp, srcUL)
	}
	if m.ci < len(m.ctrls) {
		try(m.ctrls[m.ci].t, srcCtrl)
	}
	return best, which
}

// NextWake is when the model next has something to do; ok is false when
// nothing is pending. A driver sleeps until then (or until a packet comes).
func (m *Model) NextWake() (time.Time, bool) {
	t, w := m.next()
	if w < 0 {
		return time.Time{}, false
	}
	if t < m.now {
		t = m.now
	}
	return m.start.Add(t), true
}

func (m *Model) emit(out *[]Delivery, d Delivery, t time.Duration) {
	if late := m.start.Add(t).Sub(d.Due); late > m.lateThr {
		m.c.Late++
		m.c.MaxLate = max(m.c.MaxLate, late)
	}
	*out = append(*out, d)
}

func (m *Model) deliver(out *[]Delivery, p pkt, d Dir, due, t time.Duration) {
	m.c.Delivered[d]++
	m.c.DeliveredBytes[d] += p.size
	if m.logs[d] != nil {
		m.logs[d].Departure(due, p.size, due-p.sent)
	}
	m.emit(out, Delivery{ID: p.id, Size: int(p.size), Dir: d, Sent: m.start.Add(p.sent), Due: m.start.Add(due)}, t)
}

func gridAfter(t, l time.Duration) time.Duration { return (t/l + 1) * l }

// toCell puts a downlink packet leaving the wired delay into the serving
// cell's buffer (the target's from the handover command on), tail-dropping
// what does not fit (Finding 3).
func (m *Model) toCell(p pkt, at, t time.Duration, out *[]Delivery) {
	c := &m.cells[m.serving]
	if !m.push(c, p) {
		m.emit(out, m.drop(p, Down, at), t)
		return
	}
	if m.nextSlt < 0 && at >= m.blocked {
		m.nextSlt = gridAfter(at, c.slot)
	}
}

func (m *Model) push(c *cell, p pkt) bool {
	if c.queued+p.size > c.Buffer {
		m.c.OverflowDrops++
		m.c.OverflowBytes += p.size
		if m.inHO {
			m.c.HODrops++
		}
		if m.curPlan >= 0 {
			hp := &m.plans[m.curPlan]
			hp.drops++
			if m.now <= hp.ra+m.cfg.RTT {
				// the handover's first target-overflow drop makes it
				// an overflow handover: counted here only
				if hp.targetDrops++; hp.targetDrops == 1 {
					m.c.OverflowHandovers++
					if m.cells[hp.from].Type == signaling.CellMmWave {
						m.c.OverflowFromMmWave++
					}
				}
			}
		}
		return false
	}
	c.q.push(p)
	c.queued += p.size
	return true
}

// serveSlot is one downlink slot [te-slot, te) of the serving cell: a full
// slot (RB ratio 1 > 0.9) while at least a slot's worth is queued; the
// burst ends with a partial slot under 40 % and then an empty one, the
// pattern M2HO's ŝ_max estimator looks for (§4.3).
func (m *Model) serveSlot(te time.Duration, ev *[]signaling.Event) {
	c := &m.cells[m.serving]
	capB := c.Capacity.Bytes(te-c.slot, te)
	var sent int64
	if capB > 0 && !(m.cfg.BackgroundLoad > 0 && m.rng.Float64() < m.cfg.BackgroundLoad) {
		rem := c.queued - c.headSent
		send := rem
		if rem >= capB {
			send = capB
		} else if rem*10 > capB*4 {
			send = rem - capB*3/10
		}
		sent = send
		for send > 0 && c.q.n > 0 {
			need := c.q.front().size - c.headSent
			if send < need {
				c.headSent += send
				break
			}
			send -= need
			c.headSent = 0
			p := c.q.pop()
			c.queued -= p.size
			m.toUE(p, te)
		}
	}
	switch {
	case m.cfg.SlotEvents == SlotEventsAll, m.cfg.SlotEvents == SlotEventsBursts && (sent > 0 || m.busy):
		ratio := 0.0
		if capB > 0 {
			ratio = float64(sent) / float64(capB)
		}
		*ev = append(*ev, signaling.Event{Time: m.start.Add(te), Kind: signaling.KindMACSlot, RBRatio: ratio, Bytes: int(sent), Serving: c.sig})
	}
	m.busy = sent > 0
	if c.queued > 0 || m.busy {
		m.nextSlt = te + c.slot
	} else {
		m.nextSlt = -1
	}
}

// toUE hands a packet that left the air at te to the UE's link layer; a
// fraction needs a HARQ/RLC retransmission and arrives later, and the
// reordering buffer (the ue ring, in link order) holds what follows it.
func (m *Model) toUE(p pkt, te time.Duration) {
	recv := te + m.cells[m.serving].extra
	for m.holePlan < len(m.plans) && te >= m.plans[m.holePlan].cmd {
		m.holePlan, m.holeSlot = m.nextHole(m.holePlan+1), 0 // the command came first: no hole
	}
	if m.holePlan < len(m.plans) && te >= m.plans[m.holePlan].holeAt {
		if m.holeSlot == 0 {
			m.holeSlot = te
			m.c.HolesPlanned++
		}
		if te == m.holeSlot {
			// the failed block: its retransmission completes after the
			// command, so it leaves through the target
			m.c.HARQRetx++
			m.ue.push(uePkt{p: p, recv: never / 2})
			return
		}
	}
	if m.cfg.Retx != nil {
		if extra, ok := m.cfg.Retx(p.id); ok {
			m.c.HARQRetx++
			recv += extra
		}
	} else if m.cfg.HARQFraction > 0 && m.rng.Float64() < m.cfg.HARQFraction {
		m.c.HARQRetx++
		recv += m.cfg.RetxDelay.Draw(m.rng)
	}
	m.ue.push(uePkt{p: p, recv: recv})
}

func (m *Model) control(c *ctrl, at, t time.Duration, out *[]Delivery, ev *[]signaling.Event) {
	e := c.ev
	e.Time = m.start.Add(at)
	switch c.kind {
	case ctrlReport:
		m.c.Reports++
	case ctrlA1, ctrlAlarmEnd:
		m.c.Reports++
		m.c.FalseAlarms++
	case ctrlCommand:
		p := &m.plans[c.ho]
		if p.keep {
			m.c.AnchorPauses++
		} else {
			m.curPlan = c.ho
			if m.cells[p.from].Type == signaling.CellMmWave {
				m.c.FromMmWave++
			}
		}
		m.command(p, at, t, out)
	case ctrlReplay:
		m.c.ReplayedEvents++
		if e.Kind == signaling.KindReport {
			m.c.Reports++
		}
	case ctrlRA:
		m.inHO = false
		if tc := &m.cells[m.serving]; tc.queued > 0 && m.nextSlt < 0 {
			m.nextSlt = gridAfter(at, tc.slot)
		}
	}
	*ev = append(*ev, e)
}

// command is step ④ of a handover: the UE releases the source's link
// layer and flushes its reordering buffer to IP, so packets behind a hole
// are delivered now and the holes come later through the target
// (Finding 2); the source forwards its queue, holes first, to the target,
// whose buffer tail-drops the excess (Finding 3). The downlink is served
// again only after random access to the target.
func (m *Model) command(p *hoPlan, at, t time.Duration, out *[]Delivery) {
	if p.edge {
		m.c.MmWaveEdges++
	}
	if !p.keep {
		m.c.Handovers[b2i(m.cells[p.from].Type == signaling.CellMmWave)][b2i(m.cells[p.to].Type == signaling.CellMmWave)]++
	}
	// Packets already received (behind a hole) go to IP at the flush,
	// FlushDelay after the command; those still awaiting retransmission
	// (the holes) go to the target. Nothing new reaches the UE before
	// random access, so the early ones stay queued in order until then.
	var early, holes int64
	for n := m.ue.n; n > 0; n-- {
		u := m.ue.pop()
		if u.recv <= at {
			early++ // behind a hole: UE deliveries at `at` ran before this
			m.ue.push(u)
			continue
		}
		holes++
		m.fwd.push(u.p)
	}
	if early > 0 {
		flush := at + m.cfg.FlushDelay
		m.ueLast = max(m.ueLast, flush)
		if m.cfg.FlushDelay == 0 {
			for m.ue.n > 0 {
				m.deliver(out, m.ue.pop().p, Down, at, t)
			}
		}
	}
	if holes > 0 && early > 0 && !p.keep {
		m.c.ReorderFlushes++
	}
	m.c.FlushedEarly += early
	m.c.FlushedHoles += holes
	p.holes, p.early = holes, early
	src, dst := &m.cells[p.from], &m.cells[p.to]
	for src.q.n > 0 {
		m.fwd.push(src.q.pop())
	}
	src.queued, src.headSent = 0, 0
	for dst.q.n > 0 {
		m.fwd.push(dst.q.pop())
	}
	dst.queued, dst.headSent = 0, 0
	m.serving = p.to
	m.inHO = true
	for m.fwd.n > 0 {
		q := m.fwd.pop()
		if !m.push(dst, q) {
			m.emit(out, m.drop(q, Down, at), t)
		}
	}
	m.blocked = p.ra
	m.nextSlt = -1
	m.busy = false
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// logCapacity writes the mahimahi `#` lines (delivery capacity per
// millisecond) up to t from the state valid until t.
func (m *Model) logCapacity(t time.Duration) {
	for d := Down; d <= Up; d++ {
		l := m.logs[d]
		if l == nil {
			continue
		}
		for ms := m.capNext[d]; ms+time.Millisecond <= t; ms += time.Millisecond {
			var b int64
			if d == Up {
				b = int64(m.ulBps / 8 / 1000)
			} else if ms >= m.blocked && !m.inHO {
				b = m.cells[m.serving].Capacity.Bytes(ms, ms+time.Millisecond)
			}
			if b > 0 {
				l.Capacity(ms, b)
			}
			m.capNext[d] = ms + time.Millisecond
		}
	}
}

// ring is a FIFO on a power-of-two circular buffer: it grows by doubling
// and never shrinks, so a steady state allocates nothing.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		nb := make([]T, max(16, 2*len(r.buf)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

func (r *ring[T]) front() *T { return &r.buf[r.head] }

func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

func (r *ring[T]) pop() T {
	v := r.buf[r.head]
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}
