//go:build !linux

package netns

import (
	"fmt"
	"runtime"
)

// DoPath needs setns(2), which only Linux has.
func DoPath(nsPath string, fn func() error) error {
	return fmt.Errorf("netns: DoPath: network namespaces need Linux, this is %s", runtime.GOOS)
}

// NSInode needs Linux.
func NSInode() (uint64, error) {
	return 0, fmt.Errorf("netns: NSInode: network namespaces need Linux, this is %s", runtime.GOOS)
}

// PathInode needs Linux.
func PathInode(nsPath string) (uint64, error) {
	return 0, fmt.Errorf("netns: PathInode: network namespaces need Linux, this is %s", runtime.GOOS)
}
