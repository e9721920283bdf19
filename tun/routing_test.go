package tun

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
)

// fakeKernel models what SetupRouting touches: sysctl files, routes and
// rules (added and deleted by the same words, so an undo that does not
// mirror its change fails), and link state. failAt injects a failure into
// the n-th change (1-based).
type fakeKernel struct {
	sysctl    map[string]string
	objs      map[string]bool
	up        map[string]bool
	rules     map[string]string // family -> pre-existing "ip rule show" output
	failAt    int
	changes   int
	failUndo  string // a sysctl path whose restore fails
	undoCalls []string
}

func newFakeKernel() *fakeKernel {
	k := &fakeKernel{sysctl: map[string]string{}, objs: map[string]bool{}, up: map[string]bool{}, rules: map[string]string{}}
	k.sysctl["net/ipv4/ip_forward"] = "0\n"
	k.sysctl["net/ipv6/conf/all/forwarding"] = "0\n"
	for _, d := range []string{"all", "default", "tun0", "tether0", "uplink0", "lo"} {
		k.sysctl["net/ipv4/conf/"+d+"/rp_filter"] = "2\n"
	}
	return k
}

func (k *fakeKernel) clone() *fakeKernel {
	c := *k
	c.sysctl, c.objs, c.up = maps.Clone(k.sysctl), maps.Clone(k.objs), maps.Clone(k.up)
	return &c
}

func (k *fakeKernel) same(o *fakeKernel) bool {
	return maps.Equal(k.sysctl, o.sysctl) && maps.Equal(k.objs, o.objs) && maps.Equal(k.up, o.up)
}

func (k *fakeKernel) change() error {
	k.changes++
	if k.changes == k.failAt {
		return fmt.Errorf("injected failure at change %d", k.changes)
	}
	return nil
}

func (k *fakeKernel) ip(args ...string) (string, error) {
	a := strings.Join(args, " ")
	switch {
	case strings.HasSuffix(a, "-o rule show"):
		return k.rules[args[0]], nil
	case strings.HasPrefix(a, "-o link show dev "):
		dev := args[4]
		if _, ok := k.sysctl["net/ipv4/conf/"+dev+"/rp_filter"]; !ok {
			return "", fmt.Errorf("Device %q does not exist", dev)
		}
		if k.up[dev] {
			return "7: " + dev + ": <POINTOPOINT,MULTICAST,NOARP,UP,LOWER_UP> mtu 1500", nil
		}
		return "7: " + dev + ": <POINTOPOINT,MULTICAST,NOARP> mtu 1500", nil
	case strings.HasPrefix(a, "link set dev "):
		if err := k.change(); err != nil {
			return "", err
		}
		if args[4] == "up" {
			k.up[args[3]] = true
		} else {
			delete(k.up, args[3])
			k.undoCalls = append(k.undoCalls, a)
		}
		return "", nil
	}
	i := slices.IndexFunc(args, func(s string) bool { return s == "add" || s == "del" })
	if i < 0 {
		return "", fmt.Errorf("fake: unexpected ip %s", a)
	}
	if err := k.change(); err != nil {
		return "", err
	}
	key := strings.Join(slices.Delete(slices.Clone(args), i, i+1), " ")
	if args[i] == "add" {
		if k.objs[key] {
			return "", errors.New("RTNETLINK answers: File exists")
		}
		k.objs[key] = true
		return "", nil
	}
	k.undoCalls = append(k.undoCalls, a)
	if !k.objs[key] {
		return "", errors.Join(errGone, errors.New("RTNETLINK answers: No such process"))
	}
	delete(k.objs, key)
	return "", nil
}

func (k *fakeKernel) readSysctl(path string) (string, error) {
	v, ok := k.sysctl[path]
	if !ok {
		return "", fs.ErrNotExist
	}
	return v, nil
}

func (k *fakeKernel) writeSysctl(path, val string) error {
	if err := k.change(); err != nil {
		return err
	}
	if _, ok := k.sysctl[path]; !ok {
		return errors.Join(errGone, fs.ErrNotExist)
	}
	if path == k.failUndo && val != "0" && val != "1" {
		return errors.New("injected restore failure")
	}
	k.sysctl[path] = strings.TrimSpace(val) + "\n" // as the kernel shows it
	return nil
}

var testCfg = RoutingConfig{TetherIf: "tether0", UplinkIf: "uplink0", TUN: "tun0"}

