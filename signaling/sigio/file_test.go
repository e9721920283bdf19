package sigio

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/m2ho/m2ho/signaling"
)

// XCAL rows as in signaling's tests.
const (
	rowLTEB1  = "22:44:53.100,22:45:10.686,--->,UL DCCH,LTE,LTE measurementReport,Event : B1_NR_r15 / Serving(-91, -16.5), Neighbor(nr-arfcn 648672, pci 88, rsrp -98.0, rsrq -15.0)"
	rowAddN77 = "22:44:53.170,22:45:10.739,<---,DL DCCH,LTE,LTE rrcConnectionReconfiguration,ENDC LTE HO Request(DiffLTE-DiffNR) / Split Bearer Config / keyToUse : secondary / cellGroupId : 1 / absoluteFrequencySSB : 648672 / SubcarrierSpacing : kHz30 / carrierBandwidth : 162 / frequencyBandList : 77 / Split Bearer Config (Primary Path: SCG / ul-DataSplitThreshold: b3200)"
	rowSIB    = "22:44:53.231,22:45:10.828,<---,BCCH:DL SCH,LTE,LTE systemInformation - sib2, sib3,UPPR[1]: True"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	jsonl := `{"t":"2023-02-16T22:44:59.997Z","kind":"ra","reason":"handover","result":"success"}` + "\n"
	xcal := rowLTEB1 + "\r\n" + rowAddN77 + "\r\n"
	for _, tc := range []struct {
		name, content string
		want          signaling.Kind // 99: Open fails
	}{
		{"a.jsonl", jsonl, signaling.KindRandomAccess},
		{"a.csv", xcal, signaling.KindReport},
		{"a.log", "hello world\n", 99},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := Open(p, signaling.FormatAuto)
		if tc.want == 99 {
			if err == nil {
				src.Close()
				t.Errorf("%s: opened", tc.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if e, err := src.Next(); err != nil || e.Kind != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, e.Kind, err, tc.want)
		}
		if err := src.Close(); err != nil {
			t.Error(err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing"), signaling.FormatAuto); err == nil {
		t.Error("missing file opened")
	}
}

func TestReadAll(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.csv")
	os.WriteFile(p, []byte(rowLTEB1+"\nbad row\n"+rowAddN77+"\n"+rowSIB+"\n"), 0o644)
	evs, st, errs := ReadAll(p, signaling.FormatAuto)
	if len(evs) != 2 || len(errs) != 1 || st.Errors != 1 || st.Lines != 4 || st.HO[signaling.HOSNAddition] != 1 {
		t.Errorf("events %d errs %v stats %+v", len(evs), errs, st)
	}
	var pe *signaling.ParseError
	if !errors.As(errs[0], &pe) || pe.Line != 2 || pe.Field != "columns" || pe.File != p {
		t.Errorf("error %v", errs[0])
	}
	if _, _, errs := ReadAll(filepath.Join(t.TempDir(), "missing"), signaling.FormatAuto); len(errs) != 1 {
		t.Errorf("missing file: %v", errs)
	}
}
