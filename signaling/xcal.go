package signaling

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// XCAL CSV exports (see XCAL.md for the mapping and the measured counts):
//
//	device_time,pc_time,direction,channel,RAT,message,info
//
// with no header; info is free text containing commas and runs to the end
// of the line. The reader is strictly causal: every event is decided from
// the rows before it, because its consumer is a predictor that must not
// know the future.

// nrARFCNFR2 is the first NR-ARFCN of FR2 (24.25 GHz, 38.104 §5.4.2.1);
// channels from it up are mmWave.
const nrARFCNFR2 = 2016667

// typeOfARFCN is the cell type of an NR channel number.
func typeOfARFCN(arfcn int) CellType {
	if arfcn >= nrARFCNFR2 {
		return CellMmWave
	}
	return CellSub6
}

// typeOfBand is the cell type of an NR operating band: n257-n262 are FR2
// (38.101-2 Table 5.2-1), everything else FR1.
func typeOfBand(band int) CellType {
	if band >= 257 && band <= 262 {
		return CellMmWave
	}
	return CellSub6
}

// maxPCIMap bounds the learned PCI→type map (a PCI is 0..1007, so real
// logs never reach it; hostile input cannot grow it further).
const maxPCIMap = 1024

// maxB1 bounds the B1 neighbours remembered since the last command.
const maxB1 = 8

// inferWindow is how long after a report that no command answered a
// system-information read or UE capability enquiry still counts as the
// trace of an unexported handover (XCAL.md: 110-340 ms in the data).
const inferWindow = time.Second

// scgState is what the reader knows of the NR secondary cell group.
type scgState uint8

const (
	scgUnknown scgState = iota // the start of a file: not "no SCG"
	scgUp
	scgDown
)

// XCALInference counts how the reader filled what the rows do not say, so
// that the choices documented in XCAL.md can be checked against data.
type XCALInference struct {
	// NR report neighbour type: A3 is intra-frequency (same type as
	// serving); otherwise the PCI map learned from earlier rows; otherwise
	// the default (A5 from sub-6 names mmWave); otherwise unknown.
	NeighborSameAsServing, NeighborFromPCI, NeighborDefault, NeighborUnknown int
	// NR report serving type: the tracked PSCell's, else the PCI map's.
	ServingFromPSCell, ServingFromPCI, ServingUnknown int
	// Handover command target ID: the last NR report's neighbour (SN
	// change), the B1 neighbour on the command's SSB ARFCN (SN addition),
	// the current PSCell ("SameNR" LTE anchor handover), or unknown.
	TargetFromNRReport, TargetFromB1, TargetFromPSCell, TargetUnknown int
	// PSCellMismatch counts NR reports whose serving PCI differed from the
	// PSCell the reader tracked (then the report wins).
	PSCellMismatch int
	// UnknownEvent counts reports whose event the reader does not know
	// (an empty event, "Unknown", a new name): reports of MeasUnknown,
	// not malformed rows. SuffixedEvent counts release-suffixed names
	// such as "A6-r10" read as their event.
	UnknownEvent, SuffixedEvent int
	// Handovers XCAL does not export, inferred (Event.Inferred):
	// InferredAnchor, an LTE handover without SCG configuration (an LTE
	// A3/A5 no command answered, then a system-information read or UE
	// capability enquiry); InferredRelease, an SN release (an NR report
	// no command answered, then such a read, with an SCG up);
	// InferredReleaseLate, an SN release seen only when a B1 shows the SCG
	// gone.
	InferredAnchor, InferredRelease, InferredReleaseLate int
}

type b1Neighbor struct {
	arfcn int
	pci   string
	typ   CellType
}

// XCALReader turns an XCAL CSV export into Events, one row at a time.
type XCALReader struct {
	name  string
	lr    *lineReader
	stats Stats
	inf   XCALInference

	date    time.Time     // midnight (UTC) of the first row's day
	lastTOD time.Duration // time of day of the last row
	haveTOD bool
	day     int // days elapsed since date, from midnight wraps

	scg       scgState
	pscell    Cell // the current (or last) NR PSCell: ID and Type
	pciType   map[string]CellType
	nrNbr     Cell // neighbour of the last NR report since the last command
	haveNRNbr bool
	b1        []b1Neighbor // B1 neighbours since the last command
	raReason  RAReason     // reason of the last RACH Trigger

	// Reports since the last command that no command answered: the
	// last LTE A3/A5 and the last NR report, for the inference of
	// unexported handovers.
	pendLTE, pendNR         time.Time
	havePendLTE, havePendNR bool
	lastLTEMobility         bool // the last report since the command was an LTE A3/A5

	queued    Event // an event to return before reading on
	hasQueued bool
}

