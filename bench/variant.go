package bench

import (
	"fmt"
	"strings"
)

// Variant is one configuration of the phone proxy under test: a name for
// the tables and the arguments added to `m2ho run`. The set is open: QUIC
// tunnel variants join by name with their own arguments.
type Variant struct {
	Name string
	Args []string
	// ServerArgs, when not nil, make this a tunnel variant: the run starts
	// `m2ho server` with them in the server namespace and gives `m2ho
	// run` the tunnel's flags (keys from `m2ho keys` in the run's
	// directory); the download then goes to the tunnel's inner address.
	ServerArgs []string `json:",omitempty"`
}

// Tunnel reports whether v carries its flows in the QUIC tunnel.
func (v Variant) Tunnel() bool { return v.ServerArgs != nil }

// BuiltinVariants are the variants known by name alone.
var BuiltinVariants = map[string][]string{
	// pass: the proxy is on the path and sees every packet but changes
	// nothing, so the comparison isolates M2HO's actions.
	"pass": {"--default-mode", "pass"},
	"m2ho": {"--default-mode", "m2ho"},
	// The tunnel variants (the server's side in TunnelServerArgs):
	// quic: quic-go's own Reno (with HyStart) and pacer, no Wave, no hints;
	// quic-wave: Wave bursts on the server, no hints; quic-wave-hints:
	// Wave plus the controller's hints (ŝ_max cap while predicted, restart
	// from c_est when executed); quic+m2ho: that, and M2HO's verdicts on
	// the inner TCP's uplink ACKs.
	"quic":            {"--default-mode", "quic", "--tunnel-hints=false"},
	"quic-wave":       {"--default-mode", "quic", "--tunnel-hints=false"},
	"quic-wave-hints": {"--default-mode", "quic", "--tunnel-hints=true"},
	"quic+m2ho":       {"--default-mode", "quic+m2ho", "--tunnel-hints=true"},
}

// TunnelServerArgs are the `m2ho server` arguments of the tunnel variants.
var TunnelServerArgs = map[string][]string{
	"quic":            {"--pacer", "none"},
	"quic-wave":       {"--pacer", "wave"},
	"quic-wave-hints": {"--pacer", "wave"},
	"quic+m2ho":       {"--pacer", "wave"},
}

// ParseVariants resolves variant names. defs are extra definitions
// "NAME=ARGS" or "NAME=ARGS | SERVER ARGS" (split on spaces) that add
// variants or override builtins; a name with neither is an error naming
// it. A definition is a tunnel variant when it has the "|" part (the
// `m2ho server` arguments, possibly none) or when ARGS send flows into
// the tunnel (a quic or quic+m2ho mode, in --default-mode or a --flow
// rule): then the server takes the builtin's arguments of the same name,
// else its own defaults. Without that, a defined quic variant ran with
// no tunnel server and `m2ho run` refused it.
func ParseVariants(names []string, defs []string) ([]Variant, error) {
	known := map[string][]string{}
	for k, v := range BuiltinVariants {
		known[k] = v
	}
	server := map[string][]string{}
	for k, v := range TunnelServerArgs {
		server[k] = v
	}
	for _, d := range defs {
		name, args, ok := strings.Cut(d, "=")
		name = strings.TrimSpace(name)
		if !ok || !validName(name) {
			return nil, fmt.Errorf("--variant-def %q: want NAME=ARGS with NAME of letters, digits, '-', '_', '+'", d)
		}
		run, srv, tunnel := strings.Cut(args, "|")
		if strings.Contains(srv, "|") {
			return nil, fmt.Errorf("--variant-def %q: more than one '|' (want NAME=RUN ARGS | SERVER ARGS)", d)
		}
		known[name] = strings.Fields(run)
		switch {
		case tunnel:
			server[name] = append([]string{}, strings.Fields(srv)...)
		case usesTunnel(known[name]):
			if _, ok := server[name]; !ok {
				server[name] = []string{}
			}
		default:
			delete(server, name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("--variants: empty")
	}
	var out []Variant
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		args, ok := known[n]
		if !ok {
			return nil, fmt.Errorf("--variants: unknown variant %q (builtin: pass, m2ho, quic, quic-wave, quic-wave-hints, quic+m2ho; define others with --variant-def NAME=ARGS)", n)
		}
		if seen[n] {
			return nil, fmt.Errorf("--variants: %q given twice", n)
		}
		seen[n] = true
		v := Variant{Name: n, Args: append([]string(nil), args...)}
		if sa, ok := server[n]; ok {
			v.ServerArgs = append([]string{}, sa...)
		}
		out = append(out, v)
	}
	return out, nil
}

// usesTunnel reports whether `m2ho run` arguments put flows into the
// tunnel: a quic or quic+m2ho mode as --default-mode or in a --flow rule.
func usesTunnel(args []string) bool {
	for i, a := range args {
		val, ok := "", false
		switch {
		case a == "--default-mode" && i+1 < len(args):
			val, ok = args[i+1], true
		case strings.HasPrefix(a, "--default-mode="):
			val, ok = strings.TrimPrefix(a, "--default-mode="), true
		case strings.HasPrefix(a, "mode="):
			val, ok = strings.TrimPrefix(a, "mode="), true
		}
		if ok && (val == "quic" || val == "quic+m2ho") {
			return true
		}
	}
	return false
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '+') {
			return false
		}
	}
	return true
}
