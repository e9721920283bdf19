package emu

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/m2ho/m2ho/signaling"
)

//go:embed scenarios/*.yaml
var builtinFS embed.FS

// Scenario is a loaded scenario file: its name, where it came from, and the
// resolved model Config.
type Scenario struct {
	Name   string
	Source string // file path, or "builtin:<name>"
	Config Config
	// Drive is set for a replayed drive (schedule.xcal or --xcal): its
	// files and how they were aligned.
	Drive *Drive
}

// Drive describes a replayed measured drive.
type Drive struct {
	XCAL      string         `json:"xcal"`
	Capacity  string         `json:"capacity,omitempty"`
	Replay    string         `json:"replay"` // "log" (every logged event) or "synthesized"
	Alignment DriveAlignment `json:"alignment"`
}

// Scaled returns a copy whose capacities and buffers are multiplied by f
// (the bench's --scale, which callers print with every result).
func (s *Scenario) Scaled(f float64) *Scenario {
	c := *s
	if c.Config.Scale == 0 {
		c.Config.Scale = 1
	}
	c.Config.Scale *= f
	return &c
}

// LoadOptions supply what this package does not parse itself.
type LoadOptions struct {
	// XCAL reads a signalling log (e.g. signaling.NewXCALReader over the
	// file). Needed only by scenarios with schedule.xcal.
	XCAL func(path string) ([]signaling.Event, error)
	// Open opens a file the scenario refers to (capacity traces, iperf3
	// logs), by its resolved path. Nil: a scenario that refers to a file
	// fails to load, naming it. The file-system loaders of
	// bench/emu/driver (LoadScenario, Builtin) fill it in.
	Open func(path string) (io.ReadCloser, error)
	// DataDir replaces the shared data directory for paths that start with
	// ../shared/data/ ("": they stay relative to the scenario's directory;
	// the loaders of bench/emu/driver default it to $M2HO_SHARED_DATA, else
	// the repository's ../shared/data).
	DataDir string
	// Duration, when > 0, replaces the file's duration before a synthetic
	// schedule is drawn, so a longer run gets handovers all along.
	Duration time.Duration
	// Seed, when > 0, replaces the file's seed before the synthetic
	// schedule and the measured-variability capacity traces are drawn (the
	// emulator's --seed): each seed is another drive, and every run with
	// one seed (every variant of one repetition of the bench) the same.
	Seed uint64
	// XCALPath and CapacityPath (the --xcal and --capacity flags) replace
	// the scenario's schedule with a replay of that drive: the XCAL export
	// and, optionally, its iperf3 UDP log as the capacity of every cell.
	// They are used as given (not resolved against the scenario).
	XCALPath, CapacityPath string
}

// ByteSize is a byte count written as an integer or with a unit: B, KB,
// MB, GB (powers of 1000) or KiB, MiB, GiB.
type ByteSize int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = ByteSize(v)
	return nil
}

// ParseByteSize parses "1500", "3MB", "512 KiB".
func ParseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suf string
		mul float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mul := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suf) {
			mul, t = u.mul, strings.TrimSpace(strings.TrimSuffix(t, u.suf))
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*mul > 1<<50 {
		return 0, fmt.Errorf("%q is not a byte size (e.g. 1500, 3MB, 512KiB)", s)
	}
	return int64(f * mul), nil
}

type capFile struct {
	Mbps      float64 `yaml:"mbps"`
	Mahimahi  string  `yaml:"mahimahi"`
	Iperf3    string  `yaml:"iperf3"`
	MbpsTrace string  `yaml:"mbps_trace"`
}

type cellFile struct {
	ID       string        `yaml:"id"`
	Type     string        `yaml:"type"`
	Buffer   ByteSize      `yaml:"buffer"`
	Slot     time.Duration `yaml:"slot"`
	Capacity capFile       `yaml:"capacity"`
}

type hoFile struct {
	At     time.Duration `yaml:"at"`
	To     string        `yaml:"to"`
	Type   string        `yaml:"type"`
	Report string        `yaml:"report"`
	Lead   time.Duration `yaml:"lead"`
}

