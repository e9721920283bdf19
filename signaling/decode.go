package signaling

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Decoder reads JSON lines (FORMAT.md) into Events at MAC-slot rates: one
// pass over the line with no reflection, strings as views into the line
// (or into a scratch buffer reused across lines when they hold escapes),
// cell IDs interned, so that decoding a line of a known schema allocates
// nothing once the decoder has seen its cells.
//
// It reads exactly what encoding/json into FORMAT.md's struct of
// optional fields read before it (the differential tests hold it to
// that): keys match case-insensitively as encoding/json matches them, a
// repeated key's last value wins (a repeated cell object merges into the
// earlier one), null is absent, unknown keys are skipped after a syntax
// check, invalid UTF-8 in strings reads as U+FFFD, nesting deeper than
// 10000 is an error. Errors name the field; a syntax error names the byte
// column.
//
// A Decoder is not safe for concurrent use; its zero value is ready.
type Decoder struct {
	p       []byte // the line being decoded
	i       int    // read position in p
	scratch []byte // unescaped strings of the line
	typeErr *ParseError
	f       lineFields
	ids     map[string]string // interned cell IDs
	recent  [4]string         // the IDs last returned, looked up first
	slot    uint8             // the slot of recent to fill next
}

// maxInterned bounds the decoder's cell ID table (real feeds name a few
// cells; hostile input cannot grow it further, it only costs an
// allocation per ID beyond it). maxInternLen bounds an interned ID.
const (
	maxInterned  = 256
	maxInternLen = 64
)

// maxDepth is encoding/json's nesting limit, kept so both read the same
// lines.
const maxDepth = 10000

type strField struct {
	v   []byte
	set bool
}

type numField struct {
	v   float64
	set bool
}

type intField struct {
	v   int64
	set bool
}

type boolField struct {
	v   bool
	set bool
}

type jsonCellFields struct {
	set        bool
	id, typ    strField
	rsrp, rsrq numField
}

// cellNames are a cell's field names in errors, built once.
type cellNames struct{ self, id, typ, rsrp, rsrq string }

func namesOf(cell string) *cellNames {
	return &cellNames{cell, cell + ".id", cell + ".type", cell + ".rsrp", cell + ".rsrq"}
}

var (
	servingNames  = namesOf("serving")
	neighborNames = namesOf("neighbor")
	targetNames   = namesOf("target")
)

type lineFields struct {
	t, kind, event, ho, reason, result, cell strField
	serving, neighbor, target                jsonCellFields
	rb                                       numField
	bytes                                    intField
	inferred                                 boolField
}

// The keys of the event object and of a cell object, in the order of the
// constants below.
var (
	eventKeys = [...]string{"t", "kind", "event", "serving", "neighbor", "ho", "target", "reason", "result", "rb", "bytes", "cell", "inferred"}
	cellKeys  = [...]string{"id", "type", "rsrp", "rsrq"}
)

const (
	keyT = iota
	keyKind
	keyEvent
	keyServing
	keyNeighbor
	keyHO
	keyTarget
	keyReason
	keyResult
	keyRB
	keyBytes
	keyCell
	keyInferred
)

const (
	keyID = iota
	keyType
	keyRSRP
	keyRSRQ
)

// ParseLine parses one JSON line (without or with its newline) with a
// fresh Decoder. Errors are *ParseError with File "" and Line 0; a line of
// a kind this version does not know gives one that IsUnknownKind reports.
func ParseLine(line []byte) (Event, error) {
	var d Decoder
	return d.Decode(line)
}

// Decode parses one JSON line (without or with its newline). The Event
// shares no memory with line. Errors are as ParseLine's.
func (d *Decoder) Decode(line []byte) (Event, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Event{}, perr("json", "empty line")
	}
	d.p, d.i = line, 0
	d.scratch = d.scratch[:0]
	d.typeErr = nil
	d.f = lineFields{}
	err := d.top()
	d.p = nil
	if err != nil {
		return Event{}, err
	}
	if d.typeErr != nil {
		return Event{}, d.typeErr
	}
	return d.event()
}

