package signaling

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Source is a stream of events: a file reader or anything else that
// replays signalling. Next returns io.EOF at the end and *ParseError for a
// bad line, after which it can be called again.
type Source interface {
	Next() (Event, error)
	Stats() Stats
	Close() error
}

// Format names an input format for Open.
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

type reader interface {
	Next() (Event, error)
	Stats() Stats
}

type fileSource struct {
	reader
	f *os.File
}

func (s *fileSource) Close() error { return s.f.Close() }

// Open opens path as a Source. FormatAuto decides by content: a first
// non-blank line starting with '{' is JSON; otherwise a ".csv" name, or a
// first line that starts with a time of day and has at least 7 columns, is
// XCAL; a ".jsonl", ".ndjson" or ".json" name (or an empty file) is JSON.
func Open(path string, format Format) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, MaxLine+2)
	if format == FormatAuto {
		format, err = detect(br, path)
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	switch format {
	case FormatJSON:
		return &fileSource{NewJSONReader(br, path), f}, nil
	case FormatXCAL:
		return &fileSource{NewXCALReader(br, path), f}, nil
	}
	f.Close()
	return nil, fmt.Errorf("signaling: %s: unknown format %v", path, format)
}

// detect peeks at the first non-blank line without consuming it.
func detect(br *bufio.Reader, path string) (Format, error) {
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
	ext := strings.ToLower(filepath.Ext(path))
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
	return 0, fmt.Errorf("signaling: %s: cannot tell the format (neither JSON lines nor XCAL CSV)", path)
}

func looksTOD(line []byte) bool {
	col, _, _ := bytes.Cut(line, []byte(","))
	_, perr := parseTOD(string(bytes.TrimSpace(col)))
	return perr == nil
}

// ReadAll reads every event of path. Bad lines do not stop it: their
// *ParseErrors are returned in order; any other error (I/O) ends the read
// and is the last element of errs.
func ReadAll(path string, format Format) ([]Event, Stats, []error) {
	src, err := Open(path, format)
	if err != nil {
		return nil, Stats{}, []error{err}
	}
	defer src.Close()
	var (
		events []Event
		errs   []error
	)
	for {
		e, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, err)
			var pe *ParseError
			if errors.As(err, &pe) {
				continue
			}
			break
		}
		events = append(events, e)
	}
	return events, src.Stats(), errs
}
