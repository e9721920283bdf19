package signaling

import "fmt"

// The enums' text forms are the words of FORMAT.md; each String is the
// inverse of its Parse function, so a name written by one tool reads back
// as the same value in another. Values with no name print as "unknown"
// (or "KindN" style for out-of-range values, which never parse).

var kindNames = [...]string{KindUnknown: "unknown", KindReport: "report", KindHOCommand: "ho", KindRandomAccess: "ra", KindMACSlot: "mac"}

var cellTypeNames = [...]string{CellUnknown: "unknown", CellSub6: "sub6", CellMmWave: "mmwave", CellLTE: "lte"}

var measNames = [...]string{
	MeasUnknown: "unknown", MeasA1: "A1", MeasA2: "A2", MeasA3: "A3", MeasA4: "A4", MeasA5: "A5",
	MeasA6: "A6", MeasB1: "B1", MeasB2: "B2", MeasPeriodic: "periodic",
}

var hoKindNames = [...]string{
	HOUnknown: "unknown", HOIntraNR: "intra-nr", HOLTEAnchor: "lte-anchor", HOSNChange: "sn-change",
	HOSNRelease: "sn-release", HOSNAddition: "sn-addition",
}

var raReasonNames = [...]string{
	RAUnknown: "unknown", RAHandover: "handover", RAConnectionRequest: "connection-request",
	RAULData: "ul-data", RAOther: "other",
}

var raResultNames = [...]string{RAResultUnknown: "unknown", RASuccess: "success", RAFailure: "failure", RAAborted: "aborted"}

func name(names []string, v int, typ string) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

func lookup(names []string, s string) (int, bool) {
	for i, n := range names {
		if n == s {
			return i, true
		}
	}
	return 0, false
}

func (k Kind) String() string      { return name(kindNames[:], int(k), "Kind") }
func (t CellType) String() string  { return name(cellTypeNames[:], int(t), "CellType") }
func (m MeasEvent) String() string { return name(measNames[:], int(m), "MeasEvent") }
func (h HOKind) String() string    { return name(hoKindNames[:], int(h), "HOKind") }
func (r RAReason) String() string  { return name(raReasonNames[:], int(r), "RAReason") }
func (r RAResult) String() string  { return name(raResultNames[:], int(r), "RAResult") }

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, bool) { v, ok := lookup(kindNames[:], s); return Kind(v), ok }

// ParseCellType is the inverse of CellType.String.
func ParseCellType(s string) (CellType, bool) {
	v, ok := lookup(cellTypeNames[:], s)
	return CellType(v), ok
}

// ParseMeasEvent is the inverse of MeasEvent.String.
func ParseMeasEvent(s string) (MeasEvent, bool) {
	v, ok := lookup(measNames[:], s)
	return MeasEvent(v), ok
}

// ParseHOKind is the inverse of HOKind.String.
func ParseHOKind(s string) (HOKind, bool) { v, ok := lookup(hoKindNames[:], s); return HOKind(v), ok }

// ParseRAReason is the inverse of RAReason.String.
func ParseRAReason(s string) (RAReason, bool) {
	v, ok := lookup(raReasonNames[:], s)
	return RAReason(v), ok
}

// ParseRAResult is the inverse of RAResult.String.
func ParseRAResult(s string) (RAResult, bool) {
	v, ok := lookup(raResultNames[:], s)
	return RAResult(v), ok
}

// MarshalText and UnmarshalText let the enums appear by name in
// configuration files (YAML, JSON) of other packages.

func (k Kind) MarshalText() ([]byte, error) { return marshalEnum(k.String(), int(k) < len(kindNames)) }
func (t CellType) MarshalText() ([]byte, error) {
	return marshalEnum(t.String(), int(t) < len(cellTypeNames))
}
func (m MeasEvent) MarshalText() ([]byte, error) {
	return marshalEnum(m.String(), int(m) < len(measNames))
}
func (h HOKind) MarshalText() ([]byte, error) {
	return marshalEnum(h.String(), int(h) < len(hoKindNames))
}
func (r RAReason) MarshalText() ([]byte, error) {
	return marshalEnum(r.String(), int(r) < len(raReasonNames))
}
func (r RAResult) MarshalText() ([]byte, error) {
	return marshalEnum(r.String(), int(r) < len(raResultNames))
}