// event applies FORMAT.md's rules to the fields read.
func (d *Decoder) event() (Event, error) {
	f := &d.f
	var e Event
	if !f.t.set {
		return e, perr("t", "missing")
	}
	t, ok := parseRFC3339(f.t.v)
	if !ok {
		var err error
		if t, err = time.Parse(time.RFC3339Nano, string(f.t.v)); err != nil {
			return e, perr("t", "not an RFC 3339 time: %q", f.t.v)
		}
	}
	e.Time = t.UTC()
	if y := e.Time.Year(); y < 0 || y > 9999 {
		return Event{}, perr("t", "year %d outside 0000-9999 in UTC", y)
	}
	if !f.kind.set {
		return Event{}, perr("kind", "missing")
	}
	k, ok := ParseKind(string(f.kind.v))
	if !ok || k == KindUnknown {
		kind := string(f.kind.v)
		return Event{}, &ParseError{Field: "kind", Msg: "unknown kind " + strconv.Quote(kind), unknownKind: kind, isUnknownKind: true}
	}
	e.Kind = k
	var err error
	switch k {
	case KindReport:
		var ok bool
		if e.Meas, ok = ParseMeasEvent(string(f.event.v)); !ok || !f.event.set {
			return Event{}, badEnum(&f.event, "event")
		}
		if !f.serving.set {
			return Event{}, perr("serving", "missing")
		}
		if e.Serving, err = d.cell(&f.serving, "serving"); err != nil {
			return Event{}, err
		}
		if f.neighbor.set {
			if e.Neighbor, err = d.cell(&f.neighbor, "neighbor"); err != nil {
				return Event{}, err
			}
		}
	case KindHOCommand:
		var ok bool
		if e.HO, ok = ParseHOKind(string(f.ho.v)); !ok || !f.ho.set {
			return Event{}, badEnum(&f.ho, "ho")
		}
		if !f.target.set {
			return Event{}, perr("target", "missing")
		}
		if e.Target, err = d.cell(&f.target, "target"); err != nil {
			return Event{}, err
		}
		if f.serving.set {
			if e.Serving, err = d.cell(&f.serving, "serving"); err != nil {
				return Event{}, err
			}
		}
		e.Inferred = f.inferred.set && f.inferred.v
	case KindRandomAccess:
		var ok bool
		if e.RAReason, ok = ParseRAReason(string(f.reason.v)); !ok || !f.reason.set {
			return Event{}, badEnum(&f.reason, "reason")
		}
		if e.RAResult, ok = ParseRAResult(string(f.result.v)); !ok || !f.result.set {
			return Event{}, badEnum(&f.result, "result")
		}
	case KindMACSlot:
		if !f.rb.set {
			return Event{}, perr("rb", "missing")
		}
		if !(f.rb.v >= 0 && f.rb.v <= 1) {
			return Event{}, perr("rb", "%v outside [0, 1]", f.rb.v)
		}
		e.RBRatio = f.rb.v
		if !f.bytes.set {
			return Event{}, perr("bytes", "missing")
		}
		if f.bytes.v < 0 || f.bytes.v > math.MaxInt32 {
			return Event{}, perr("bytes", "%d outside [0, 2^31)", f.bytes.v)
		}
		e.Bytes = int(f.bytes.v)
		switch {
		case f.cell.set && f.serving.set:
			return Event{}, perr("cell", "both cell and serving given")
		case f.cell.set:
			if len(f.cell.v) == 0 {
				return Event{}, perr("cell", "empty")
			}
			e.Serving.ID = d.intern(f.cell.v)
		case f.serving.set:
			if e.Serving, err = d.cell(&f.serving, "serving"); err != nil {
				return Event{}, err
			}
		}
	}
	return e, nil
}

// badEnum is the error for an enum field that is missing or names no
// value. (The Parse functions are called directly, not through a func
// value, so that the string conversion of their argument stays on the
// stack.)
func badEnum(f *strField, field string) *ParseError {
	if !f.set {
		return perr(field, "missing")
	}
	return perr(field, "unknown value %q", f.v)
}

