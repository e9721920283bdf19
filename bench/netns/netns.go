// Package netns builds throw-away network topologies for real-kernel tests
// and benchmarks: network namespaces joined by veth pairs, configured with
// the ip(8) command. Every namespace a Topo makes is named
// <prefix>-<pid>-<counter>-<name>, so parallel tests never collide, and
// Cleanup can tell the leftovers of a crashed run (whose pid is gone) from
// the namespaces of a run still going.
//
// A Topo records each change it makes together with its undo; Close replays
// the undos in reverse order and keeps going past errors, so a topology that
// failed halfway is still removed completely.
//
// Code runs inside a namespace in two ways. Exec wraps a command in
// "ip netns exec" (for iperf3, ss, sysctl). DoPath / Topo.Do run a Go
// function on an OS thread that has joined the namespace (setns on a locked
// thread, restored afterwards): a test opens listeners, dials, or creates a
// TUN there and then uses the file descriptor from any goroutine, because
// sockets and TUN devices stay in the namespace they were made in. Commands
// started inside Do inherit its namespace as well.
//
// Typical use in a test:
//
//	if err := netns.Available(); err != nil {
//		t.Skip(err)
//	}
//	c, err := netns.NewChain("m2hot", false) // laptop <-> phone <-> server
//	...
//	defer c.Close()
//	c.Do(netns.Phone, func() error { ...open the TUN, tun.SetupRouting... })
package netns

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RunDir is where ip(8) keeps the bind mounts that name namespaces.
const RunDir = "/run/netns"

// maxIfName is IFNAMSIZ-1: the kernel rejects longer interface names.
const maxIfName = 15

// topoCounter makes names unique within one process.
var topoCounter atomic.Uint64

// Available reports why real-kernel topologies cannot be built here (not
// Linux, not root, no ip command), or nil when they can. Tests skip with
// its message.
func Available() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("network namespaces need Linux, this is %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("network namespaces need root, euid is %d", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("the ip command (iproute2) is missing: %w", err)
	}
	return nil
}

// Topo is one topology: a set of namespaces with links, routes and sysctls.
// Its methods are safe for concurrent use.
type Topo struct {
	prefix string
	base   string // prefix-pid-counter

	mu    sync.Mutex
	ns    map[string]string // logical name -> kernel namespace name
	undo  []undoStep
	close bool
}

type undoStep struct {
	what string
	args []string // ip arguments
}

// New starts an empty topology whose namespaces are named after prefix.
// The prefix must be a short word without '-' or '/', such as "m2ho".
func New(prefix string) *Topo {
	n := topoCounter.Add(1)
	return &Topo{
		prefix: prefix,
		base:   fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), n),
		ns:     map[string]string{},
	}
}

// NSName is the kernel name of the logical namespace name ("" if unknown),
// the name ip netns and /run/netns know it by.
func (t *Topo) NSName(name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ns[name]
}

// NSPath is the file that pins namespace name, for setns(2).
func (t *Topo) NSPath(name string) string {
	k := t.NSName(name)
	if k == "" {
		return ""
	}
	return filepath.Join(RunDir, k)
}

// Names lists the kernel names of the namespaces made so far, in creation order.
func (t *Topo) Names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, u := range t.undo {
		if len(u.args) == 3 && u.args[0] == "netns" && u.args[1] == "del" {
			out = append(out, u.args[2])
		}
	}
	return out
}

// AddNS creates the namespace name with its loopback up.
func (t *Topo) AddNS(name string) error {
	if name == "" || strings.ContainsAny(name, "/ \t\n") {
		return fmt.Errorf("netns: AddNS: bad namespace name %q", name)
	}
	t.mu.Lock()
	if t.close {
		t.mu.Unlock()
		return errors.New("netns: AddNS after Close")
	}
	if _, ok := t.ns[name]; ok {
		t.mu.Unlock()
		return fmt.Errorf("netns: AddNS: namespace %q already exists in this topology", name)
	}
	k := t.base + "-" + name
	t.mu.Unlock()

	if err := ip("netns", "add", k); err != nil {
		return err
	}
	t.mu.Lock()
	t.ns[name] = k
	t.undo = append(t.undo, undoStep{what: "namespace " + k, args: []string{"netns", "del", k}})
	t.mu.Unlock()
	if err := ip("-n", k, "link", "set", "lo", "up"); err != nil {
		return err
	}
	// Without this, each new interface's IPv6 link-local address stays
	// tentative for a second or two and neighbour discovery through a
	// router hop stalls until it is not.
	for _, key := range []string{"net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"} {
		if err := t.Sysctl(name, key, "0"); err != nil {
			return err
		}
	}
	return nil
}

