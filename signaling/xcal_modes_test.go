package signaling

import (
	"strings"
	"testing"
)

// row builds an XCAL row at time hms with the given message and info.
func row(hms, msg, info string) string {
	return hms + "," + hms + ",,DL DCCH,LTE," + msg + "," + info
}

const (
	msgLTEReport = "LTE measurementReport"
	msgNRReport  = "5GNR measurementReport"
	msgReconf    = "LTE rrcConnectionReconfiguration"
	msgSIB       = "LTE systemInformation - sib2, sib3"
	msgCapEnq    = "LTE ueCapabilityEnquiry"
	hoReqN77     = "ENDC LTE HO Request%s / Split Bearer Config / keyToUse : secondary / cellGroupId : 1 / absoluteFrequencySSB : 648672 / frequencyBandList : 77"
	hoReqN261    = "ENDC LTE HO Request / Split Bearer Config / keyToUse : secondary / cellGroupId : 1 / absoluteFrequencySSB : 2074081 / frequencyBandList : 261"
	lteA3        = "Event : A3 / Serving(-95, -19.0)"
	lteB1n77     = "Event : B1_NR_r15 / Serving(-91, -16.5), Neighbor(nr-arfcn 648672, pci 88, rsrp -98.0, rsrq -15.0)"
	lteB1n261    = "Event : B1_NR_r15 / Serving(-91, -16.5), Neighbor(nr-arfcn 2074081, pci 524, rsrp -98.0, rsrq -15.0)"
	nrA2mm       = "Event: A2 / Serving(pci 524, ss-rsrp -118.0, ss-rsrq -15.0)"
)

func hoReq(suffix string) string { return strings.Replace(hoReqN77, "%s", suffix, 1) }

// evSummary is what the failure-mode tests check of an event.
type evSummary struct {
	at   string
	kind Kind
	meas MeasEvent
	ho   HOKind
}