func (d *Decoder) cell(c *jsonCellFields, field string) (Cell, error) {
	var out Cell
	if c.id.set {
		out.ID = d.intern(c.id.v)
	}
	if c.typ.set {
		t, ok := ParseCellType(string(c.typ.v))
		if !ok {
			return Cell{}, perr(field+".type", "unknown value %q", c.typ.v)
		}
		out.Type = t
	}
	if c.rsrp.set || c.rsrq.set {
		out.HasSignal = true
		out.RSRP, out.RSRQ = c.rsrp.v, c.rsrq.v
	}
	return out, nil
}

// intern returns b as a string, the same string for the same bytes while
// the table has room.
func (d *Decoder) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	for _, s := range d.recent {
		if s == string(b) {
			return s
		}
	}
	s, ok := d.ids[string(b)]
	if !ok {
		s = d.add(b)
	}
	d.recent[d.slot] = s
	d.slot = (d.slot + 1) % uint8(len(d.recent))
	return s
}

// add makes b a string and keeps it in the table if there is room.
func (d *Decoder) add(b []byte) string {
	s := string(b)
	if len(b) <= maxInternLen {
		if d.ids == nil {
			d.ids = make(map[string]string)
		}
		if len(d.ids) < maxInterned {
			d.ids[s] = s
		}
	}
	return s
}

// The parser proper. Each function starts at the first byte of its value
// (whitespace skipped by the caller) and returns a syntax error, which
// ends the line at once; a value of the wrong type for a known key is a
// type error, saved (the first one) while the line is checked to its end,
// because a syntax error anywhere is the line's error first.

func (d *Decoder) top() error {
	d.ws()
	if d.i < len(d.p) && d.p[d.i] == '{' {
		if err := d.eventObject(); err != nil {
			return err
		}
	} else {
		what, err := d.skip(0)
		if err != nil {
			return err
		}
		if what != "null" { // null into the struct is a no-op: "t" is missing
			d.typeErr = perr("json", "want an object, got JSON %s", what)
		}
	}
	d.ws()
	if d.i < len(d.p) {
		return d.syntax("after the top-level value")
	}
	return nil
}

func (d *Decoder) eventObject() error {
	more, err := d.enter(1)
	for more && err == nil {
		var key []byte
		if key, err = d.key(); err != nil {
			return err
		}
		switch eventKey(key) {
		case keyT:
			err = d.str(&d.f.t, "t")
		case keyKind:
			err = d.str(&d.f.kind, "kind")
		case keyEvent:
			err = d.str(&d.f.event, "event")
		case keyServing:
			err = d.cellObject(&d.f.serving, servingNames)
		case keyNeighbor:
			err = d.cellObject(&d.f.neighbor, neighborNames)
		case keyHO:
			err = d.str(&d.f.ho, "ho")
		case keyTarget:
			err = d.cellObject(&d.f.target, targetNames)
		case keyReason:
			err = d.str(&d.f.reason, "reason")
		case keyResult:
			err = d.str(&d.f.result, "result")
		case keyRB:
			err = d.float(&d.f.rb, "rb")
		case keyBytes:
			err = d.int(&d.f.bytes, "bytes")
		case keyCell:
			err = d.str(&d.f.cell, "cell")
		case keyInferred:
			err = d.bool(&d.f.inferred, "inferred")
		default:
			_, err = d.skip(1)
		}
		if err == nil {
			more, err = d.next()
		}
	}
	return err
}