// NewXCALReader reads an XCAL CSV export from r. name is used in errors and
// gives the date: a path component YYYYMMDD, or YYYYMM followed by DD (as
// in measurements/202302/13/), else 1970-01-01; times are UTC.
func NewXCALReader(r io.Reader, name string) *XCALReader {
	return &XCALReader{
		name:    name,
		lr:      newLineReader(r, MaxLine),
		date:    dateFromPath(name),
		pciType: make(map[string]CellType),
	}
}

// dateFromPath finds the deepest date in path's components.
func dateFromPath(path string) time.Time {
	// Both separators, whatever the OS: a name is only text here.
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '\\' })
	var d time.Time
	for i, p := range parts {
		var s string
		switch {
		case len(p) == 8 && allDigits(p):
			s = p
		case len(p) == 6 && allDigits(p) && i+1 < len(parts) && len(parts[i+1]) == 2 && allDigits(parts[i+1]):
			s = p + parts[i+1]
		default:
			continue
		}
		if t, err := time.Parse("20060102", s); err == nil {
			d = t
		}
	}
	if d.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return d
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// Stats returns a copy of the counts so far.
func (x *XCALReader) Stats() Stats { return x.stats.Clone() }

// Inference returns the counts of inferred fields so far.
func (x *XCALReader) Inference() XCALInference { return x.inf }

// Next returns the next event, io.EOF at the end, or a *ParseError naming
// the file, line and field of a malformed row; calling Next again goes on
// with the following row. Rows that are not events are counted in Stats.
func (x *XCALReader) Next() (Event, error) {
	if x.hasQueued {
		x.hasQueued = false
		x.stats.event(&x.queued)
		return x.queued, nil
	}
	for {
		line, err := x.lr.next()
		if err == errLineTooLong {
			x.stats.Lines++
			x.stats.Errors++
			return Event{}, &ParseError{File: x.name, Line: x.lr.line, Field: "row", Msg: fmt.Sprintf("longer than %d bytes", MaxLine)}
		}
		if err != nil {
			return Event{}, err
		}
		if isBlank(line) {
			continue
		}
		x.stats.Lines++
		e, ok, err := x.row(line)
		if err != nil {
			x.stats.Errors++
			pe := err.(*ParseError)
			pe.File, pe.Line = x.name, x.lr.line
			return Event{}, pe
		}
		if ok {
			if e.Inferred {
				// Not a row: counted in Inference, not in Stats.
				return e, nil
			}
			x.stats.event(&e)
			return e, nil
		}
	}
}

