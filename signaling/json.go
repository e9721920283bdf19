package signaling

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The JSON-lines format is specified in FORMAT.md. The writer appends by
// hand (no reflection, no allocation beyond the destination buffer) so the
// emulator can publish MAC slots at slot rate; the reader is Decoder
// (decode.go), also allocation-free.

// AppendJSON appends e as one JSON line (with its "\n") to dst. It fails,
// leaving dst's contents up to len(dst) untouched, for events that cannot
// be read back as the same Event: an unknown or out-of-range Kind or enum,
// a non-finite number, an ID that is not UTF-8, a time outside years
// 0000-9999, or an RB ratio outside [0, 1] or negative bytes.
func AppendJSON(dst []byte, e *Event) ([]byte, error) {
	start := len(dst)
	out, err := appendJSON(dst, e)
	if err != nil {
		return dst[:start], err
	}
	return out, nil
}

func appendJSON(b []byte, e *Event) ([]byte, error) {
	if e.Kind == KindUnknown || int(e.Kind) >= len(kindNames) {
		return b, fmt.Errorf("signaling: cannot write event of kind %v", e.Kind)
	}
	t := e.Time.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return b, fmt.Errorf("signaling: time %v outside RFC 3339 years", t)
	}
	b = append(b, `{"t":"`...)
	b = t.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","kind":"`...)
	b = append(b, kindNames[e.Kind]...)
	b = append(b, '"')
	var err error
	switch e.Kind {
	case KindReport:
		if b, err = appendEnum(b, "event", measNames[:], int(e.Meas)); err != nil {
			return b, err
		}
		if b, err = appendCell(b, "serving", &e.Serving); err != nil {
			return b, err
		}
		if e.Neighbor != (Cell{}) {
			if b, err = appendCell(b, "neighbor", &e.Neighbor); err != nil {
				return b, err
			}
		}
	case KindHOCommand:
		if b, err = appendEnum(b, "ho", hoKindNames[:], int(e.HO)); err != nil {
			return b, err
		}
		if e.Serving != (Cell{}) {
			if b, err = appendCell(b, "serving", &e.Serving); err != nil {
				return b, err
			}
		}
		if b, err = appendCell(b, "target", &e.Target); err != nil {
			return b, err
		}
		if e.Inferred {
			b = append(b, `,"inferred":true`...)
		}
	case KindRandomAccess:
		if b, err = appendEnum(b, "reason", raReasonNames[:], int(e.RAReason)); err != nil {
			return b, err
		}
		if b, err = appendEnum(b, "result", raResultNames[:], int(e.RAResult)); err != nil {
			return b, err
		}
	case KindMACSlot:
		if !(e.RBRatio >= 0 && e.RBRatio <= 1) {
			return b, fmt.Errorf("signaling: rb %v outside [0, 1]", e.RBRatio)
		}
		if e.Bytes < 0 {
			return b, fmt.Errorf("signaling: negative bytes %d", e.Bytes)
		}
		b = append(b, `,"rb":`...)
		b = appendFloat(b, e.RBRatio)
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, int64(e.Bytes), 10)
		switch s := e.Serving; {
		case s == Cell{}:
		case s == Cell{ID: s.ID}:
			b = append(b, `,"cell":`...)
			if b, err = appendString(b, s.ID); err != nil {
				return b, err
			}
		default:
			if b, err = appendCell(b, "serving", &e.Serving); err != nil {
				return b, err
			}
		}
	}
	return append(b, "}\n"...), nil
}

func appendEnum(b []byte, key string, names []string, v int) ([]byte, error) {
	if v < 0 || v >= len(names) {
		return b, fmt.Errorf("signaling: %s value %d has no name", key, v)
	}
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":"`...)
	b = append(b, names[v]...)
	return append(b, '"'), nil
}

