// Package driver runs the emulator's pure link model (bench/emu) in real
// time: it reads every packet crossing the emulated link from one TUN
// device, steps the model on the wall clock, writes the deliveries back,
// publishes the signalling events to the proxy's socket and writes the
// output files. It also loads scenarios and traces from the file system.
package driver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/sigio"
	"github.com/m2ho/m2ho/tun"

	"github.com/m2ho/m2ho/bench/emu"
)

// packetIO is what the driver needs from its packet device: one TUN that
// every packet crossing the emulator enters (tun.SetupRouting with the
// phone-side and server-side interfaces), read in batches without blocking,
// written in batches, and waited on with a precise deadline. The same
// device carries both directions.
type packetIO interface {
	// wait blocks until a packet may be readable or deadline passes.
	wait(deadline time.Time) error
	// readBatch reads, without blocking, up to len(bufs) packets into
	// bufs[i][offset:] (sizes in sizes); 0, nil when none is waiting. A
	// packet it cannot deliver is an error matching tun.IsPacketError.
	readBatch(bufs [][]byte, sizes []int, offset int) (int, error)
	// writeBatch sends each bufs[i][offset:] (tun.Device's Write: on an
	// error, n packets were written and the one at n failed).
	writeBatch(bufs [][]byte, offset int) (int, error)
	// layout and batch are the device's tun.LayoutOf and BatchSize.
	layout() tun.Layout
	batch() int
}

// DriverConfig says what to run and where the results go.
type DriverConfig struct {
	Scenario *emu.Scenario // resolved, already Scaled
	Seed     uint64        // 0 = the scenario's
	Duration time.Duration
	// UENets are the UE-side prefixes (packets to them are downlink).
	UENets []netip.Prefix
	// SignalSocket is the proxy's signalling socket ("" = none).
	SignalSocket string
	// OutDir receives events.jsonl, mm-down.log, mm-up.log while running,
	// and the other outputs at the end (WriteOutputs).
	OutDir string
	// LateThreshold: a delivery written more than this after its Due is
	// late (default 1 ms). InvalidLatePct: a run with more late deliveries
	// than this percentage is invalid (default 1).
	LateThreshold  time.Duration
	InvalidLatePct float64
	// Progress, if set, is called about every second from the packet loop.
	Progress func(Progress)
	// SignalQueue bounds the events waiting for the socket (default 8192).
	SignalQueue int
	// RTPriority, when > 0, runs the emulator's threads (the packet
	// loop's and the Go runtime's, which hand the loop back after a
	// preemption) SCHED_FIFO at this priority (1-99, needs root), so that
	// other processes on a busy machine do not delay deliveries; the loop
	// sleeps in ppoll between deadlines, so it does not starve them.
	RTPriority int
}

// Progress is a snapshot of a running emulation.
type Progress struct {
	Elapsed, Duration time.Duration
	Serving           signaling.Cell
	Handovers         int64
	DownMbps          float64 // delivered downlink rate over the last interval
	LatePct           float64
}

// Result is a finished run.
type Result struct {
	Summary     emu.Summary
	Counters    emu.Counters
	Handovers   []emu.HandoverRecord
	FalseAlarms []emu.FalseAlarmRecord
	Capacity    []emu.CapacityBin
	Ignored     int64 // packets the link does not carry (multicast, link-local, non-IP)
	TooBig      int64 // packets larger than a buffer
	WriteErrors int64
	EventsSent  int64 // events the signalling socket accepted
}

// DriverStats are the driver's own counters.
type DriverStats struct {
	Delivered, Late, Ignored, TooBig, WriteErrors, DupAcks int64
	MaxLate                                                time.Duration
}

