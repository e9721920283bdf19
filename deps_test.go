package m2ho_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/m2ho/m2ho"

// pure are the packages that compute and never do I/O (STYLE.md: pure
// cores on `now`): the M2HO controller and its estimators, the packet
// views, the signalling event model, the emulator's link model and the
// Wave pacer. Each may import
//   - the standard library minus denyStd (the packages that reach the
//     network, the file system, processes or the kernel, or bypass the type
//     system),
//   - other pure packages of this module,
//   - the third-party packages listed for it in pureThirdParty, whose own
//     standard-library imports are checked by the same rule.
//
// Direct imports are checked, not transitive ones: fmt and encoding/json
// import os themselves, but a package that only formats does no I/O, and
// every project package it imports is checked in turn.
var pure = []string{
	mod + "/m2ho",
	mod + "/m2ho/bwe",
	mod + "/m2ho/score",
	mod + "/proxy/packet",
	mod + "/proxy/wave", // the Wave pacer; checked once it exists
	mod + "/signaling",
	mod + "/bench/emu",
}

// denyStd is the standard library's I/O. A path ending in "/" denies the
// whole tree under it. net/netip is allowed (addresses are values).
var denyStd = []string{
	"net", "net/", "os", "os/", "syscall", "path/filepath", "io/ioutil",
	"log", "log/", "plugin", "unsafe", "runtime/cgo", "C",
}

var allowStd = []string{"net/netip"}

// pureThirdParty lists, per pure package, the modules' packages outside
// this module it may import.
var pureThirdParty = map[string][]string{
	mod + "/bench/emu": {"go.yaml.in/yaml/v3"}, // the scenario files
}

// pureExceptions are imports a pure package still has today, each to go.
// (signaling's net, os and path/filepath went with the socket server and
// file opening, now in signaling/sigio.)
var pureExceptions = map[string][]string{}

// noQUIC are the packages that must not reach QUIC, even transitively.
var noQUIC = []string{mod + "/m2ho", mod + "/proxy/packet", mod + "/proxy/wave"}

