package netns

import (
	"strings"
	"testing"
)

const iperf3OK = `{"start":{"connected":[]},"intervals":[],"end":{
 "sum_sent":{"start":0,"end":5.0,"seconds":5.0,"bytes":625000000,"bits_per_second":1.0e9,"retransmits":12,"sender":true},
 "sum_received":{"start":0,"end":5.0,"seconds":5.0,"bytes":620000000,"bits_per_second":9.92e8,"sender":true}}}`

func TestParseIperf3(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Iperf3Result
		err      string
	}{
		{"ok", iperf3OK, Iperf3Result{BitsPerSecond: 9.92e8, SentBitsPerSecond: 1e9, ReceivedBytes: 620000000, Retransmits: 12, Seconds: 5}, ""},
		{"error member", `{"start":{},"intervals":[],"end":{},"error":"unable to connect to server: Connection refused"}`, Iperf3Result{}, "Connection refused"},
		{"no end", `{"start":{}}`, Iperf3Result{}, "end.sum_received missing"},
		{"no sum_received", `{"end":{"sum_sent":{"bits_per_second":5}}}`, Iperf3Result{}, "end.sum_received missing"},
		{"negative", `{"end":{"sum_received":{"bits_per_second":-1}}}`, Iperf3Result{}, "negative"},
		{"not json", `iperf3: error - unable to connect`, Iperf3Result{}, "iperf3 JSON"},
		{"empty", ``, Iperf3Result{}, "iperf3 JSON"},
	} {
		got, err := ParseIperf3([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// FuzzParseIperf3: never panics; a result it accepts has no negative
// fields.
func FuzzParseIperf3(f *testing.F) {
	f.Add([]byte(iperf3OK))
	f.Add([]byte(`{"error":"x"}`))
	f.Add([]byte(`{"end":{"sum_received":{"bits_per_second":1e400}}}`))
	f.Add([]byte(`{"end":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseIperf3(b)
		if err != nil {
			return
		}
		if r.BitsPerSecond < 0 || r.ReceivedBytes < 0 || r.Seconds < 0 {
			t.Fatalf("accepted negative result %+v", r)
		}
	})
}
