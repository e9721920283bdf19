package main

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/proxy"
	"github.com/m2ho/m2ho/proxy/packettest"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/tun"
)

// A periodic save that blocks (a slow disk) does not hold the engine's
// lock: packets still flow through the engine while it is stuck. The
// final save happens once, after every pump (the tick included) has
// stopped, and run returns only after it.
func TestPumpsSaveOutsideTheLockAndLast(t *testing.T) {
	dev := tun.NewChannelTUN(1500, 8)
	eng := proxy.NewEngine(proxy.EngineConfig{
		TetherPrefixes: []netip.Prefix{netip.MustParsePrefix("192.168.42.0/24")},
	}, dev, nil, zap.NewNop())
	db := m2ho.NewSMaxDB()
	db.Observe(signaling.Cell{Type: signaling.CellSub6, ID: "a"}, 100_000)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		ticks       atomic.Int64
		inTick      atomic.Bool
		armed       atomic.Bool
		tickRunning = make(chan struct{})
		serveDone   atomic.Bool
		mu          sync.Mutex
		saves       []string // "periodic" or "final", with what the save saw
	)
	entered, release := make(chan struct{}), make(chan struct{})
	ps := &pumps{
		eng:       eng,
		tickEvery: time.Millisecond,
		tick: func(time.Time) {
			ticks.Add(1)
			if armed.CompareAndSwap(true, false) {
				// A tick still running when the stop comes: a final save
				// that does not wait for the tick sees it.
				inTick.Store(true)
				close(tickRunning)
				time.Sleep(20 * time.Millisecond)
				inTick.Store(false)
			}
		},
		db:        db,
		saveEvery: 0,
		serve: []func(context.Context) error{func(ctx context.Context) error {
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond) // a server slow to close
			serveDone.Store(true)
			return nil
		}},
		log: zap.NewNop(),
	}
	ps.save = func(snap m2ho.SMaxSnapshot) error {
		if ctx.Err() == nil {
			mu.Lock()
			saves = append(saves, "periodic")
			first := len(saves) == 1
			mu.Unlock()
			if first {
				close(entered)
				<-release
			}
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if inTick.Load() || !serveDone.Load() {
			saves = append(saves, "final while a pump ran")
		} else {
			saves = append(saves, "final")
		}
		if snap.Len() != 1 {
			t.Errorf("final snapshot has %d cells, want 1", snap.Len())
		}
		return nil
	}
	runErr := make(chan error, 1)
	go func() { runErr <- ps.run(ctx) }()

	<-entered // the first periodic save is stuck on the disk
	pkt := packettest.TCP{Src: netip.MustParseAddrPort("192.168.42.10:4000"), Dst: netip.MustParseAddrPort("10.0.0.1:80"),
		Flags: packettest.ACK, Window: 1000}.Build()
	for i := range 3 {
		dev.Inbound <- pkt
		select {
		case <-dev.Outbound:
		case <-time.After(10 * time.Second):
			t.Fatalf("packet %d did not pass the engine while the database was being saved: the save holds the packet path's lock", i+1)
		}
	}
	if s := eng.Stats(); s.Uplink.Packets != 3 {
		t.Errorf("engine counted %d uplink packets, want 3", s.Uplink.Packets)
	}
	close(release)

	armed.Store(true)
	<-tickRunning // stop while a tick runs
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the stop")
	}
	n := ticks.Load()
	time.Sleep(5 * time.Millisecond)
	if ticks.Load() != n {
		t.Error("the tick goroutine still runs after run returned")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(saves) < 2 || saves[len(saves)-1] != "final" {
		t.Fatalf("saves %v: want periodic ones, then one final save after every pump stopped", saves)
	}
	for _, s := range saves[:len(saves)-1] {
		if s != "periodic" {
			t.Errorf("saves %v: more than one final save", saves)
		}
	}
	// The periodic save marked the database clean: no further periodic
	// saves without a change.
	if len(saves) != 2 {
		t.Errorf("saves %v: the database was unchanged after the first save, want exactly periodic+final", saves)
	}
}