// row handles one non-blank row: an event (ok), a counted skip, or an
// error. State changes only for rows without error.
func (x *XCALReader) row(line []byte) (e Event, ok bool, err error) {
	var cols [7][]byte
	rest := line
	for i := 0; i < 6; i++ {
		j := bytes.IndexByte(rest, ',')
		if j < 0 {
			return e, false, perr("columns", "want 7 columns, got %d", i+1)
		}
		cols[i], rest = rest[:j], rest[j+1:]
	}
	cols[6] = rest
	tod, perrv := parseTOD(string(bytes.TrimSpace(cols[0])))
	if perrv != nil {
		return e, false, perrv
	}
	msg := string(bytes.TrimSpace(cols[5]))
	info := string(bytes.TrimSpace(cols[6]))

	e.Time = x.stamp(tod)
	switch {
	case msg == "LTE measurementReport":
		err = x.lteReport(&e, info)
		ok = err == nil
		if ok && (e.Meas == MeasB1 || e.Meas == MeasB2) {
			// B1 towards NR is measured only while no SCG is
			// configured (it is the SN addition trigger): NR data has
			// fallen back to LTE by now. If the reader believed an
			// SCG up, its release was not exported: infer it now,
			// before the report.
			wasUp := x.scg == scgUp
			x.scg = scgDown
			x.havePendNR = false
			if wasUp {
				x.queued, x.hasQueued = e, true
				e = x.inferred(e.Time, HOSNRelease)
				x.inf.InferredReleaseLate++
			}
		}
	case msg == "5GNR measurementReport":
		err = x.nrReport(&e, info)
		ok = err == nil
	case msg == "LTE rrcConnectionReconfiguration":
		ok, err = x.reconfiguration(&e, info)
	case msg == "5GNR MAC RACH Trigger":
		x.raReason = raReasonOf(info)
		x.stats.skip(msg)
	case msg == "5GNR MAC RACH Attempt":
		e.Kind = KindRandomAccess
		e.RAReason = x.raReason
		switch {
		case info == "SUCCESS":
			e.RAResult = RASuccess
		case strings.HasPrefix(info, "FAILURE"):
			e.RAResult = RAFailure
		case info == "ABORTED":
			e.RAResult = RAAborted
		default:
			return Event{}, false, perr("info", "unknown RACH attempt result %q", truncate(info, 40))
		}
		ok = true
	case msg == "LTE rrcConnectionRelease":
		// The RRC connection and with it any SCG is gone.
		x.scg = scgDown
		x.pscell = Cell{}
		x.clearPending()
		x.stats.skip(msg)
	case strings.HasPrefix(msg, "LTE scgFailureInformationNR"):
		// The UE declared the SCG failed: data is on LTE until an SN
		// addition, but the PSCell's type is kept as the last known.
		// A failure is not a handover.
		x.scg = scgDown
		x.havePendNR = false
		x.stats.skip(msg)
	case strings.HasPrefix(msg, "LTE systemInformation"), msg == "LTE ueCapabilityEnquiry":
		x.stats.skip(msg)
		ok = x.inferAt(&e)
	case msg == "":
		x.stats.skip("(no message)")
	default:
		x.stats.skip(msg)
	}
	if err != nil {
		return Event{}, false, err
	}
	return e, ok, nil
}

// stamp turns a time of day into a time, advancing a day when the clock
// goes back by more than 12 h (midnight) and putting a row that jumps
// forward by more than 12 h just after a wrap back into the previous day
// (rows slightly out of order around midnight).
func (x *XCALReader) stamp(tod time.Duration) time.Time {
	day := x.day
	if x.haveTOD {
		switch d := tod - x.lastTOD; {
		case d < -12*time.Hour:
			x.day++
			day = x.day
		case d > 12*time.Hour && x.day > 0:
			return x.date.AddDate(0, 0, x.day-1).Add(tod)
		}
	}
	x.lastTOD, x.haveTOD = tod, true
	return x.date.AddDate(0, 0, day).Add(tod)
}

// parseTOD parses "HH:MM:SS" with an optional fraction of up to 9 digits.
func parseTOD(s string) (time.Duration, *ParseError) {
	bad := func() (time.Duration, *ParseError) {
		return 0, perr("device_time", "want HH:MM:SS.fff, got %q", truncate(s, 40))
	}
	if len(s) < 8 || s[2] != ':' || s[5] != ':' {
		return bad()
	}
	h, err1 := strconv.Atoi(s[0:2])
	m, err2 := strconv.Atoi(s[3:5])
	sec, err3 := strconv.Atoi(s[6:8])
	if err1 != nil || err2 != nil || err3 != nil || !allDigits(s[0:2]+s[3:5]+s[6:8]) || h > 23 || m > 59 || sec > 59 {
		return bad()
	}
	d := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second
	if len(s) > 8 {
		frac := s[9:]
		if s[8] != '.' || len(frac) == 0 || len(frac) > 9 || !allDigits(frac) {
			return bad()
		}
		n, _ := strconv.Atoi(frac)
		for i := len(frac); i < 9; i++ {
			n *= 10
		}
		d += time.Duration(n)
	}
	return d, nil
}

func raReasonOf(info string) RAReason {
	switch info {
	case "HANDOVER":
		return RAHandover
	case "CONNECTION_REQUEST":
		return RAConnectionRequest
	case "UL_DATA_ARRIVAL":
		return RAULData
	}
	return RAOther
}