// Driver runs a Model in real time on a packet device. The model is owned
// by the goroutine in Run; nothing else touches it.
type Driver struct {
	cfg DriverConfig
	io  packetIO
	// commandWait bounds how long a step's writes wait for its handover
	// command to reach the socket (commandPublishWait; tests that check
	// the order, not the real-time bound, raise it).
	commandWait time.Duration
	m           *emu.Model
	cls         emu.Classifier
	dup         emu.DupAckCounter
	pool        pool
	pub         *publisher

	out []emu.Delivery
	ev  []signaling.Event

	// The device's batch: head-room, read buffers (pool ids) and sizes,
	// and the write batch. When the device merges on write (its buffers
	// are larger than the pool's), deliveries are copied into wscratch,
	// buffers with room to merge in place; otherwise the pool's buffers
	// are written as they are.
	off      int
	rids     []uint32
	rbufs    [][]byte
	rsizes   []int
	wbatch   [][]byte
	wscratch [][]byte

	events    *os.File
	eventsBuf *bufio.Writer
	evw       *signaling.Writer
	logFiles  [2]*os.File
	logs      [2]*emu.MMLog
	published int64

	st DriverStats

	// prof is the loop's timeline (Run makes it); t0 is the loop's start.
	prof *profile
	t0   time.Time
	gc   emu.GCStat
	wdue []time.Time // the due times of wbatch's packets
}

// bufSize is a packet buffer after the head-room: a 1500-byte MTU packet
// and room to tell a larger one (a read that fills the buffer is refused).
const bufSize = 2048

// NewDriver prepares a run on dev: it creates the output directory and
// the files written while running. Run starts the clock.
func newDriver(cfg DriverConfig, dev packetIO) (*Driver, error) {
	if cfg.Scenario == nil {
		return nil, errors.New("emu: DriverConfig.Scenario: nil")
	}
	if cfg.Duration <= 0 {
		cfg.Duration = cfg.Scenario.Config.Duration
	}
	if cfg.Duration <= 0 {
		return nil, errors.New("emu: DriverConfig.Duration: must be > 0")
	}
	if cfg.LateThreshold <= 0 {
		cfg.LateThreshold = time.Millisecond
	}
	if cfg.InvalidLatePct <= 0 {
		cfg.InvalidLatePct = 1
	}
	if cfg.SignalQueue <= 0 {
		cfg.SignalQueue = 8192
	}
	if cfg.OutDir == "" {
		return nil, errors.New("emu: DriverConfig.OutDir: empty")
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, io: dev, commandWait: commandPublishWait, cls: emu.Classifier{UE: cfg.UENets},
		out: make([]emu.Delivery, 0, 1024), ev: make([]signaling.Event, 0, 256)}
	d.t0, d.prof = time.Now(), newProfile(cfg.Duration)
	lay := dev.layout()
	bs := max(dev.batch(), 1)
	d.off = lay.Headroom
	d.pool.size0 = d.off + bufSize
	d.pool.init(4096)
	d.rids = make([]uint32, bs)
	d.rbufs = make([][]byte, bs)
	d.rsizes = make([]int, bs)
	d.wbatch = make([][]byte, 0, bs)
	d.wdue = make([]time.Time, 0, bs)
	if lay.BufSize > bufSize {
		d.wscratch = make([][]byte, bs)
		for i := range d.wscratch {
			d.wscratch[i] = make([]byte, d.off+lay.BufSize)
		}
	}
	var err error
	if d.events, err = os.Create(filepath.Join(cfg.OutDir, "events.jsonl")); err != nil {
		return nil, err
	}
	d.eventsBuf = bufio.NewWriterSize(&timedWriter{w: d.events, d: d}, 256<<10)
	d.evw = signaling.NewWriter(d.eventsBuf)
	for i, name := range []string{"mm-down.log", "mm-up.log"} {
		if d.logFiles[i], err = os.Create(filepath.Join(cfg.OutDir, name)); err != nil {
			d.closeFiles()
			return nil, err
		}
	}
	if cfg.SignalSocket != "" {
		d.pub = newPublisher(cfg.SignalSocket, cfg.SignalQueue)
	}
	return d, nil
}

