package proxy

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/m2ho/m2ho/proxy/packet"
)

func TestParseRulesErrors(t *testing.T) {
	cases := []struct {
		rules []string
		want  string
	}{
		{[]string{"tcp mode=m2ho", "tcp dst-prt 443 mode=m2ho"},
			`rule 2: token 2 "dst-prt": unknown keyword (want src, dst, port, src-port, dst-port, mode=)`},
		{[]string{"tcp dst net 10.0.0.0/8 dst-prt 443 mode=m2ho"},
			`rule 1: token 5 "dst-prt": unknown keyword (want src, dst, port, src-port, dst-port, mode=)`},
		{[]string{"tcp dst-port 443"}, `rule 1: missing mode= (want mode=pass, mode=m2ho, mode=quic or mode=quic+m2ho)`},
		{[]string{"tcp dst-port 443 mode=fast"}, `rule 1: token 4 "mode=fast": unknown mode "fast" (want pass, m2ho, quic, quic+m2ho)`},
		{[]string{"tcp dst-port 70000 mode=m2ho"}, `rule 1: token 3 "70000": bad port "70000" (want 0-65535)`},
		{[]string{"tcp dst-port 500-400 mode=m2ho"}, `rule 1: token 3 "500-400": empty port range (500 > 400)`},
		{[]string{"tcp dst-port"}, `rule 1: token 2 "dst-port": missing port after dst-port (want n or n-m)`},
		{[]string{"udp src host 10.0.0.0/8 mode=pass"}, `rule 1: token 4 "10.0.0.0/8": host takes an address, not a prefix`},
		{[]string{"udp src net 10.0.0.1 mode=pass"}, `rule 1: token 4 "10.0.0.1": net takes a prefix like 10.0.0.0/8`},
		{[]string{"udp src 10.0.0.1/8 mode=pass"}, `rule 1: token 3 "10.0.0.1/8": prefix has host bits set (did you mean 10.0.0.0/8?)`},
		{[]string{"any dst example.com mode=pass"}, `rule 1: token 3 "example.com": bad address (want e.g. 192.0.2.1, 2001:db8::1 or a prefix)`},
		{[]string{"port 1 port 2 mode=pass"}, `rule 1: token 3 "port": port given twice`},
		{[]string{"mode=pass tcp"}, `rule 1: token 2 "tcp": protocol must be the first token`},
		{[]string{"  "}, `rule 1: empty rule (want e.g. "tcp dst-port 443 mode=m2ho")`},
	}
	for _, c := range cases {
		_, err := ParseRules(c.rules)
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseRules(%q):\n got %v\nwant %s", c.rules, err, c.want)
		}
	}
}

func TestParseRulesRoundTrip(t *testing.T) {
	specs := []string{
		"tcp dst-port 443 mode=m2ho",
		"udp dst net 2001:db8::/32 port 443-444 mode=quic",
		"any src host 192.168.42.10 mode=pass",
		"tcp src 192.168.42.0/24 dst 203.0.113.5 src-port 1024-65535 dst-port 80 mode=quic+m2ho",
	}
	canon := []string{
		"tcp dst-port 443 mode=m2ho",
		"udp dst net 2001:db8::/32 port 443-444 mode=quic",
		"any src host 192.168.42.10 mode=pass",
		"tcp src net 192.168.42.0/24 dst host 203.0.113.5 src-port 1024-65535 dst-port 80 mode=quic+m2ho",
	}
	rules, err := ParseRules(specs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rules {
		if r.String() != canon[i] {
			t.Errorf("rule %d String() = %q, want %q", i+1, r.String(), canon[i])
		}
		again, err := ParseRules([]string{r.String()})
		if err != nil || !reflect.DeepEqual(again[0], r) {
			t.Errorf("rule %d does not round-trip: %v %+v vs %+v", i+1, err, again, r)
		}
	}
}

func TestMatchRules(t *testing.T) {
	rules, err := ParseRules([]string{
		"udp port 53 mode=pass",
		"tcp dst net 203.0.113.0/24 dst-port 443 mode=m2ho",
		"tcp src host fd00:42::10 mode=m2ho",
		"tcp port 8000-8080 mode=quic",
	})
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	cases := []struct {
		proto uint8
		src   string
		sport uint16
		dst   string
		dport uint16
		want  Mode
	}{
		{packet.ProtoTCP, "192.168.42.10", 50000, "203.0.113.5", 443, ModeM2HO},
		{packet.ProtoTCP, "192.168.42.10", 50000, "198.51.100.1", 443, ModeQUICM2HO}, // default
		{packet.ProtoTCP, "192.168.42.10", 443, "203.0.113.5", 50000, ModeQUICM2HO},  // dst-port is the server's
		{packet.ProtoUDP, "192.168.42.10", 53, "8.8.8.8", 5353, ModePass},            // port matches either side
		{packet.ProtoTCP, "192.168.42.10", 53, "8.8.8.8", 5353, ModeQUICM2HO},        // udp rule only for udp
		{packet.ProtoTCP, "fd00:42::10", 1, "2001:db8::1", 2, ModeM2HO},
		{packet.ProtoTCP, "fd00:42::11", 1, "2001:db8::1", 8080, ModeQUIC},
		{packet.ProtoTCP, "fd00:42::11", 8081, "2001:db8::1", 2, ModeQUICM2HO},
	}
	for _, c := range cases {
		if got := MatchRules(rules, ModeQUICM2HO, c.proto, a(c.src), c.sport, a(c.dst), c.dport); got != c.want {
			t.Errorf("%d %s:%d -> %s:%d = %v, want %v", c.proto, c.src, c.sport, c.dst, c.dport, got, c.want)
		}
	}
}

func FuzzParseRules(f *testing.F) {
	f.Add("tcp dst net 10.0.0.0/8 dst-port 443 mode=m2ho")
	f.Add("udp src host ::1 port 1-2 mode=quic")
	f.Add("any dst")
	f.Fuzz(func(t *testing.T, s string) {
		rules, err := ParseRules([]string{s})
		if err != nil {
			return
		}
		again, err := ParseRules([]string{rules[0].String()})
		if err != nil || !reflect.DeepEqual(again[0], rules[0]) {
			t.Fatalf("%q -> %q does not round-trip: %v", s, rules[0].String(), err)
		}
	})
}