// measEventOf reads "Event : X" or "Event: X" at the start of info. An
// event name it does not know (empty, "Unknown", a new one) is
// MeasUnknown, not an error: the row is still a report. Release-suffixed
// names ("A6-r10", "B1_NR_r15") are their event. Only a missing
// "Event :" is an error: then the row's structure is broken.
func (x *XCALReader) measEventOf(info string) (MeasEvent, error) {
	s, ok := strings.CutPrefix(info, "Event")
	if !ok {
		return 0, perr("info.event", "missing \"Event :\"")
	}
	s = strings.TrimLeft(s, " ")
	s, ok = strings.CutPrefix(s, ":")
	if !ok {
		return 0, perr("info.event", "missing \"Event :\"")
	}
	s = strings.TrimLeft(s, " ")
	if i := strings.IndexAny(s, " /"); i >= 0 {
		s = s[:i]
	}
	base, suffixed := s, false
	if i := strings.IndexAny(s, "-_"); i >= 0 {
		base, suffixed = s[:i], true
	}
	m := MeasUnknown
	switch {
	case len(base) == 2 && base[0] == 'A' && base[1] >= '1' && base[1] <= '6':
		m = MeasA1 + MeasEvent(base[1]-'1')
	case base == "B1":
		m = MeasB1
	case base == "B2":
		m = MeasB2
	case s == "periodical":
		m = MeasPeriodic
	}
	switch {
	case m == MeasUnknown:
		x.inf.UnknownEvent++
	case suffixed && m != MeasB1 && m != MeasB2:
		x.inf.SuffixedEvent++
	}
	return m, nil
}

// paren returns the text inside "key(...)" in info.
func paren(info, key string) (string, bool) {
	i := strings.Index(info, key+"(")
	if i < 0 {
		return "", false
	}
	s := info[i+len(key)+1:]
	j := strings.IndexByte(s, ')')
	if j < 0 {
		return "", false
	}
	return s[:j], true
}

// cellFields is what a "Serving(...)" or "Neighbor(...)" says in its
// "key value, key value" form.
type cellFields struct {
	pci              string
	arfcn            int
	hasARFCN         bool
	rsrp, rsrq       float64
	hasRSRP, hasRSRQ bool
}

func parseCellFields(s, field string) (cellFields, error) {
	var c cellFields
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		k, v, ok := strings.Cut(item, " ")
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			return c, perr(field, "want \"key value\", got %q", truncate(item, 40))
		}
		switch k {
		case "pci":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 1007 {
				return c, perr(field, "pci %q not in 0..1007", truncate(v, 20))
			}
			c.pci = strconv.Itoa(n)
		case "nr-arfcn":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 3279165 {
				return c, perr(field, "nr-arfcn %q not in 0..3279165", truncate(v, 20))
			}
			c.arfcn, c.hasARFCN = n, true
		case "ss-rsrp", "rsrp":
			f, err := parseDB(v)
			if err != nil {
				return c, perr(field, "%s %q: %v", k, truncate(v, 20), err)
			}
			c.rsrp, c.hasRSRP = f, true
		case "ss-rsrq", "rsrq":
			f, err := parseDB(v)
			if err != nil {
				return c, perr(field, "%s %q: %v", k, truncate(v, 20), err)
			}
			c.rsrq, c.hasRSRQ = f, true
		}
		// Other keys (an export may add SINR) are ignored.
	}
	return c, nil
}

// parseDB parses a dBm/dB value; only finite values in a sane range are
// accepted, so that every event can be written as JSON.
func parseDB(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= -300 && f <= 300) {
		return 0, fmt.Errorf("not a number in [-300, 300]")
	}
	return f, nil
}

func (c *cellFields) signal(cell *Cell) {
	if c.hasRSRP || c.hasRSRQ {
		cell.HasSignal = true
		cell.RSRP, cell.RSRQ = c.rsrp, c.rsrq
	}
}