func (d *Driver) closeFiles() error {
	var errs []error
	if d.eventsBuf != nil {
		errs = append(errs, d.eventsBuf.Flush())
	}
	if d.events != nil {
		errs = append(errs, d.events.Close())
	}
	for i, f := range d.logFiles {
		if d.logs[i] != nil {
			errs = append(errs, d.logs[i].Flush())
		}
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// Stats returns the driver's counters (only safe once Run has returned).
func (d *Driver) Stats() DriverStats { return d.st }

// spinBelow: waits shorter than this are spun (a kernel timer wake-up
// costs tens of microseconds of jitter); longer ones sleep in the kernel
// until the deadline.
const spinBelow = 50 * time.Microsecond

// maxWait bounds one sleep so that a stop request is seen promptly.
const maxWait = 5 * time.Millisecond

// Run emulates the link in real time until the duration is over or ctx
// is done, then writes every output file and returns the result. It must
// run on one goroutine; without RTPriority it locks it to its OS thread
// (see pinThread for why it does not with RTPriority).
func (d *Driver) Run(ctx context.Context) (res Result, err error) {
	start := time.Now()
	mc := d.cfg.Scenario.Config
	if mc.HARQByPayload && mc.Retx == nil {
		mc.Retx = emu.PayloadRetx(mc, d.cfg.Seed, func(id uint64) []byte { return d.pool.buf(uint32(id))[d.off : d.off+int(d.pool.size[id])] })
	}
	m, err := emu.New(mc, start, d.cfg.Seed)
	if err != nil {
		d.closeFiles()
		return res, err
	}
	d.m = m
	src := d.cfg.Scenario.Source
	d.logs[emu.Down] = emu.NewMMLog(&timedWriter{w: d.logFiles[emu.Down], d: d}, "downlink", src)
	d.logs[emu.Up] = emu.NewMMLog(&timedWriter{w: d.logFiles[emu.Up], d: d}, "uplink", src)
	d.t0, d.prof = start, newProfile(d.cfg.Duration)
	gc0, alloc0, pause0 := gcNow()
	m.SetLog(emu.Down, d.logs[emu.Down])
	m.SetLog(emu.Up, d.logs[emu.Up])
	if d.pub != nil {
		go d.pub.run()
	}
	var stop atomic.Bool
	watch := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			stop.Store(true)
		case <-watch:
		}
	}()
	defer close(watch)

	end := start.Add(d.cfg.Duration)
	nextProgress := start.Add(time.Second)
	var lastBytes int64
	lastProgress := start
	if err := pinThread(d.cfg.RTPriority); err != nil {
		d.closeFiles()
		return res, err
	}
	var loopErr error
	for !stop.Load() {
		now := time.Now()
		d.prof.mark(phStep, d.ns(now))
		if !now.Before(end) {
			now = end
		}
		m.Step(now, &d.out, &d.ev)
		d.flush()
		if !now.Before(end) {
			break
		}
		if err := d.ingest(now); err != nil {
			loopErr = err
			break
		}
		d.prof.mark(phStep, d.since())
		m.Step(now, &d.out, &d.ev)
		d.flush()
		d.prof.mark(phOther, d.since())
		d.prof.tick(d.ns(now))
		if d.cfg.Progress != nil && !now.Before(nextProgress) {
			c := m.Counters()
			b := c.DeliveredBytes[emu.Down]
			d.cfg.Progress(Progress{Elapsed: now.Sub(start), Duration: d.cfg.Duration, Serving: m.Serving(),
				Handovers: totalHO(&c), DownMbps: float64(b-lastBytes) * 8 / now.Sub(lastProgress).Seconds() / 1e6,
				LatePct: d.latePct()})
			lastBytes, lastProgress = b, now
			nextProgress = nextProgress.Add(time.Second)
		}
		deadline := end
		if w, ok := m.NextWake(); ok && w.Before(deadline) {
			deadline = w
		}
		if lim := now.Add(maxWait); lim.Before(deadline) {
			deadline = lim
		}
		if time.Until(deadline) > spinBelow {
			from := d.since()
			if err := d.io.wait(deadline); err != nil {
				loopErr = err
				break
			}
			d.prof.slept(from, d.ns(deadline), d.since())
		}
	}
	d.prof.mark(phOther, d.since())
	elapsed := min(time.Since(start), d.cfg.Duration)
	gc1, alloc1, pause1 := gcNow()
	d.gc = gcBetween(gc0, alloc0, pause0, gc1, alloc1, pause1)
	return d.finish(start, elapsed, loopErr)
}

func totalHO(c *emu.Counters) int64 {
	return c.Handovers[0][0] + c.Handovers[0][1] + c.Handovers[1][0] + c.Handovers[1][1]
}

