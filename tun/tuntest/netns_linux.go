// Package tuntest holds helpers for the real-kernel tests of the packages
// that open TUN devices (tun, proxy).
package tuntest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// EnterNetns makes a fresh named network namespace (prefix-pid), moves the
// calling goroutine's thread into it and returns its name; the namespace is
// deleted when the test ends. The thread stays locked and is discarded by
// the runtime when the test goroutine ends, so no other goroutine ever runs
// in the namespace. It skips, saying why, without root or iproute2.
func EnterNetns(t testing.TB, prefix string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN) to create TUN devices and a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip command:", err)
	}
	name := fmt.Sprintf("%s-%d", prefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
	f, err := os.Open("/var/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatalf("setns %s: %v", name, err)
	}
	return name
}
