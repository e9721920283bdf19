package signaling

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Rows in the XCAL export's format, written for these tests.
const (
	rowLTEB1     = "22:44:53.100,22:45:10.686,--->,UL DCCH,LTE,LTE measurementReport,Event : B1_NR_r15 / Serving(-91, -16.5), Neighbor(nr-arfcn 648672, pci 88, rsrp -98.0, rsrq -15.0)"
	rowLTEB1mm   = "22:44:53.000,22:45:10.686,--->,UL DCCH,LTE,LTE measurementReport,Event : B1_NR_r15 / Serving(-91, -16.5), Neighbor(nr-arfcn 2074081, pci 522, rsrp -98.0, rsrq -15.0)"
	rowAddN77    = "22:44:53.170,22:45:10.739,<---,DL DCCH,LTE,LTE rrcConnectionReconfiguration,ENDC LTE HO Request(DiffLTE-DiffNR) / Split Bearer Config / keyToUse : secondary / cellGroupId : 1 / absoluteFrequencySSB : 648672 / SubcarrierSpacing : kHz30 / carrierBandwidth : 162 / frequencyBandList : 77 / Split Bearer Config (Primary Path: SCG / ul-DataSplitThreshold: b3200)"
	rowTrigConn  = "22:44:53.200,22:45:10.793,,5GNR RACH,5GNR,5GNR MAC RACH Trigger,CONNECTION_REQUEST"
	rowAttOK     = "22:44:53.230,22:45:10.807,,5GNR RACH,5GNR,5GNR MAC RACH Attempt,SUCCESS"
	rowNRA3      = "22:44:59.886,22:45:17.489,--->,UL DCCH,5GNR,5GNR measurementReport,Event: A3 / Serving(pci 88, ss-rsrp -96.0, ss-rsrq -15.5) / Neighbor(pci 393, ss-rsrp -91.0, ss-rsrq -13.0)"
	rowSNChg77   = "22:44:59.928,22:45:17.526,<---,DL DCCH,LTE,LTE rrcConnectionReconfiguration,ENDC SN Release Request / Split Bearer Config / keyToUse : secondary / cellGroupId : 1 / absoluteFrequencySSB : 648672 / SubcarrierSpacing : kHz30 / carrierBandwidth : 162 / frequencyBandList : 77 / Split Bearer Config (Primary Path: SCG / ul-DataSplitThreshold: b3200)"
	rowTrigHO    = "22:44:59.981,22:45:17.572,,5GNR RACH,5GNR,5GNR MAC RACH Trigger,HANDOVER"
	rowLTEA3     = "22:45:04.589,22:45:22.186,--->,UL DCCH,LTE,LTE measurementReport,Event : A3 / Serving(-95, -19.0)"
	rowLTEHOSame = "22:45:04.658,22:45:22.255,<---,DL DCCH,LTE,LTE rrcConnectionReconfiguration,ENDC LTE HO Request(DiffLTE-SameNR) / Split Bearer Config / keyToUse : secondary / cellGroupId : 1 / absoluteFrequencySSB : 648672 / SubcarrierSpacing : kHz30 / carrierBandwidth : 162 / frequencyBandList : 77 / Split Bearer Config (Primary Path: SCG / ul-DataSplitThreshold: b3200)"
	rowNRA5      = "22:45:11.254,22:45:28.850,--->,UL DCCH,5GNR,5GNR measurementReport,Event: A5 / Serving(pci 393, ss-rsrp -90.0, ss-rsrq -12.0) / Neighbor(pci 522, ss-rsrp -88.0)"
	rowSNChg261  = "22:45:11.300,22:45:28.895,<---,DL DCCH,LTE,LTE rrcConnectionReconfiguration,ENDC SN Release Request / Split Bearer Config / keyToUse : secondary / cellGroupId : 1 / absoluteFrequencySSB : 2074081 / SubcarrierSpacing : kHz120 / carrierBandwidth : 66 / frequencyBandList : 261 / Split Bearer Config (Primary Path: SCG / ul-DataSplitThreshold: b3200)"
	rowNRA2      = "22:47:39.742,22:47:57.289,--->,UL DCCH,5GNR,5GNR measurementReport,Event: A2 / Serving(pci 524, ss-rsrp -118.0, ss-rsrq -15.0)"
	rowAttFail   = "22:45:32.193,22:45:49.790,,5GNR RACH,5GNR,5GNR MAC RACH Attempt,FAILURE_MSG2_RA_TIMER_EXP"
	rowAttAbort  = "22:45:32.379,22:45:49.974,,5GNR RACH,5GNR,5GNR MAC RACH Attempt,ABORTED"
	rowTrigUL    = "22:45:32.164,22:45:49.768,,5GNR RACH,5GNR,5GNR MAC RACH Trigger,UL_DATA_ARRIVAL"
	rowPeriodic  = "01:38:48.036,01:39:17.162,--->,UL DCCH,LTE,LTE measurementReport,Event : periodical / Purpose : reportStrongestCells / Serving(-76, -9.0)"
	rowLTEA2     = "01:39:58.046,01:40:27.165,--->,UL DCCH,LTE,LTE measurementReport,Event : A2 / Serving(-98, -14.0)"
	rowCGOnly    = "22:44:54.426,22:45:12.023,<---,DL DCCH,LTE,LTE rrcConnectionReconfiguration,cellGroupId : 1"
	rowMCG       = "22:45:31.365,22:45:48.965,<---,DL DCCH,LTE,LTE rrcConnectionReconfiguration,Split Bearer Config / Split Bearer Config (Primary Path: MCG / ul-DataSplitThreshold: infinity)"
	rowEmptyRec  = "22:44:58.261,22:45:15.861,<---,DL DCCH,LTE,LTE rrcConnectionReconfiguration,"
	rowComplete  = "22:44:53.199,22:45:10.769,--->,UL DCCH,LTE,LTE rrcConnectionReconfigurationComplete,ENDC LTE HO Success"
	rowSIB       = "22:44:53.231,22:45:10.828,<---,BCCH:DL SCH,LTE,LTE systemInformation - sib2, sib3,UPPR[1]: True"
	rowRelease   = "22:46:10.351,22:46:27.926,<---,DL DCCH,LTE,LTE rrcConnectionRelease,"
	rowSCGFail   = "22:45:32.446,22:45:50.050,--->,UL DCCH,LTE,LTE scgFailureInformationNR-r15,failureType-r15 : randomAccessProblem"
	rowSNRelOnly = "22:45:40.000,22:45:58.000,<---,DL DCCH,LTE,LTE rrcConnectionReconfiguration,ENDC SN Release Request / Split Bearer Config (Primary Path: MCG / ul-DataSplitThreshold: infinity)"
	rowLTEHONoNR = "22:45:41.000,22:45:59.000,<---,DL DCCH,LTE,LTE rrcConnectionReconfiguration,ENDC LTE HO Request"
)

