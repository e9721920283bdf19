package emu

// LoopProfile is where the real-time driver spent its time and, for the
// deliveries written late, which part of the loop the late time fell in
// (emulator.json "loop"). It explains a run marked invalid: the model
// itself, TUN writes (the kernel forwards what is written, up to the
// receiving TCP's ACK processing, in the writer's system call), TUN
// reads, waiting for the proxy to take a handover command, the output
// files, or the thread waking after its deadline (a CPU taken by others,
// or the stop of a garbage collection).
type LoopProfile struct {
	// LateByCause: per cause, the late deliveries it dominated (the
	// largest share of the span from their due time to their write) and
	// the late time that fell in it, summed over every late delivery.
	LateByCause map[string]LateCause `json:"late_by_cause"`
	// Phases: per part of the loop, how often it ran and how long.
	Phases map[string]PhaseStat `json:"phases"`
	// PerFlush: deliveries written per flush (mean, max).
	FlushMeanPackets float64 `json:"flush_mean_packets"`
	FlushMaxPackets  int64   `json:"flush_max_packets"`
	GC               GCStat  `json:"gc"`
	// LateSeconds lists the seconds of the run with late deliveries:
	// second, late deliveries, deliveries, the cause that dominated most
	// of them, and the GC cycles that completed in that second.
	LateSeconds []LateSecond `json:"late_seconds,omitempty"`
}

// LateCause is one cause's share of the lateness.
type LateCause struct {
	Packets int64   `json:"packets"`
	Ms      float64 `json:"ms"`
}

// PhaseStat is a part of the loop: calls, total and longest duration, and
// a histogram over PhaseBuckets.
type PhaseStat struct {
	Calls   int64   `json:"calls"`
	TotalMs float64 `json:"total_ms"`
	MaxMs   float64 `json:"max_ms"`
	// Hist counts durations below 10 µs, 30 µs, 100 µs, 300 µs, 1 ms,
	// 3 ms, 10 ms and longer.
	Hist [8]int64 `json:"hist"`
}

// GCStat is the Go runtime's garbage collection during the run
// (runtime/metrics): cycles, stop-the-world pauses, bytes allocated.
type GCStat struct {
	Cycles         int64   `json:"cycles"`
	Pauses         int64   `json:"pauses"`
	PausesOver1ms  int64   `json:"pauses_over_1ms"`
	MaxPauseMs     float64 `json:"max_pause_ms"` // upper bound of the histogram bucket
	AllocatedBytes int64   `json:"allocated_bytes"`
}

// LateSecond is one second of the run with late deliveries.
type LateSecond struct {
	Second    int    `json:"s"`
	Late      int64  `json:"late"`
	Delivered int64  `json:"delivered"`
	Cause     string `json:"cause"`
	GCCycles  int64  `json:"gc_cycles"`
}
