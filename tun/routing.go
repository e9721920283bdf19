package tun

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DefaultRoutingTable is the policy routing table that sends the tethered
// traffic into the TUN (DESIGN.md "Packet path").
const DefaultRoutingTable = 100

// DefaultRulePriority is the preference of the two "iif ... lookup table"
// rules: after the local table (0), before main (32766). Pinning it lets
// Undo delete exactly the rules it added, since ip(8) allows duplicates.
const DefaultRulePriority = 1000

// maxIfName is IFNAMSIZ-1.
const maxIfName = 15

// RoutingConfig names the phone's interfaces for SetupRouting.
type RoutingConfig struct {
	// TetherIf faces the tethered laptop (USB/Wi-Fi tethering).
	TetherIf string
	// UplinkIf faces the network (the 5G modem's interface).
	UplinkIf string
	// TUN is the proxy's TUN device; it must exist (it is brought up if down).
	TUN string
	// Table is the routing table that holds the default route into the TUN;
	// 0 means DefaultRoutingTable.
	Table int
	// RulePriority is the preference of the iif rules; 0 means
	// DefaultRulePriority.
	RulePriority int
	// NoIPv6 leaves IPv6 alone (for kernels without it); by default both
	// families are routed through the TUN.
	NoIPv6 bool
}

// withDefaults fills zero fields and validates, naming the bad field.
func (c RoutingConfig) withDefaults() (RoutingConfig, error) {
	if c.Table == 0 {
		c.Table = DefaultRoutingTable
	}
	if c.RulePriority == 0 {
		c.RulePriority = DefaultRulePriority
	}
	for _, f := range []struct{ field, v string }{{"TetherIf", c.TetherIf}, {"UplinkIf", c.UplinkIf}, {"TUN", c.TUN}} {
		if f.v == "" || len(f.v) > maxIfName || strings.ContainsAny(f.v, "/ \t\n:") || f.v == "." || f.v == ".." {
			return c, fmt.Errorf("tun: RoutingConfig.%s: %q is not an interface name (1-%d characters, no '/', ':' or space)", f.field, f.v, maxIfName)
		}
	}
	if c.TetherIf == c.UplinkIf || c.TetherIf == c.TUN || c.UplinkIf == c.TUN {
		return c, fmt.Errorf("tun: RoutingConfig: TetherIf %q, UplinkIf %q and TUN %q must be three different interfaces", c.TetherIf, c.UplinkIf, c.TUN)
	}
	// 253-255 are the kernel's default, main and local tables.
	if c.Table < 1 || c.Table > 252 && c.Table < 256 || int64(c.Table) > 1<<32-1 {
		return c, fmt.Errorf("tun: RoutingConfig.Table: %d is not a free table id (1-252 or 256-4294967295)", c.Table)
	}
	if c.RulePriority < 1 || c.RulePriority >= 32766 {
		return c, fmt.Errorf("tun: RoutingConfig.RulePriority: %d must lie between 1 and 32765, before the main table's rule", c.RulePriority)
	}
	return c, nil
}

// routingSystem is what SetupRouting changes: ip(8) and /proc/sys. The
// Linux implementation execs ip; tests use a model of the kernel state.
type routingSystem interface {
	// ip runs ip(8) and returns its standard output.
	ip(args ...string) (string, error)
	// readSysctl and writeSysctl take a path under /proc/sys such as
	// "net/ipv4/ip_forward".
	readSysctl(path string) (string, error)
	writeSysctl(path, val string) error
}

// Routing is the policy routing SetupRouting configured: every change with
// its undo, in the order made.
type Routing struct {
	sys  routingSystem
	done []routingChange
}

type routingChange struct {
	desc string
	undo func(routingSystem) error
}

// Describe lists what was configured, one line per change, in order.
func (r *Routing) Describe() []string {
	out := make([]string, len(r.done))
	for i, c := range r.done {
		out[i] = c.desc
	}
	return out
}

// Undo reverts every change, newest first, restoring the old sysctl values,
// and reports each one that failed. Changes whose object is already gone
// (the TUN closed, taking its routes and its sysctl directory with it)
// count as reverted. Undo is idempotent.
func (r *Routing) Undo() error {
	var errs []error
	for i := len(r.done) - 1; i >= 0; i-- {
		if err := r.done[i].undo(r.sys); err != nil && !errors.Is(err, errGone) {
			errs = append(errs, fmt.Errorf("undoing %q: %w", r.done[i].desc, err))
		}
	}
	r.done = nil
	return errors.Join(errs...)
}

// errGone marks failures to remove something that no longer exists.
var errGone = errors.New("already gone")