func appendCell(b []byte, key string, c *Cell) ([]byte, error) {
	if int(c.Type) >= len(cellTypeNames) {
		return b, fmt.Errorf("signaling: %s.type value %d has no name", key, c.Type)
	}
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":{`...)
	sep := ""
	if c.ID != "" {
		b = append(b, `"id":`...)
		var err error
		if b, err = appendString(b, c.ID); err != nil {
			return b, fmt.Errorf("signaling: %s.id: %w", key, err)
		}
		sep = ","
	}
	b = append(b, sep...)
	b = append(b, `"type":"`...)
	b = append(b, cellTypeNames[c.Type]...)
	b = append(b, '"')
	if c.HasSignal {
		if !finite(c.RSRP) || !finite(c.RSRQ) {
			return b, fmt.Errorf("signaling: %s: non-finite rsrp/rsrq", key)
		}
		b = append(b, `,"rsrp":`...)
		b = appendFloat(b, c.RSRP)
		b = append(b, `,"rsrq":`...)
		b = appendFloat(b, c.RSRQ)
	} else if c.RSRP != 0 || c.RSRQ != 0 {
		return b, fmt.Errorf("signaling: %s: rsrp/rsrq set without HasSignal", key)
	}
	return append(b, '}'), nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// appendFloat writes the shortest decimal that parses back to f exactly.
func appendFloat(b []byte, f float64) []byte {
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendString writes s as a JSON string. Only valid UTF-8 is accepted:
// encoding/json would read anything else back as U+FFFD, a different ID.
func appendString(b []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return b, errors.New("not valid UTF-8")
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"'), nil
}

// Writer writes events as JSON lines, one Write per line.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer onto w. Each event is written with one call
// to w.Write, so a Writer on a socket never interleaves half lines.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, buf: make([]byte, 0, 256)} }

// Write writes e as one line. Reading the line back gives an Event equal to
// e with its Time in UTC (the monotonic clock reading, if any, is dropped),
// provided e sets only the fields of its Kind; see AppendJSON for what is
// refused.
func (w *Writer) Write(e *Event) error {
	b, err := AppendJSON(w.buf[:0], e)
	if err != nil {
		return err
	}
	w.buf = b
	_, err = w.w.Write(b)
	return err
}

// IsUnknownKind reports whether err is a ParseError for a line that is
// well-formed but has a kind this version does not know (such lines are
// skipped, not fatal).
func IsUnknownKind(err error) bool {
	var pe *ParseError
	return errors.As(err, &pe) && pe.isUnknownKind
}

func perr(field, format string, a ...any) *ParseError {
	return &ParseError{Field: field, Msg: fmt.Sprintf(format, a...)}
}

// JSONReader streams events from JSON lines; see FORMAT.md.
type JSONReader struct {
	name  string
	lr    *lineReader
	dec   Decoder
	stats Stats
}

// NewJSONReader reads JSON lines from r; name is used in errors (a path).
func NewJSONReader(r io.Reader, name string) *JSONReader {
	return &JSONReader{name: name, lr: newLineReader(r, MaxLine)}
}

// Next returns the next event, io.EOF at the end, or a *ParseError for a
// malformed line (call Next again to go on with the next line). Blank lines
// and lines with an unknown "kind" are counted in Stats and skipped. Other
// errors are the underlying reader's.
func (r *JSONReader) Next() (Event, error) {
	for {
		line, err := r.lr.next()
		if err == errLineTooLong {
			r.stats.Lines++
			r.stats.Errors++
			return Event{}, &ParseError{File: r.name, Line: r.lr.line, Field: "json", Msg: fmt.Sprintf("line longer than %d bytes", MaxLine)}
		}
		if err != nil {
			return Event{}, err
		}
		if isBlank(line) {
			continue
		}
		e, err := r.dec.Decode(line)
		r.stats.CountLine(&e, err)
		if err != nil {
			if IsUnknownKind(err) {
				continue
			}
			pe := err.(*ParseError)
			pe.File, pe.Line = r.name, r.lr.line
			return Event{}, pe
		}
		return e, nil
	}
}

// Stats returns a copy of the counts so far.
func (r *JSONReader) Stats() Stats { return r.stats.Clone() }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