func (t *Topo) kernelName(ns string) (string, error) {
	k := t.NSName(ns)
	if k == "" {
		return "", fmt.Errorf("netns: unknown namespace %q (call AddNS first)", ns)
	}
	return k, nil
}

// Link joins namespaces a and b with a veth pair: interface aIf in a with
// addresses aAddrs, bIf in b with bAddrs. Addresses are prefixes such as
// "10.77.1.1/24" or "fd77:1::1/64"; IPv6 ones skip duplicate address
// detection so they are usable at once. Both ends are brought up.
func (t *Topo) Link(a, aIf string, aAddrs []string, b, bIf string, bAddrs []string) error {
	ka, err := t.kernelName(a)
	if err != nil {
		return err
	}
	kb, err := t.kernelName(b)
	if err != nil {
		return err
	}
	for _, n := range []string{aIf, bIf} {
		if n == "" || len(n) > maxIfName || strings.ContainsAny(n, "/ \t\n:") {
			return fmt.Errorf("netns: Link: bad interface name %q (1-%d characters, no '/', ':' or space)", n, maxIfName)
		}
	}
	pa, err := parsePrefixes("Link aAddrs", aAddrs)
	if err != nil {
		return err
	}
	pb, err := parsePrefixes("Link bAddrs", bAddrs)
	if err != nil {
		return err
	}
	if err := ip("link", "add", aIf, "netns", ka, "type", "veth", "peer", "name", bIf, "netns", kb); err != nil {
		return err
	}
	// Deleting one end removes the pair.
	t.record("veth "+a+"/"+aIf+" <-> "+b+"/"+bIf, "-n", ka, "link", "del", aIf)
	for _, e := range []struct {
		k, ifn string
		addrs  []netip.Prefix
	}{{ka, aIf, pa}, {kb, bIf, pb}} {
		for _, p := range e.addrs {
			args := []string{"-n", e.k, "addr", "add", p.String(), "dev", e.ifn}
			if p.Addr().Is6() {
				args = append(args, "nodad")
			}
			if err := ip(args...); err != nil {
				return err
			}
		}
		if err := ip("-n", e.k, "link", "set", e.ifn, "up"); err != nil {
			return err
		}
	}
	for _, e := range []struct {
		k, ifn string
		addrs  []netip.Prefix
	}{{ka, aIf, pa}, {kb, bIf, pb}} {
		if err := waitReady(e.k, e.ifn, e.addrs); err != nil {
			return err
		}
	}
	return nil
}

// linkReadyTimeout bounds waitReady; the kernel usually needs under 1 s.
const linkReadyTimeout = 5 * time.Second

// waitReady waits until interface ifn in namespace k is operationally up
// and IPv6 has configured it (link-local address present and a route for
// each of its IPv6 prefixes). The kernel reports carrier through linkwatch,
// which batches events up to a second apart; until then IPv6 installs no
// prefix route and forwarded packets are dropped (Ip6InNoRoutes), so the
// first IPv6 connection through a fresh chain would lose its SYN and wait
// for the 1 s retransmission.
func waitReady(k, ifn string, addrs []netip.Prefix) error {
	deadline := time.Now().Add(linkReadyTimeout)
	var last string
	for {
		ok, why := linkReady(k, ifn, addrs)
		if ok {
			return nil
		}
		last = why
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: %s in %s not ready after %v: %s", ifn, k, linkReadyTimeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func linkReady(k, ifn string, addrs []netip.Prefix) (bool, string) {
	out, err := exec.Command("ip", "-n", k, "-o", "link", "show", "dev", ifn).CombinedOutput()
	if err != nil {
		return false, fmt.Sprintf("ip link show: %v: %s", err, bytes.TrimSpace(out))
	}
	if !bytes.Contains(out, []byte("state UP")) || bytes.Contains(out, []byte("NO-CARRIER")) {
		return false, "link not up: " + string(bytes.TrimSpace(out))
	}
	v6 := false
	for _, p := range addrs {
		v6 = v6 || p.Addr().Is6()
	}
	if !v6 {
		return true, ""
	}
	out, err = exec.Command("ip", "-n", k, "-6", "addr", "show", "dev", ifn, "scope", "link").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("inet6 fe80:")) {
		return false, "no IPv6 link-local address yet"
	}
	out, err = exec.Command("ip", "-n", k, "-6", "route", "show", "dev", ifn).CombinedOutput()
	if err != nil {
		return false, fmt.Sprintf("ip -6 route show: %v", err)
	}
	for _, p := range addrs {
		if p.Addr().Is6() && !bytes.Contains(out, []byte(p.Masked().String())) {
			return false, "no IPv6 route for " + p.Masked().String() + " yet"
		}
	}
	return true, ""
}