func TestSetupRoutingDescribeAndUndo(t *testing.T) {
	k := newFakeKernel()
	before := k.clone()
	r, err := setupRouting(testCfg, k)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sysctl net.ipv4.ip_forward=1 (was 0)",
		"sysctl net.ipv6.conf.all.forwarding=1 (was 0)",
		"sysctl net.ipv4.conf.all.rp_filter=0 (was 2)",
		"sysctl net.ipv4.conf.default.rp_filter=0 (was 2)",
		"sysctl net.ipv4.conf.tun0.rp_filter=0 (was 2)",
		"sysctl net.ipv4.conf.tether0.rp_filter=0 (was 2)",
		"sysctl net.ipv4.conf.uplink0.rp_filter=0 (was 2)",
		"ip link set dev tun0 up",
		"ip -4 route add default dev tun0 table 100",
		"ip -6 route add default dev tun0 table 100",
		"ip -4 rule add pref 1000 iif tether0 lookup 100",
		"ip -4 rule add pref 1000 iif uplink0 lookup 100",
		"ip -6 rule add pref 1000 iif tether0 lookup 100",
		"ip -6 rule add pref 1000 iif uplink0 lookup 100",
	}
	if got := r.Describe(); !slices.Equal(got, want) {
		t.Errorf("Describe:\n got %q\nwant %q", got, want)
	}
	if len(k.objs) != 6 || !k.up["tun0"] || k.sysctl["net/ipv4/conf/tether0/rp_filter"] != "0\n" || k.sysctl["net/ipv4/ip_forward"] != "1\n" {
		t.Errorf("after setup: objs %v up %v sysctl %v", k.objs, k.up, k.sysctl)
	}
	if err := r.Undo(); err != nil {
		t.Fatal(err)
	}
	// Old values come back, and the link's state.
	if !k.same(before) {
		t.Errorf("after Undo: sysctl %v objs %v; want %v, none", k.sysctl, k.objs, before.sysctl)
	}
	// Rules go first, the link last, each mirroring its add.
	wantUndo := []string{
		"-6 rule del pref 1000 iif uplink0 lookup 100",
		"-6 rule del pref 1000 iif tether0 lookup 100",
		"-4 rule del pref 1000 iif uplink0 lookup 100",
		"-4 rule del pref 1000 iif tether0 lookup 100",
		"-6 route del default dev tun0 table 100",
		"-4 route del default dev tun0 table 100",
		"link set dev tun0 down",
	}
	if !slices.Equal(k.undoCalls, wantUndo) {
		t.Errorf("undo order:\n got %q\nwant %q", k.undoCalls, wantUndo)
	}
	n := k.changes
	if err := r.Undo(); err != nil || k.changes != n {
		t.Errorf("second Undo: %v, %d more changes", err, k.changes-n)
	}
}

