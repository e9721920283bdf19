//go:build linux

package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// DoPath runs fn on a fresh goroutine whose OS thread has joined the network
// namespace pinned at nsPath (a /run/netns file or /proc/<pid>/ns/net), and
// waits for it.
//
// What fn creates there stays there: sockets, listeners and TUN devices
// opened inside fn belong to the namespace and may be used afterwards from
// any goroutine. Commands started with os/exec inside fn inherit the
// namespace, since the child is cloned from the calling thread. Goroutines
// that fn starts run on other threads, in the process's own namespace.
//
// After fn the thread rejoins its original namespace; if that fails the
// thread is left locked, so the runtime discards it rather than let another
// goroutine run in the wrong namespace.
func DoPath(nsPath string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: opening this thread's namespace: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: opening %s: %w", nsPath, err)
			return
		}
		err = unix.Setns(int(target.Fd()), unix.CLONE_NEWNET)
		target.Close()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: setns %s: %w", nsPath, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread dies with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("netns: returning from %s: %w (thread discarded)", nsPath, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// NSInode identifies the network namespace of the calling thread, to check
// which namespace code runs in.
func NSInode() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// PathInode identifies the network namespace pinned at nsPath.
func PathInode(nsPath string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(nsPath, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
