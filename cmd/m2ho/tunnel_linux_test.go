//go:build linux

package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/m2ho/m2ho/bench/netns"
	"github.com/m2ho/m2ho/proxy/tunnel"
	"github.com/m2ho/m2ho/tun"
)

// TestTunnelKernelTransferWithMigration runs `m2ho server` in a server
// namespace and a tunnel.Client with its own TUN in a phone namespace, and
// carries a real kernel TCP connection through the tunnel both ways,
// sha256-checked, moving the client's uplink from 10.9.0.1 to 10.9.0.3
// mid-transfer (QUIC connection migration). The client side is wired here
// by hand (TUN <-> Client pumps) as the phone daemon's route seam will do.
func TestTunnelKernelTransferWithMigration(t *testing.T) {
	needKernel(t)
	if raceEnabled {
		t.Skip(quicMigrationRace)
	}
	bin := m2hoBinary(t)
	topo := netns.New("m2hotun")
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Errorf("removing the namespaces: %v", err)
		}
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(topo.AddNS("phone"))
	must(topo.AddNS("server"))
	must(topo.Link("phone", "up0", []string{"10.9.0.1/24", "10.9.0.3/24"}, "server", "srv0", []string{"10.9.0.2/24"}))
	run := nsRun(t, topo)
	// The host behind the server: an address on the server's loopback,
	// inside the only route the server forwards to.
	run("server", "ip", "addr", "add", "198.51.100.1/32", "dev", "lo")

	fwd, err := topo.Exec("server", "cat", "/proc/sys/net/ipv4/ip_forward").Output()
	must(err)
	fwdBefore := strings.TrimSpace(string(fwd))

	pki := t.TempDir()
	must(newKeysCmdRun(t, pki))
	srv := topo.Exec("server", bin, "server", "--listen", "10.9.0.2:4433",
		"--cert", filepath.Join(pki, "server.crt"), "--key", filepath.Join(pki, "server.key"),
		"--client-ca", filepath.Join(pki, "ca.crt"), "--inner-prefix", "10.77.0.0/24",
		"--route", "198.51.100.0/24", "--metrics-addr", "", "--log-level", "warn")
	stdout, err := srv.StdoutPipe()
	must(err)
	var stderr strings.Builder
	srv.Stderr = &stderr
	must(srv.Start())
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var srvOut []string
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		srv.Process.Signal(syscall.SIGTERM)
		for l := range lines {
			srvOut = append(srvOut, l)
		}
		if err := srv.Wait(); err != nil {
			t.Errorf("m2ho server: %v\n%s\n%s", err, strings.Join(srvOut, "\n"), stderr.String())
		}
	}
	t.Cleanup(stop)
	for l := range lines {
		srvOut = append(srvOut, l)
		if strings.Contains(l, "listening on") {
			break
		}
	}

	// The phone: the client, then a TUN with the assigned address and the
	// advertised routes.
	var c *tunnel.Client
	var dev *tun.Linux
	must(topo.Do("phone", func() error {
		pool, err := tunnel.LoadCertPool(filepath.Join(pki, "ca.crt"))
		if err != nil {
			return err
		}
		crt, err := loadPair(filepath.Join(pki, "phone-1"))
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err = tunnel.Dial(ctx, tunnel.ClientConfig{Server: "10.9.0.2:4433", ServerName: "localhost",
			RootCAs: pool, Certificate: crt, LocalAddr: "10.9.0.1:0", Log: zaptest.NewLogger(t)})
		if err != nil {
			return err
		}
		dev, err = tun.OpenLinux(tun.LinuxConfig{Name: "m2hoc0", MTU: c.MTU()})
		return err
	}))
	t.Cleanup(func() { c.Close(); dev.Close() })
	if got := c.Addresses()[0].String(); got != "10.77.0.2/32" {
		t.Fatalf("assigned %s", got)
	}
	run("phone", "ip", "addr", "add", c.Addresses()[0].String(), "dev", "m2hoc0")
	run("phone", "ip", "link", "set", "m2hoc0", "up")
	for _, r := range c.Routes() {
		run("phone", "ip", "route", "add", r.String(), "dev", "m2hoc0", "src", c.Addresses()[0].Addr().String())
	}
	go pumpTUNToTunnel(dev, c)
	go pumpTunnelToTUN(c, dev)

	// A real TCP connection from the phone's kernel to 198.51.100.1.
	var ln net.Listener
	must(topo.Do("server", func() (err error) { ln, err = net.Listen("tcp", "198.51.100.1:5201"); return }))
	defer ln.Close()
	const size = 6 << 20
	upData, downData := randomBytes(size, 1), randomBytes(size, 2)
	serverGot := make(chan [32]byte, 1)
	serverErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer conn.Close()
		wrote := make(chan error, 1)
		go func() { _, err := conn.Write(downData); wrote <- err }()
		h := sha256.New()
		_, err = io.CopyN(h, conn, size)
		var d [32]byte
		copy(d[:], h.Sum(nil))
		serverGot <- d
		// Close only once the download is written too.
		serverErr <- errors.Join(err, <-wrote)
	}()
	var conn net.Conn
	must(topo.Do("phone", func() (err error) {
		conn, err = (&net.Dialer{Timeout: 30 * time.Second}).Dial("tcp", "198.51.100.1:5201")
		return
	}))
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Minute))
	downGot := make(chan [32]byte, 1)
	downErr := make(chan error, 1)
	go func() {
		h := sha256.New()
		n, err := io.CopyN(h, conn, size)
		if err != nil {
			err = fmt.Errorf("download: %d of %d bytes: %w", n, size, err)
		}
		downErr <- err
		var d [32]byte
		copy(d[:], h.Sum(nil))
		downGot <- d
	}()
	start := time.Now()
	// Upload the first half, migrate the uplink, upload the rest.
	if _, err := conn.Write(upData[:size/2]); err != nil {
		t.Fatal(err)
	}
	must(topo.Do("phone", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return c.Migrate(ctx, "10.9.0.3:0")
	}))
	if _, err := conn.Write(upData[size/2:]); err != nil {
		t.Fatal(err)
	}
	if got, want := <-serverGot, sha256.Sum256(upData); got != want {
		t.Fatalf("upload: sha256 %x at the server, want %x", got, want)
	}
	if err := <-downErr; err != nil {
		t.Fatal(err)
	}
	if got, want := <-downGot, sha256.Sum256(downData); got != want {
		t.Fatalf("download: sha256 %x at the phone, want %x", got, want)
	}
	if err := <-serverErr; err != nil {
		t.Fatal(err)
	}
	// Indicative only: a loaded, shared machine and the water TUN.
	t.Logf("%d MiB each way in %v (both directions at once, one migration)", size>>20, time.Since(start).Round(time.Millisecond))
	if ip := c.LocalAddr().(*net.UDPAddr).IP.String(); ip != "10.9.0.3" {
		t.Fatalf("uplink address %s after the migration, want 10.9.0.3", ip)
	}
	st := c.Stats()
	t.Logf("client: %+v; tunnel RTT %v", st, c.ConnectionStats().SmoothedRTT)
	if st.Migrations != 1 || st.PacketsUp == 0 || st.PacketsDown == 0 {
		t.Fatalf("client stats %+v", st)
	}
	conn.Close()
	c.Close()
	stop()
	out := strings.Join(srvOut, "\n")
	for _, want := range []string{"TUN m2hos0 (mtu 1280) with [10.77.0.1/24]", "ip_forward=1", "server stopped: 1 connection(s), 1 session(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("server output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(linkList(t, topo.NSName("server")), "m2hos0") {
		t.Error("m2ho server left its TUN behind")
	}
	if b, err := topo.Exec("server", "cat", "/proc/sys/net/ipv4/ip_forward").Output(); err != nil || strings.TrimSpace(string(b)) != fwdBefore {
		t.Errorf("ip_forward in the server namespace is %q after exit, was %q (%v)", b, fwdBefore, err)
	}
}