type faFile struct {
	At          time.Duration `yaml:"at"`
	Neighbor    string        `yaml:"neighbor"`
	Report      string        `yaml:"report"`
	A1After     time.Duration `yaml:"a1_after"`
	End         string        `yaml:"end"` // "a1" (default) or "silence"
	Resends     int           `yaml:"resends"`
	ResendEvery time.Duration `yaml:"resend_every"`
}

type scenarioFile struct {
	Name      string                   `yaml:"name"`
	Duration  time.Duration            `yaml:"duration"`
	Seed      uint64                   `yaml:"seed"`
	Scale     float64                  `yaml:"scale"`
	RTT       time.Duration            `yaml:"rtt"`
	RTTByType map[string]time.Duration `yaml:"rtt_by_type"`
	// CapacityVariation: "measured" turns every constant (mbps) capacity
	// into a trace drawn from MeasuredVariability of the cell's type;
	// "none" or empty keeps it constant.
	CapacityVariation string `yaml:"capacity_variation"`
	// MmWaveEdge: "measured" lowers an mmWave cell's capacity in the 5 s
	// before each handover from it down to sub-6 as the measured cells
	// fell (MeasuredMmWaveEdge; not for a replay with a capacity log,
	// which has its own); "none" or empty leaves the capacity alone.
	MmWaveEdge string `yaml:"mmwave_edge"`
	Uplink     struct {
		Mbps   float64  `yaml:"mbps"`
		Buffer ByteSize `yaml:"buffer"`
	} `yaml:"uplink"`
	Slots struct {
		Sub6           time.Duration `yaml:"sub6"`
		MmWave         time.Duration `yaml:"mmwave"`
		Events         string        `yaml:"events"`
		BackgroundLoad float64       `yaml:"background_load"`
	} `yaml:"slots"`
	Errors struct {
		HARQFraction float64 `yaml:"harq_fraction"`
		FlushHoles   float64 `yaml:"flush_holes"`
		RetxDelay    *Dist   `yaml:"retx_delay"`
		HARQBy       string  `yaml:"harq_by"`
	} `yaml:"errors"`
	Handover struct {
		ReportLead    *Dist          `yaml:"report_lead"`
		CommandToExec *time.Duration `yaml:"command_to_exec"`
		FlushDelay    *time.Duration `yaml:"flush_delay"`
		Interruption  *time.Duration `yaml:"interruption"`
		A1After       *time.Duration `yaml:"a1_after"`
		// AnchorPause: pause the link at LTE anchor handovers that keep
		// the NR cell (Config.AnchorPause; default true).
		AnchorPause *bool `yaml:"anchor_pause"`
	} `yaml:"handover"`
	Cells        []cellFile          `yaml:"cells"`
	CellDefaults map[string]cellFile `yaml:"cell_defaults"`
	Schedule     struct {
		Start       string        `yaml:"start"`
		Synthetic   *Synthetic    `yaml:"synthetic"`
		Handovers   []hoFile      `yaml:"handovers"`
		FalseAlarms []faFile      `yaml:"false_alarms"`
		XCAL        string        `yaml:"xcal"`
		Iperf3      string        `yaml:"iperf3"`
		Capacity    string        `yaml:"capacity"`
		Replay      string        `yaml:"replay"`
		MaxLead     time.Duration `yaml:"max_lead"`
	} `yaml:"schedule"`
}

// Builtin returns one of the scenarios compiled into the binary
// (BuiltinNames lists them).
func Builtin(name string, opts LoadOptions) (*Scenario, error) {
	data, err := builtinFS.ReadFile("scenarios/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no builtin scenario %q (have %s)", name, strings.Join(BuiltinNames(), ", "))
	}
	return ParseScenario("builtin:"+name, "", data, opts)
}

