package signaling

import "testing"

func TestEnumNamesRoundTrip(t *testing.T) {
	check := func(name string, n int, str func(int) string, parse func(string) (int, bool)) {
		seen := map[string]bool{}
		for i := 0; i < n; i++ {
			s := str(i)
			if seen[s] {
				t.Errorf("%s: duplicate name %q", name, s)
			}
			seen[s] = true
			if v, ok := parse(s); !ok || v != i {
				t.Errorf("%s: parse(%q) = %d, %v; want %d", name, s, v, ok, i)
			}
		}
		if _, ok := parse(str(n)); ok {
			t.Errorf("%s: out-of-range name %q parses", name, str(n))
		}
		if _, ok := parse("nonsense"); ok {
			t.Errorf("%s: nonsense parses", name)
		}
	}
	check("Kind", 5, func(i int) string { return Kind(i).String() }, func(s string) (int, bool) { v, ok := ParseKind(s); return int(v), ok })
	check("CellType", 4, func(i int) string { return CellType(i).String() }, func(s string) (int, bool) { v, ok := ParseCellType(s); return int(v), ok })
	check("MeasEvent", 10, func(i int) string { return MeasEvent(i).String() }, func(s string) (int, bool) { v, ok := ParseMeasEvent(s); return int(v), ok })
	check("HOKind", 6, func(i int) string { return HOKind(i).String() }, func(s string) (int, bool) { v, ok := ParseHOKind(s); return int(v), ok })
	check("RAReason", 5, func(i int) string { return RAReason(i).String() }, func(s string) (int, bool) { v, ok := ParseRAReason(s); return int(v), ok })
	check("RAResult", 4, func(i int) string { return RAResult(i).String() }, func(s string) (int, bool) { v, ok := ParseRAResult(s); return int(v), ok })
	check("HOType", 4, func(i int) string { return HOType(i).String() }, func(s string) (int, bool) { v, ok := ParseHOType(s); return int(v), ok })

	// The names FORMAT.md promises.
	for v, want := range map[any]string{
		CellSub6: "sub6", CellMmWave: "mmwave", CellLTE: "lte", CellUnknown: "unknown",
		MeasA1: "A1", MeasA6: "A6", MeasB1: "B1", MeasB2: "B2", MeasPeriodic: "periodic",
		HOIntraNR: "intra-nr", HOLTEAnchor: "lte-anchor", HOSNChange: "sn-change", HOSNRelease: "sn-release", HOSNAddition: "sn-addition",
		KindReport: "report", KindHOCommand: "ho", KindRandomAccess: "ra", KindMACSlot: "mac",
		RAHandover: "handover", RAConnectionRequest: "connection-request", RAULData: "ul-data", RAOther: "other",
		RASuccess: "success", RAFailure: "failure", RAAborted: "aborted",
	} {
		if got := v.(interface{ String() string }).String(); got != want {
			t.Errorf("%#v: %q, want %q", v, got, want)
		}
	}
}

func TestEnumText(t *testing.T) {
	b, err := CellMmWave.MarshalText()
	if err != nil || string(b) != "mmwave" {
		t.Fatalf("%s %v", b, err)
	}
	var c CellType
	if err := c.UnmarshalText([]byte("lte")); err != nil || c != CellLTE {
		t.Errorf("%v %v", c, err)
	}
	if err := c.UnmarshalText([]byte("5g")); err == nil {
		t.Error("5g accepted")
	}
	if _, err := HOKind(77).MarshalText(); err == nil {
		t.Error("out-of-range HOKind marshalled")
	}
}

func TestClassifyHO(t *testing.T) {
	for _, tc := range []struct {
		from, to CellType
		want     HOType
	}{
		{CellSub6, CellSub6, HOHorizontal},
		{CellMmWave, CellMmWave, HOHorizontal},
		{CellLTE, CellSub6, HOHorizontal},
		{CellSub6, CellLTE, HOHorizontal},
		{CellLTE, CellMmWave, HOSub6ToMmWave},
		{CellSub6, CellMmWave, HOSub6ToMmWave},
		{CellMmWave, CellSub6, HOMmWaveToSub6},
		{CellMmWave, CellLTE, HOMmWaveToSub6},
		{CellUnknown, CellSub6, HOTypeUnknown},
		{CellMmWave, CellUnknown, HOTypeUnknown},
		{CellType(9), CellSub6, HOTypeUnknown},
	} {
		if got := ClassifyHO(tc.from, tc.to); got != tc.want {
			t.Errorf("%v->%v: %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	e := Event{Kind: KindReport, Serving: Cell{Type: CellSub6}, Target: Cell{Type: CellMmWave}}
	if e.HOType() != HOTypeUnknown {
		t.Error("a report has a handover class")
	}
	e.Kind = KindHOCommand
	if e.HOType() != HOSub6ToMmWave {
		t.Error("command class wrong")
	}
}
