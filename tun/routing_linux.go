//go:build linux

package tun

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SetupRouting makes the kernel of the current network namespace send all
// traffic arriving on cfg.TetherIf or cfg.UplinkIf into the TUN (DESIGN.md
// "Packet path"): ip_forward=1 (and IPv6 forwarding), rp_filter=0 on all,
// default, the TUN and both interfaces, a default route through the TUN in
// cfg.Table for both families, and "iif <if> lookup <table>" rules for both
// interfaces. Packets the proxy writes back to the TUN arrive with iif=TUN,
// match no rule, and leave through the main table.
//
// Every change is recorded with its undo; if a step fails, the steps before
// it are undone before the error is returned. Needs CAP_NET_ADMIN.
func SetupRouting(cfg RoutingConfig) (*Routing, error) {
	return setupRouting(cfg, linuxRouting{})
}

// linuxRouting changes the kernel through ip(8) and /proc/sys, in the
// network namespace of the calling thread.
type linuxRouting struct{}

func (linuxRouting) ip(args ...string) (string, error) {
	cmd := exec.Command("ip", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		err = fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, msg)
		if ipGone(args, msg) {
			err = errors.Join(errGone, err)
		}
		return stdout.String(), err
	}
	return stdout.String(), nil
}

// ipGone tells that a deletion failed only because its object is absent:
// a route whose device was removed, or a device that no longer exists.
func ipGone(args []string, msg string) bool {
	del := false
	for _, a := range args {
		del = del || a == "del" || a == "down"
	}
	return del && (strings.Contains(msg, "Cannot find device") || strings.Contains(msg, "No such process") ||
		strings.Contains(msg, "No such file or directory"))
}

func (linuxRouting) readSysctl(path string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc/sys", path))
	return string(b), err
}

func (linuxRouting) writeSysctl(path, val string) error {
	err := os.WriteFile(filepath.Join("/proc/sys", path), []byte(val), 0)
	if errors.Is(err, os.ErrNotExist) {
		// The interface directory vanished with its interface.
		return errors.Join(errGone, err)
	}
	return err
}
