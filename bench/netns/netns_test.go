package netns

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testPrefix names every namespace these tests make; Cleanup removes those
// of crashed earlier runs.
const testPrefix = "m2hot"

func need(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	if _, err := Cleanup(testPrefix); err != nil {
		t.Logf("cleanup of stale namespaces: %v", err)
	}
}

// listNetns is ip netns list restricted to this process's namespaces:
// other test binaries (go test runs packages in parallel) make their own.
func listNetns(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	mine := fmt.Sprintf("%s-%d-", testPrefix, os.Getpid())
	var b strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, mine) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func newChain(t *testing.T, withEmu bool) *Chain {
	t.Helper()
	c, err := NewChain(testPrefix, withEmu)
	if err != nil {
		t.Fatalf("NewChain: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func TestOwnerPID(t *testing.T) {
	for _, tc := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"m2hot-123-4-phone", 123, true},
		{"m2hot-123-4-a-b", 123, true},
		{"m2hot-x-4-phone", 0, false},
		{"m2hot-123-y-phone", 0, false},
		{"m2hot-123-4", 0, false},
		{"m2hotx-123-4-phone", 0, false},
		{"other-123-4-phone", 0, false},
		{"m2hot-0-4-phone", 0, false},
		{"m2hot--4-phone", 0, false},
	} {
		pid, ok := ownerPID(testPrefix, tc.name)
		if pid != tc.pid || ok != tc.ok {
			t.Errorf("ownerPID(%q) = %d, %v; want %d, %v", tc.name, pid, ok, tc.pid, tc.ok)
		}
	}
}