// lteReport maps "Event : A3 / Serving(-95, -19.0)" and
// "Event : B1_NR_r15 / Serving(..), Neighbor(nr-arfcn N, pci P, rsrp R, rsrq Q)".
func (x *XCALReader) lteReport(e *Event, info string) error {
	m, err := x.measEventOf(info)
	if err != nil {
		return err
	}
	sv, ok := paren(info, "Serving")
	if !ok && m == MeasUnknown {
		// An unknown event need not carry the cells of a known one.
		e.Kind, e.Meas, e.Serving = KindReport, m, Cell{Type: CellLTE}
		return nil
	}
	if !ok {
		return perr("info.serving", "missing Serving(rsrp, rsrq)")
	}
	a, b, ok := strings.Cut(sv, ",")
	if !ok {
		return perr("info.serving", "want Serving(rsrp, rsrq), got %q", truncate(sv, 40))
	}
	rsrp, err1 := parseDB(strings.TrimSpace(a))
	rsrq, err2 := parseDB(strings.TrimSpace(b))
	if err1 != nil || err2 != nil {
		return perr("info.serving", "want Serving(rsrp, rsrq), got %q", truncate(sv, 40))
	}
	e.Kind = KindReport
	e.Meas = m
	e.Serving = Cell{Type: CellLTE, RSRP: rsrp, RSRQ: rsrq, HasSignal: true}
	switch m {
	case MeasA3, MeasA5:
		x.pendLTE, x.havePendLTE, x.lastLTEMobility = e.Time, true, true
	case MeasB1, MeasB2:
		x.lastLTEMobility = false
	}
	switch m {
	case MeasA3, MeasA4, MeasA5, MeasA6:
		// An LTE A-event's neighbour is an LTE cell; the export does
		// not name it.
		e.Neighbor = Cell{Type: CellLTE}
	case MeasB1, MeasB2:
		nb, ok := paren(info, "Neighbor")
		if !ok {
			return perr("info.neighbor", "B1/B2 report without Neighbor(...)")
		}
		c, err := parseCellFields(nb, "info.neighbor")
		if err != nil {
			return err
		}
		if !c.hasARFCN || c.pci == "" {
			return perr("info.neighbor", "want nr-arfcn and pci, got %q", truncate(nb, 60))
		}
		e.Neighbor = Cell{ID: c.pci, Type: typeOfARFCN(c.arfcn)}
		c.signal(&e.Neighbor)
		x.learn(c.pci, e.Neighbor.Type)
		if len(x.b1) == maxB1 {
			copy(x.b1, x.b1[1:])
			x.b1 = x.b1[:maxB1-1]
		}
		x.b1 = append(x.b1, b1Neighbor{arfcn: c.arfcn, pci: c.pci, typ: e.Neighbor.Type})
	}
	return nil
}

func (x *XCALReader) learn(pci string, t CellType) {
	if pci == "" || t == CellUnknown {
		return
	}
	if _, ok := x.pciType[pci]; ok || len(x.pciType) < maxPCIMap {
		x.pciType[pci] = t
	}
}

// nrReport maps "Event: A3 / Serving(pci 88, ss-rsrp .., ss-rsrq ..) /
// Neighbor(pci 393, ss-rsrp .., ss-rsrq ..)"; the neighbour is optional.
func (x *XCALReader) nrReport(e *Event, info string) error {
	m, err := x.measEventOf(info)
	if err != nil {
		return err
	}
	sv, ok := paren(info, "Serving")
	if !ok && m == MeasUnknown {
		// An unknown event need not carry the cells of a known one.
		e.Kind, e.Meas, e.Serving = KindReport, m, Cell{ID: x.pscell.ID, Type: x.pscell.Type}
		return nil
	}
	if !ok {
		return perr("info.serving", "missing Serving(pci .., ss-rsrp ..)")
	}
	s, err := parseCellFields(sv, "info.serving")
	if err != nil {
		return err
	}
	if s.pci == "" {
		return perr("info.serving", "missing pci")
	}
	var n cellFields
	nb, hasNbr := paren(info, "Neighbor")
	if hasNbr {
		if n, err = parseCellFields(nb, "info.neighbor"); err != nil {
			return err
		}
		if n.pci == "" {
			return perr("info.neighbor", "missing pci")
		}
	}

	// Serving: the PSCell the commands so far put the UE on.
	e.Kind = KindReport
	e.Meas = m
	e.Serving.ID = s.pci
	s.signal(&e.Serving)
	if x.pscell.ID != "" && x.pscell.ID != s.pci {
		x.inf.PSCellMismatch++
	}
	switch {
	case x.pscell.Type != CellUnknown:
		e.Serving.Type = x.pscell.Type
		x.inf.ServingFromPSCell++
	case x.pciType[s.pci] != CellUnknown:
		e.Serving.Type = x.pciType[s.pci]
		x.inf.ServingFromPCI++
	default:
		x.inf.ServingUnknown++
	}
	// An NR report proves an SCG, on the serving PCI.
	x.scg = scgUp
	x.lastLTEMobility = false
	if m != MeasA1 && m != MeasPeriodic && m != MeasUnknown {
		x.pendNR, x.havePendNR = e.Time, true
	}
	x.pscell.ID = s.pci
	x.pscell.Type = e.Serving.Type
	x.learn(s.pci, e.Serving.Type)

	if hasNbr {
		e.Neighbor.ID = n.pci
		n.signal(&e.Neighbor)
		switch t := x.pciType[n.pci]; {
		case m == MeasA3 && e.Serving.Type != CellUnknown:
			// A3 is configured per frequency: the neighbour is on
			// the serving cell's carrier.
			e.Neighbor.Type = e.Serving.Type
			x.inf.NeighborSameAsServing++
		case t != CellUnknown:
			e.Neighbor.Type = t
			x.inf.NeighborFromPCI++
		case m == MeasA5 && e.Serving.Type == CellSub6:
			// In these logs A5 is only configured on n77 towards the
			// n261 layer (XCAL.md).
			e.Neighbor.Type = CellMmWave
			x.inf.NeighborDefault++
		default:
			x.inf.NeighborUnknown++
		}
		x.nrNbr, x.haveNRNbr = e.Neighbor, true
	}
	return nil
}