// cellObject reads a cell; a repeated key merges into the cell read
// before, null clears it (encoding/json reuses a non-nil pointer).
func (d *Decoder) cellObject(c *jsonCellFields, names *cellNames) error {
	switch d.p[d.i] {
	case 'n':
		if err := d.literal("null"); err != nil {
			return err
		}
		*c = jsonCellFields{}
		return nil
	case '{':
	default:
		return d.wrongType(names.self, "an object", 1)
	}
	if !c.set {
		*c = jsonCellFields{set: true}
	}
	more, err := d.enter(2)
	for more && err == nil {
		var key []byte
		if key, err = d.key(); err != nil {
			return err
		}
		switch cellKey(key) {
		case keyID:
			err = d.str(&c.id, names.id)
		case keyType:
			err = d.str(&c.typ, names.typ)
		case keyRSRP:
			err = d.float(&c.rsrp, names.rsrp)
		case keyRSRQ:
			err = d.float(&c.rsrq, names.rsrq)
		default:
			_, err = d.skip(2)
		}
		if err == nil {
			more, err = d.next()
		}
	}
	return err
}

// An object is read as enter, then for each member key, its value and
// next. enter consumes the '{' of an object at nesting depth depth (its
// own level) and says whether a member follows.
func (d *Decoder) enter(depth int) (bool, error) {
	if depth > maxDepth {
		return false, perr("json", "nested deeper than %d", maxDepth)
	}
	d.i++ // '{'
	d.ws()
	if d.i < len(d.p) && d.p[d.i] == '}' {
		d.i++
		return false, nil
	}
	return true, nil
}

// key reads a member's key and its colon, leaving d.i at the value.
func (d *Decoder) key() ([]byte, error) {
	if d.i >= len(d.p) || d.p[d.i] != '"' {
		return nil, d.syntax("looking for a key string")
	}
	key, err := d.quoted()
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.i >= len(d.p) || d.p[d.i] != ':' {
		return nil, d.syntax("after a key")
	}
	d.i++
	d.ws()
	if d.i >= len(d.p) {
		return nil, d.syntax("looking for a value")
	}
	return key, nil
}

// next reads what follows a member's value: a comma (another member
// follows) or the closing brace.
func (d *Decoder) next() (bool, error) {
	d.ws()
	if d.i < len(d.p) {
		switch d.p[d.i] {
		case ',':
			d.i++
			d.ws()
			return true, nil
		case '}':
			d.i++
			return false, nil
		}
	}
	return false, d.syntax("after an object member")
}

func (d *Decoder) str(f *strField, field string) error {
	switch d.p[d.i] {
	case '"':
		v, err := d.quoted()
		if err != nil {
			return err
		}
		*f = strField{v: v, set: true}
		return nil
	case 'n':
		if err := d.literal("null"); err != nil {
			return err
		}
		*f = strField{}
		return nil
	}
	return d.wrongType(field, "a string", 1)
}

func (d *Decoder) bool(f *boolField, field string) error {
	switch d.p[d.i] {
	case 't':
		if err := d.literal("true"); err != nil {
			return err
		}
		*f = boolField{v: true, set: true}
		return nil
	case 'f':
		if err := d.literal("false"); err != nil {
			return err
		}
		*f = boolField{set: true}
		return nil
	case 'n':
		if err := d.literal("null"); err != nil {
			return err
		}
		*f = boolField{}
		return nil
	}
	return d.wrongType(field, "a boolean", 1)
}

func (d *Decoder) float(f *numField, field string) error {
	lit, null, err := d.numberOrNull(field, "a number")
	if err != nil || lit == nil {
		if null {
			*f = numField{}
		}
		return err
	}
	v, ok := simpleFloat(lit)
	var perr error
	if !ok {
		v, perr = strconv.ParseFloat(string(lit), 64)
	}
	if perr != nil {
		d.saveType(field, "a number", "number "+string(lit))
		return nil
	}
	*f = numField{v: v, set: true}
	return nil
}

func (d *Decoder) int(f *intField, field string) error {
	lit, null, err := d.numberOrNull(field, "an integer")
	if err != nil || lit == nil {
		if null {
			*f = intField{}
		}
		return err
	}
	v, ok := parseInt64(lit)
	if !ok {
		d.saveType(field, "an integer", "number "+string(lit))
		return nil
	}
	*f = intField{v: v, set: true}
	return nil
}

