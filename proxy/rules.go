package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/m2ho/m2ho/proxy/packet"
)

// Mode is how the packet path treats one flow.
type Mode uint8

const (
	ModePass     Mode = iota // forward unchanged (counted)
	ModeM2HO                 // TCP through the M2HO controller
	ModeQUIC                 // carried in the QUIC tunnel (reserved)
	ModeQUICM2HO             // tunnel plus M2HO hints (reserved)
)

var modeNames = [...]string{"pass", "m2ho", "quic", "quic+m2ho"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses a mode name as written in a rule or a flag.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q (want pass, m2ho, quic, quic+m2ho)", s)
}

// Available reports an error for a mode the grammar accepts but the
// packet path cannot run yet.
func (m Mode) Available() error {
	switch m {
	case ModePass, ModeM2HO:
		return nil
	}
	return fmt.Errorf("mode %s is not available yet", m)
}

// Protocol a rule matches.
type Protocol uint8

const (
	ProtoAny Protocol = iota
	ProtoTCPOnly
	ProtoUDPOnly
)

// Rule selects flows by protocol, addresses and ports and gives them a
// mode. "src" is always the tethered (laptop) side and "dst" the internet
// side, whichever direction the flow's first packet travelled, so
// `tcp dst-port 443 mode=m2ho` means "the laptop's HTTPS connections".
type Rule struct {
	Proto Protocol
	// Src and Dst are prefixes; an invalid (zero) prefix matches anything.
	Src, Dst netip.Prefix
	// srcHost/dstHost remember that the address was written as a host, for
	// String.
	srcHost, dstHost bool
	// Port ranges, inclusive; hasX false matches any port.
	SrcPort, DstPort, AnyPort       PortRange
	HasSrcPort, HasDstPort, HasPort bool
	Mode                            Mode
}

// PortRange is an inclusive range of ports.
type PortRange struct{ Lo, Hi uint16 }

func (r PortRange) contains(p uint16) bool { return r.Lo <= p && p <= r.Hi }

func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return strconv.Itoa(int(r.Lo)) + "-" + strconv.Itoa(int(r.Hi))
}

// Match reports whether a flow matches: proto is packet.ProtoTCP or packet.ProtoUDP; the
// laptop side is (src, sport), the internet side (dst, dport).
func (r *Rule) Match(proto uint8, src netip.Addr, sport uint16, dst netip.Addr, dport uint16) bool {
	switch r.Proto {
	case ProtoTCPOnly:
		if proto != packet.ProtoTCP {
			return false
		}
	case ProtoUDPOnly:
		if proto != packet.ProtoUDP {
			return false
		}
	}
	if r.Src.IsValid() && !r.Src.Contains(src) {
		return false
	}
	if r.Dst.IsValid() && !r.Dst.Contains(dst) {
		return false
	}
	if r.HasSrcPort && !r.SrcPort.contains(sport) {
		return false
	}
	if r.HasDstPort && !r.DstPort.contains(dport) {
		return false
	}
	if r.HasPort && !r.AnyPort.contains(sport) && !r.AnyPort.contains(dport) {
		return false
	}
	return true
}

// String renders the rule in the syntax ParseRules reads; parsing it gives
// the same rule back.
func (r Rule) String() string {
	var sb strings.Builder
	sb.WriteString([...]string{"any", "tcp", "udp"}[r.Proto])
	addr := func(kw string, p netip.Prefix, host bool) {
		if !p.IsValid() {
			return
		}
		if host {
			fmt.Fprintf(&sb, " %s host %s", kw, p.Addr())
		} else {
			fmt.Fprintf(&sb, " %s net %s", kw, p)
		}
	}
	addr("src", r.Src, r.srcHost)
	addr("dst", r.Dst, r.dstHost)
	if r.HasSrcPort {
		sb.WriteString(" src-port " + r.SrcPort.String())
	}
	if r.HasDstPort {
		sb.WriteString(" dst-port " + r.DstPort.String())
	}
	if r.HasPort {
		sb.WriteString(" port " + r.AnyPort.String())
	}
	sb.WriteString(" mode=" + r.Mode.String())
	return sb.String()
}

const wantKeywords = "want src, dst, port, src-port, dst-port, mode="