// reconfiguration maps an LTE rrcConnectionReconfiguration. Only those with
// mobility are events; see XCAL.md for why each is classified so.
func (x *XCALReader) reconfiguration(e *Event, info string) (bool, error) {
	const msg = "LTE rrcConnectionReconfiguration"
	snReq := strings.HasPrefix(info, "ENDC SN Release Request")
	lteHO := strings.HasPrefix(info, "ENDC LTE HO Request")
	if !snReq && !lteHO {
		switch {
		case info == "":
			x.stats.skip(msg + ": empty")
		case strings.HasPrefix(info, "cellGroupId"):
			x.stats.skip(msg + ": cellGroupId only")
		case strings.Contains(info, "Primary Path: MCG"):
			x.stats.skip(msg + ": UL primary path MCG")
		default:
			x.stats.skip(msg + ": other, no mobility")
		}
		return false, nil
	}

	band, hasBand, err := intAfter(info, "frequencyBandList : ", "info.frequencyBandList", 1, 1024)
	if err != nil {
		return false, err
	}
	ssb, hasSSB, err := intAfter(info, "absoluteFrequencySSB : ", "info.absoluteFrequencySSB", 0, 3279165)
	if err != nil {
		return false, err
	}
	var nr CellType
	if hasBand {
		nr = typeOfBand(band)
		if hasSSB && typeOfARFCN(ssb) != nr {
			return false, perr("info.absoluteFrequencySSB", "ARFCN %d is %v but band n%d is %v", ssb, typeOfARFCN(ssb), band, nr)
		}
	}

	e.Kind = KindHOCommand
	// The source is the NR PSCell the data was last on, even when the
	// SCG has since been lost (LTE carries the data only in that gap;
	// the paper's handover types are between NR cell types). Only a
	// connection that has had no PSCell yet hands over from LTE.
	e.Serving = Cell{Type: CellLTE}
	if x.pscell.Type != CellUnknown {
		e.Serving = Cell{ID: x.pscell.ID, Type: x.pscell.Type}
	}
	switch {
	case snReq && hasBand:
		// "SN Release Request" with a new SCG config is a PSCell
		// change: the export always follows it with RACH HANDOVER.
		e.HO = HOSNChange
		e.Target.Type = nr
		if x.haveNRNbr && (x.nrNbr.Type == nr || x.nrNbr.Type == CellUnknown) {
			e.Target.ID = x.nrNbr.ID
		}
	case snReq:
		e.HO = HOSNRelease
		e.Target.Type = CellLTE
	case hasBand && x.addsSCG(info):
		// No SCG (B1 was being measured): the "LTE HO Request" adds
		// one; the export follows it with RACH CONNECTION_REQUEST.
		e.HO = HOSNAddition
		e.Target.Type = nr
		e.Target.ID = x.b1Target(ssb, hasSSB, nr)
	default:
		e.HO = HOLTEAnchor
		if hasBand {
			e.Target.Type = nr
			if strings.HasPrefix(info, "ENDC LTE HO Request(DiffLTE-SameNR)") {
				e.Target.ID = x.pscell.ID
			}
		} else {
			e.Target.Type = CellLTE
		}
	}
	switch {
	case e.Target.ID == "" || e.Target.Type == CellLTE:
		x.inf.TargetUnknown++
	case e.HO == HOSNChange:
		x.inf.TargetFromNRReport++
	case e.HO == HOSNAddition:
		x.inf.TargetFromB1++
	default:
		x.inf.TargetFromPSCell++
	}

	// After the command.
	if hasBand {
		x.scg = scgUp
		x.pscell = Cell{ID: e.Target.ID, Type: nr}
		x.learn(e.Target.ID, nr)
	} else {
		x.scg = scgDown
	}
	x.haveNRNbr = false
	x.b1 = x.b1[:0]
	x.clearPending()
	return true, nil
}

