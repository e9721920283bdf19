//go:build linux

package tun_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/m2ho/m2ho/bench/netns"
	"github.com/m2ho/m2ho/tun"
)

const tunName = "m2ho0"

var qdisc = regexp.MustCompile(`qdisc \S+ `)

// phoneState is everything SetupRouting may touch in the phone namespace,
// as text, so before/after comparisons show the difference. withTUN=false
// leaves out what exists only while the TUN does.
func phoneState(t *testing.T, c *netns.Chain, withTUN bool) map[string]string {
	t.Helper()
	st := map[string]string{}
	queries := [][]string{
		{"ip", "-4", "rule"}, {"ip", "-6", "rule"},
		{"ip", "-4", "route", "show", "table", "100"}, {"ip", "-6", "route", "show", "table", "100"},
	}
	if withTUN {
		queries = append(queries, []string{"ip", "-o", "link"})
	}
	for _, q := range queries {
		out, err := c.Exec(netns.Phone, q...).CombinedOutput()
		// A table without routes does not exist for IPv4.
		if err != nil && !strings.Contains(string(out), "FIB table does not exist") {
			t.Fatalf("%v: %v: %s", q, err, out)
		}
		if err != nil {
			out = nil
		}
		// The kernel attaches a qdisc when a device first goes up and keeps it.
		st[strings.Join(q, " ")] = qdisc.ReplaceAllString(string(out), "")
	}
	sysctls := []string{
		"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding",
		"net/ipv4/conf/all/rp_filter", "net/ipv4/conf/default/rp_filter",
		"net/ipv4/conf/tether0/rp_filter", "net/ipv4/conf/uplink0/rp_filter",
	}
	if withTUN {
		sysctls = append(sysctls, "net/ipv4/conf/"+tunName+"/rp_filter")
	}
	for _, p := range sysctls {
		out, err := c.Exec(netns.Phone, "cat", "/proc/sys/"+p).CombinedOutput()
		if err != nil {
			t.Fatalf("cat %s: %v: %s", p, err, out)
		}
		st[p] = strings.TrimSpace(string(out))
	}
	return st
}

func hostSysctls(t *testing.T) string {
	var b strings.Builder
	for _, p := range []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv4/conf/all/rp_filter", "net/ipv4/conf/default/rp_filter"} {
		v, err := os.ReadFile("/proc/sys/" + p)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(p + "=" + string(v))
	}
	return b.String()
}

func diffState(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s:\n got %q\nwant %q", what, k, got[k], w)
		}
	}
}

func run(t *testing.T, c *netns.Chain, ns string, cmd ...string) {
	t.Helper()
	if out, err := c.Exec(ns, cmd...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", cmd, err, out)
	}
}

// phoneChain builds laptop <-> phone <-> server with a persistent TUN in the
// phone and non-default sysctls, so that restoring them is visible.
func phoneChain(t *testing.T) *netns.Chain {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	c, err := netns.NewChain("m2hot", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	run(t, c, netns.Phone, "ip", "tuntap", "add", "dev", tunName, "mode", "tun")
	for kv, v := range map[string]string{
		"net.ipv4.ip_forward":                     "0",
		"net.ipv6.conf.all.forwarding":            "0",
		"net.ipv4.conf.all.rp_filter":             "2",
		"net.ipv4.conf.tether0.rp_filter":         "1",
		"net.ipv4.conf.default.rp_filter":         "1",
		"net.ipv4.conf." + tunName + ".rp_filter": "2",
	} {
		if err := c.Sysctl(netns.Phone, kv, v); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

var phoneCfg = tun.RoutingConfig{TetherIf: netns.PhoneTetherIf, UplinkIf: netns.PhoneUplinkIf, TUN: tunName}

func TestSetupRoutingKernel(t *testing.T) {
	c := phoneChain(t)
	host := hostSysctls(t)
	before := phoneState(t, c, true)

	var r *tun.Routing
	err := c.Do(netns.Phone, func() (err error) {
		r, err = tun.SetupRouting(phoneCfg)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Describe() {
		t.Log(d)
	}
	during := phoneState(t, c, true)
	for _, want := range []string{"1000:\tfrom all iif tether0 lookup 100", "1000:\tfrom all iif uplink0 lookup 100"} {
		for _, fam := range []string{"ip -4 rule", "ip -6 rule"} {
			if !strings.Contains(during[fam], want) {
				t.Errorf("%s lacks %q:\n%s", fam, want, during[fam])
			}
		}
	}
	for _, fam := range []string{"ip -4 route show table 100", "ip -6 route show table 100"} {
		if !strings.HasPrefix(during[fam], "default dev "+tunName) {
			t.Errorf("%s = %q, want a default route via %s", fam, during[fam], tunName)
		}
	}
	for p, want := range map[string]string{
		"net/ipv4/ip_forward": "1", "net/ipv6/conf/all/forwarding": "1",
		"net/ipv4/conf/all/rp_filter": "0", "net/ipv4/conf/default/rp_filter": "0",
		"net/ipv4/conf/" + tunName + "/rp_filter": "0", "net/ipv4/conf/tether0/rp_filter": "0",
		"net/ipv4/conf/uplink0/rp_filter": "0",
	} {
		if during[p] != want {
			t.Errorf("%s = %s, want %s", p, during[p], want)
		}
	}

	// A second instance on the same interfaces is refused and must not
	// disturb the first.
	err = c.Do(netns.Phone, func() error {
		_, err := tun.SetupRouting(phoneCfg)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second SetupRouting: %v, want a refusal", err)
	}
	diffState(t, "after refused second setup", phoneState(t, c, true), during)

	if err := c.Do(netns.Phone, r.Undo); err != nil {
		t.Fatal(err)
	}
	diffState(t, "after Undo", phoneState(t, c, true), before)
	if h := hostSysctls(t); h != host {
		t.Errorf("host sysctls changed:\n%s\nwas\n%s", h, host)
	}
}

// TestSetupRoutingKernelRollback: a default route that is already in the
// IPv6 table makes the setup fail at that step; everything before it
// (sysctls, link up, IPv4 route) must be undone.
func TestSetupRoutingKernelRollback(t *testing.T) {
	c := phoneChain(t)
	run(t, c, netns.Phone, "ip", "link", "set", "dev", tunName, "up")
	// Kept up: the kernel flushes a device's routes when it goes down.
	run(t, c, netns.Phone, "ip", "-6", "route", "add", "default", "dev", tunName, "table", "100")
	before := phoneState(t, c, true)
	err := c.Do(netns.Phone, func() error {
		_, err := tun.SetupRouting(phoneCfg)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "-6 route add default dev "+tunName) {
		t.Fatalf("SetupRouting: %v, want failure at the IPv6 route", err)
	}
	t.Log(err)
	diffState(t, "after rollback", phoneState(t, c, true), before)
}

// TestUndoAfterTUNClosed: the daemon may close its TUN before undoing the
// routing; the kernel then has already dropped the TUN's routes.
func TestUndoAfterTUNClosed(t *testing.T) {
	c := phoneChain(t)
	before := phoneState(t, c, false)
	var r *tun.Routing
	if err := c.Do(netns.Phone, func() (err error) { r, err = tun.SetupRouting(phoneCfg); return err }); err != nil {
		t.Fatal(err)
	}
	run(t, c, netns.Phone, "ip", "tuntap", "del", "dev", tunName, "mode", "tun")
	if err := c.Do(netns.Phone, r.Undo); err != nil {
		t.Fatalf("Undo after the TUN was removed: %v", err)
	}
	diffState(t, "after TUN removal and Undo", phoneState(t, c, false), before)
}
