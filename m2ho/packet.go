package m2ho

// Dir is the direction of a packet relative to the tethered laptop.
type Dir uint8

const (
	Downlink Dir = iota // internet → laptop (data, in the flows we protect)
	Uplink              // laptop → internet (the ACKs we rewrite or drop)
)

// TCP flags as they appear in the header's flag byte.
const (
	FlagFIN uint8 = 0x01
	FlagSYN uint8 = 0x02
	FlagRST uint8 = 0x04
	FlagPSH uint8 = 0x08
	FlagACK uint8 = 0x10
)

// Packet is what the controller needs to know of one TCP segment: parsed
// facts, not bytes. The packet path fills it from the header without
// allocating; the controller never sees the buffer.
type Packet struct {
	Dir        Dir
	Flags      uint8
	Seq, Ack   uint32
	Window     uint16 // the raw 16-bit window field, unscaled
	PayloadLen int

	// WScale is the window scale shift the sender of this packet announced
	// in its SYN; -1 when the handshake was not seen, and then the packet's
	// window is never rewritten.
	WScale int8
	// MSS is the flow's maximum segment size (0: unknown, 1460 assumed);
	// a clamped window is never below two segments.
	MSS uint16

	HasTS        bool
	TSval, TSecr uint32
}

// IsPureACK reports whether the segment carries no data and no SYN, FIN or
// RST: the only kind of packet M2HO may ever drop.
// segSize is the flow's MSS as the packet carries it, DefaultMSS when
// unknown.
func (p *Packet) segSize() int {
	if p.MSS == 0 {
		return DefaultMSS
	}
	return int(p.MSS)
}

func (p *Packet) IsPureACK() bool {
	return p.PayloadLen == 0 && p.Flags&FlagACK != 0 && p.Flags&(FlagSYN|FlagFIN|FlagRST) == 0
}

// Action is what the packet path must do with a packet.
type Action uint8

const (
	Pass    Action = iota // forward unchanged
	Rewrite               // forward with the window field set to Verdict.Window
	Drop                  // discard (only ever a pure uplink ACK)
)

// Verdict is the controller's decision for one packet.
type Verdict struct {
	Action Action
	// Window is the raw 16-bit field value to write when Action is
	// Rewrite: already scaled by the flow's shift, never above the
	// packet's own field.
	Window uint16
	// Reason says why a packet is dropped or rewritten, for counters.
	Reason Reason
}

// Reason labels verdicts for metrics.
type Reason uint8

const (
	ReasonNone        Reason = iota
	ReasonPreparation        // §4.3 clamp to the target's ŝ_max share
	ReasonStableRate         // §4.5 rwnd = λ·c_est·RTT_min/RTT
	ReasonSmoothing          // §4.4 duplicate ACK suppressed
	ReasonRelease            // a held window opened gradually (Controller.release)
)

// State is the controller's phase (Fig. 6 of the M2HO paper).
type State uint8

const (
	Stable State = iota
	Preparation
	Smoothing
)

func (s State) String() string {
	switch s {
	case Stable:
		return "stable"
	case Preparation:
		return "preparation"
	case Smoothing:
		return "smoothing"
	}
	return "unknown"
}
