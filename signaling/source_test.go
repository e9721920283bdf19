package signaling

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenDetect(t *testing.T) {
	dir := t.TempDir()
	jsonl := `{"t":"2023-02-16T22:44:59.997Z","kind":"ra","reason":"handover","result":"success"}` + "\n"
	xcal := rowLTEB1 + "\r\n" + rowAddN77 + "\r\n"
	for _, tc := range []struct {
		name, content string
		format        Format
		want          Kind // first event's kind; KindUnknown: a ParseError; 99: Open fails
	}{
		{"a.jsonl", jsonl, FormatAuto, KindRandomAccess},
		{"a.txt", "\n\n  " + jsonl, FormatAuto, KindRandomAccess},
		{"a.csv", jsonl, FormatAuto, KindRandomAccess}, // content wins
		{"a.csv", xcal, FormatAuto, KindReport},
		{"noext", xcal, FormatAuto, KindReport},
		{"a.log", "hello world\n", FormatAuto, 99},
		{"a.txt", xcal, FormatJSON, KindUnknown}, // forced: parse error
		{"a.jsonl", xcal, FormatXCAL, KindReport},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := Open(p, tc.format)
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
		e, err := src.Next()
		if tc.want == KindUnknown {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != p || pe.Line != 1 {
				t.Errorf("%s forced JSON: %v", tc.name, err)
			}
		} else if err != nil || e.Kind != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, e.Kind, err, tc.want)
		}
		if err := src.Close(); err != nil {
			t.Error(err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing"), FormatAuto); err == nil {
		t.Error("missing file opened")
	}
}

func TestReadAll(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.csv")
	os.WriteFile(p, []byte(rowLTEB1+"\nbad row\n"+rowAddN77+"\n"+rowSIB+"\n"), 0o644)
	evs, st, errs := ReadAll(p, FormatAuto)
	if len(evs) != 2 || len(errs) != 1 || st.Errors != 1 || st.Lines != 4 || st.HO[HOSNAddition] != 1 {
		t.Errorf("events %d errs %v stats %+v", len(evs), errs, st)
	}
	var pe *ParseError
	if !errors.As(errs[0], &pe) || pe.Line != 2 || pe.Field != "columns" {
		t.Errorf("error %v", errs[0])
	}
	for _, f := range []Format{FormatAuto, FormatJSON, FormatXCAL} {
		if g, ok := ParseFormat(f.String()); !ok || g != f {
			t.Errorf("format %v", f)
		}
	}
}
