package signaling

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path"
	"strings"
)

// Format names an input format for NewReader (and sigio.Open).
type Format uint8

const (
	FormatAuto Format = iota // decide from the content, then the name
	FormatJSON               // JSON lines, FORMAT.md
	FormatXCAL               // XCAL CSV export, XCAL.md
)

func (f Format) String() string {
	switch f {
	case FormatAuto:
		return "auto"
	case FormatJSON:
		return "json"
	case FormatXCAL:
		return "xcal"
	}
	return fmt.Sprintf("Format(%d)", f)
}

// ParseFormat is the inverse of Format.String.
func ParseFormat(s string) (Format, bool) {
	for f := FormatAuto; f <= FormatXCAL; f++ {
		if f.String() == s {
			return f, true
		}
	}
	return 0, false
}

// Reader is a stream of events read from one input: Next returns io.EOF
// at the end and *ParseError for a bad line, after which it can be called
// again. JSONReader and XCALReader are Readers.
type Reader interface {
	Next() (Event, error)
	Stats() Stats
}

// NewReader reads events of the given format from r; name (a path) is used
// in errors and, for FormatAuto, to help decide the format. FormatAuto
// decides by content: a first non-blank line starting with '{' is JSON;
// otherwise a ".csv" name, or a first line that starts with a time of day
// and has at least 7 columns, is XCAL; a ".jsonl", ".ndjson" or ".json"
// name (or empty input) is JSON. It reads ahead (without consuming) only
// to decide; the error is then the read error or an undecidable format.
func NewReader(r io.Reader, name string, format Format) (Reader, error) {
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < MaxLine+2 {
		br = bufio.NewReaderSize(r, MaxLine+2)
	}
	if format == FormatAuto {
		var err error
		if format, err = detect(br, name); err != nil {
			return nil, err
		}
	}
	switch format {
	case FormatJSON:
		return NewJSONReader(br, name), nil
	case FormatXCAL:
		return NewXCALReader(br, name), nil
	}
	return nil, fmt.Errorf("signaling: %s: unknown format %v", name, format)
}

// detect peeks at the first non-blank line without consuming it.
func detect(br *bufio.Reader, name string) (Format, error) {
	head, err := br.Peek(MaxLine)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return 0, err
	}
	var first []byte
	for line := range bytes.SplitSeq(head, []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) > 0 {
			first = line
			break
		}
	}
	ext := strings.ToLower(path.Ext(name))
	switch {
	case len(first) > 0 && first[0] == '{':
		return FormatJSON, nil
	case ext == ".csv":
		return FormatXCAL, nil
	case len(first) > 0 && bytes.Count(first, []byte(",")) >= 6 && looksTOD(first):
		return FormatXCAL, nil
	case len(first) == 0 || ext == ".jsonl" || ext == ".ndjson" || ext == ".json":
		return FormatJSON, nil
	}
	return 0, fmt.Errorf("signaling: %s: cannot tell the format (neither JSON lines nor XCAL CSV)", name)
}

func looksTOD(line []byte) bool {
	col, _, _ := bytes.Cut(line, []byte(","))
	_, perr := parseTOD(string(bytes.TrimSpace(col)))
	return perr == nil
}
