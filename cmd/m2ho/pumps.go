package main

import (
	"context"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/proxy"
)

// pumps are the daemon's goroutines: the engine's packet path, the
// controller's tick and the servers (signalling socket, metrics). run
// starts them under one errgroup, so that the first to fail stops the
// others and shutdown waits for every one of them; only then does it save
// the ŝ_max database, once, last, when nothing can change it any more.
//
// Nothing slow runs under the engine's lock: the tick takes a snapshot of
// the database there (a copy of a few cells) and writes it (temporary
// file, fsync, rename) after releasing the lock, so a flush never stalls
// the packet path.
type pumps struct {
	eng *proxy.Engine
	// tick advances the controller's timers; it runs under the engine's
	// lock every tickEvery.
	tick      func(now time.Time)
	tickEvery time.Duration
	// afterTick, if set, runs after each tick without the lock (the
	// verdict log).
	afterTick func(now time.Time)
	db        *m2ho.SMaxDB
	// save writes a snapshot of db (nil: the database lives in memory
	// only). It is called without any lock held.
	save      func(m2ho.SMaxSnapshot) error
	saveEvery time.Duration // at most one periodic save per saveEvery
	// serve are the other pumps; each must return once its context is
	// done.
	serve []func(ctx context.Context) error
	log   *zap.Logger
}

func (p *pumps) run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.eng.Run(gctx) })
	g.Go(func() error { p.tickLoop(gctx); return nil })
	for _, s := range p.serve {
		g.Go(func() error { return s(gctx) })
	}
	err := g.Wait()
	if p.save != nil {
		p.store(p.db.Snapshot())
	}
	return err
}

// tickLoop runs the controller's timers (withdrawal, smoothing bound,
// signal loss) on a short tick while no packet brings the time along, and
// saves the database now and then when it changed.
func (p *pumps) tickLoop(ctx context.Context) {
	t := time.NewTicker(p.tickEvery)
	defer t.Stop()
	lastSave := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			var snap m2ho.SMaxSnapshot
			take := false
			p.eng.Do(func() {
				p.tick(now)
				if p.save != nil && p.db.Dirty() && now.Sub(lastSave) >= p.saveEvery {
					snap, take = p.db.Snapshot(), true
				}
			})
			if take {
				lastSave = now
				p.store(snap)
			}
			if p.afterTick != nil {
				p.afterTick(now)
			}
		}
	}
}

func (p *pumps) store(snap m2ho.SMaxSnapshot) {
	if err := p.save(snap); err != nil {
		p.log.Warn("saving the s_max database", zap.Error(err))
		return
	}
	p.db.Saved(snap)
}
