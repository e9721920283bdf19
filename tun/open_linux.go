//go:build linux

package tun

import (
	"errors"
	"fmt"
)

// Open creates the kernel TUN device cfg.Offload asks for and says which
// one it opened, and why, in a sentence for the start-up log. With
// OffloadAuto it tries the offload device first and falls back to water
// where the kernel refuses it; with OffloadOn that refusal is the error.
func Open(cfg Config) (Device, string, error) {
	if cfg.Offload > OffloadOff {
		return nil, "", fmt.Errorf("tun: offload mode %d: want auto, on or off", cfg.Offload)
	}
	if cfg.Offload != OffloadOff {
		d, err := OpenOffload(OffloadConfig{Name: cfg.Name, MTU: cfg.MTU})
		if err == nil {
			return d, fmt.Sprintf("offload device (wireguard-go tun: %s; batch %d)", d.Offloads(), d.BatchSize()), nil
		}
		if cfg.Offload == OffloadOn {
			return nil, "", fmt.Errorf("%w (--tun-offload on; use auto to fall back to water)", err)
		}
		w, werr := OpenLinux(LinuxConfig{Name: cfg.Name, MTU: cfg.MTU, BatchSize: cfg.BatchSize})
		if werr != nil {
			return nil, "", errors.Join(err, werr)
		}
		return w, fmt.Sprintf("water (one packet per system call): the offload device failed: %v", err), nil
	}
	w, err := OpenLinux(LinuxConfig{Name: cfg.Name, MTU: cfg.MTU, BatchSize: cfg.BatchSize})
	if err != nil {
		return nil, "", err
	}
	return w, "water (one packet per system call): offloads off", nil
}