func isStd(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

func denied(p string) bool {
	if slices.Contains(allowStd, p) {
		return false
	}
	for _, d := range denyStd {
		if p == d || (strings.HasSuffix(d, "/") && strings.HasPrefix(p, d)) {
			return true
		}
	}
	return false
}

// goList runs `go list -e -f format pkgs...` and returns one line per
// package; missing packages are reported by the template's .Error.
func goList(t *testing.T, format string, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-e", "-f", format}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// existing drops the pure packages that do not exist (yet).
func existing(t *testing.T, pkgs []string) []string {
	var have []string
	for _, line := range goList(t, "{{.ImportPath}} {{if .Error}}missing{{else}}ok{{end}}", pkgs...) {
		p, status, _ := strings.Cut(line, " ")
		if status == "ok" {
			have = append(have, p)
		} else {
			t.Logf("%s does not exist yet: not checked", p)
		}
	}
	return have
}

func TestPurePackagesAllowList(t *testing.T) {
	pkgs := existing(t, pure)
	for _, line := range goList(t, "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", pkgs...) {
		f := strings.Fields(line)
		pkg, imports := f[0], f[1:]
		for _, imp := range imports {
			switch {
			case slices.Contains(pureExceptions[pkg], imp):
				// still to go; listed above
			case isStd(imp):
				if denied(imp) {
					t.Errorf("%s imports %s: pure packages do no I/O (the standard library minus %v)", pkg, imp, denyStd)
				}
			case imp == mod || strings.HasPrefix(imp, mod+"/"):
				if !slices.Contains(pure, imp) {
					t.Errorf("%s imports %s, which is not one of the pure packages", pkg, imp)
				}
			case slices.Contains(pureThirdParty[pkg], imp):
				for _, dep := range goList(t, "{{range .Imports}}{{.}}\n{{end}}", imp) {
					if isStd(dep) && denied(dep) {
						t.Errorf("%s imports %s, which imports %s", pkg, imp, dep)
					}
				}
			default:
				t.Errorf("%s imports %s, outside this module and not allowed for it", pkg, imp)
			}
		}
	}
	// An exception that is no longer needed must go from the list.
	for pkg, exc := range pureExceptions {
		imports := goList(t, "{{range .Imports}}{{.}}\n{{end}}", pkg)
		for _, e := range exc {
			if !slices.Contains(imports, e) {
				t.Errorf("%s no longer imports %s: drop it from pureExceptions", pkg, e)
			}
		}
	}
}

func TestNoQUICInTheCores(t *testing.T) {
	for _, pkg := range existing(t, noQUIC) {
		for _, dep := range goList(t, "{{range .Deps}}{{.}}\n{{end}}", pkg) {
			if strings.HasPrefix(dep, "github.com/quic-go/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// Dependencies point one way (STYLE.md): cmd → proxy, bench → m2ho,
// signaling → leaves. The pure cores must not reach the TUN, sockets of
// their own, QUIC or the command line.
func TestDependencyDirection(t *testing.T) {
	forbidden := map[string][]string{
		mod + "/m2ho":      {mod + "/tun", mod + "/proxy", mod + "/bench", "github.com/quic-go/", "github.com/spf13/cobra", "go.uber.org/zap", "net/http"},
		mod + "/m2ho/bwe":  {mod + "/signaling", mod + "/tun", mod + "/proxy"},
		mod + "/signaling": {mod + "/m2ho", mod + "/tun", mod + "/proxy", mod + "/bench"},
		mod + "/proxy":     {mod + "/bench", mod + "/cmd", "github.com/spf13/cobra"},
		mod + "/tun":       {mod + "/m2ho", mod + "/proxy", mod + "/bench"},
		mod + "/bench/emu": {mod + "/m2ho", mod + "/proxy", mod + "/tun", mod + "/bench/emu/driver", mod + "/bench/netns"},
		// the Wave pacer core: pure, on virtual time (its own test also
		// allow-lists its direct imports)
		mod + "/proxy/wave": {"github.com/quic-go/", "net", "os/exec", mod + "/tun", mod + "/m2ho", "go.uber.org/zap"},
		// The tunnel takes a packet device and hints, not the command line
		// nor the controller.
		mod + "/proxy/tunnel": {mod + "/bench", mod + "/cmd", "github.com/spf13/cobra", mod + "/m2ho"},
	}
	// allowed are the leaves under a forbidden prefix.
	// m2ho/bwe is the per-RTT delivery estimator, a pure leaf (no
	// controller, no signalling): the tunnel client measures its own
	// delivery rate with it for the executed hint's c_est.
	allowed := map[string]bool{mod + "/proxy/packet": true, mod + "/m2ho/bwe": true}
	for pkg, bad := range forbidden {
		for _, dep := range goList(t, "{{range .Deps}}{{.}}\n{{end}}", pkg) {
			if allowed[dep] {
				continue
			}
			for _, b := range bad {
				if dep == b || strings.HasPrefix(dep, strings.TrimSuffix(b, "/")+"/") || (strings.HasSuffix(b, "/") && strings.HasPrefix(dep, b)) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}

// TestDenyRule pins the rule itself, so that a typo in denyStd does not
// silently allow everything.
func TestDenyRule(t *testing.T) {
	for _, p := range []string{"net", "net/http", "os", "os/exec", "syscall", "path/filepath", "unsafe"} {
		if !denied(p) {
			t.Errorf("%s allowed", p)
		}
	}
	for _, p := range []string{"net/netip", "io", "io/fs", "embed", "fmt", "encoding/binary", "time", "math/rand/v2"} {
		if denied(p) {
			t.Errorf("%s denied", p)
		}
	}
	if isStd("golang.org/x/sys/unix") || !isStd("encoding/json") {
		t.Error("isStd")
	}
}