func (d *Driver) latePct() float64 {
	if d.st.Delivered == 0 {
		return 0
	}
	return float64(d.st.Late) / float64(d.st.Delivered) * 100
}

// ingest reads what the device holds (a few batches at most, so a flood
// cannot starve the deliveries) and hands each packet to the model, each
// with its own size: the pieces of a split frame are separate packets to
// the model. It allocates nothing unless the pool must grow.
func (d *Driver) ingest(now time.Time) error {
	for got := 0; got < 256; {
		for i := range d.rids {
			d.rids[i] = d.pool.get()
			d.rbufs[i] = d.pool.buf(d.rids[i])
		}
		d.prof.mark(phRead, d.since())
		n, err := d.io.readBatch(d.rbufs, d.rsizes, d.off)
		d.prof.mark(phStep, d.since())
		for i := 0; i < n; i++ {
			id, size := d.rids[i], d.rsizes[i]
			p := d.rbufs[i][d.off : d.off+size]
			dir, ok := d.cls.Dir(p)
			if !ok {
				d.st.Ignored++
				d.pool.put(id)
				continue
			}
			d.pool.size[id] = int32(size)
			d.m.Enqueue(now, dir, uint64(id), size)
		}
		for _, id := range d.rids[n:] {
			d.pool.put(id)
		}
		got += n
		if err != nil {
			if tun.IsPacketError(err) {
				d.st.TooBig++
				continue
			}
			return err
		}
		if n == 0 {
			return nil
		}
	}
	return nil
}

// flush writes the deliveries of the last Step to the device, frees
// their buffers, measures lateness against each write, and records and
// publishes the events. The downlink deliveries are written first, then
// the uplink ones, each direction in model order: the two directions
// leave through different interfaces, so nothing orders one against the
// other, and the profile can tell the kernel's work behind each apart.
func (d *Driver) flush() {
	// Events first: a handover command is what makes the UE flush its
	// reordering buffer, so on a phone the command is known (the modem
	// logs the RRC message on reception) before the flushed packets reach
	// IP. Writing the flush first lets the laptop's duplicate ACKs reach
	// the proxy before the command does, and the proxy could not act on
	// Finding 2 at all (measured: ACKs 0.2 ms after the flush, the
	// command applied ~1 ms after it).
	command := false
	if len(d.ev) > 0 {
		d.prof.mark(phEvents, d.since())
	}
	for i := range d.ev {
		e := &d.ev[i]
		d.evw.Write(e)
		d.published++
		if d.pub != nil {
			d.pub.offer(e)
			command = command || e.Kind == signaling.KindHOCommand
		}
	}
	d.ev = d.ev[:0]
	if command && len(d.out) > 0 {
		d.prof.mark(phCmdWait, d.since())
		d.pub.waitHandled(d.commandWait)
	}
	if len(d.out) == 0 {
		return
	}
	d.prof.flushed(len(d.out))
	d.writeDir(emu.Down, phWriteDown)
	d.writeDir(emu.Up, phWriteUp)
	for i := range d.out {
		d.pool.put(uint32(d.out[i].ID))
	}
	d.out = d.out[:0]
}

// writeDir writes the step's deliveries of one direction, a device batch
// per write; the model has counted each at its own Due, and lateness is
// per delivery against the end of its batch's write, however the device
// merges them.
func (d *Driver) writeDir(dir emu.Dir, ph phase) {
	d.wbatch, d.wdue = d.wbatch[:0], d.wdue[:0]
	marked := false
	for i := range d.out {
		dl := &d.out[i]
		if dl.Dropped || dl.Dir != dir {
			continue
		}
		if !marked {
			d.prof.mark(ph, d.since())
			marked = true
		}
		id := uint32(dl.ID)
		b := d.pool.buf(id)[:d.off+int(d.pool.size[id])]
		if dir == emu.Up && d.dup.Observe(b[d.off:]) {
			d.st.DupAcks++
		}
		if d.wscratch != nil {
			w := d.wscratch[len(d.wbatch)]
			b = w[:d.off+copy(w[d.off:], b[d.off:])]
		}
		d.wbatch = append(d.wbatch, b)
		d.wdue = append(d.wdue, dl.Due)
		if len(d.wbatch) == cap(d.wbatch) {
			d.writeBatch()
		}
	}
	d.writeBatch()
}