func marshalEnum(s string, ok bool) ([]byte, error) {
	if !ok {
		return nil, fmt.Errorf("signaling: no name for %s", s)
	}
	return []byte(s), nil
}

func unmarshalEnum[T ~uint8](dst *T, names []string, b []byte, typ string) error {
	v, ok := lookup(names, string(b))
	if !ok {
		return fmt.Errorf("signaling: unknown %s %q", typ, b)
	}
	*dst = T(v)
	return nil
}

func (k *Kind) UnmarshalText(b []byte) error { return unmarshalEnum(k, kindNames[:], b, "kind") }
func (t *CellType) UnmarshalText(b []byte) error {
	return unmarshalEnum(t, cellTypeNames[:], b, "cell type")
}
func (m *MeasEvent) UnmarshalText(b []byte) error {
	return unmarshalEnum(m, measNames[:], b, "measurement event")
}
func (h *HOKind) UnmarshalText(b []byte) error {
	return unmarshalEnum(h, hoKindNames[:], b, "handover kind")
}
func (r *RAReason) UnmarshalText(b []byte) error {
	return unmarshalEnum(r, raReasonNames[:], b, "random access reason")
}
func (r *RAResult) UnmarshalText(b []byte) error {
	return unmarshalEnum(r, raResultNames[:], b, "random access result")
}

// HOType is a handover's direction between cell types, as the M2HO paper
// splits its results (§2.2, §3 "handover type i→j", 0 = sub-6, 1 =
// mmWave): LTE counts as sub-6, as in Algorithm 1. It is the one handover
// type of the project: the predictor's prediction, the score's split and
// the bench's output files all use it, and its names are theirs.
type HOType uint8

const (
	HOTypeUnknown  HOType = iota // a side's type is unknown
	HOHorizontal                 // same class on both sides
	HOSub6ToMmWave               // vertical, up to mmWave
	HOMmWaveToSub6               // vertical, down to sub-6 (or LTE)
)

var hoTypeNames = [...]string{HOTypeUnknown: "unknown", HOHorizontal: "horizontal", HOSub6ToMmWave: "sub6-to-mmwave", HOMmWaveToSub6: "mmwave-to-sub6"}

func (t HOType) String() string { return name(hoTypeNames[:], int(t), "HOType") }

// ParseHOType is the inverse of HOType.String.
func ParseHOType(s string) (HOType, bool) {
	v, ok := lookup(hoTypeNames[:], s)
	return HOType(v), ok
}

func (t HOType) MarshalText() ([]byte, error) {
	return marshalEnum(t.String(), int(t) < len(hoTypeNames))
}

func (t *HOType) UnmarshalText(b []byte) error {
	return unmarshalEnum(t, hoTypeNames[:], b, "handover type")
}

// ClassifyHO says which way a handover from a cell of type from to one of
// type to goes.
func ClassifyHO(from, to CellType) HOType {
	if from == CellUnknown || to == CellUnknown || from > CellLTE || to > CellLTE {
		return HOTypeUnknown
	}
	switch fs, ts := from.IsSub6(), to.IsSub6(); {
	case fs == ts:
		return HOHorizontal
	case fs:
		return HOSub6ToMmWave
	default:
		return HOMmWaveToSub6
	}
}

// HOType classifies a handover command from its source (Serving, the cell
// the data was on when the command came, as the readers fill it) to its
// Target. Other kinds give HOTypeUnknown.
func (e *Event) HOType() HOType {
	if e.Kind != KindHOCommand {
		return HOTypeUnknown
	}
	return ClassifyHO(e.Serving.Type, e.Target.Type)
}