func linkList(t *testing.T, ns string) string { return strings.Join(linkNames(t, ns), ",") }

func loadPair(base string) (tlsCert, error) { return loadX509(base+".crt", base+".key") }

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// pumpTUNToTunnel and pumpTunnelToTUN are the phone side's two loops.
func pumpTUNToTunnel(dev *tun.Linux, c *tunnel.Client) {
	bufs := make([][]byte, dev.BatchSize())
	sizes := make([]int, len(bufs))
	for i := range bufs {
		bufs[i] = make([]byte, 65535)
	}
	pkts := make([][]byte, len(bufs))
	for {
		n, err := dev.Read(bufs, sizes, 0)
		if err != nil {
			return
		}
		for i := range n {
			pkts[i] = bufs[i][:sizes[i]]
		}
		if _, err := c.Write(pkts[:n], 0); err != nil {
			return
		}
	}
}

func pumpTunnelToTUN(c *tunnel.Client, dev *tun.Linux) {
	bufs := make([][]byte, c.BatchSize())
	sizes := make([]int, len(bufs))
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	pkts := make([][]byte, len(bufs))
	for {
		n, err := c.Read(bufs, sizes, 0)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				fmt.Println("tunnel read:", err)
			}
			return
		}
		for i := range n {
			pkts[i] = bufs[i][:sizes[i]]
		}
		if _, err := dev.Write(pkts[:n], 0); err != nil {
			return
		}
	}
}

type tlsCert = tls.Certificate

func loadX509(crt, key string) (tls.Certificate, error) { return tls.LoadX509KeyPair(crt, key) }
