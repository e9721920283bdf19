package m2ho_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Dependencies point one way (STYLE.md): cmd → proxy, bench → m2ho,
// signaling → leaves. The pure cores must not reach the TUN, sockets of
// their own, QUIC or the command line.
func TestDependencyDirection(t *testing.T) {
	forbidden := map[string][]string{
		"github.com/m2ho/m2ho/m2ho":      {"github.com/m2ho/m2ho/tun", "github.com/m2ho/m2ho/proxy", "github.com/m2ho/m2ho/bench", "github.com/quic-go/", "github.com/spf13/cobra", "go.uber.org/zap", "net/http"},
		"github.com/m2ho/m2ho/m2ho/bwe":  {"github.com/m2ho/m2ho/signaling", "github.com/m2ho/m2ho/tun", "github.com/m2ho/m2ho/proxy"},
		"github.com/m2ho/m2ho/signaling": {"github.com/m2ho/m2ho/m2ho", "github.com/m2ho/m2ho/tun", "github.com/m2ho/m2ho/proxy", "github.com/m2ho/m2ho/bench"},
		"github.com/m2ho/m2ho/proxy":     {"github.com/m2ho/m2ho/bench", "github.com/m2ho/m2ho/cmd", "github.com/spf13/cobra"},
		// The tunnel takes a packet device and hints, not the command line.
		// TODO: once the packet view moves to proxy/packet and the tunnel
		// imports that instead of proxy, also forbid m2ho and tun here.
		"github.com/m2ho/m2ho/proxy/tunnel": {"github.com/m2ho/m2ho/bench", "github.com/m2ho/m2ho/cmd", "github.com/spf13/cobra"},
		"github.com/m2ho/m2ho/tun":          {"github.com/m2ho/m2ho/m2ho", "github.com/m2ho/m2ho/proxy", "github.com/m2ho/m2ho/bench"},
		"github.com/m2ho/m2ho/bench/emu":    {"github.com/m2ho/m2ho/m2ho", "github.com/m2ho/m2ho/proxy"},
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range bad {
				if dep == b || strings.HasPrefix(dep, strings.TrimSuffix(b, "/")+"/") || (strings.HasSuffix(b, "/") && strings.HasPrefix(dep, b)) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