// setupRouting is SetupRouting over any routingSystem.
func setupRouting(cfg RoutingConfig, sys routingSystem) (r *Routing, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r = &Routing{sys: sys}
	defer func() {
		if err != nil {
			if uerr := r.Undo(); uerr != nil {
				err = errors.Join(err, fmt.Errorf("tun: rolling back: %w", uerr))
			}
			r = nil
		}
	}()
	families := []string{"-4"}
	if !cfg.NoIPv6 {
		families = append(families, "-6")
	}
	// Refuse to stack on rules another instance (or a crashed run) left:
	// with two rules for one interface only the first one counts. A fence
	// after ours (a blackhole, prohibit or unreachable rule of a later
	// preference: what catches the interface's packets once we are gone,
	// netns.Chain.SealEmu) is no instance and stays.
	for _, fam := range families {
		out, err := sys.ip(fam, "-o", "rule", "show")
		if err != nil {
			return r, fmt.Errorf("tun: SetupRouting: %w", err)
		}
		for _, line := range strings.Split(out, "\n") {
			if iif := ruleIIF(line); (iif == cfg.TetherIf || iif == cfg.UplinkIf) && !fenceAfter(line, cfg.RulePriority) {
				return r, fmt.Errorf("tun: SetupRouting: a %s rule for iif %s exists already (%q); remove it or stop the instance that owns it", fam, iif, strings.TrimSpace(line))
			}
		}
	}

	// Forwarding and reverse path filtering first, routes next, rules last:
	// traffic is diverted only once the table it is diverted to is complete.
	// rp_filter must be 0 on "all" and on each interface (the kernel uses the
	// larger of the two); "default" covers interfaces created later.
	sysctls := [][2]string{{"net/ipv4/ip_forward", "1"}}
	if !cfg.NoIPv6 {
		sysctls = append(sysctls, [2]string{"net/ipv6/conf/all/forwarding", "1"})
	}
	for _, dev := range []string{"all", "default", cfg.TUN, cfg.TetherIf, cfg.UplinkIf} {
		sysctls = append(sysctls, [2]string{"net/ipv4/conf/" + dev + "/rp_filter", "0"})
	}
	for _, kv := range sysctls {
		if err := r.sysctl(kv[0], kv[1]); err != nil {
			return r, err
		}
	}
	if err := r.linkUp(cfg.TUN); err != nil {
		return r, err
	}
	table := strconv.Itoa(cfg.Table)
	pref := strconv.Itoa(cfg.RulePriority)
	for _, fam := range families {
		if err := r.ipChange([]string{fam, "route", "add", "default", "dev", cfg.TUN, "table", table},
			[]string{fam, "route", "del", "default", "dev", cfg.TUN, "table", table}); err != nil {
			return r, err
		}
	}
	for _, fam := range families {
		for _, iif := range []string{cfg.TetherIf, cfg.UplinkIf} {
			if err := r.ipChange([]string{fam, "rule", "add", "pref", pref, "iif", iif, "lookup", table},
				[]string{fam, "rule", "del", "pref", pref, "iif", iif, "lookup", table}); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// fenceAfter tells an "ip -o rule show" line whose action drops what it
// matches (blackhole, prohibit, unreachable) and whose preference comes
// after prio.
func fenceAfter(line string, prio int) bool {
	pref, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
	n, err := strconv.Atoi(pref)
	if !ok || err != nil || n <= prio {
		return false
	}
	f := strings.Fields(rest)
	return len(f) > 0 && (f[len(f)-1] == "blackhole" || f[len(f)-1] == "prohibit" || f[len(f)-1] == "unreachable")
}

// ruleIIF returns the interface after "iif" in one line of ip rule show.
func ruleIIF(line string) string {
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "iif" {
			return f[i+1]
		}
	}
	return ""
}

func (r *Routing) sysctl(path, val string) error {
	old, err := r.sys.readSysctl(path)
	if err != nil {
		return fmt.Errorf("tun: SetupRouting: reading %s: %w", dotted(path), err)
	}
	old = strings.TrimSpace(old)
	if err := r.sys.writeSysctl(path, val); err != nil {
		return fmt.Errorf("tun: SetupRouting: setting %s=%s: %w", dotted(path), val, err)
	}
	r.done = append(r.done, routingChange{
		desc: fmt.Sprintf("sysctl %s=%s (was %s)", dotted(path), val, old),
		undo: func(s routingSystem) error { return s.writeSysctl(path, old) },
	})
	return nil
}

// dotted renders a /proc/sys path the way sysctl(8) names it; interface
// names keep their dots, so "/" is kept inside conf/<dev>/ for clarity.
func dotted(path string) string {
	f := strings.Split(path, "/")
	if len(f) == 5 && f[2] == "conf" && strings.Contains(f[3], ".") {
		return strings.Join(f[:3], ".") + "." + strings.ReplaceAll(f[3], ".", "/") + "." + f[4]
	}
	return strings.Join(f, ".")
}

// linkUp brings dev up unless it is, recording "down" as the undo only when
// it was down, so a TUN that its opener brought up stays up after Undo.
func (r *Routing) linkUp(dev string) error {
	out, err := r.sys.ip("-o", "link", "show", "dev", dev)
	if err != nil {
		return fmt.Errorf("tun: SetupRouting: TUN %s: %w", dev, err)
	}
	if linkFlagUp(out) {
		return nil
	}
	return r.ipChange([]string{"link", "set", "dev", dev, "up"}, []string{"link", "set", "dev", dev, "down"})
}

// linkFlagUp tells whether the flags "<...>" of ip -o link show contain UP.
func linkFlagUp(out string) bool {
	i := strings.IndexByte(out, '<')
	j := strings.IndexByte(out, '>')
	if i < 0 || j < i {
		return false
	}
	for _, f := range strings.Split(out[i+1:j], ",") {
		if f == "UP" {
			return true
		}
	}
	return false
}

func (r *Routing) ipChange(do, undo []string) error {
	if _, err := r.sys.ip(do...); err != nil {
		return fmt.Errorf("tun: SetupRouting: %w", err)
	}
	r.done = append(r.done, routingChange{
		desc: "ip " + strings.Join(do, " "),
		undo: func(s routingSystem) error { _, err := s.ip(undo...); return err },
	})
	return nil
}
