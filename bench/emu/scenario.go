package emu

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	// DataDir replaces the shared data directory for paths that start with
	// ../shared/data/ (default: $M2HO_SHARED_DATA, else the repository's
	// ../shared/data).
	DataDir string
	// Duration, when > 0, replaces the file's duration before a synthetic
	// schedule is drawn, so a longer run gets handovers all along.
	Duration time.Duration
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
	At       time.Duration `yaml:"at"`
	Neighbor string        `yaml:"neighbor"`
	Report   string        `yaml:"report"`
	A1After  time.Duration `yaml:"a1_after"`
}

type scenarioFile struct {
	Name     string        `yaml:"name"`
	Duration time.Duration `yaml:"duration"`
	Seed     uint64        `yaml:"seed"`
	Scale    float64       `yaml:"scale"`
	RTT      time.Duration `yaml:"rtt"`
	Uplink   struct {
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
		RetxDelay    *Dist   `yaml:"retx_delay"`
		HARQBy       string  `yaml:"harq_by"`
	} `yaml:"errors"`
	Handover struct {
		ReportLead    *Dist          `yaml:"report_lead"`
		CommandToExec *time.Duration `yaml:"command_to_exec"`
		FlushDelay    *time.Duration `yaml:"flush_delay"`
		Interruption  *time.Duration `yaml:"interruption"`
		A1After       *time.Duration `yaml:"a1_after"`
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
		MaxLead     time.Duration `yaml:"max_lead"`
	} `yaml:"schedule"`
}

// LoadScenario reads a scenario YAML file; relative paths in it resolve
// against the file's directory (../shared/data/... against the shared data
// directory).
func LoadScenario(path string, opts LoadOptions) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseScenario(path, filepath.Dir(path), data, opts)
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

// DataDir is where tests and scenarios find /work/shared/data:
// $M2HO_SHARED_DATA if set, else <repo root>/../shared/data, with the repo
// root found by walking up from dir to go.mod.
func DataDir(dir string) string {
	if d := os.Getenv("M2HO_SHARED_DATA"); d != "" {
		return d
	}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if abs, err := filepath.Abs(dir); err == nil {
		for d := abs; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return filepath.Join(d, "..", "shared", "data")
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return filepath.Join("..", "shared", "data")
}

func (l *loader) path(p string) string {
	const shared = "../shared/data/"
	if rest, ok := strings.CutPrefix(p, shared); ok {
		d := l.opts.DataDir
		if d == "" {
			d = DataDir(l.base)
		}
		return filepath.Join(d, rest)
	}
	if filepath.IsAbs(p) || l.base == "" {
		return p
	}
	return filepath.Join(l.base, p)
}

func (l *loader) iperf3(p string) (*IperfUDP, error) {
	full := l.path(p)
	if c, ok := l.iperf[full]; ok {
		return c, nil
	}
	f, err := os.Open(full)
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
	n := 0
	for _, s := range []string{c.Mahimahi, c.Iperf3, c.MbpsTrace} {
		if s != "" {
			n++
		}
	}
	if c.Mbps != 0 {
		n++
	}
	if n != 1 {
		return nil, fmt.Errorf("%s: give exactly one of mbps, mahimahi, iperf3, mbps_trace", field)
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
		cp, err = LoadCapacity("mahimahi", l.path(c.Mahimahi))
	default:
		cp, err = LoadCapacity("mbps-trace", l.path(c.MbpsTrace))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
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
	if opts.Duration > 0 {
		f.Duration = opts.Duration
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
	if f.Uplink.Mbps < 0 || f.Uplink.Mbps > 1e6 || f.Uplink.Buffer < 0 {
		return nil, errors.New("uplink: mbps and buffer must be > 0")
	}
	if f.Uplink.Mbps > 0 {
		cfg.UplinkMbps = f.Uplink.Mbps
	}
	if f.Uplink.Buffer > 0 {
		cfg.UplinkBuffer = int64(f.Uplink.Buffer)
	}
	if f.Slots.Sub6 < 0 || f.Slots.MmWave < 0 {
		return nil, errors.New("slots: lengths must be > 0")
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
	sc := f.Schedule
	kinds := 0
	if sc.Synthetic != nil {
		kinds++
	}
	if len(sc.Handovers) > 0 || len(sc.FalseAlarms) > 0 {
		kinds++
	}
	if sc.XCAL != "" {
		kinds++
	}
	if kinds > 1 {
		return nil, errors.New("schedule: give one of synthetic, handovers/false_alarms, xcal")
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
	case sc.XCAL != "":
		if sc.Iperf3 == "" {
			return nil, errors.New("schedule.iperf3: needed with schedule.xcal (its start time aligns the log)")
		}
		if opts.XCAL == nil {
			return nil, errors.New("schedule.xcal: no XCAL reader configured (LoadOptions.XCAL, e.g. over signaling.NewXCALReader)")
		}
		ip, err := l.iperf3(sc.Iperf3)
		if err != nil {
			return nil, fmt.Errorf("schedule.iperf3: %w", err)
		}
		evs, err := opts.XCAL(l.path(sc.XCAL))
		if err != nil {
			return nil, fmt.Errorf("schedule.xcal: %w", err)
		}
		if len(evs) == 0 {
			return nil, errors.New("schedule.xcal: no events")
		}
		maxLead := sc.MaxLead
		if maxLead <= 0 {
			maxLead = time.Second
		}
		cfg.Schedule = FromEvents(evs, SinceTimeOfDay(evs[0].Time, ip.Start), maxLead)
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
			if h.To == "" || h.At < 0 || h.Lead < 0 {
				return nil, fmt.Errorf("%s: needs to, at >= 0 and lead >= 0", field)
			}
			cfg.Schedule.Handovers = append(cfg.Schedule.Handovers, Handover{At: h.At, To: h.To, ToType: t, Report: meas, Lead: h.Lead})
		}
		for i, fa := range sc.FalseAlarms {
			field := fmt.Sprintf("schedule.false_alarms[%d]", i)
			meas, ok := parseMeas(fa.Report)
			if !ok || meas == signaling.MeasA1 {
				return nil, fmt.Errorf("%s.report: %q is not a measurement event other than A1", field, fa.Report)
			}
			if fa.At < 0 || fa.A1After < 0 {
				return nil, fmt.Errorf("%s: at and a1_after must be >= 0", field)
			}
			cfg.Schedule.FalseAlarms = append(cfg.Schedule.FalseAlarms, FalseAlarm{At: fa.At, Neighbor: fa.Neighbor, Report: meas, A1After: fa.A1After})
		}
	}
	name := f.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))
	}
	scn := &Scenario{Name: name, Source: src, Config: cfg}
	// Build once so that every error (unknown cells, overlapping
	// handovers) surfaces at load time, naming its field.
	if _, err := New(cfg, time.Unix(0, 0), 0); err != nil {
		return nil, err
	}
	return scn, nil
}