func TestChainPingAndClose(t *testing.T) {
	need(t)
	for _, withEmu := range []bool{false, true} {
		before := listNetns(t)
		c, err := NewChain(testPrefix, withEmu)
		if err != nil {
			t.Fatalf("NewChain(emu=%v): %v", withEmu, err)
		}
		names := c.Names()
		want := 3
		if withEmu {
			want = 4
		}
		if len(names) != want {
			t.Errorf("emu=%v: %d namespaces %v, want %d", withEmu, len(names), names, want)
		}
		for _, dst := range []netip.Addr{c.ServerAddr4, c.ServerAddr6} {
			if err := hello(c, dst); err != nil {
				t.Errorf("emu=%v: laptop -> server %s: %v", withEmu, dst, err)
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		after := listNetns(t)
		for _, n := range names {
			if strings.Contains(after, n) {
				t.Errorf("namespace %s left after Close:\n%s", n, after)
			}
		}
		if before != after {
			t.Errorf("ip netns list differs:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	}
}

// TestCloseAfterPartialFailure makes Link fail halfway (after the veth
// exists) and checks Close still removes all.
func TestCloseAfterPartialFailure(t *testing.T) {
	need(t)
	topo := New(testPrefix)
	if err := topo.AddNS("a"); err != nil {
		t.Fatal(err)
	}
	if err := topo.AddNS("b"); err != nil {
		t.Fatal(err)
	}
	// The same address twice on one interface: ip fails on the second.
	err := topo.Link("a", "x0", []string{"10.77.9.1/24", "10.77.9.1/24"}, "b", "y0", nil)
	if err == nil {
		t.Fatal("Link with a duplicate address succeeded")
	}
	if err := topo.Link("a", "x1", nil, "nope", "y1", nil); err == nil {
		t.Fatal("Link to an unknown namespace succeeded")
	}
	if err := topo.Link("a", "waytoolonginterface", nil, "b", "y1", nil); err == nil {
		t.Fatal("Link with a 19-character interface name succeeded")
	}
	if err := topo.Link("a", "x2", []string{"10.77.9.300/24"}, "b", "y2", nil); err == nil || !strings.Contains(err.Error(), "aAddrs[0]") {
		t.Fatalf("bad address: got %v, want an error naming aAddrs[0]", err)
	}
	names := topo.Names()
	if err := topo.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	after := listNetns(t)
	for _, n := range names {
		if strings.Contains(after, n) {
			t.Errorf("namespace %s left after Close", n)
		}
	}
	if err := topo.AddNS("c"); err == nil {
		t.Error("AddNS after Close succeeded")
	}
}

func TestSysctlRefusesHostKeys(t *testing.T) {
	need(t)
	topo := New(testPrefix)
	defer topo.Close()
	if err := topo.AddNS("a"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"kernel.hostname", "net/../kernel/hostname", "net.ipv4..x"} {
		if err := topo.Sysctl("a", k, "x"); err == nil {
			t.Errorf("Sysctl(%q) succeeded", k)
		}
	}
	if err := topo.Sysctl("a", "net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	out, err := topo.Exec("a", "cat", "/proc/sys/net/ipv4/ip_forward").Output()
	if err != nil || string(bytes.TrimSpace(out)) != "1" {
		t.Errorf("ip_forward in namespace = %q, %v; want 1", out, err)
	}
}

// TestCleanupRemovesStale fakes a crashed run (a namespace named after a pid
// that does not exist) and a live one (this process): Cleanup removes only
// the first.
func TestCleanupRemovesStale(t *testing.T) {
	need(t)
	// pid_max is at most 2^22; this pid cannot exist.
	stale := testPrefix + "-99999999-1-phone"
	if out, err := exec.Command("ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	live := New(testPrefix)
	defer live.Close()
	if err := live.AddNS("x"); err != nil {
		t.Fatal(err)
	}
	removed, err := Cleanup(testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	// Another test binary's Cleanup may have raced us to the stale one;
	// either way it must be gone and nothing live may have been removed.
	for _, r := range removed {
		if pid, _ := ownerPID(testPrefix, r); processAlive(pid) {
			t.Errorf("Cleanup removed %s of live pid %d", r, pid)
		}
	}
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), stale) {
		t.Errorf("stale %s still listed", stale)
	}
	if !strings.Contains(string(out), live.NSName("x")) {
		t.Errorf("live %s was removed", live.NSName("x"))
	}
}

// TestDoJoinsNamespace checks that code in Do, and commands it starts, run
// in the namespace, that the thread comes back, and that a listener opened
// in Do stays in the namespace.
func TestDoJoinsNamespace(t *testing.T) {
	need(t)
	c := newChain(t, false)
	host, err := NSInode()
	if err != nil {
		t.Fatal(err)
	}
	want, err := PathInode(c.NSPath(Server))
	if err != nil {
		t.Fatal(err)
	}
	if want == host {
		t.Fatal("server namespace has the host's inode")
	}
	var got uint64
	var childNS string
	var ln net.Listener
	err = c.Do(Server, func() error {
		var err error
		if got, err = NSInode(); err != nil {
			return err
		}
		out, err := exec.Command("readlink", "/proc/self/ns/net").Output()
		childNS = strings.TrimSpace(string(out))
		if err != nil {
			return err
		}
		ln, err = net.Listen("tcp", net.JoinHostPort(c.ServerAddr4.String(), "0"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got != want {
		t.Errorf("inside Do: namespace inode %d, want %d", got, want)
	}
	if wantS := "net:[" + strconv.FormatUint(want, 10) + "]"; childNS != wantS {
		t.Errorf("command started in Do runs in %s, want %s", childNS, wantS)
	}
	// The server address exists only in the server namespace, so Listen
	// succeeding proved the socket is there; the host cannot reach it.
	if conn, err := net.DialTimeout("tcp", ln.Addr().String(), 200*time.Millisecond); err == nil {
		conn.Close()
		t.Errorf("host reached %s, which should exist only inside the chain", ln.Addr())
	}
	// Many Do calls must leave no thread behind in a namespace.
	for i := 0; i < 50; i++ {
		if err := c.Do(Phone, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		if now, _ := NSInode(); now != host {
			t.Fatalf("after Do, this goroutine's thread is in namespace %d, host is %d", now, host)
		}
	}
	if err := c.Do("nope", func() error { return nil }); err == nil {
		t.Error("Do in an unknown namespace succeeded")
	}
}

// hello opens a TCP connection from the laptop to a listener on dst in the
// server namespace and reads a greeting through it.
func hello(c *Chain, dst netip.Addr) error {
	var ln net.Listener
	err := c.Do(Server, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(dst, 0).String())
		return err
	})
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			conn.Write([]byte("hello"))
			conn.Close()
		}
	}()
	var msg []byte
	err = c.Do(Laptop, func() error {
		conn, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		msg, err = io.ReadAll(conn)
		return err
	})
	if err != nil {
		return err
	}
	if string(msg) != "hello" {
		return fmt.Errorf("read %q, want hello", msg)
	}
	return nil
}

// TestSealEmu: once sealed, the emu hop forwards nothing by itself (no
// emulator runs here, so nothing may pass), in both directions and both
// families; a chain without the hop refuses the seal.
func TestSealEmu(t *testing.T) {
	need(t)
	if err := newChain(t, false).SealEmu(); err == nil {
		t.Error("SealEmu on a chain without an emu hop: no error")
	}
	c := newChain(t, true)
	if err := hello(c, c.ServerAddr4); err != nil {
		t.Fatalf("before the seal: %v", err)
	}
	if err := c.SealEmu(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from string
		dst  netip.Addr
	}{{Laptop, c.ServerAddr4}, {Laptop, c.ServerAddr6}, {Server, c.LaptopAddr4}, {Server, c.LaptopAddr6}} {
		err := c.Do(tc.from, func() error {
			conn, err := net.DialTimeout("tcp", netip.AddrPortFrom(tc.dst, 9).String(), 300*time.Millisecond)
			if err == nil {
				conn.Close()
			}
			return err
		})
		// A refused connection would mean the SYN reached the other end.
		if err == nil || !os.IsTimeout(err) {
			t.Errorf("%s -> %s through the sealed hop: %v, want a timeout", tc.from, tc.dst, err)
		}
	}
}