// BuiltinNames lists the built-in scenarios.
func BuiltinNames() []string {
	ents, _ := fs.ReadDir(builtinFS, "scenarios")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

func parseType(s string) (signaling.CellType, bool) {
	switch strings.ToLower(s) {
	case "sub6", "sub-6", "fr1":
		return signaling.CellSub6, true
	case "mmwave", "fr2":
		return signaling.CellMmWave, true
	case "lte":
		return signaling.CellLTE, true
	}
	return signaling.CellUnknown, false
}

func parseMeas(s string) (signaling.MeasEvent, bool) {
	m := map[string]signaling.MeasEvent{"": signaling.MeasUnknown, "A1": signaling.MeasA1, "A2": signaling.MeasA2,
		"A3": signaling.MeasA3, "A4": signaling.MeasA4, "A5": signaling.MeasA5, "A6": signaling.MeasA6,
		"B1": signaling.MeasB1, "B2": signaling.MeasB2}
	v, ok := m[strings.ToUpper(s)]
	return v, ok
}

type loader struct {
	src, base string
	opts      LoadOptions
	iperf     map[string]*IperfUDP
}

// path resolves a file reference of the scenario: ../shared/data/...
// against LoadOptions.DataDir when set, a relative one against the
// scenario's directory. Paths are slash-separated (the driver runs on
// Linux only).
func (l *loader) path(p string) string {
	const shared = "../shared/data/"
	if rest, ok := strings.CutPrefix(p, shared); ok && l.opts.DataDir != "" {
		return path.Join(l.opts.DataDir, rest)
	}
	if path.IsAbs(p) || l.base == "" {
		return p
	}
	return path.Join(l.base, p)
}

// open opens a resolved file through LoadOptions.Open.
func (l *loader) open(p string) (io.ReadCloser, error) {
	if l.opts.Open == nil {
		return nil, fmt.Errorf("%s: no file opener (LoadOptions.Open; bench/emu/driver loads from the file system)", p)
	}
	return l.opts.Open(p)
}

// capacityFile opens and parses one capacity trace of kind.
func (l *loader) capacityFile(kind, p string) (Capacity, error) {
	f, err := l.open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseCapacity(kind, p, f)
}

func (l *loader) iperf3(p string) (*IperfUDP, error) {
	full := l.path(p)
	if c, ok := l.iperf[full]; ok {
		return c, nil
	}
	f, err := l.open(full)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := ParseIperf3UDP(full, f)
	if err != nil {
		return nil, err
	}
	l.iperf[full] = c
	return c, nil
}

func (l *loader) capacity(c capFile, field string) (Capacity, error) {
	var given []string
	if c.Mbps != 0 {
		given = append(given, "mbps")
	}
	for _, g := range []struct{ name, v string }{{"mahimahi", c.Mahimahi}, {"iperf3", c.Iperf3}, {"mbps_trace", c.MbpsTrace}} {
		if g.v != "" {
			given = append(given, g.name)
		}
	}
	switch len(given) {
	case 0:
		return nil, fmt.Errorf("%s: give exactly one of mbps, mahimahi, iperf3, mbps_trace (none given)", field)
	case 1:
	default:
		return nil, fmt.Errorf("%s.%s: conflicts with %s.%s (give exactly one of mbps, mahimahi, iperf3, mbps_trace)", field, given[1], field, given[0])
	}
	var (
		cp  Capacity
		err error
	)
	switch {
	case c.Mbps < 0 || c.Mbps > 1e6:
		return nil, fmt.Errorf("%s.mbps: must be in (0, 1e6]", field)
	case c.Mbps > 0:
		return Mbps(c.Mbps), nil
	case c.Iperf3 != "":
		var ip *IperfUDP
		ip, err = l.iperf3(c.Iperf3)
		if ip != nil {
			cp = ip.Series
		}
	case c.Mahimahi != "":
		cp, err = l.capacityFile("mahimahi", l.path(c.Mahimahi))
	default:
		cp, err = l.capacityFile("mbps-trace", l.path(c.MbpsTrace))
	}
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", field, given[0], err)
	}
	return cp, nil
}