// addsSCG decides whether an "LTE HO Request" with an SCG configuration
// adds the SCG (SN addition) or moves the LTE anchor with one. With the
// SCG known down it is an addition; known up, an anchor handover. At the
// start of a file the state is unknown: "(DiffLTE-SameNR)" names an SCG
// kept, and the last report tells what the network answers (an LTE
// A3/A5: an anchor handover; otherwise, a B1 or nothing: an addition).
func (x *XCALReader) addsSCG(info string) bool {
	switch x.scg {
	case scgDown:
		return true
	case scgUp:
		return false
	}
	if strings.HasPrefix(info, "ENDC LTE HO Request(DiffLTE-SameNR)") || x.lastLTEMobility {
		return false
	}
	return true
}

func (x *XCALReader) clearPending() {
	x.havePendLTE, x.havePendNR, x.lastLTEMobility = false, false, false
}

// inferAt handles a system-information read or UE capability enquiry at
// e.Time: the UE reads them after a handover, so one that follows an
// unanswered report within inferWindow is taken as the trace of a
// handover XCAL did not export (XCAL.md). An LTE A3/A5 gives an LTE
// handover without SCG configuration (it releases the SCG too); an NR
// report with an SCG up gives an SN release.
func (x *XCALReader) inferAt(e *Event) bool {
	now := e.Time
	switch {
	case x.havePendLTE && now.Sub(x.pendLTE) <= inferWindow:
		*e = x.inferred(now, HOLTEAnchor)
		x.inf.InferredAnchor++
	case x.havePendNR && x.scg == scgUp && now.Sub(x.pendNR) <= inferWindow:
		*e = x.inferred(now, HOSNRelease)
		x.inf.InferredRelease++
	default:
		return false
	}
	x.scg = scgDown
	x.haveNRNbr = false
	x.b1 = x.b1[:0]
	x.clearPending()
	return true
}

// inferred is an inferred handover of kind ho at t onto LTE, from the NR
// cell the data was last on (as for commands).
func (x *XCALReader) inferred(t time.Time, ho HOKind) Event {
	e := Event{Time: t, Kind: KindHOCommand, HO: ho, Inferred: true, Target: Cell{Type: CellLTE}}
	e.Serving = Cell{Type: CellLTE}
	if x.pscell.Type != CellUnknown {
		e.Serving = Cell{ID: x.pscell.ID, Type: x.pscell.Type}
	}
	return e
}

// b1Target is the PCI of the latest B1 neighbour on the command's SSB
// ARFCN, else of the latest one of the command's type.
func (x *XCALReader) b1Target(ssb int, hasSSB bool, t CellType) string {
	for i := len(x.b1) - 1; i >= 0; i-- {
		if hasSSB && x.b1[i].arfcn == ssb {
			return x.b1[i].pci
		}
	}
	for i := len(x.b1) - 1; i >= 0; i-- {
		if x.b1[i].typ == t {
			return x.b1[i].pci
		}
	}
	return ""
}

// intAfter reads the integer following key in info, if key is there.
func intAfter(info, key, field string, lo, hi int) (int, bool, error) {
	i := strings.Index(info, key)
	if i < 0 {
		return 0, false, nil
	}
	s := info[i+len(key):]
	j := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	n, err := strconv.Atoi(s[:j])
	if err != nil || n < lo || n > hi {
		return 0, false, perr(field, "want an integer in %d..%d, got %q", lo, hi, truncate(s, 20))
	}
	return n, true, nil
}
