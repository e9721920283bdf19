package tunnel

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/m2ho/m2ho/signaling"
)

func TestHintRoundTrip(t *testing.T) {
	for _, h := range []Hint{
		{Kind: HintPredicted, Seq: 1, TargetCell: "310410-0x1a2b", CellType: signaling.CellMmWave, SMax: 3_000_000},
		{Kind: HintExecuted, Seq: 2, CellType: signaling.CellSub6, CEst: 12.5e6},
		{Kind: HintWithdrawn, Seq: 3},
	} {
		b, err := MarshalHint(h)
		if err != nil {
			t.Fatal(err)
		}
		if b[len(b)-1] != '\n' || strings.Count(string(b), "\n") != 1 {
			t.Fatalf("not one line: %q", b)
		}
		got, err := ParseHint(b[:len(b)-1])
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got != h {
			t.Fatalf("round trip %+v -> %s -> %+v", h, b, got)
		}
	}
}

func TestParseHintErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"v":1,"seq":1,"kind":"predicted"}`, "smax"},
		{`{"v":1,"seq":1,"kind":"predicted","smax":0}`, "smax 0"},
		{`{"v":1,"seq":1,"kind":"executed","c_est":5}`, "cell_type"},
		{`{"v":1,"seq":1,"kind":"executed","cell_type":"wifi","c_est":5}`, `cell_type "wifi"`},
		{`{"v":1,"seq":1,"kind":"executed","cell_type":"sub6","c_est":-1}`, "c_est -1"},
		{`{"v":1,"seq":1,"kind":"withdrawn","smax":5}`, "smax given"},
		{`{"v":2,"seq":1,"kind":"withdrawn"}`, "v 2"},
		{`{"v":1,"seq":1,"kind":"maybe"}`, `kind "maybe"`},
		{`{"v":1,"seq":1,"kind":"withdrawn","extra":1}`, "unknown field"},
		{`{"v":1,"seq":1,"kind":"withdrawn"} {}`, "trailing"},
		{`not json`, "hint:"},
	} {
		_, err := ParseHint([]byte(tc.line))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.line, err, tc.want)
		}
	}
}

func FuzzParseHint(f *testing.F) {
	f.Add([]byte(`{"v":1,"seq":1,"kind":"predicted","smax":100}`))
	f.Add([]byte(`{"v":1,"seq":2,"kind":"executed","cell_type":"mmwave","c_est":1e6}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHint(b)
		if err != nil {
			return
		}
		// Whatever parses re-encodes and parses to the same hint.
		enc, err := MarshalHint(h)
		if err != nil {
			t.Fatalf("parsed %+v does not re-encode: %v", h, err)
		}
		h2, err := ParseHint(enc[:len(enc)-1])
		if err != nil || h2 != h {
			t.Fatalf("re-parse: %+v, %v; want %+v", h2, err, h)
		}
	})
}

func TestQueueBound(t *testing.T) {
	q := newQueue(4, 100)
	for i := range 10 {
		ok := q.push([]byte{byte(i)})
		if ok != (i < 4) {
			t.Fatalf("push %d: %v", i, ok)
		}
	}
	if d := q.dropped.Load(); d != 6 {
		t.Fatalf("dropped %d, want 6", d)
	}
	for i := range 4 {
		pkt, ok := q.front()
		if !ok || pkt[0] != byte(i) {
			t.Fatalf("front %d: %v %v (tail drop keeps the oldest)", i, pkt, ok)
		}
		q.pop()
	}
	if q.push(make([]byte, 101)) {
		t.Fatal("accepted a packet larger than a slot")
	}
}

func TestLastAddrAndRoutes(t *testing.T) {
	for p, want := range map[string]string{"10.0.0.0/8": "10.255.255.255", "192.0.2.128/25": "192.0.2.255", "2001:db8::/64": "2001:db8::ffff:ffff:ffff:ffff", "10.1.2.3/32": "10.1.2.3"} {
		if got := lastAddr(mustPrefix(p)).String(); got != want {
			t.Errorf("lastAddr(%s) = %s, want %s", p, got, want)
		}
	}
	if _, err := prefixRoutes([]netip.Prefix{mustPrefix("10.0.0.0/8"), mustPrefix("10.1.0.0/16")}); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("overlapping routes: %v", err)
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