// TestSetupRoutingRollsBack fails every change in turn: SetupRouting must
// return the error and leave the kernel as it found it.
func TestSetupRoutingRollsBack(t *testing.T) {
	total := func() int {
		k := newFakeKernel()
		if _, err := setupRouting(testCfg, k); err != nil {
			t.Fatal(err)
		}
		return k.changes
	}()
	if total != 14 {
		t.Fatalf("setup makes %d changes, want 14", total)
	}
	for n := 1; n <= total; n++ {
		k := newFakeKernel()
		before := k.clone()
		k.failAt = n
		r, err := setupRouting(testCfg, k)
		if err == nil || r != nil {
			t.Fatalf("failure at change %d: got %v, %v", n, r, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("injected failure at change %d", n)) {
			t.Errorf("failure at change %d: error %q does not carry the cause", n, err)
		}
		if !k.same(before) {
			t.Errorf("failure at change %d: left sysctl %v objs %v up %v", n, k.sysctl, k.objs, k.up)
		}
	}
}

func TestSetupRoutingTUNAlreadyUpStaysUp(t *testing.T) {
	k := newFakeKernel()
	k.up["tun0"] = true
	r, err := setupRouting(testCfg, k)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(r.Describe(), "ip link set dev tun0 up") {
		t.Error("brought up a TUN that was up")
	}
	if err := r.Undo(); err != nil {
		t.Fatal(err)
	}
	if !k.up["tun0"] {
		t.Error("Undo took down a TUN that was up before")
	}
}

func TestSetupRoutingRefusesExistingRule(t *testing.T) {
	k := newFakeKernel()
	k.rules["-6"] = "0:\tfrom all lookup local\n1000:\tfrom all iif uplink0 lookup 100\n32766:\tfrom all lookup main\n"
	before := k.clone()
	_, err := setupRouting(testCfg, k)
	if err == nil || !strings.Contains(err.Error(), "iif uplink0 exists already") {
		t.Fatalf("got %v, want a refusal naming the existing rule", err)
	}
	if k.changes != 0 || !k.same(before) {
		t.Errorf("made %d changes before refusing", k.changes)
	}
}

func TestSetupRoutingNoIPv6(t *testing.T) {
	k := newFakeKernel()
	cfg := testCfg
	cfg.NoIPv6, cfg.Table, cfg.RulePriority = true, 7, 5
	r, err := setupRouting(cfg, k)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Describe() {
		if strings.Contains(d, "-6") || strings.Contains(d, "ipv6") {
			t.Errorf("NoIPv6 but configured %q", d)
		}
	}
	if !k.objs["-4 rule pref 5 iif tether0 lookup 7"] || !k.objs["-4 route default dev tun0 table 7"] {
		t.Errorf("table/priority not used: %v", k.objs)
	}
}

// TestUndoAfterTUNGone: closing the TUN removes its routes and its sysctl
// directory; Undo treats those as reverted and restores the rest.
func TestUndoAfterTUNGone(t *testing.T) {
	k := newFakeKernel()
	r, err := setupRouting(testCfg, k)
	if err != nil {
		t.Fatal(err)
	}
	delete(k.objs, "-4 route default dev tun0 table 100")
	delete(k.objs, "-6 route default dev tun0 table 100")
	delete(k.sysctl, "net/ipv4/conf/tun0/rp_filter")
	if err := r.Undo(); err != nil {
		t.Fatalf("Undo after the TUN went away: %v", err)
	}
	if len(k.objs) != 0 || k.sysctl["net/ipv4/conf/all/rp_filter"] != "2\n" {
		t.Errorf("left objs %v sysctl %v", k.objs, k.sysctl)
	}
}

// TestUndoContinuesPastFailure: one failing restore is reported and the
// others still happen.
func TestUndoContinuesPastFailure(t *testing.T) {
	k := newFakeKernel()
	k.failUndo = "net/ipv4/conf/all/rp_filter"
	r, err := setupRouting(testCfg, k)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Undo()
	if err == nil || !strings.Contains(err.Error(), "net.ipv4.conf.all.rp_filter") {
		t.Fatalf("Undo: %v, want the failed restore named", err)
	}
	if len(k.objs) != 0 || k.sysctl["net/ipv4/ip_forward"] != "0\n" || k.sysctl["net/ipv4/conf/default/rp_filter"] != "2\n" {
		t.Errorf("Undo stopped at the failure: objs %v sysctl %v", k.objs, k.sysctl)
	}
}

func TestRoutingConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   RoutingConfig
		field string
	}{
		{"no tether", RoutingConfig{UplinkIf: "u", TUN: "t"}, "TetherIf"},
		{"long uplink", RoutingConfig{TetherIf: "a", UplinkIf: "abcdefghijklmnop", TUN: "t"}, "UplinkIf"},
		{"slash tun", RoutingConfig{TetherIf: "a", UplinkIf: "b", TUN: "x/y"}, "TUN"},
		{"same", RoutingConfig{TetherIf: "a", UplinkIf: "a", TUN: "t"}, "different"},
		{"main table", RoutingConfig{TetherIf: "a", UplinkIf: "b", TUN: "t", Table: 254}, "Table"},
		{"negative table", RoutingConfig{TetherIf: "a", UplinkIf: "b", TUN: "t", Table: -1}, "Table"},
		{"prio after main", RoutingConfig{TetherIf: "a", UplinkIf: "b", TUN: "t", RulePriority: 32766}, "RulePriority"},
	} {
		k := newFakeKernel()
		_, err := setupRouting(tc.cfg, k)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want an error naming %s", tc.name, err, tc.field)
		}
		if k.changes != 0 {
			t.Errorf("%s: %d changes before validation failed", tc.name, k.changes)
		}
	}
}

func TestDotted(t *testing.T) {
	for in, want := range map[string]string{
		"net/ipv4/ip_forward":            "net.ipv4.ip_forward",
		"net/ipv4/conf/eth0/rp_filter":   "net.ipv4.conf.eth0.rp_filter",
		"net/ipv4/conf/eth0.5/rp_filter": "net.ipv4.conf.eth0/5.rp_filter",
		"net/ipv6/conf/all/forwarding":   "net.ipv6.conf.all.forwarding",
	} {
		if got := dotted(in); got != want {
			t.Errorf("dotted(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSetupRoutingKeepsAFenceAfterIt: a blackhole rule for the interface
// after our preference (the bench's sealed emu hop) is no other instance;
// one before it, or a lookup rule anywhere, still is.
func TestSetupRoutingKeepsAFenceAfterIt(t *testing.T) {
	for _, tc := range []struct {
		rule string
		ok   bool
	}{
		{"30000:\tfrom all iif uplink0 blackhole", true},
		{"30000:\tfrom all iif tether0 prohibit", true},
		{"1001:\tfrom all iif uplink0 unreachable", true},
		{"999:\tfrom all iif uplink0 blackhole", false},
		{"1000:\tfrom all iif uplink0 blackhole", false},
		{"30000:\tfrom all iif uplink0 lookup 100", false},
	} {
		k := newFakeKernel()
		k.rules["-4"] = "0:\tfrom all lookup local\n" + tc.rule + "\n32766:\tfrom all lookup main\n"
		r, err := setupRouting(testCfg, k)
		if (err == nil) != tc.ok {
			t.Errorf("existing %q: err %v, want accepted %v", tc.rule, err, tc.ok)
		}
		if err == nil {
			r.Undo()
		}
	}
}