func parsePrefixes(field string, ss []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(ss))
	for i, s := range ss {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("netns: %s[%d]: %w", field, i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Route adds a route to dst ("default", "10.77.2.0/24", "fd77:2::/64") via
// the gateway via in namespace ns. The address family follows via.
func (t *Topo) Route(ns, dst, via string) error {
	k, err := t.kernelName(ns)
	if err != nil {
		return err
	}
	gw, err := netip.ParseAddr(via)
	if err != nil {
		return fmt.Errorf("netns: Route %s: via: %w", ns, err)
	}
	if dst != "default" {
		p, err := netip.ParsePrefix(dst)
		if err != nil {
			return fmt.Errorf("netns: Route %s: dst: %w", ns, err)
		}
		if p.Addr().Is6() != gw.Is6() {
			return fmt.Errorf("netns: Route %s: dst %s and via %s are of different families", ns, dst, via)
		}
	}
	fam := "-4"
	if gw.Is6() {
		fam = "-6"
	}
	// Routes die with the namespace: nothing to undo.
	return ip("-n", k, fam, "route", "add", dst, "via", gw.String())
}

// Sysctl sets key (dotted, "net.ipv4.ip_forward") to val inside ns. Only
// net.* keys are per namespace; others are refused, since writing them
// would change the host.
func (t *Topo) Sysctl(ns, key, val string) error {
	k, err := t.kernelName(ns)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(key, "net.") || strings.Contains(key, "..") || strings.Contains(key, "/") {
		return fmt.Errorf("netns: Sysctl %s: key %q is not a net.* key of the namespace", ns, key)
	}
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	// ip netns exec gives the writer the namespace's view of /proc/sys/net.
	cmd := exec.Command("ip", "netns", "exec", k, "sh", "-c", `printf '%s' "$1" > "$2"`, "sh", val, path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netns: sysctl %s=%s in %s: %v: %s", key, val, ns, err, bytes.TrimSpace(out))
	}
	return nil
}

// Exec prepares cmd to run inside namespace ns (through ip netns exec). An
// unknown namespace yields a command that fails when started.
func (t *Topo) Exec(ns string, cmd ...string) *exec.Cmd {
	k := t.NSName(ns)
	if k == "" {
		k = "unknown-namespace-" + ns
	}
	return exec.Command("ip", append([]string{"netns", "exec", k}, cmd...)...)
}

// Do runs fn on an OS thread that has joined namespace ns; see DoPath.
func (t *Topo) Do(ns string, fn func() error) error {
	p := t.NSPath(ns)
	if p == "" {
		return fmt.Errorf("netns: Do: unknown namespace %q", ns)
	}
	return DoPath(p, fn)
}

func (t *Topo) record(what string, args ...string) {
	t.mu.Lock()
	t.undo = append(t.undo, undoStep{what: what, args: args})
	t.mu.Unlock()
}

// Close removes everything the topology made, newest first, and reports
// every step that failed. Steps whose object is already gone (a veth
// removed with its peer's namespace) do not count as failures. Close is
// idempotent.
func (t *Topo) Close() error {
	t.mu.Lock()
	steps := t.undo
	t.undo = nil
	t.close = true
	t.mu.Unlock()
	var errs []error
	for i := len(steps) - 1; i >= 0; i-- {
		if err := ip(steps[i].args...); err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("removing %s: %w", steps[i].what, err))
		}
	}
	return errors.Join(errs...)
}

// isGone tells the errors ip prints when the object to delete is absent.
func isGone(err error) bool {
	s := err.Error()
	for _, m := range []string{"Cannot find device", "No such file or directory", "does not exist", "Cannot open network namespace"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// Cleanup removes namespaces named by prefix that earlier runs left behind:
// those whose creating process (the pid in the name) no longer exists.
// Namespaces of live processes, including this one, are kept. It returns the
// names it removed.
func Cleanup(prefix string) ([]string, error) {
	entries, err := os.ReadDir(RunDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		pid, ok := ownerPID(prefix, e.Name())
		if !ok || processAlive(pid) {
			continue
		}
		if err := ip("netns", "del", e.Name()); err != nil && !isGone(err) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// ownerPID parses <prefix>-<pid>-<counter>-<name>.
func ownerPID(prefix, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok {
		return 0, false
	}
	f := strings.SplitN(rest, "-", 3)
	if len(f) != 3 {
		return 0, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0, false
	}
	if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
		return 0, false
	}
	return pid, true
}

func processAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// ip runs ip(8) and returns an error naming the command and its stderr.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
