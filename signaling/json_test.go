package signaling

import (
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2023, 2, 16, 22, 44, 53, 100_000_000, time.UTC)

// roundTripEvents has one event of every kind and the corner cases of
// each field the format must carry exactly.
var roundTripEvents = []struct {
	name string
	e    Event
}{
	{"report A3 full", Event{Time: t0, Kind: KindReport, Meas: MeasA3,
		Serving:  Cell{ID: "88", Type: CellSub6, RSRP: -96, RSRQ: -15.5, HasSignal: true},
		Neighbor: Cell{ID: "393", Type: CellSub6, RSRP: -91, RSRQ: 0, HasSignal: true}}},
	{"report A2 no neighbour", Event{Time: t0, Kind: KindReport, Meas: MeasA2,
		Serving: Cell{ID: "524", Type: CellMmWave, RSRP: -118, RSRQ: -15, HasSignal: true}}},
	{"report lte neighbour no signal", Event{Time: t0, Kind: KindReport, Meas: MeasA3,
		Serving: Cell{Type: CellLTE, RSRP: -95, RSRQ: -19, HasSignal: true}, Neighbor: Cell{Type: CellLTE}}},
	{"report periodic unknown serving", Event{Time: t0, Kind: KindReport, Meas: MeasPeriodic}},
	{"report B1 odd floats", Event{Time: t0.Add(1), Kind: KindReport, Meas: MeasB1,
		Serving:  Cell{Type: CellLTE, RSRP: -0.1 - 0.2, RSRQ: 1e-300, HasSignal: true},
		Neighbor: Cell{ID: "a\"b\\c\n\u00e9\u2028", Type: CellMmWave, RSRP: math.SmallestNonzeroFloat64, RSRQ: -math.MaxFloat64, HasSignal: true}}},
	{"ho sn-change", Event{Time: t0, Kind: KindHOCommand, HO: HOSNChange,
		Serving: Cell{ID: "522", Type: CellMmWave}, Target: Cell{ID: "524", Type: CellMmWave}}},
	{"ho inferred", Event{Time: t0, Kind: KindHOCommand, HO: HOSNRelease, Inferred: true,
		Serving: Cell{ID: "524", Type: CellMmWave}, Target: Cell{Type: CellLTE}}},
	{"ho without source", Event{Time: t0, Kind: KindHOCommand, HO: HOSNAddition, Target: Cell{Type: CellSub6}}},
	{"ho unknown kind value", Event{Time: t0, Kind: KindHOCommand, HO: HOUnknown, Target: Cell{}}},
	{"ra", Event{Time: t0, Kind: KindRandomAccess, RAReason: RAHandover, RAResult: RASuccess}},
	{"ra unknown reason", Event{Time: t0, Kind: KindRandomAccess, RAReason: RAUnknown, RAResult: RAAborted}},
	{"mac with cell id", Event{Time: t0, Kind: KindMACSlot, RBRatio: 0.95, Bytes: 12000, Serving: Cell{ID: "88"}}},
	{"mac with serving cell", Event{Time: t0, Kind: KindMACSlot, RBRatio: 1, Bytes: 0, Serving: Cell{ID: "88", Type: CellSub6}}},
	{"mac bare", Event{Time: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), Kind: KindMACSlot}},
	{"nanoseconds", Event{Time: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), Kind: KindRandomAccess, RAReason: RAOther, RAResult: RAFailure}},
}

func TestJSONRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, tc := range roundTripEvents {
		if err := w.Write(&tc.e); err != nil {
			t.Fatalf("%s: Write: %v", tc.name, err)
		}
	}
	r := NewJSONReader(&buf, "rt.jsonl")
	for _, tc := range roundTripEvents {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("%s: Next: %v", tc.name, err)
		}
		if !reflect.DeepEqual(got, tc.e) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.e)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after last event: %v, want io.EOF", err)
	}
	st := r.Stats()
	if st.Events != len(roundTripEvents) || st.Lines != st.Events || st.Errors != 0 || st.Kinds[KindMACSlot] != 3 || st.HO[HOSNChange] != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestJSONTimeInOtherZone(t *testing.T) {
	loc := time.FixedZone("X", -5*3600)
	e := Event{Time: t0.In(loc), Kind: KindRandomAccess, RAReason: RAHandover, RAResult: RASuccess}
	b, err := AppendJSON(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"t":"2023-02-16T22:44:53.1Z"`)) {
		t.Errorf("time not written in UTC: %s", b)
	}
	got, err := ParseLine(b)
	if err != nil || !got.Time.Equal(e.Time) || got.Time.Location() != time.UTC {
		t.Errorf("got %v %v", got.Time, err)
	}
	// A line with an offset is read as the same instant, in UTC.
	got, err = ParseLine([]byte(`{"t":"2023-02-16T17:44:53.1-05:00","kind":"ra","reason":"handover","result":"success"}`))
	if err != nil || !got.Time.Equal(t0) || got.Time.Location() != time.UTC {
		t.Errorf("offset: got %v %v", got.Time, err)
	}
}

func TestJSONWriteRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Event
	}{
		{"unknown kind", Event{Time: t0}},
		{"kind out of range", Event{Time: t0, Kind: 9}},
		{"meas out of range", Event{Time: t0, Kind: KindReport, Meas: 42}},
		{"cell type out of range", Event{Time: t0, Kind: KindHOCommand, Target: Cell{Type: 9}}},
		{"NaN rsrp", Event{Time: t0, Kind: KindReport, Serving: Cell{RSRP: math.NaN(), HasSignal: true}}},
		{"Inf rsrq", Event{Time: t0, Kind: KindReport, Serving: Cell{RSRQ: math.Inf(-1), HasSignal: true}}},
		{"signal without HasSignal", Event{Time: t0, Kind: KindReport, Serving: Cell{RSRP: -90}}},
		{"invalid UTF-8 id", Event{Time: t0, Kind: KindHOCommand, Target: Cell{ID: "\xff"}}},
		{"rb above 1", Event{Time: t0, Kind: KindMACSlot, RBRatio: 1.5}},
		{"rb NaN", Event{Time: t0, Kind: KindMACSlot, RBRatio: math.NaN()}},
		{"negative bytes", Event{Time: t0, Kind: KindMACSlot, Bytes: -1}},
		{"year 10000", Event{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Kind: KindRandomAccess}},
	} {
		dst := []byte("keep")
		out, err := AppendJSON(dst, &tc.e)
		if err == nil {
			t.Errorf("%s: wrote %s", tc.name, out)
		}
		if string(out) != "keep" {
			t.Errorf("%s: dst changed to %q", tc.name, out)
		}
	}
}

func TestParseLineErrors(t *testing.T) {
	for _, tc := range []struct {
		line, field string
	}{
		{`{`, "json"},
		{`[1]`, "json"},
		{`   `, "json"},
		{`{"kind":"ra","reason":"handover","result":"success"}`, "t"},
		{`{"t":"yesterday","kind":"ra"}`, "t"},
		{`{"t":"2023-02-16T22:44:53Z"}`, "kind"},
		{`{"t":"2023-02-16T22:44:53Z","kind":7}`, "kind"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"report","serving":{}}`, "event"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"report","event":"A9","serving":{}}`, "event"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"report","event":"A3"}`, "serving"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"report","event":"A3","serving":{"type":"5g"}}`, "serving.type"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"report","event":"A3","serving":{"rsrp":"low"}}`, "serving.rsrp"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"report","event":"A3","serving":{},"neighbor":{"type":"x"}}`, "neighbor.type"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"ho","target":{}}`, "ho"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"sn-change"}`, "target"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"sn-change","target":{"id":88}}`, "target.id"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"sn-release","target":{"type":"lte"},"inferred":"yes"}`, "inferred"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"ra","result":"success"}`, "reason"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"ra","reason":"handover","result":"maybe"}`, "result"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"mac","bytes":1}`, "rb"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":1.01,"bytes":1}`, "rb"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":0.5}`, "bytes"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":0.5,"bytes":-3}`, "bytes"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":0.5,"bytes":1.5}`, "bytes"},
		{`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":0.5,"bytes":1,"cell":"1","serving":{}}`, "cell"},
		{`{"t":"9999-12-31T23:59:59-23:00","kind":"mac","rb":0.5,"bytes":1}`, "t"},
	} {
		_, err := ParseLine([]byte(tc.line))
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%s: err %v, want *ParseError", tc.line, err)
			continue
		}
		if pe.Field != tc.field {
			t.Errorf("%s: field %q (%v), want %q", tc.line, pe.Field, err, tc.field)
		}
		if IsUnknownKind(err) {
			t.Errorf("%s: reported as unknown kind", tc.line)
		}
	}
}