// numberOrNull reads a number literal or null for field (want names the
// expected type in the error): the literal, or nil and null = true.
func (d *Decoder) numberOrNull(field, want string) (lit []byte, null bool, err error) {
	c := d.p[d.i]
	if c == 'n' {
		if err := d.literal("null"); err != nil {
			return nil, false, err
		}
		return nil, true, nil
	}
	if c != '-' && (c < '0' || c > '9') {
		return nil, false, d.wrongType(field, want, 1)
	}
	lit, err = d.number()
	return lit, false, err
}

// pow10 holds the powers of ten a float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// simpleFloat converts the common literals (no exponent, at most 15
// digits) the way strconv.ParseFloat does for them: the digits as an exact
// integer divided by an exact power of ten is correctly rounded.
func simpleFloat(lit []byte) (float64, bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	var m uint64
	digits, frac := 0, -1
	for i, c := range lit {
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + uint64(c-'0')
			digits++
		case c == '.':
			frac = i
		default:
			return 0, false // exponent
		}
	}
	if digits > 15 {
		return 0, false
	}
	f := float64(m)
	if frac >= 0 {
		f /= pow10[len(lit)-frac-1]
	}
	if neg {
		f = -f
	}
	return f, true
}

// parseInt64 parses a JSON number literal as strconv.ParseInt(s, 10, 64)
// does: digits only (no fraction or exponent), in range.
func parseInt64(s []byte) (int64, bool) {
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var u uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// wrongType skips a value of the wrong type and saves the type error.
func (d *Decoder) wrongType(field, want string, depth int) error {
	what, err := d.skip(depth)
	if err != nil {
		return err
	}
	d.saveType(field, want, what)
	return nil
}

func (d *Decoder) saveType(field, want, got string) {
	if d.typeErr == nil {
		d.typeErr = perr(field, "want %s, got JSON %s", want, got)
	}
}

// skip checks and skips any value at nesting depth depth (the level of
// the container holding it) and says what it was, in encoding/json's
// words.
func (d *Decoder) skip(depth int) (string, error) {
	if d.i >= len(d.p) {
		return "", d.syntax("looking for a value")
	}
	switch c := d.p[d.i]; {
	case c == '"':
		_, err := d.quoted()
		return "string", err
	case c == '{':
		more, err := d.enter(depth + 1)
		for more && err == nil {
			if _, err = d.key(); err == nil {
				if _, err = d.skip(depth + 1); err == nil {
					more, err = d.next()
				}
			}
		}
		return "object", err
	case c == '[':
		return "array", d.array(depth + 1)
	case c == 't':
		return "bool", d.literal("true")
	case c == 'f':
		return "bool", d.literal("false")
	case c == 'n':
		return "null", d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := d.number()
		return "number", err
	}
	return "", d.syntax("looking for a value")
}

func (d *Decoder) array(depth int) error {
	if depth > maxDepth {
		return perr("json", "nested deeper than %d", maxDepth)
	}
	d.i++ // '['
	d.ws()
	if d.i < len(d.p) && d.p[d.i] == ']' {
		d.i++
		return nil
	}
	for {
		if _, err := d.skip(depth); err != nil {
			return err
		}
		d.ws()
		if d.i >= len(d.p) {
			return d.syntax("after an array element")
		}
		switch d.p[d.i] {
		case ',':
			d.i++
			d.ws()
		case ']':
			d.i++
			return nil
		default:
			return d.syntax("after an array element")
		}
	}
}

func (d *Decoder) literal(word string) error {
	for j := 0; j < len(word); j++ {
		if d.i >= len(d.p) || d.p[d.i] != word[j] {
			return d.syntax("in literal " + word)
		}
		d.i++
	}
	return nil
}

// number checks a JSON number at d.i and returns its text:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *Decoder) number() ([]byte, error) {
	p, start := d.p, d.i
	i := d.i
	if p[i] == '-' {
		i++
	}
	digits := func() bool {
		n := i
		for i < len(p) && p[i] >= '0' && p[i] <= '9' {
			i++
		}
		return i > n
	}
	switch {
	case i < len(p) && p[i] == '0':
		i++
	case i < len(p) && p[i] >= '1' && p[i] <= '9':
		digits()
	default:
		d.i = i
		return nil, d.syntax("in numeric literal")
	}
	if i < len(p) && p[i] == '.' {
		i++
		if !digits() {
			d.i = i
			return nil, d.syntax("after decimal point in numeric literal")
		}
	}
	if i < len(p) && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < len(p) && (p[i] == '+' || p[i] == '-') {
			i++
		}
		if !digits() {
			d.i = i
			return nil, d.syntax("in exponent of numeric literal")
		}
	}
	d.i = i
	return p[start:i], nil
}