func readRows(t *testing.T, name string, rows ...string) ([]Event, Stats, []error) {
	t.Helper()
	r := NewXCALReader(strings.NewReader(strings.Join(rows, "\r\n")+"\r\n"), name)
	var evs []Event
	var errs []error
	for {
		e, err := r.Next()
		if err == io.EOF {
			return evs, r.Stats(), errs
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		evs = append(evs, e)
	}
}

var day0 = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)

func at(hms string) time.Time {
	d, err := parseTOD(hms)
	if err != nil {
		panic(err)
	}
	return day0.Add(d)
}

func TestXCALMapping(t *testing.T) {
	add261 := strings.Replace(rowAddN77, "648672 / SubcarrierSpacing : kHz30 / carrierBandwidth : 162 / frequencyBandList : 77", "2074081 / SubcarrierSpacing : kHz120 / carrierBandwidth : 66 / frequencyBandList : 261", 1)
	sub6 := func(id string) Cell { return Cell{ID: id, Type: CellSub6} }
	mm := func(id string) Cell { return Cell{ID: id, Type: CellMmWave} }
	for _, tc := range []struct {
		name string
		rows []string
		want []Event // the events of all rows, in order
	}{
		{"LTE B1 sub6 neighbour", []string{rowLTEB1}, []Event{{Time: at("22:44:53.100"), Kind: KindReport, Meas: MeasB1,
			Serving:  Cell{Type: CellLTE, RSRP: -91, RSRQ: -16.5, HasSignal: true},
			Neighbor: Cell{ID: "88", Type: CellSub6, RSRP: -98, RSRQ: -15, HasSignal: true}}}},
		{"LTE B1 mmWave neighbour by ARFCN", []string{rowLTEB1mm}, []Event{{Time: at("22:44:53.000"), Kind: KindReport, Meas: MeasB1,
			Serving:  Cell{Type: CellLTE, RSRP: -91, RSRQ: -16.5, HasSignal: true},
			Neighbor: Cell{ID: "522", Type: CellMmWave, RSRP: -98, RSRQ: -15, HasSignal: true}}}},
		{"LTE A3 names an LTE neighbour", []string{rowLTEA3}, []Event{{Time: at("22:45:04.589"), Kind: KindReport, Meas: MeasA3,
			Serving: Cell{Type: CellLTE, RSRP: -95, RSRQ: -19, HasSignal: true}, Neighbor: Cell{Type: CellLTE}}}},
		{"LTE A2 no neighbour", []string{rowLTEA2}, []Event{{Time: at("01:39:58.046"), Kind: KindReport, Meas: MeasA2,
			Serving: Cell{Type: CellLTE, RSRP: -98, RSRQ: -14, HasSignal: true}}}},
		{"LTE periodical", []string{rowPeriodic}, []Event{{Time: at("01:38:48.036"), Kind: KindReport, Meas: MeasPeriodic,
			Serving: Cell{Type: CellLTE, RSRP: -76, RSRQ: -9, HasSignal: true}}}},
		{"SN addition from B1, RACH reason from trigger", []string{rowLTEB1, rowAddN77, rowComplete, rowTrigConn, rowAttOK}, []Event{
			{Time: at("22:44:53.100"), Kind: KindReport, Meas: MeasB1, Serving: Cell{Type: CellLTE, RSRP: -91, RSRQ: -16.5, HasSignal: true},
				Neighbor: Cell{ID: "88", Type: CellSub6, RSRP: -98, RSRQ: -15, HasSignal: true}},
			{Time: at("22:44:53.170"), Kind: KindHOCommand, HO: HOSNAddition, Serving: Cell{Type: CellLTE}, Target: sub6("88")},
			{Time: at("22:44:53.230"), Kind: KindRandomAccess, RAReason: RAConnectionRequest, RAResult: RASuccess},
		}},
		{"SN addition picks the B1 on the SSB ARFCN", []string{rowLTEB1, rowLTEB1mm, rowAddN77}, []Event{
			{Kind: KindReport}, {Kind: KindReport},
			{Time: at("22:44:53.170"), Kind: KindHOCommand, HO: HOSNAddition, Serving: Cell{Type: CellLTE}, Target: sub6("88")},
		}},
		{"NR A3 intra-frequency, SN change target from report", []string{rowLTEB1, rowAddN77, rowNRA3, rowSNChg77, rowTrigHO, rowAttOK}, []Event{
			{Kind: KindReport}, {Kind: KindHOCommand},
			{Time: at("22:44:59.886"), Kind: KindReport, Meas: MeasA3,
				Serving:  Cell{ID: "88", Type: CellSub6, RSRP: -96, RSRQ: -15.5, HasSignal: true},
				Neighbor: Cell{ID: "393", Type: CellSub6, RSRP: -91, RSRQ: -13, HasSignal: true}},
			{Time: at("22:44:59.928"), Kind: KindHOCommand, HO: HOSNChange, Serving: sub6("88"), Target: sub6("393")},
			{Time: at("22:44:53.230"), Kind: KindRandomAccess, RAReason: RAHandover, RAResult: RASuccess},
		}},
		{"LTE anchor HO keeps NR (SameNR)", []string{rowLTEB1, rowAddN77, rowNRA3, rowSNChg77, rowLTEA3, rowLTEHOSame}, []Event{
			{Kind: KindReport}, {Kind: KindHOCommand}, {Kind: KindReport}, {Kind: KindHOCommand}, {Kind: KindReport},
			{Time: at("22:45:04.658"), Kind: KindHOCommand, HO: HOLTEAnchor, Serving: sub6("393"), Target: sub6("393")},
		}},
		{"A5 from sub6 defaults to mmWave neighbour; SN change to n261", []string{rowLTEB1, rowAddN77, rowNRA5, rowSNChg261}, []Event{
			{Kind: KindReport}, {Kind: KindHOCommand},
			{Time: at("22:45:11.254"), Kind: KindReport, Meas: MeasA5,
				Serving:  Cell{ID: "393", Type: CellSub6, RSRP: -90, RSRQ: -12, HasSignal: true},
				Neighbor: Cell{ID: "522", Type: CellMmWave, RSRP: -88, HasSignal: true}},
			{Time: at("22:45:11.300"), Kind: KindHOCommand, HO: HOSNChange, Serving: sub6("393"), Target: mm("522")},
		}},
		{"A5 neighbour type from PCI learned from a B1", []string{rowLTEB1mm, rowLTEB1, rowAddN77, strings.Replace(rowNRA5, "pci 522", "pci 88", 1)}, []Event{
			{Kind: KindReport}, {Kind: KindReport}, {Kind: KindHOCommand},
			{Time: at("22:45:11.254"), Kind: KindReport, Meas: MeasA5,
				Serving:  Cell{ID: "393", Type: CellSub6, RSRP: -90, RSRQ: -12, HasSignal: true},
				Neighbor: Cell{ID: "88", Type: CellSub6, RSRP: -88, HasSignal: true}},
		}},
		{"NR A2 on mmWave, then B1 and addition: source is the lost mmWave PSCell", []string{rowLTEB1mm, add261, rowNRA2, rowLTEB1, rowAddN77}, []Event{
			{Kind: KindReport}, {Time: at("22:44:53.170"), Kind: KindHOCommand, HO: HOSNAddition, Serving: Cell{Type: CellLTE}, Target: mm("522")},
			{Time: at("22:47:39.742"), Kind: KindReport, Meas: MeasA2, Serving: Cell{ID: "524", Type: CellMmWave, RSRP: -118, RSRQ: -15, HasSignal: true}},
			// The B1 shows the SCG gone: its release, not exported, is
			// inferred before it.
			{Time: at("22:44:53.100"), Kind: KindHOCommand, HO: HOSNRelease, Inferred: true, Serving: mm("524"), Target: Cell{Type: CellLTE}},
			{Kind: KindReport},
			{Time: at("22:44:53.170"), Kind: KindHOCommand, HO: HOSNAddition, Serving: mm("524"), Target: sub6("88")},
		}},
		{"release forgets the PSCell", []string{rowLTEB1mm, add261, rowRelease, rowAddN77}, []Event{
			{Kind: KindReport}, {Kind: KindHOCommand},
			{Time: at("22:44:53.170"), Kind: KindHOCommand, HO: HOSNAddition, Serving: Cell{Type: CellLTE}, Target: Cell{Type: CellSub6}},
		}},
		{"SCG failure: next LTE HO Request is an addition", []string{rowLTEB1, rowAddN77, rowSCGFail, rowAddN77}, []Event{
			{Kind: KindReport}, {Kind: KindHOCommand},
			{Time: at("22:44:53.170"), Kind: KindHOCommand, HO: HOSNAddition, Serving: sub6("88"), Target: Cell{Type: CellSub6}},
		}},
		{"SN Release Request without SCG config is a release", []string{rowLTEB1, rowAddN77, rowSNRelOnly}, []Event{
			{Kind: KindReport}, {Kind: KindHOCommand},
			{Time: at("22:45:40.000"), Kind: KindHOCommand, HO: HOSNRelease, Serving: sub6("88"), Target: Cell{Type: CellLTE}},
		}},
		{"LTE HO without NR config", []string{rowLTEB1, rowAddN77, rowLTEHONoNR, rowNRA3}, []Event{
			{Kind: KindReport}, {Kind: KindHOCommand},
			{Time: at("22:45:41.000"), Kind: KindHOCommand, HO: HOLTEAnchor, Serving: sub6("88"), Target: Cell{Type: CellLTE}},
			{Time: at("22:44:59.886"), Kind: KindReport, Meas: MeasA3,
				Serving:  Cell{ID: "88", Type: CellSub6, RSRP: -96, RSRQ: -15.5, HasSignal: true},
				Neighbor: Cell{ID: "393", Type: CellSub6, RSRP: -91, RSRQ: -13, HasSignal: true}},
		}},
		{"RACH failures carry the last trigger's reason", []string{rowAttOK, rowTrigUL, rowAttFail, rowAttAbort}, []Event{
			{Time: at("22:44:53.230"), Kind: KindRandomAccess, RAReason: RAUnknown, RAResult: RASuccess},
			{Time: at("22:45:32.193"), Kind: KindRandomAccess, RAReason: RAULData, RAResult: RAFailure},
			{Time: at("22:45:32.379"), Kind: KindRandomAccess, RAReason: RAULData, RAResult: RAAborted},
		}},
		{"NR report with no PSCell known: serving unknown, A3 neighbour unknown", []string{rowNRA3}, []Event{
			{Time: at("22:44:59.886"), Kind: KindReport, Meas: MeasA3,
				Serving:  Cell{ID: "88", RSRP: -96, RSRQ: -15.5, HasSignal: true},
				Neighbor: Cell{ID: "393", RSRP: -91, RSRQ: -13, HasSignal: true}},
		}},
		{"non-events are skipped", []string{rowCGOnly, rowMCG, rowEmptyRec, rowComplete, rowSIB, rowTrigHO, rowRelease, rowSCGFail}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st, errs := readRows(t, "x.csv", tc.rows...)
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if w.Time.IsZero() && (w == Event{Kind: w.Kind}) {
					// Only the kind is asserted for context rows.
					if g.Kind != w.Kind {
						t.Errorf("event %d: kind %v, want %v", i, g.Kind, w.Kind)
					}
					continue
				}
				if w.Kind == KindRandomAccess || w.Kind == KindHOCommand {
					w.Time = g.Time // asserted in TestXCALTime
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("event %d:\n got %+v\nwant %+v", i, g, w)
				}
			}
			if st.Lines != len(tc.rows) || st.Lines != st.Events+st.SkippedTotal()+st.Errors {
				t.Errorf("stats do not add up: %+v", st)
			}
		})
	}
}