// writeBatch writes d.wbatch, skipping (and counting) a packet the device
// refuses, counts its packets delivered and late against the time the
// write returned, and empties it.
func (d *Driver) writeBatch() {
	if len(d.wbatch) == 0 {
		return
	}
	b := d.wbatch
	for len(b) > 0 {
		n, err := d.io.writeBatch(b, d.off)
		if err == nil {
			break
		}
		d.st.WriteErrors++
		b = b[min(n+1, len(b)):]
	}
	written := time.Now()
	w := d.ns(written)
	for _, due := range d.wdue {
		d.st.Delivered++
		if late := written.Sub(due); late > d.cfg.LateThreshold {
			d.st.Late++
			d.st.MaxLate = max(d.st.MaxLate, late)
			d.prof.late(d.ns(due), w)
		}
	}
	d.prof.delivered(w, len(d.wdue))
	d.wbatch, d.wdue = d.wbatch[:0], d.wdue[:0]
}

// ns is t in ns from the loop's start; since is now.
func (d *Driver) ns(t time.Time) int64 { return int64(t.Sub(d.t0)) }
func (d *Driver) since() int64         { return int64(time.Since(d.t0)) }

// commandPublishWait bounds how long the packets of a step with a
// handover command wait for the command to be written to the signalling
// socket: the socket write takes microseconds; a stuck proxy must not
// stall the link for longer than a millisecond or two (the wait counts
// as lateness).
const commandPublishWait = 2 * time.Millisecond

// finish stops the publisher, closes the running files and writes the
// end-of-run outputs.
func (d *Driver) finish(start time.Time, elapsed time.Duration, loopErr error) (Result, error) {
	unpinThread(d.cfg.RTPriority)
	m := d.m
	var res Result
	var sent, dropped int64
	if d.pub != nil {
		sent, dropped = d.pub.close(time.Second)
	}
	errs := []error{loopErr, d.closeFiles()}
	c := m.Counters()
	res.Counters = c
	res.Handovers = m.HandoverRecords(elapsed)
	res.FalseAlarms = m.FalseAlarmRecords(elapsed)
	res.Capacity = m.CapacityBins(100*time.Millisecond, elapsed)
	res.Ignored, res.TooBig, res.WriteErrors, res.EventsSent = d.st.Ignored, d.st.TooBig, d.st.WriteErrors, sent
	scale := d.cfg.Scenario.Config.Scale
	if scale == 0 {
		scale = 1
	}
	lp := d.latePct()
	res.Summary = emu.Summary{
		Scenario: d.cfg.Scenario.Name, Scale: scale, StartUnixNS: start.UnixNano(), DurationS: elapsed.Seconds(),
		Valid: loopErr == nil && lp <= d.cfg.InvalidLatePct, LatePct: lp,
		MaxLateMs:        float64(d.st.MaxLate) / float64(time.Millisecond),
		DeliveredPackets: d.st.Delivered, OverflowDrops: c.OverflowDrops, ReorderFlushes: c.ReorderFlushes,
		FlushedHoles: c.FlushedHoles, FalseAlarms: int64(len(res.FalseAlarms)), Handovers: int64(len(res.Handovers)),
		AnchorPauses: c.AnchorPauses, MmWaveEdges: c.MmWaveEdges,
		DupAcksUp: d.st.DupAcks, EventsPublished: d.published, EventsDropped: dropped,
		OverflowHandovers: c.OverflowHandovers, FromMmWave: c.FromMmWave, OverflowFromMmWave: c.OverflowFromMmWave,
		FlushHolesP: d.cfg.Scenario.Config.FlushHoles, HARQFraction: d.cfg.Scenario.Config.HARQFraction,
		Drive: d.cfg.Scenario.Drive,
		Loop:  d.prof.result(d.gc),
	}
	errs = append(errs, WriteOutputs(d.cfg.OutDir, &res))
	return res, errors.Join(errs...)
}