// quoted reads the string at d.i (its opening quote) and returns its
// value: a view into the line when it has no escapes and is valid UTF-8,
// else its unescaped form in d.scratch.
func (d *Decoder) quoted() ([]byte, error) {
	p := d.p
	start := d.i + 1
	i := start
	for i < len(p) && plain[p[i]] {
		i++
	}
	if i < len(p) && p[i] == '"' {
		d.i = i + 1
		return p[start:i], nil
	}
	// Slow path: escapes, control characters or non-ASCII.
	out := len(d.scratch)
	d.scratch = append(d.scratch, p[start:i]...)
	for {
		if i >= len(p) {
			d.i = i
			return nil, d.syntax("in string literal")
		}
		c := p[i]
		switch {
		case c == '"':
			d.i = i + 1
			return d.scratch[out:], nil
		case c < ' ':
			d.i = i
			return nil, d.syntax("in string literal")
		case c == '\\':
			if i+1 >= len(p) {
				d.i = i + 1
				return nil, d.syntax("in string escape code")
			}
			switch e := p[i+1]; e {
			case '"', '\\', '/':
				d.scratch = append(d.scratch, e)
			case 'b':
				d.scratch = append(d.scratch, '\b')
			case 'f':
				d.scratch = append(d.scratch, '\f')
			case 'n':
				d.scratch = append(d.scratch, '\n')
			case 'r':
				d.scratch = append(d.scratch, '\r')
			case 't':
				d.scratch = append(d.scratch, '\t')
			case 'u':
				r, ok := hex4(p[i+2:])
				if !ok {
					d.i = i + 2
					for d.i < len(p) && d.i < i+6 && isHex(p[d.i]) {
						d.i++
					}
					return nil, d.syntax("in \\u hexadecimal character escape")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A pair only if a \u escape of the other half follows;
					// otherwise this half reads as U+FFFD.
					if len(p) >= i+6 && p[i] == '\\' && p[i+1] == 'u' {
						if r2, ok := hex4(p[i+2:]); ok {
							if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
								d.scratch = utf8.AppendRune(d.scratch, dec)
								i += 6
								continue
							}
						}
					}
					r = unicode.ReplacementChar
				}
				d.scratch = utf8.AppendRune(d.scratch, r)
				continue
			default:
				d.i = i + 1
				return nil, d.syntax("in string escape code")
			}
			i += 2
		case c < utf8.RuneSelf:
			d.scratch = append(d.scratch, c)
			i++
		default:
			r, n := utf8.DecodeRune(p[i:])
			d.scratch = utf8.AppendRune(d.scratch, r) // invalid bytes: U+FFFD each
			i += n
		}
	}
}