func TestXCALSkipReasons(t *testing.T) {
	_, st, _ := readRows(t, "x.csv", rowCGOnly, rowCGOnly, rowMCG, rowEmptyRec, rowComplete, rowSIB, rowTrigHO, rowRelease, rowSCGFail,
		"00:00:00.000,,,,,Detach request,")
	want := map[string]int{
		"LTE rrcConnectionReconfiguration: cellGroupId only":    2,
		"LTE rrcConnectionReconfiguration: UL primary path MCG": 1,
		"LTE rrcConnectionReconfiguration: empty":               1,
		"LTE rrcConnectionReconfigurationComplete":              1,
		"LTE systemInformation - sib2":                          1, // the message itself holds a comma
		"5GNR MAC RACH Trigger":                                 1,
		"LTE rrcConnectionRelease":                              1,
		"LTE scgFailureInformationNR-r15":                       1,
		"Detach request":                                        1,
	}
	if !reflect.DeepEqual(st.Skipped, want) {
		t.Errorf("skipped %v\nwant %v", st.Skipped, want)
	}
}

func TestXCALTime(t *testing.T) {
	rows := []string{
		"23:59:59.990,,,,,5GNR MAC RACH Attempt,SUCCESS",
		"00:00:00.010,,,,,5GNR MAC RACH Attempt,SUCCESS",
		"23:59:59.995,,,,,5GNR MAC RACH Attempt,SUCCESS", // late row from before midnight
		"00:00:01.5,,,,,5GNR MAC RACH Attempt,SUCCESS",
		"23:00:00,,,,,5GNR MAC RACH Attempt,SUCCESS", // next evening: 23 h later, past midnight rule
	}
	got, _, errs := readRows(t, "measurements/202302/13/1-ho.csv", rows...)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	d := time.Date(2023, 2, 13, 0, 0, 0, 0, time.UTC)
	want := []time.Time{
		d.Add(24*time.Hour - 10*time.Millisecond),
		d.Add(24*time.Hour + 10*time.Millisecond),
		d.Add(24*time.Hour - 5*time.Millisecond),
		d.Add(24*time.Hour + 1500*time.Millisecond),
		d.Add(23 * time.Hour), // > 12 h forward after a wrap: previous day
	}
	for i := range want {
		if !got[i].Time.Equal(want[i]) {
			t.Errorf("row %d: %v, want %v", i, got[i].Time, want[i])
		}
	}
	for path, want := range map[string]time.Time{
		"/data/measurements/202302/13/1-ho.csv": time.Date(2023, 2, 13, 0, 0, 0, 0, time.UTC),
		"logs/20230216/bw-1-ho.csv":             time.Date(2023, 2, 16, 0, 0, 0, 0, time.UTC),
		`C:\logs\20230216\x.csv`:                time.Date(2023, 2, 16, 0, 0, 0, 0, time.UTC),
		"sample_link_layer_traces/bw-1-ho.csv":  time.Unix(0, 0).UTC(),
		"x/20231399/y.csv":                      time.Unix(0, 0).UTC(),
		"x/202302/31/y.csv":                     time.Unix(0, 0).UTC(),
	} {
		if got := dateFromPath(path); !got.Equal(want) {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}

func TestXCALErrors(t *testing.T) {
	for _, tc := range []struct {
		row, field string
	}{
		{"22:44:53.100,22:45:10.686,--->,UL DCCH,LTE", "columns"},
		{"", ""}, // blank: skipped, no error
		{"25:44:53.100,,,,,5GNR MAC RACH Attempt,SUCCESS", "device_time"},
		{"22:44:53.1x,,,,,5GNR MAC RACH Attempt,SUCCESS", "device_time"},
		{"22:44:53.1234567890,,,,,5GNR MAC RACH Attempt,SUCCESS", "device_time"},
		{"22:44,,,,,5GNR MAC RACH Attempt,SUCCESS", "device_time"},
		{"22:44:53.100,,,,,5GNR MAC RACH Attempt,MAYBE", "info"},
		{"22:44:53.100,,,,,LTE measurementReport,Event : A3 / Serving(-95)", "info.serving"},
		{"22:44:53.100,,,,,LTE measurementReport,Event : A3 / Serving(x, -19.0)", "info.serving"},
		{"22:44:53.100,,,,,LTE measurementReport,Event : A3", "info.serving"},
		{"22:44:53.100,,,,,LTE measurementReport,Serving(-95, -19.0)", "info.event"},
		{"22:44:53.100,,,,,LTE measurementReport,Event : B1_NR_r15 / Serving(-91, -16.5)", "info.neighbor"},
		{"22:44:53.100,,,,,LTE measurementReport,Event : B1_NR_r15 / Serving(-91, -16.5), Neighbor(pci 88, rsrp -98.0)", "info.neighbor"},
		{"22:44:53.100,,,,,LTE measurementReport,Event : B1_NR_r15 / Serving(-91, -16.5), Neighbor(nr-arfcn -1, pci 88)", "info.neighbor"},
		{"22:44:53.100,,,,,5GNR measurementReport,Event: A3 / Serving(pci 2000, ss-rsrp -96.0)", "info.serving"},
		{"22:44:53.100,,,,,5GNR measurementReport,Event: A3 / Serving(ss-rsrp -96.0)", "info.serving"},
		{"22:44:53.100,,,,,5GNR measurementReport,Event: A3 / Serving(pci 88, ss-rsrp NaN)", "info.serving"},
		{"22:44:53.100,,,,,5GNR measurementReport,Event: A3 / Serving(pci 88, ss-rsrp -96.0) / Neighbor(ss-rsrp -91.0)", "info.neighbor"},
		{"22:44:53.100,,,,,5GNR measurementReport,Event: A3 / Serving(pci 88, ss-rsrp) / Neighbor(pci 1)", "info.serving"},
		{"22:44:53.100,,,,,LTE rrcConnectionReconfiguration,ENDC SN Release Request / frequencyBandList : x", "info.frequencyBandList"},
		{"22:44:53.100,,,,,LTE rrcConnectionReconfiguration,ENDC SN Release Request / absoluteFrequencySSB : 648672 / frequencyBandList : 261", "info.absoluteFrequencySSB"},
	} {
		_, st, errs := readRows(t, "f.csv", tc.row)
		if tc.field == "" {
			if len(errs) != 0 || st.Lines != 0 {
				t.Errorf("%q: %v %+v", tc.row, errs, st)
			}
			continue
		}
		if len(errs) != 1 {
			t.Errorf("%q: errors %v, want one", tc.row, errs)
			continue
		}
		var pe *ParseError
		if !errors.As(errs[0], &pe) || pe.Field != tc.field || pe.File != "f.csv" || pe.Line != 1 {
			t.Errorf("%q: %v, want f.csv:1: %s", tc.row, errs[0], tc.field)
		}
		if st.Errors != 1 || st.Lines != 1 {
			t.Errorf("%q: stats %+v", tc.row, st)
		}
	}
	// Reading goes on after an error, and a bad row changes no state.
	evs, st, errs := readRows(t, "f.csv", rowLTEB1, "22:44:53.100,,,,,LTE rrcConnectionReconfiguration,ENDC SN Release Request / frequencyBandList : 0", rowAddN77)
	if len(errs) != 1 || len(evs) != 2 || evs[1].HO != HOSNAddition || st.Errors != 1 {
		t.Errorf("continue after error: %v %+v %+v", errs, evs, st)
	}
	if !strings.HasPrefix(errs[0].Error(), "f.csv:2: info.frequencyBandList: ") {
		t.Errorf("error text %q", errs[0])
	}
}

func FuzzXCALRow(f *testing.F) {
	for _, r := range []string{rowLTEB1, rowLTEB1mm, rowAddN77, rowTrigConn, rowAttOK, rowNRA3, rowSNChg77, rowTrigHO,
		rowLTEA3, rowLTEHOSame, rowNRA5, rowSNChg261, rowNRA2, rowAttFail, rowAttAbort, rowTrigUL, rowPeriodic, rowLTEA2,
		rowCGOnly, rowMCG, rowEmptyRec, rowComplete, rowSIB, rowRelease, rowSCGFail, rowSNRelOnly, rowLTEHONoNR} {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, row string) {
		// A context that gives the row's state something to act on.
		in := rowLTEB1 + "\n" + rowAddN77 + "\n" + row + "\n" + rowNRA3 + "\n" + rowSNChg77 + "\n"
		r := NewXCALReader(strings.NewReader(in), "fuzz.csv")
		for i := 0; i < 100; i++ {
			e, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Field == "" || pe.Line == 0 {
					t.Fatalf("error %v is not a located *ParseError", err)
				}
				continue
			}
			// Every event the reader makes can be written as JSON.
			if _, err := AppendJSON(nil, &e); err != nil {
				t.Fatalf("event %+v cannot be written: %v", e, err)
			}
		}
		st := r.Stats()
		if st.Lines != st.Events+st.SkippedTotal()+st.Errors {
			t.Fatalf("stats do not add up: %+v", st)
		}
	})
}
