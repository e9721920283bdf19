package signaling

// For the external tests (decode_test.go), which compare Decoder with the
// old decoder in internal/jsonv1 (which imports this package).
var FormatExamples = formatExamples

func RoundTripEvents() []Event {
	out := make([]Event, len(roundTripEvents))
	for i, tc := range roundTripEvents {
		out[i] = tc.e
	}
	return out
}