// plain marks the bytes a string holds as they are: printable ASCII but
// the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func (d *Decoder) ws() {
	if d.i < len(d.p) && d.p[d.i] > ' ' {
		return // compact JSON: the common case
	}
	for d.i < len(d.p) {
		switch d.p[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *Decoder) syntax(where string) *ParseError {
	if d.i >= len(d.p) {
		return perr("json", "unexpected end of line %s", where)
	}
	return perr("json", "invalid character %s at column %d %s", quoteChar(d.p[d.i]), d.i+1, where)
}

func quoteChar(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte %#02x", c)
}

// eventKey and cellKey find a key as encoding/json matches a key to a
// field: exactly, else by Unicode simple case folding (so "Kind", "KIND"
// and "\u212aind" with a Kelvin sign all name "kind"). -1: not a key of
// the schema.
func eventKey(key []byte) int {
	switch string(key) {
	case "t":
		return keyT
	case "kind":
		return keyKind
	case "event":
		return keyEvent
	case "serving":
		return keyServing
	case "neighbor":
		return keyNeighbor
	case "ho":
		return keyHO
	case "target":
		return keyTarget
	case "reason":
		return keyReason
	case "result":
		return keyResult
	case "rb":
		return keyRB
	case "bytes":
		return keyBytes
	case "cell":
		return keyCell
	case "inferred":
		return keyInferred
	}
	return foldedKey(key, eventKeys[:])
}

func cellKey(key []byte) int {
	switch string(key) {
	case "id":
		return keyID
	case "type":
		return keyType
	case "rsrp":
		return keyRSRP
	case "rsrq":
		return keyRSRQ
	}
	return foldedKey(key, cellKeys[:])
}

// foldedKey matches key to names (lower-case ASCII) by case folding.
func foldedKey(key []byte, names []string) int {
	const longest = 8 // "neighbor"
	var buf [longest]byte
	folded := buf[:0]
	for j := 0; j < len(key); {
		c := key[j]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			j++
		} else {
			r, n := utf8.DecodeRune(key[j:])
			j += n
			r = foldRune(r)
			if r >= utf8.RuneSelf {
				return -1 // no name has non-ASCII letters
			}
			c = byte(r)
		}
		if len(folded) == longest {
			return -1
		}
		folded = append(folded, c)
	}
	for i, n := range names {
		if len(n) != len(folded) {
			continue
		}
		match := true
		for j := 0; j < len(n); j++ {
			c := n[j]
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			if folded[j] != c {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

// foldRune is the smallest rune of r's simple case-folding orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// parseRFC3339 parses the strict form time.Parse(time.RFC3339Nano, s)
// takes first, "2006-01-02T15:04:05[.frac](Z|±07:00)", to the same
// instant; anything else is left to time.Parse (ok false).
func parseRFC3339(s []byte) (time.Time, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") {
		return time.Time{}, false
	}
	ok := true
	num := func(b []byte, lo, hi int) int {
		x := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				ok = false
				return lo
			}
			x = x*10 + int(c-'0')
		}
		if x < lo || x > hi {
			ok = false
		}
		return x
	}
	year := num(s[0:4], 0, 9999)
	month := num(s[5:7], 1, 12)
	if !ok {
		return time.Time{}, false
	}
	day := num(s[8:10], 1, daysIn(month, year))
	hour := num(s[11:13], 0, 23)
	minute := num(s[14:16], 0, 59)
	sec := num(s[17:19], 0, 59)
	if !ok || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	s = s[19:]
	nsec := 0
	if len(s) >= 2 && s[0] == '.' && s[1] >= '0' && s[1] <= '9' {
		n := 1
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			if n <= 9 {
				nsec = nsec*10 + int(s[n]-'0')
			}
			n++
		}
		for k := n; k <= 9; k++ {
			nsec *= 10
		}
		s = s[n:]
	}
	t := time.Unix(unixDays(year, month, day)*86400+int64(hour*3600+minute*60+sec), int64(nsec)).UTC()
	if len(s) == 1 && s[0] == 'Z' {
		return t, true
	}
	if len(s) != len("-07:00") || (s[0] != '+' && s[0] != '-') || s[3] != ':' {
		return time.Time{}, false
	}
	hh := num(s[1:3], 0, 23)
	mm := num(s[4:6], 0, 59)
	if !ok {
		return time.Time{}, false
	}
	off := time.Duration(hh*60+mm) * time.Minute
	if s[0] == '-' {
		off = -off
	}
	return t.Add(-off), true
}

// unixDays is the number of days from 1970-01-01 to the given proleptic
// Gregorian date (the days-from-civil algorithm: years start in March, so
// the leap day is a year's last).
func unixDays(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400 // [0, 399]
	m := int64(month)
	if m > 2 {
		m -= 3
	} else {
		m += 9
	}
	doy := (153*m+2)/5 + int64(day) - 1    // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