func (l *loader) cell(cf cellFile, field string) (CellSpec, error) {
	t, ok := parseType(cf.Type)
	if !ok {
		return CellSpec{}, fmt.Errorf("%s.type: %q is not sub6, mmwave or lte", field, cf.Type)
	}
	if cf.Buffer <= 0 {
		return CellSpec{}, fmt.Errorf("%s.buffer: must be > 0", field)
	}
	if cf.Slot < 0 {
		return CellSpec{}, fmt.Errorf("%s.slot: negative", field)
	}
	cp, err := l.capacity(cf.Capacity, field+".capacity")
	if err != nil {
		return CellSpec{}, err
	}
	return CellSpec{ID: cf.ID, Type: t, Capacity: cp, Buffer: int64(cf.Buffer), Slot: cf.Slot}, nil
}

// ParseScenario parses scenario YAML; src names it in errors and base is
// the directory relative paths resolve against ("" = current directory).
func ParseScenario(src, base string, data []byte, opts LoadOptions) (*Scenario, error) {
	s, err := parseScenario(src, base, data, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return s, nil
}

func parseScenario(src, base string, data []byte, opts LoadOptions) (*Scenario, error) {
	var f scenarioFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	l := &loader{src: src, base: base, opts: opts, iperf: map[string]*IperfUDP{}}
	cfg := DefaultConfig()
	var drive *Drive
	if opts.Duration > 0 {
		f.Duration = opts.Duration
	}
	if opts.Seed > 0 {
		f.Seed = opts.Seed
	}
	cfg.Seed, cfg.Duration = f.Seed, f.Duration
	if f.Duration <= 0 || f.Duration > 24*time.Hour {
		return nil, errors.New("duration: must be in (0, 24h] (e.g. 60s)")
	}
	if f.Scale < 0 {
		return nil, errors.New("scale: must be > 0")
	}
	if f.Scale > 0 {
		cfg.Scale = f.Scale
	}
	if f.RTT < 0 {
		return nil, errors.New("rtt: negative")
	}
	if f.RTT > 0 {
		cfg.RTT = f.RTT
	}
	if f.Uplink.Mbps < 0 || f.Uplink.Mbps > 1e6 {
		return nil, errors.New("uplink.mbps: must be in (0, 1e6]")
	}
	if f.Uplink.Buffer < 0 {
		return nil, errors.New("uplink.buffer: must be > 0")
	}
	if f.Uplink.Mbps > 0 {
		cfg.UplinkMbps = f.Uplink.Mbps
	}
	if f.Uplink.Buffer > 0 {
		cfg.UplinkBuffer = int64(f.Uplink.Buffer)
	}
	if f.Slots.Sub6 < 0 {
		return nil, errors.New("slots.sub6: must be > 0")
	}
	if f.Slots.MmWave < 0 {
		return nil, errors.New("slots.mmwave: must be > 0")
	}
	if f.Slots.Sub6 > 0 {
		cfg.SlotSub6 = f.Slots.Sub6
	}
	if f.Slots.MmWave > 0 {
		cfg.SlotMmWave = f.Slots.MmWave
	}
	switch f.Slots.Events {
	case "", "bursts":
		cfg.SlotEvents = SlotEventsBursts
	case "all":
		cfg.SlotEvents = SlotEventsAll
	case "none":
		cfg.SlotEvents = SlotEventsNone
	default:
		return nil, fmt.Errorf("slots.events: %q is not bursts, all or none", f.Slots.Events)
	}
	if f.Slots.BackgroundLoad < 0 || f.Slots.BackgroundLoad >= 1 {
		return nil, errors.New("slots.background_load: must be in [0,1)")
	}
	cfg.BackgroundLoad = f.Slots.BackgroundLoad
	if f.Errors.HARQFraction < 0 || f.Errors.HARQFraction > 1 {
		return nil, errors.New("errors.harq_fraction: must be in [0,1]")
	}
	cfg.HARQFraction = f.Errors.HARQFraction
	if f.Errors.FlushHoles < 0 || f.Errors.FlushHoles > 1 {
		return nil, errors.New("errors.flush_holes: must be in [0,1] (a probability per handover)")
	}
	cfg.FlushHoles = f.Errors.FlushHoles
	if len(f.RTTByType) > 0 {
		cfg.RTTByType = map[signaling.CellType]time.Duration{}
		for k, v := range f.RTTByType {
			t, ok := parseType(k)
			if !ok {
				return nil, fmt.Errorf("rtt_by_type.%s: not sub6, mmwave or lte", k)
			}
			if v <= 0 {
				return nil, fmt.Errorf("rtt_by_type.%s: must be > 0", k)
			}
			cfg.RTTByType[dataType(t)] = v
		}
	}
	switch f.CapacityVariation {
	case "", "none", "measured":
	default:
		return nil, fmt.Errorf("capacity_variation: %q is not measured or none", f.CapacityVariation)
	}
	switch f.MmWaveEdge {
	case "", "none":
	case "measured":
		e := MeasuredMmWaveEdge
		cfg.MmWaveEdge = &e
	default:
		return nil, fmt.Errorf("mmwave_edge: %q is not measured or none", f.MmWaveEdge)
	}
	switch f.Errors.HARQBy {
	case "", "random":
	case "payload":
		cfg.HARQByPayload = true
	default:
		return nil, fmt.Errorf("errors.harq_by: %q is not random or payload", f.Errors.HARQBy)
	}
	if f.Errors.RetxDelay != nil {
		if err := f.Errors.RetxDelay.validate("errors.retx_delay"); err != nil {
			return nil, err
		}
		cfg.RetxDelay = *f.Errors.RetxDelay
	}
	if f.Handover.ReportLead != nil {
		switch f.Handover.ReportLead.Kind {
		case "paper": // the paper's report→execution figure, as an option
			*f.Handover.ReportLead = PaperLead
		case "measured": // the XCAL fit (the default)
			*f.Handover.ReportLead = DefaultLead
		}
		if err := f.Handover.ReportLead.validate("handover.report_lead"); err != nil {
			return nil, err
		}
		cfg.Lead = *f.Handover.ReportLead
	}
	for name, p := range map[string]struct {
		v   *time.Duration
		dst *time.Duration
	}{"command_to_exec": {f.Handover.CommandToExec, &cfg.CommandToExec}, "flush_delay": {f.Handover.FlushDelay, &cfg.FlushDelay},
		"interruption": {f.Handover.Interruption, &cfg.Interruption}, "a1_after": {f.Handover.A1After, &cfg.A1After}} {
		if p.v != nil {
			if *p.v < 0 {
				return nil, fmt.Errorf("handover.%s: negative", name)
			}
			*p.dst = *p.v
		}
	}
	if f.Handover.AnchorPause != nil {
		cfg.AnchorPause = *f.Handover.AnchorPause
	}
	for i, cf := range f.Cells {
		field := fmt.Sprintf("cells[%d]", i)
		if cf.ID == "" {
			return nil, fmt.Errorf("%s.id: empty", field)
		}
		cs, err := l.cell(cf, field)
		if err != nil {
			return nil, err
		}
		cfg.Cells = append(cfg.Cells, cs)
	}
	if len(f.CellDefaults) > 0 {
		cfg.CellDefaults = map[signaling.CellType]CellSpec{}
		keys := make([]string, 0, len(f.CellDefaults))
		for k := range f.CellDefaults {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			cf := f.CellDefaults[k]
			if cf.Type == "" {
				cf.Type = k
			}
			cs, err := l.cell(cf, "cell_defaults."+k)
			if err != nil {
				return nil, err
			}
			cfg.CellDefaults[cs.Type] = cs
		}
	}
	if f.CapacityVariation == "measured" {
		if err := varyCells(&cfg); err != nil {
			return nil, err
		}
	}
	sc := f.Schedule
	if opts.XCALPath != "" {
		// --xcal replaces whatever schedule the file has.
		sc.Synthetic, sc.Handovers, sc.FalseAlarms = nil, nil, nil
		sc.XCAL, sc.Iperf3, sc.Capacity = "", "", ""
	}
	// One kind of schedule: synthetic, explicit (handovers and/or
	// false_alarms) or xcal; a conflict names the two fields.
	var kinds []string
	if sc.Synthetic != nil {
		kinds = append(kinds, "schedule.synthetic")
	}
	switch {
	case len(sc.Handovers) > 0:
		kinds = append(kinds, "schedule.handovers")
	case len(sc.FalseAlarms) > 0:
		kinds = append(kinds, "schedule.false_alarms")
	}
	if sc.XCAL != "" || opts.XCALPath != "" {
		kinds = append(kinds, "schedule.xcal")
	}
	if len(kinds) > 1 {
		return nil, fmt.Errorf("%s: conflicts with %s (give one of synthetic, handovers/false_alarms, xcal)", kinds[1], kinds[0])
	}
	switch {
	case sc.Synthetic != nil:
		var refs []CellRef
		for _, c := range cfg.Cells {
			refs = append(refs, CellRef{c.ID, c.Type})
		}
		p := *sc.Synthetic
		if p.Start == "" {
			p.Start = sc.Start
		}
		s, err := Synthesize(refs, p, cfg.Duration, cfg.Seed)
		if err != nil {
			return nil, fmt.Errorf("schedule.%w", err)
		}
		cfg.Schedule = s
	case sc.XCAL != "" || opts.XCALPath != "":
		d, err := l.drive(sc.XCAL, sc.Iperf3, sc.Capacity, sc.Replay, sc.MaxLead, &cfg)
		if err != nil {
			return nil, err
		}
		drive = d
		if sc.Start != "" {
			cfg.Schedule.Start = sc.Start
		}
	default:
		cfg.Schedule.Start = sc.Start
		for i, h := range sc.Handovers {
			field := fmt.Sprintf("schedule.handovers[%d]", i)
			meas, ok := parseMeas(h.Report)
			if !ok {
				return nil, fmt.Errorf("%s.report: %q is not a measurement event (A1-A6, B1, B2)", field, h.Report)
			}
			var t signaling.CellType
			if h.Type != "" {
				if t, ok = parseType(h.Type); !ok {
					return nil, fmt.Errorf("%s.type: %q is not sub6, mmwave or lte", field, h.Type)
				}
			}
			if h.To == "" {
				return nil, fmt.Errorf("%s.to: empty", field)
			}
			if h.At < 0 {
				return nil, fmt.Errorf("%s.at: negative", field)
			}
			if h.Lead < 0 {
				return nil, fmt.Errorf("%s.lead: negative", field)
			}
			cfg.Schedule.Handovers = append(cfg.Schedule.Handovers, Handover{At: h.At, To: h.To, ToType: t, Report: meas, Lead: h.Lead})
		}
		for i, fa := range sc.FalseAlarms {
			field := fmt.Sprintf("schedule.false_alarms[%d]", i)
			meas, ok := parseMeas(fa.Report)
			if !ok || meas == signaling.MeasA1 {
				return nil, fmt.Errorf("%s.report: %q is not a measurement event other than A1", field, fa.Report)
			}
			if fa.At < 0 {
				return nil, fmt.Errorf("%s.at: negative", field)
			}
			if fa.A1After < 0 {
				return nil, fmt.Errorf("%s.a1_after: negative", field)
			}
			a := FalseAlarm{At: fa.At, Neighbor: fa.Neighbor, Report: meas, A1After: fa.A1After}
			switch fa.End {
			case "", "a1":
				if fa.Resends != 0 {
					return nil, fmt.Errorf("%s.resends: needs end: silence", field)
				}
			case "silence":
				if fa.Resends < 0 || fa.Resends > 100 || (fa.Resends > 0 && fa.ResendEvery <= 0) {
					return nil, fmt.Errorf("%s.resends: %d every %v (need 0-100, and resend_every > 0 with re-sends)", field, fa.Resends, fa.ResendEvery)
				}
				a.Silent, a.Resends, a.ResendEvery = true, fa.Resends, fa.ResendEvery
			default:
				return nil, fmt.Errorf("%s.end: %q is not a1 or silence", field, fa.End)
			}
			cfg.Schedule.FalseAlarms = append(cfg.Schedule.FalseAlarms, a)
		}
	}
	name := f.Name
	if name == "" {
		name = strings.TrimSuffix(path.Base(src), path.Ext(src))
	}
	scn := &Scenario{Name: name, Source: src, Config: cfg, Drive: drive}
	// Build once so that every error (unknown cells, overlapping
	// handovers) surfaces at load time, naming its field.
	if _, err := New(cfg, time.Unix(0, 0), 0); err != nil {
		return nil, err
	}
	return scn, nil
}

// varyCells gives every cell with a constant capacity the measured
// variability of its type (MeasuredVariability): a trace as long as the
// run plus a minute (it repeats after that), drawn from the scenario's
// seed and the cell's position, so every run of a scenario sees the same
// capacity.
func varyCells(cfg *Config) error {
	length := cfg.Duration + time.Minute
	vary := func(cs *CellSpec, salt uint64, field string) error {
		c, ok := cs.Capacity.(Constant)
		if !ok {
			return nil
		}
		v := MeasuredVariability[dataType(cs.Type)]
		tr, err := v.Trace(c.BitsPerSecond/1e6, length, cfg.Seed*1000003+salt)
		if err != nil {
			return fmt.Errorf("%s.capacity: %w", field, err)
		}
		cs.Capacity = tr
		return nil
	}
	for i := range cfg.Cells {
		if err := vary(&cfg.Cells[i], uint64(i+1), fmt.Sprintf("cells[%d]", i)); err != nil {
			return err
		}
	}
	// The mean each type's cells made from the defaults vary around: the
	// default's, else the first declared cell's of that type (as
	// defaultsFromCells takes them), read before the traces replace them.
	means := map[signaling.CellType]float64{}
	for t, d := range cfg.CellDefaults {
		if c, ok := d.Capacity.(Constant); ok {
			means[dataType(t)] = c.BitsPerSecond / 1e6
		}
		if err := vary(&d, 1000+uint64(t), "cell_defaults."+typeName(t)); err != nil {
			return err
		}
		cfg.CellDefaults[t] = d
	}
	for _, c := range cfg.Cells {
		if _, ok := means[dataType(c.Type)]; !ok {
			if k, ok := c.Capacity.(Constant); ok {
				means[dataType(c.Type)] = k.BitsPerSecond / 1e6
			}
		}
	}
	seed := cfg.Seed
	cfg.DefaultCapacity = func(id string, typ signaling.CellType) (Capacity, error) {
		mean, ok := means[dataType(typ)]
		if !ok {
			return nil, nil // not a constant: the default's own capacity
		}
		h := fnv.New64a()
		h.Write([]byte(id))
		return MeasuredVariability[dataType(typ)].Trace(mean, length, seed*1000003+h.Sum64())
	}
	return nil
}

// drive builds the schedule of a replayed drive: the XCAL log (the
// --xcal flag, else schedule.xcal), its capacity log (--capacity, else
// schedule.capacity; schedule.iperf3 is the older key, which only
// aligns), aligned by AlignDrive.
func (l *loader) drive(xcal, align, capacity, replay string, maxLead time.Duration, cfg *Config) (*Drive, error) {
	xcalPath, xfield := l.path(xcal), "schedule.xcal"
	if l.opts.XCALPath != "" {
		xcalPath, xfield = l.opts.XCALPath, "--xcal"
	}
	capPath, cfield := "", "schedule.capacity"
	switch {
	case l.opts.CapacityPath != "":
		capPath, cfield = l.opts.CapacityPath, "--capacity"
	case l.opts.XCALPath != "":
	case capacity != "":
		capPath = l.path(capacity)
	}
	if capacity != "" && align != "" && l.opts.XCALPath == "" {
		return nil, errors.New("schedule.capacity: conflicts with schedule.iperf3 (capacity replaces it: give one)")
	}
	switch replay {
	case "", "log", "synthesized":
	default:
		return nil, fmt.Errorf("schedule.replay: %q is not log or synthesized", replay)
	}
	if replay == "" {
		replay = "log"
	}
	if l.opts.XCAL == nil {
		return nil, errors.New("schedule.xcal: no XCAL reader configured (LoadOptions.XCAL, e.g. over signaling.NewXCALReader)")
	}
	// The capacity log first: a missing file is named before the XCAL
	// log is read.
	var ip *IperfUDP
	if capPath != "" {
		var err error
		if ip, err = l.iperf3(capPath); err != nil {
			return nil, fmt.Errorf("%s: %w", cfield, err)
		}
	}
	evs, err := l.opts.XCAL(xcalPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", xfield, err)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("%s: %s: no events", xfield, xcalPath)
	}
	if maxLead <= 0 {
		maxLead = time.Second
	}
	d := &Drive{XCAL: xcalPath, Replay: replay}
	var since func(time.Time) time.Duration
	switch {
	case ip != nil:
		d.Capacity = capPath
		since, d.Alignment = AlignDrive(evs, ip)
		// The capacity log is what the serving cell delivered at each
		// moment, whichever it was: every cell of the drive takes it,
		// and it has the mmWave edges already.
		cfg.DefaultCapacity = nil
		cfg.MmWaveEdge = nil
		buf := map[signaling.CellType]int64{signaling.CellSub6: MeasuredBufferSub6, signaling.CellMmWave: MeasuredBufferMmWave}
		if cfg.CellDefaults == nil {
			cfg.CellDefaults = map[signaling.CellType]CellSpec{}
		}
		for _, t := range []signaling.CellType{signaling.CellSub6, signaling.CellMmWave} {
			cs := cfg.CellDefaults[t]
			if cs.Buffer <= 0 {
				cs.Buffer = buf[t]
				for _, c := range cfg.Cells {
					if dataType(c.Type) == t {
						cs.Buffer = c.Buffer
						break
					}
				}
			}
			cs.Type, cs.Capacity = t, ip.Series
			cfg.CellDefaults[t] = cs
		}
	case align != "":
		// schedule.iperf3 (older scenarios): aligns only; the cells keep
		// the scenario's capacities.
		ip, err := l.iperf3(align)
		if err != nil {
			return nil, fmt.Errorf("schedule.iperf3: %w", err)
		}
		since = SinceTimeOfDay(evs[0].Time, ip.Start)
		d.Capacity = ""
		d.Alignment = DriveAlignment{Mode: AlignTimestamps, CapacityS: ip.Period().Seconds(),
			Text: "aligned by timestamps with schedule.iperf3 (XCAL device_time against its start.timestamp.timesecs, zone removed, no refinement)"}
	default:
		since, d.Alignment = AlignDrive(evs, nil)
		if err := defaultsFromCells(cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", xfield, err)
		}
	}
	if replay == "log" {
		cfg.Schedule = ReplayLog(evs, since, maxLead)
	} else {
		cfg.Schedule = FromEvents(evs, since, maxLead)
	}
	return d, nil
}

// defaultsFromCells gives a drive without a capacity log per-type cell
// defaults: the scenario's own cell_defaults, else its first declared cell
// of each type.
func defaultsFromCells(cfg *Config) error {
	if cfg.CellDefaults == nil {
		cfg.CellDefaults = map[signaling.CellType]CellSpec{}
	}
	for _, t := range []signaling.CellType{signaling.CellSub6, signaling.CellMmWave} {
		if _, ok := cfg.CellDefaults[t]; ok {
			continue
		}
		for _, c := range cfg.Cells {
			if dataType(c.Type) == t {
				c.Type, c.ID = t, ""
				cfg.CellDefaults[t] = c
				break
			}
		}
	}
	if len(cfg.CellDefaults) == 0 {
		return errors.New("no capacity log and no cells or cell_defaults to take per-type capacities from")
	}
	return nil
}
