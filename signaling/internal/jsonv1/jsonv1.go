// Package jsonv1 is the JSON-lines decoder m2ho used before the hand-rolled
// one (signaling.Decoder): encoding/json into a struct of pointers, then the
// FORMAT.md checks. It is kept only as the oracle of the differential tests
// and the "old" side of the benchmarks.
package jsonv1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// UnknownKindError is the oracle's answer for a well-formed line whose
// kind is not known.
type UnknownKindError struct{ Kind string }

func (e *UnknownKindError) Error() string { return "unknown kind " + strconv.Quote(e.Kind) }

// ParseLine decodes one line as the old decoder did: an signaling.Event, a
// *signaling.ParseError (Field and Msg set) or an *UnknownKindError.
func ParseLine(line []byte) (signaling.Event, error) { return parseLine(line) }

func perr(field, format string, a ...any) *signaling.ParseError {
	return &signaling.ParseError{Field: field, Msg: fmt.Sprintf(format, a...)}
}

type jsonCell struct {
	ID   *string  `json:"id"`
	Type *string  `json:"type"`
	RSRP *float64 `json:"rsrp"`
	RSRQ *float64 `json:"rsrq"`
}

type jsonEvent struct {
	T        *string   `json:"t"`
	Kind     *string   `json:"kind"`
	Event    *string   `json:"event"`
	Serving  *jsonCell `json:"serving"`
	Neighbor *jsonCell `json:"neighbor"`
	HO       *string   `json:"ho"`
	Target   *jsonCell `json:"target"`
	Reason   *string   `json:"reason"`
	Result   *string   `json:"result"`
	RB       *float64  `json:"rb"`
	Bytes    *int64    `json:"bytes"`
	Cell     *string   `json:"cell"`
	Inferred *bool     `json:"inferred"`
}

func parseLine(line []byte) (signaling.Event, error) {
	var j jsonEvent
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return signaling.Event{}, perr("json", "empty line")
	}
	if err := json.Unmarshal(line, &j); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return signaling.Event{}, perr(te.Field, "want %s, got JSON %s", te.Type, te.Value)
		}
		return signaling.Event{}, perr("json", "%v", trimJSONErr(err))
	}
	var e signaling.Event
	if j.T == nil {
		return e, perr("t", "missing")
	}
	t, err := time.Parse(time.RFC3339Nano, *j.T)
	if err != nil {
		return e, perr("t", "not an RFC 3339 time: %q", *j.T)
	}
	e.Time = t.UTC()
	if y := e.Time.Year(); y < 0 || y > 9999 {
		return signaling.Event{}, perr("t", "year %d outside 0000-9999 in UTC", y)
	}
	if j.Kind == nil {
		return signaling.Event{}, perr("kind", "missing")
	}
	k, ok := signaling.ParseKind(*j.Kind)
	if !ok || k == signaling.KindUnknown {
		return signaling.Event{}, &UnknownKindError{*j.Kind}
	}
	e.Kind = k
	switch k {
	case signaling.KindReport:
		if e.Meas, err = parseEnum(j.Event, "event", signaling.ParseMeasEvent); err != nil {
			return signaling.Event{}, err
		}
		if j.Serving == nil {
			return signaling.Event{}, perr("serving", "missing")
		}
		if e.Serving, err = j.Serving.cell("serving"); err != nil {
			return signaling.Event{}, err
		}
		if j.Neighbor != nil {
			if e.Neighbor, err = j.Neighbor.cell("neighbor"); err != nil {
				return signaling.Event{}, err
			}
		}
	case signaling.KindHOCommand:
		if e.HO, err = parseEnum(j.HO, "ho", signaling.ParseHOKind); err != nil {
			return signaling.Event{}, err
		}
		if j.Target == nil {
			return signaling.Event{}, perr("target", "missing")
		}
		if e.Target, err = j.Target.cell("target"); err != nil {
			return signaling.Event{}, err
		}
		if j.Serving != nil {
			if e.Serving, err = j.Serving.cell("serving"); err != nil {
				return signaling.Event{}, err
			}
		}
		e.Inferred = j.Inferred != nil && *j.Inferred
	case signaling.KindRandomAccess:
		if e.RAReason, err = parseEnum(j.Reason, "reason", signaling.ParseRAReason); err != nil {
			return signaling.Event{}, err
		}
		if e.RAResult, err = parseEnum(j.Result, "result", signaling.ParseRAResult); err != nil {
			return signaling.Event{}, err
		}
	case signaling.KindMACSlot:
		if j.RB == nil {
			return signaling.Event{}, perr("rb", "missing")
		}
		if !(*j.RB >= 0 && *j.RB <= 1) {
			return signaling.Event{}, perr("rb", "%v outside [0, 1]", *j.RB)
		}
		e.RBRatio = *j.RB
		if j.Bytes == nil {
			return signaling.Event{}, perr("bytes", "missing")
		}
		if *j.Bytes < 0 || *j.Bytes > math.MaxInt32 {
			return signaling.Event{}, perr("bytes", "%d outside [0, 2^31)", *j.Bytes)
		}
		e.Bytes = int(*j.Bytes)
		switch {
		case j.Cell != nil && j.Serving != nil:
			return signaling.Event{}, perr("cell", "both cell and serving given")
		case j.Cell != nil:
			if *j.Cell == "" {
				return signaling.Event{}, perr("cell", "empty")
			}
			e.Serving.ID = *j.Cell
		case j.Serving != nil:
			if e.Serving, err = j.Serving.cell("serving"); err != nil {
				return signaling.Event{}, err
			}
		}
	}
	return e, nil
}

func parseEnum[T any](s *string, field string, parse func(string) (T, bool)) (T, error) {
	var zero T
	if s == nil {
		return zero, perr(field, "missing")
	}
	v, ok := parse(*s)
	if !ok {
		return zero, perr(field, "unknown value %q", *s)
	}
	return v, nil
}

func (j *jsonCell) cell(field string) (signaling.Cell, error) {
	var c signaling.Cell
	if j.ID != nil {
		c.ID = *j.ID
	}
	if j.Type != nil {
		t, ok := signaling.ParseCellType(*j.Type)
		if !ok {
			return signaling.Cell{}, perr(field+".type", "unknown value %q", *j.Type)
		}
		c.Type = t
	}
	if j.RSRP != nil || j.RSRQ != nil {
		c.HasSignal = true
		if j.RSRP != nil {
			c.RSRP = *j.RSRP
		}
		if j.RSRQ != nil {
			c.RSRQ = *j.RSRQ
		}
	}
	return c, nil
}

// trimJSONErr drops encoding/json's "json: " prefix: the field already says
// "json".
func trimJSONErr(err error) string {
	s := err.Error()
	if len(s) > 6 && s[:6] == "json: " {
		return s[6:]
	}
	return s
}