// WriteOutputs writes capacity.tsv, handovers.tsv, falsealarms.tsv and
// emulator.json into dir.
func WriteOutputs(dir string, r *Result) error {
	write := func(name string, f func(*os.File) error) error {
		fh, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := f(fh); err != nil {
			fh.Close()
			return fmt.Errorf("%s: %w", name, err)
		}
		return fh.Close()
	}
	return errors.Join(
		write("capacity.tsv", func(f *os.File) error { return emu.WriteCapacityTSV(f, r.Capacity) }),
		write("handovers.tsv", func(f *os.File) error { return emu.WriteHandoversTSV(f, r.Handovers) }),
		write("falsealarms.tsv", func(f *os.File) error { return emu.WriteFalseAlarmsTSV(f, r.FalseAlarms) }),
		write("emulator.json", func(f *os.File) error { return emu.WriteSummary(f, r.Summary) }),
	)
}

// pool holds the payloads of the packets inside the model, by id: the
// model only keeps (id, size). It grows in chunks and never shrinks, so a
// steady state allocates nothing.
type pool struct {
	bufs  [][]byte
	size  []int32
	free  []uint32
	size0 int // bytes per buffer (head-room + bufSize); 0 means bufSize
}

func (p *pool) init(n int) { p.grow(n) }

func (p *pool) grow(n int) {
	bs := p.size0
	if bs == 0 {
		bs = bufSize
	}
	chunk := make([]byte, n*bs)
	base := len(p.bufs)
	for i := range n {
		p.bufs = append(p.bufs, chunk[i*bs:(i+1)*bs:(i+1)*bs])
		p.size = append(p.size, 0)
		p.free = append(p.free, uint32(base+n-1-i))
	}
}

func (p *pool) get() uint32 {
	if len(p.free) == 0 {
		p.grow(len(p.bufs))
	}
	id := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return id
}

func (p *pool) put(id uint32) { p.free = append(p.free, id) }

func (p *pool) buf(id uint32) []byte { return p.bufs[id] }

// publisher sends events to the proxy's signalling socket from its own
// goroutine, so the packet path never waits for the socket: offer drops
// (and counts) when the bounded queue is full, and the sender reconnects
// when the socket goes away, dropping what it could not send meanwhile.
type publisher struct {
	path    string
	ch      chan signaling.Event
	done    chan struct{}
	once    sync.Once
	sent    atomic.Int64
	dropped atomic.Int64
	offered atomic.Int64
}

// waitHandled waits, sleeping (never spinning: the driver's thread may be
// real-time and the sender needs a CPU), until every event offered so far
// was sent or dropped, or up to limit; it reports whether they were.
func (p *publisher) waitHandled(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for p.sent.Load()+p.dropped.Load() < p.offered.Load() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Microsecond)
	}
	return true
}

// redialEvery bounds reconnection attempts while the socket is away.
const redialEvery = 50 * time.Millisecond

func newPublisher(path string, queue int) *publisher {
	return &publisher{path: path, ch: make(chan signaling.Event, queue), done: make(chan struct{})}
}

func (p *publisher) offer(e *signaling.Event) {
	p.offered.Add(1)
	select {
	case p.ch <- *e:
	default:
		p.dropped.Add(1)
	}
}

func (p *publisher) run() {
	defer close(p.done)
	var c *sigio.Client
	var nextDial time.Time
	for e := range p.ch {
		if c == nil {
			if time.Now().Before(nextDial) {
				p.dropped.Add(1)
				continue
			}
			var err error
			if c, err = sigio.Dial(p.path); err != nil {
				c = nil
				nextDial = time.Now().Add(redialEvery)
				p.dropped.Add(1)
				continue
			}
		}
		if err := c.Send(&e); err != nil {
			c.Close()
			c = nil
			p.dropped.Add(1)
			continue
		}
		p.sent.Add(1)
	}
	if c != nil {
		c.Close()
	}
}

// close ends the queue and waits up to timeout for the sender to drain
// it; what is left counts as dropped.
func (p *publisher) close(timeout time.Duration) (sent, dropped int64) {
	p.once.Do(func() { close(p.ch) })
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.dropped.Add(int64(len(p.ch)))
	}
	return p.sent.Load(), p.dropped.Load()
}
