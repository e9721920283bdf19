package packet

// TCP sequence and acknowledgment numbers live in a 2^32 circle (RFC 9293
// §3.4): a comparison is only meaningful for numbers less than 2^31 apart,
// and must be done on the signed difference, never with `<` (gVisor's
// seqnum.LessThan does the same).

// SeqLess reports whether a comes before b in sequence space.
func SeqLess(a, b uint32) bool { return int32(a-b) < 0 }

// SeqLEQ reports whether a comes before b or equals it.
func SeqLEQ(a, b uint32) bool { return int32(a-b) <= 0 }

// SeqGreater reports whether a comes after b in sequence space.
func SeqGreater(a, b uint32) bool { return int32(a-b) > 0 }

// SeqGEQ reports whether a comes after b or equals it.
func SeqGEQ(a, b uint32) bool { return int32(a-b) >= 0 }
