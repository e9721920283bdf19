package signaling

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestNewReaderDetect(t *testing.T) {
	jsonl := `{"t":"2023-02-16T22:44:59.997Z","kind":"ra","reason":"handover","result":"success"}` + "\n"
	xcal := rowLTEB1 + "\r\n" + rowAddN77 + "\r\n"
	for _, tc := range []struct {
		name, content string
		format        Format
		want          Kind // first event's kind; KindUnknown: a ParseError; 99: NewReader fails
	}{
		{"a.jsonl", jsonl, FormatAuto, KindRandomAccess},
		{"a.txt", "\n\n  " + jsonl, FormatAuto, KindRandomAccess},
		{"a.csv", jsonl, FormatAuto, KindRandomAccess}, // content wins
		{"a.csv", xcal, FormatAuto, KindReport},
		{"dir.d/noext", xcal, FormatAuto, KindReport},
		{"a.log", "hello world\n", FormatAuto, 99},
		{"a.txt", xcal, FormatJSON, KindUnknown}, // forced: parse error
		{"a.jsonl", xcal, FormatXCAL, KindReport},
		{"a.jsonl", jsonl, Format(7), 99},
	} {
		r, err := NewReader(strings.NewReader(tc.content), tc.name, tc.format)
		if tc.want == 99 {
			if err == nil {
				t.Errorf("%s %v: no error", tc.name, tc.format)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		e, err := r.Next()
		if tc.want == KindUnknown {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != tc.name || pe.Line != 1 {
				t.Errorf("%s forced JSON: %v", tc.name, err)
			}
		} else if err != nil || e.Kind != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, e.Kind, err, tc.want)
		}
	}
	boom := errors.New("boom")
	if _, err := NewReader(iotest.ErrReader(boom), "x", FormatAuto); !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
	if r, err := NewReader(strings.NewReader(""), "empty", FormatAuto); err != nil {
		t.Errorf("empty input: %v", err)
	} else if _, err := r.Next(); err != io.EOF {
		t.Errorf("empty input: %v, want EOF", err)
	}
	for _, f := range []Format{FormatAuto, FormatJSON, FormatXCAL} {
		if g, ok := ParseFormat(f.String()); !ok || g != f {
			t.Errorf("format %v", f)
		}
	}
}