// ParseRules parses one rule per string, e.g.
//
//	tcp dst-port 443 mode=m2ho
//	udp dst net 2001:db8::/32 port 443-444 mode=quic
//	any src host 192.168.42.10 mode=pass
//
// The protocol (tcp, udp or any) is optional and first; then clauses in any
// order, each at most once: `src|dst [host|net] <addr|prefix>`,
// `src-port|dst-port|port <n|n-m>`; `mode=<m>` is required. Errors name the
// rule and token, counting from 1.
func ParseRules(specs []string) ([]Rule, error) {
	rules := make([]Rule, 0, len(specs))
	for i, s := range specs {
		r, err := parseRule(s)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i+1, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

type tokenError struct {
	n   int
	tok string
	msg string
}

func (e *tokenError) Error() string { return fmt.Sprintf("token %d %q: %s", e.n, e.tok, e.msg) }

func parseRule(s string) (Rule, error) {
	toks := strings.Fields(s)
	if len(toks) == 0 {
		return Rule{}, errors.New("empty rule (want e.g. \"tcp dst-port 443 mode=m2ho\")")
	}
	var r Rule
	seen := map[string]bool{}
	hasMode := false
	i := 0
	errAt := func(j int, format string, a ...any) error {
		tok := ""
		if j < len(toks) {
			tok = toks[j]
		}
		return &tokenError{n: j + 1, tok: tok, msg: fmt.Sprintf(format, a...)}
	}
	switch toks[0] {
	case "tcp":
		r.Proto, i = ProtoTCPOnly, 1
	case "udp":
		r.Proto, i = ProtoUDPOnly, 1
	case "any":
		r.Proto, i = ProtoAny, 1
	}
	for i < len(toks) {
		tok := toks[i]
		kw := tok
		if strings.HasPrefix(tok, "mode=") {
			kw = "mode="
		}
		switch kw {
		case "src", "dst", "src-port", "dst-port", "port", "mode=":
		case "tcp", "udp", "any":
			return r, errAt(i, "protocol must be the first token")
		default:
			return r, errAt(i, "unknown keyword (%s)", wantKeywords)
		}
		if seen[kw] {
			return r, errAt(i, "%s given twice", strings.TrimSuffix(kw, "="))
		}
		seen[kw] = true
		switch kw {
		case "mode=":
			m, err := ParseMode(strings.TrimPrefix(tok, "mode="))
			if err != nil {
				return r, errAt(i, "%v", err)
			}
			r.Mode, hasMode = m, true
			i++
		case "src", "dst":
			i++
			form := ""
			if i < len(toks) && (toks[i] == "host" || toks[i] == "net") {
				form = toks[i]
				i++
			}
			if i >= len(toks) {
				return r, errAt(i-1, "missing address after %s (want an address or prefix)", kw)
			}
			p, host, err := parseAddr(toks[i], form)
			if err != nil {
				return r, errAt(i, "%v", err)
			}
			if kw == "src" {
				r.Src, r.srcHost = p, host
			} else {
				r.Dst, r.dstHost = p, host
			}
			i++
		default: // ports
			i++
			if i >= len(toks) {
				return r, errAt(i-1, "missing port after %s (want n or n-m)", kw)
			}
			pr, err := parsePortRange(toks[i])
			if err != nil {
				return r, errAt(i, "%v", err)
			}
			switch kw {
			case "src-port":
				r.SrcPort, r.HasSrcPort = pr, true
			case "dst-port":
				r.DstPort, r.HasDstPort = pr, true
			default:
				r.AnyPort, r.HasPort = pr, true
			}
			i++
		}
	}
	if !hasMode {
		return r, errors.New("missing mode= (want mode=pass, mode=m2ho, mode=quic or mode=quic+m2ho)")
	}
	return r, nil
}

func parseAddr(s, form string) (netip.Prefix, bool, error) {
	if strings.Contains(s, "/") {
		if form == "host" {
			return netip.Prefix{}, false, errors.New("host takes an address, not a prefix")
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, false, fmt.Errorf("bad prefix: %v", err)
		}
		if p != p.Masked() {
			return p, false, fmt.Errorf("prefix has host bits set (did you mean %s?)", p.Masked())
		}
		return p, false, nil
	}
	if form == "net" {
		return netip.Prefix{}, false, errors.New("net takes a prefix like 10.0.0.0/8")
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false, fmt.Errorf("bad address (want e.g. 192.0.2.1, 2001:db8::1 or a prefix)")
	}
	if a.Zone() != "" {
		return netip.Prefix{}, false, errors.New("zoned addresses are not supported")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), true, nil
}

func parsePortRange(s string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	l, err := parsePort(lo)
	if err != nil {
		return PortRange{}, err
	}
	if !isRange {
		return PortRange{l, l}, nil
	}
	h, err := parsePort(hi)
	if err != nil {
		return PortRange{}, err
	}
	if h < l {
		return PortRange{}, fmt.Errorf("empty port range (%d > %d)", l, h)
	}
	return PortRange{l, h}, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("bad port %q (want 0-65535)", s)
	}
	return uint16(n), nil
}

// MatchRules returns the mode of the first matching rule, or def.
func MatchRules(rules []Rule, def Mode, proto uint8, src netip.Addr, sport uint16, dst netip.Addr, dport uint16) Mode {
	for i := range rules {
		if rules[i].Match(proto, src, sport, dst, dport) {
			return rules[i].Mode
		}
	}
	return def
}
