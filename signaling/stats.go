package signaling

import (
	"bufio"
	"errors"
	"io"
	"maps"
	"strconv"
)

// ParseError says which input line was wrong and in which field. Readers
// return it from Next and carry on with the next line when called again, so
// the caller decides whether one bad line ends a replay.
type ParseError struct {
	File  string // the name given to the reader; "" for ParseLine
	Line  int    // 1-based line number; 0 when unknown
	Field string // the field (JSON key, XCAL column or part of info) at fault
	Msg   string

	unknownKind   string // the kind, when isUnknownKind
	isUnknownKind bool   // set for a well-formed line of unknown kind
}

// Error formats "file:line: field: msg", leaving out the parts that are
// unknown (the live socket answers "line: field: msg").
func (e *ParseError) Error() string {
	b := make([]byte, 0, len(e.File)+len(e.Field)+len(e.Msg)+16)
	b = append(b, e.File...)
	if e.Line > 0 {
		if len(b) > 0 {
			b = append(b, ':')
		}
		b = strconv.AppendInt(b, int64(e.Line), 10)
	}
	if len(b) > 0 {
		b = append(b, ": "...)
	}
	if e.Field != "" {
		b = append(b, e.Field...)
		b = append(b, ": "...)
	}
	b = append(b, e.Msg...)
	return string(b)
}

// Stats counts what a reader did with its input. Every non-blank line ends
// up in exactly one of Events, Skipped or Errors:
// Lines == Events + SkippedTotal() + Errors.
type Stats struct {
	Lines   int            // non-blank lines read
	Events  int            // events returned by Next
	Kinds   map[Kind]int   // Events by kind
	HO      map[HOKind]int // handover commands by kind
	Skipped map[string]int // lines that are not events, by reason (XCAL: message name)
	Errors  int            // lines that gave a *ParseError
}

// maxSkipReasons bounds Stats.Skipped so that input with endless distinct
// message names (or a hostile socket writer) cannot grow it without limit.
const maxSkipReasons = 64

// otherReason collects skip reasons beyond maxSkipReasons.
const otherReason = "(other)"

func (s *Stats) skip(reason string) {
	if s.Skipped == nil {
		s.Skipped = make(map[string]int)
	}
	if _, ok := s.Skipped[reason]; !ok && len(s.Skipped) >= maxSkipReasons {
		reason = otherReason
	}
	s.Skipped[reason]++
}

func (s *Stats) event(e *Event) {
	s.Events++
	if s.Kinds == nil {
		s.Kinds = make(map[Kind]int)
	}
	s.Kinds[e.Kind]++
	if e.Kind == KindHOCommand {
		if s.HO == nil {
			s.HO = make(map[HOKind]int)
		}
		s.HO[e.HO]++
	}
}

// SkippedTotal is the number of lines skipped for any reason.
func (s Stats) SkippedTotal() int {
	n := 0
	for _, v := range s.Skipped {
		n += v
	}
	return n
}

// Clone returns a copy that shares no maps with s.
func (s Stats) Clone() Stats {
	s.Kinds = maps.Clone(s.Kinds)
	s.HO = maps.Clone(s.HO)
	s.Skipped = maps.Clone(s.Skipped)
	return s
}

// Add accumulates o into s.
func (s *Stats) Add(o Stats) {
	s.Lines += o.Lines
	s.Events += o.Events
	s.Errors += o.Errors
	for k, v := range o.Kinds {
		if s.Kinds == nil {
			s.Kinds = make(map[Kind]int)
		}
		s.Kinds[k] += v
	}
	for k, v := range o.HO {
		if s.HO == nil {
			s.HO = make(map[HOKind]int)
		}
		s.HO[k] += v
	}
	for k, v := range o.Skipped {
		if s.Skipped == nil {
			s.Skipped = make(map[string]int)
		}
		if _, ok := s.Skipped[k]; !ok && len(s.Skipped) >= maxSkipReasons {
			k = otherReason
		}
		s.Skipped[k] += v
	}
}

// MaxLine is the longest line (without its newline) any reader or the
// socket server accepts; a longer line is a *ParseError, never a crash or
// an unbounded allocation.
const MaxLine = 64 << 10

var errLineTooLong = errors.New("line too long")

// lineReader yields lines without their "\n" or "\r\n", counting them. An
// over-long line is consumed to its end and reported as errLineTooLong so
// the next call starts at the following line.
type lineReader struct {
	r    *bufio.Reader
	line int
	max  int
}

func newLineReader(r io.Reader, max int) *lineReader {
	if max <= 0 {
		max = MaxLine
	}
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < max+2 {
		br = bufio.NewReaderSize(r, max+2)
	}
	return &lineReader{r: br, max: max}
}

// next returns the next line (valid until the following call), io.EOF at
// the end, errLineTooLong for a line above the limit, or a read error.
func (lr *lineReader) next() ([]byte, error) {
	b, err := lr.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull || (err == nil && len(b) > lr.max+2) {
		lr.line++
		for err == bufio.ErrBufferFull {
			_, err = lr.r.ReadSlice('\n')
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		return nil, errLineTooLong
	}
	if err == io.EOF {
		if len(b) == 0 {
			return nil, io.EOF
		}
		err = nil
	}
	if err != nil {
		return nil, err
	}
	lr.line++
	b = trimEOL(b)
	if len(b) > lr.max {
		return nil, errLineTooLong
	}
	return b, nil
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// ErrLineTooLong is LineReader.Next's error for a line above its limit.
var ErrLineTooLong = errLineTooLong

// LineReader yields the lines of a stream without their "\n" or "\r\n",
// counting them, with no allocation per line: a line is a view into the
// reader's buffer, valid until the next call. A line longer than the limit
// is consumed to its end and reported as ErrLineTooLong, so that memory
// stays bounded and the next call starts at the following line.
type LineReader struct{ lr *lineReader }

// NewLineReader reads lines of at most max bytes (MaxLine if max <= 0)
// from r, reusing r when it is a large enough *bufio.Reader.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{newLineReader(r, max)}
}

// Next returns the next line, io.EOF at the end, ErrLineTooLong or a read
// error.
func (l *LineReader) Next() ([]byte, error) { return l.lr.next() }

// Line is the 1-based number of the line Next last returned (or skipped
// as too long).
func (l *LineReader) Line() int { return l.lr.line }

// IsBlank reports whether a line holds only spaces, tabs and CRs; readers
// skip such lines without counting them.
func IsBlank(line []byte) bool { return isBlank(line) }

// CountLine records the outcome of one non-blank line: an event (err nil),
// a line of unknown kind (IsUnknownKind(err): skipped), or an error.
func (s *Stats) CountLine(e *Event, err error) {
	s.Lines++
	switch {
	case err == nil:
		s.event(e)
	case IsUnknownKind(err):
		s.skip(unknownKindReason(err))
	default:
		s.Errors++
	}
}

func unknownKindReason(err error) string {
	var pe *ParseError
	errors.As(err, &pe)
	return "unknown kind " + strconv.Quote(truncate(pe.unknownKind, 32))
}
