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
}

// BuiltinVariants are the variants known by name alone.
var BuiltinVariants = map[string][]string{
	// pass: the proxy is on the path and sees every packet but changes
	// nothing, so the comparison isolates M2HO's actions.
	"pass": {"--default-mode", "pass"},
	"m2ho": {"--default-mode", "m2ho"},
}

// ParseVariants resolves variant names. defs are extra definitions
// "NAME=ARGS" (ARGS split on spaces) that add variants or override
// builtins; a name with neither is an error naming it.
func ParseVariants(names []string, defs []string) ([]Variant, error) {
	known := map[string][]string{}
	for k, v := range BuiltinVariants {
		known[k] = v
	}
	for _, d := range defs {
		name, args, ok := strings.Cut(d, "=")
		name = strings.TrimSpace(name)
		if !ok || !validName(name) {
			return nil, fmt.Errorf("--variant-def %q: want NAME=ARGS with NAME of letters, digits, '-', '_'", d)
		}
		known[name] = strings.Fields(args)
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
			return nil, fmt.Errorf("--variants: unknown variant %q (builtin: pass, m2ho; define others with --variant-def NAME=ARGS)", n)
		}
		if seen[n] {
			return nil, fmt.Errorf("--variants: %q given twice", n)
		}
		seen[n] = true
		out = append(out, Variant{Name: n, Args: append([]string(nil), args...)})
	}
	return out, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
