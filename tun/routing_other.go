//go:build !linux

package tun

import (
	"fmt"
	"runtime"
)

// SetupRouting needs Linux policy routing; elsewhere it only validates cfg
// and reports that.
func SetupRouting(cfg RoutingConfig) (*Routing, error) {
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("tun: SetupRouting: policy routing is implemented for Linux only, this is %s", runtime.GOOS)
}