// TestXCALFailureModes reads the failure modes of the reader
// (how real logs differ from the February ones) from short synthetic
// exports. Each case fails on the reader before the rework.
func TestXCALFailureModes(t *testing.T) {
	tests := []struct {
		name string
		rows []string
		want []evSummary
	}{
		{
			// 4. The SN release after an mmWave A2 is not exported; the
			// system-information read 150 ms later is its trace.
			name: "4 mmWave A2 then a system-information read: inferred SN release",
			rows: []string{
				row("10:00:00.000", msgLTEReport, lteB1n261), row("10:00:00.080", msgReconf, hoReqN261),
				row("10:00:05.000", msgNRReport, nrA2mm), row("10:00:05.150", msgSIB, "UPPR[1]: True"),
				row("10:00:06.400", msgLTEReport, lteB1n77), row("10:00:06.460", msgReconf, hoReq("(DiffLTE-DiffNR)")),
			},
			want: []evSummary{
				{"10:00:00.000", KindReport, MeasB1, 0}, {"10:00:00.080", KindHOCommand, 0, HOSNAddition},
				{"10:00:05.000", KindReport, MeasA2, 0}, {"10:00:05.150", KindHOCommand, 0, HOSNRelease},
				{"10:00:06.400", KindReport, MeasB1, 0}, {"10:00:06.460", KindHOCommand, 0, HOSNAddition},
			},
		},
		{
			// 5. An LTE handover without SCG configuration leaves no
			// command row: the LTE A3, a system-information read and a UE
			// capability enquiry ~350 ms later, then B1 and an addition.
			name: "5 LTE A3, SIB read and capability enquiry: inferred anchor handover",
			rows: []string{
				row("10:00:00.000", msgLTEReport, lteB1n77), row("10:00:00.060", msgReconf, hoReq("")),
				row("10:00:04.000", msgLTEReport, lteA3), row("10:00:04.350", msgSIB, "UPPR[1]: True"),
				row("10:00:04.390", msgCapEnq, "rat-type : eutra_nr"),
				row("10:00:05.500", msgLTEReport, lteB1n77), row("10:00:05.560", msgReconf, hoReq("(DiffLTE-DiffNR)")),
			},
			want: []evSummary{
				{"10:00:00.000", KindReport, MeasB1, 0}, {"10:00:00.060", KindHOCommand, 0, HOSNAddition},
				{"10:00:04.000", KindReport, MeasA3, 0}, {"10:00:04.350", KindHOCommand, 0, HOLTEAnchor},
				{"10:00:05.500", KindReport, MeasB1, 0}, {"10:00:05.560", KindHOCommand, 0, HOSNAddition},
			},
		},
		{
			// 6. The SCG state at the start of a file is unknown, not "no
			// SCG": an LTE A3 answered by an "LTE HO Request(DiffLTE-
			// SameNR)" moves the anchor and keeps the NR leg.
			name: "6 SCG unknown at file start: LTE A3 then HO Request is an anchor handover",
			rows: []string{
				row("10:00:00.000", msgLTEReport, lteA3), row("10:00:00.090", msgReconf, hoReq("(DiffLTE-SameNR)")),
			},
			want: []evSummary{{"10:00:00.000", KindReport, MeasA3, 0}, {"10:00:00.090", KindHOCommand, 0, HOLTEAnchor}},
		},
		{
			name: "6 SCG unknown at file start: SameNR names an SCG kept",
			rows: []string{row("10:00:00.090", msgReconf, hoReq("(DiffLTE-SameNR)"))},
			want: []evSummary{{"10:00:00.090", KindHOCommand, 0, HOLTEAnchor}},
		},
		{
			name: "6 SCG unknown at file start: B1 then HO Request is still an addition",
			rows: []string{row("10:00:00.000", msgLTEReport, lteB1n77), row("10:00:00.060", msgReconf, hoReq("(DiffLTE-DiffNR)"))},
			want: []evSummary{{"10:00:00.000", KindReport, MeasB1, 0}, {"10:00:00.060", KindHOCommand, 0, HOSNAddition}},
		},
		{
			// 7. Report kinds real logs carry: events, not malformed rows.
			name: "7 A6-r10, an empty LTE event and NR Unknown are reports",
			rows: []string{
				row("10:00:00.000", msgLTEReport, "Event : A6-r10 / Serving(-95, -19.0)"),
				row("10:00:00.100", msgLTEReport, "Event :  / Serving(-95, -19.0)"),
				row("10:00:00.200", msgNRReport, "Event: Unknown / Serving(pci 88, ss-rsrp -96.0, ss-rsrq -15.5)"),
				row("10:00:00.300", msgLTEReport, "Event : B9_new_r18 / Serving(-95, -19.0)"),
				row("10:00:00.400", msgLTEReport, "Event : "),
			},
			want: []evSummary{
				{"10:00:00.000", KindReport, MeasA6, 0}, {"10:00:00.100", KindReport, MeasUnknown, 0},
				{"10:00:00.200", KindReport, MeasUnknown, 0}, {"10:00:00.300", KindReport, MeasUnknown, 0},
				{"10:00:00.400", KindReport, MeasUnknown, 0},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, st, errs := readRows(t, "f.csv", tc.rows...)
			if len(errs) != 0 || st.Errors != 0 {
				t.Fatalf("errors %v (stats %d)", errs, st.Errors)
			}
			var got []evSummary
			for _, e := range evs {
				got = append(got, evSummary{e.Time.Format("15:04:05.000"), e.Kind, e.Meas, e.HO})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("event %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			if st.Events+st.SkippedTotal()+st.Errors != st.Lines {
				t.Errorf("stats do not add up: %+v", st)
			}
		})
	}
}

// The inferred handovers are marked and counted apart, and are not rows.
func TestXCALInferredMarked(t *testing.T) {
	r := NewXCALReader(strings.NewReader(strings.Join([]string{
		row("10:00:00.000", msgLTEReport, lteB1n261), row("10:00:00.080", msgReconf, hoReqN261),
		row("10:00:05.000", msgNRReport, nrA2mm), row("10:00:05.150", msgSIB, "x"),
		row("10:00:06.000", msgLTEReport, lteB1n77), row("10:00:06.060", msgReconf, hoReq("")),
		row("10:00:08.000", msgLTEReport, lteA3), row("10:00:08.300", msgSIB, "x"),
		// No read after the A3 this time, but the B1 shows the SCG gone.
		row("10:00:09.000", msgLTEReport, lteB1n77), row("10:00:09.060", msgReconf, hoReq("")),
		row("10:00:12.000", msgNRReport, "Event: A3 / Serving(pci 88, ss-rsrp -96.0) / Neighbor(pci 89, ss-rsrp -91.0)"),
		row("10:00:13.000", msgLTEReport, lteB1n77),
		row("10:00:14.000", msgLTEReport, "Event : A6-r10 / Serving(-95, -19.0)"),
		row("10:00:14.100", msgLTEReport, "Event :  / Serving(-95, -19.0)"),
	}, "\r\n")), "f.csv")
	var inferred []Event
	n := 0
	for {
		e, err := r.Next()
		if err != nil {
			break
		}
		n++
		if e.Inferred {
			inferred = append(inferred, e)
		}
	}
	inf, st := r.Inference(), r.Stats()
	if inf.InferredRelease != 1 || inf.InferredAnchor != 1 || inf.InferredReleaseLate != 1 || inf.UnknownEvent != 1 || inf.SuffixedEvent != 1 {
		t.Fatalf("inference %+v", inf)
	}
	if len(inferred) != 3 || st.Events+3 != n {
		t.Fatalf("inferred %d, events %d of %d", len(inferred), st.Events, n)
	}
	for _, e := range inferred {
		if e.Target.Type != CellLTE || e.Kind != KindHOCommand {
			t.Errorf("inferred %+v", e)
		}
	}
	// Source: the NR cell the data was on (mmWave 524, then sub-6 88).
	if inferred[0].Serving.Type != CellMmWave || inferred[0].HO != HOSNRelease ||
		inferred[1].Serving.Type != CellSub6 || inferred[1].HO != HOLTEAnchor ||
		inferred[2].Serving.ID != "88" || inferred[2].HO != HOSNRelease || !inferred[2].Time.Equal(at("10:00:13.000")) {
		t.Errorf("inferred %+v", inferred)
	}
}
