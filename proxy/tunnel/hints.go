package tunnel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/m2ho/m2ho/signaling"
)

// HintKind is what a hint from the phone says about the radio (HINTS.md).
type HintKind uint8

const (
	// HintPredicted: the M2HO predictor (MobiCom'24 Algorithm 1) expects a
	// handover; SMax is the target cell's estimated buffer ŝ_max (§4.2),
	// the cap on bytes in flight while it is pending.
	HintPredicted HintKind = iota + 1
	// HintExecuted: the handover command was executed; CellType is the new
	// cell's kind and CEst its estimated delivery rate, for a sender that
	// restarts its estimate from it.
	HintExecuted
	// HintWithdrawn: the prediction is withdrawn (an A1 after it, or no
	// command within 2·T2); undo whatever HintPredicted did.
	HintWithdrawn
)

var hintKindNames = [...]string{HintPredicted: "predicted", HintExecuted: "executed", HintWithdrawn: "withdrawn"}

func (k HintKind) String() string {
	if int(k) < len(hintKindNames) && hintKindNames[k] != "" {
		return hintKindNames[k]
	}
	return fmt.Sprintf("HintKind(%d)", uint8(k))
}

// Hint is one message of the hints channel.
type Hint struct {
	Kind HintKind
	// Seq increases by one per hint on a connection; the server refuses a
	// hint whose Seq does not increase.
	Seq uint64
	// TargetCell is the predicted or new cell's identifier (informational).
	TargetCell string
	// CellType is the target (HintPredicted, optional) or new (HintExecuted,
	// required) cell's kind.
	CellType signaling.CellType
	// SMax is ŝ_max in bytes (HintPredicted; > 0).
	SMax int64
	// CEst is the new cell's estimated rate in bytes per second
	// (HintExecuted; >= 0, 0 meaning unknown).
	CEst float64
}

// maxHintLine bounds one hint's encoding, so a hostile peer costs a
// constant per line.
const maxHintLine = 1024

// hintVersion is the wire format's version (field "v").
const hintVersion = 1

// wireHint is a hint's JSON form, one per line (HINTS.md).
type wireHint struct {
	V          int      `json:"v"`
	Seq        uint64   `json:"seq"`
	Kind       string   `json:"kind"`
	TargetCell string   `json:"target_cell,omitempty"`
	CellType   string   `json:"cell_type,omitempty"`
	SMax       *int64   `json:"smax,omitempty"`
	CEst       *float64 `json:"c_est,omitempty"`
}

// MarshalHint encodes h as one line of the hints channel, newline included.
func MarshalHint(h Hint) ([]byte, error) {
	if err := h.validate(); err != nil {
		return nil, err
	}
	w := wireHint{V: hintVersion, Seq: h.Seq, Kind: h.Kind.String(), TargetCell: h.TargetCell}
	if h.CellType != signaling.CellUnknown {
		w.CellType = h.CellType.String()
	}
	switch h.Kind {
	case HintPredicted:
		w.SMax = &h.SMax
	case HintExecuted:
		w.CEst = &h.CEst
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	if len(b)+1 > maxHintLine {
		return nil, fmt.Errorf("hint: encoding is %d bytes, more than %d (target_cell too long?)", len(b)+1, maxHintLine)
	}
	return append(b, '\n'), nil
}

// ParseHint decodes one line of the hints channel (without its newline).
// Errors name the field at fault.
func ParseHint(line []byte) (Hint, error) {
	var w wireHint
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(&w); err != nil {
		return Hint{}, fmt.Errorf("hint: %v", err)
	}
	if d.More() {
		return Hint{}, errors.New("hint: trailing data after the JSON object")
	}
	if w.V != hintVersion {
		return Hint{}, fmt.Errorf("hint: v %d: want %d", w.V, hintVersion)
	}
	h := Hint{Seq: w.Seq, TargetCell: w.TargetCell}
	switch w.Kind {
	case "predicted":
		h.Kind = HintPredicted
	case "executed":
		h.Kind = HintExecuted
	case "withdrawn":
		h.Kind = HintWithdrawn
	default:
		return Hint{}, fmt.Errorf("hint: kind %q: want predicted, executed or withdrawn", w.Kind)
	}
	if w.CellType != "" {
		ct, ok := signaling.ParseCellType(w.CellType)
		if !ok {
			return Hint{}, fmt.Errorf("hint: cell_type %q: want sub6, mmwave or lte", w.CellType)
		}
		h.CellType = ct
	}
	if w.SMax != nil {
		if h.Kind != HintPredicted {
			return Hint{}, fmt.Errorf("hint: smax given on a %s hint", w.Kind)
		}
		h.SMax = *w.SMax
	}
	if w.CEst != nil {
		if h.Kind != HintExecuted {
			return Hint{}, fmt.Errorf("hint: c_est given on a %s hint", w.Kind)
		}
		h.CEst = *w.CEst
	}
	if err := h.validate(); err != nil {
		return Hint{}, err
	}
	return h, nil
}

func (h Hint) validate() error {
	if len(h.TargetCell) > 128 {
		return fmt.Errorf("hint: target_cell is %d bytes, at most 128", len(h.TargetCell))
	}
	switch h.Kind {
	case HintPredicted:
		if h.SMax <= 0 {
			return fmt.Errorf("hint: smax %d: a predicted hint needs a positive ŝ_max (M2HO never clamps to 0)", h.SMax)
		}
	case HintExecuted:
		if h.CellType == signaling.CellUnknown {
			return errors.New("hint: cell_type: an executed hint needs the new cell's type")
		}
		if !(h.CEst >= 0) || h.CEst > 1e12 {
			return fmt.Errorf("hint: c_est %v: want a rate in [0, 1e12] bytes/s", h.CEst)
		}
	case HintWithdrawn:
	default:
		return fmt.Errorf("hint: kind %d unknown", h.Kind)
	}
	return nil
}