func TestJSONReaderErrorsAndSkips(t *testing.T) {
	in := strings.Join([]string{
		`{"t":"2023-02-16T22:44:53.1Z","kind":"ra","reason":"handover","result":"success"}`,
		``,
		`{"t":"2023-02-16T22:44:53.2Z","kind":"pdcp","seq":4}`,
		`{"t":"2023-02-16T22:44:53.3Z","kind":"ra","reason":"handover"}`,
		`{"t":"2023-02-16T22:44:53.4Z","kind":"gnss"}`,
		strings.Repeat("x", MaxLine+10),
		`{"t":"2023-02-16T22:44:53.5Z","kind":"mac","rb":0.5,"bytes":100}` + "\r",
	}, "\n")
	r := NewJSONReader(strings.NewReader(in), "f.jsonl")
	e, err := r.Next()
	if err != nil || e.Kind != KindRandomAccess {
		t.Fatalf("first: %v %v", e, err)
	}
	_, err = r.Next()
	if err == nil || err.Error() != "f.jsonl:4: result: missing" {
		t.Fatalf("second: %v, want f.jsonl:4: result: missing", err)
	}
	_, err = r.Next()
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 6 || pe.Field != "json" {
		t.Fatalf("long line: %v", err)
	}
	e, err = r.Next()
	if err != nil || e.Kind != KindMACSlot || e.Bytes != 100 {
		t.Fatalf("after long line: %v %v", e, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	st := r.Stats()
	if st.Lines != 6 || st.Events != 2 || st.Errors != 2 || st.Skipped[`unknown kind "pdcp"`] != 1 || st.Skipped[`unknown kind "gnss"`] != 1 {
		t.Errorf("stats %+v", st)
	}
	if st.Lines != st.Events+st.Errors+st.SkippedTotal() {
		t.Errorf("stats do not add up: %+v", st)
	}
	// ParseLine tells unknown kinds apart.
	if _, err := ParseLine([]byte(`{"t":"2023-02-16T22:44:53.2Z","kind":"pdcp"}`)); !IsUnknownKind(err) {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestParseErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    ParseError
		want string
	}{
		{ParseError{File: "a.csv", Line: 3, Field: "device_time", Msg: "bad"}, "a.csv:3: device_time: bad"},
		{ParseError{Line: 3, Field: "t", Msg: "missing"}, "3: t: missing"},
		{ParseError{Field: "t", Msg: "missing"}, "t: missing"},
		{ParseError{File: "a", Msg: "m"}, "a: m"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q want %q", got, tc.want)
		}
	}
}

func TestAppendJSONAllocs(t *testing.T) {
	e := roundTripEvents[0].e
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = AppendJSON(buf[:0], &e); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AppendJSON allocates %v times per event", n)
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	e := roundTripEvents[0].e
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendJSON(buf[:0], &e)
	}
}

func BenchmarkParseLine(b *testing.B) {
	line, _ := AppendJSON(nil, &roundTripEvents[0].e)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseLine(line); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	for _, l := range formatExamples {
		f.Add([]byte(l))
	}
	for _, tc := range roundTripEvents {
		b, _ := AppendJSON(nil, &tc.e)
		f.Add(b)
	}
	f.Add([]byte(`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":0.5,"bytes":1,"cell":"1","serving":{}}`))
	f.Add([]byte(`{"t":"0000-01-01T00:00:00+23:59","kind":"ra","reason":"other","result":"failure"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := ParseLine(line)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Field == "" {
				t.Fatalf("error %v is not a *ParseError with a field", err)
			}
			return
		}
		b, err := AppendJSON(nil, &e)
		if err != nil {
			t.Fatalf("parsed %+v but cannot write it: %v", e, err)
		}
		e2, err := ParseLine(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("round trip changed the event:\n%+v\n%+v", e, e2)
		}
	})
}
