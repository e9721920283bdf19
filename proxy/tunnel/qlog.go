package tunnel

import (
	"net/netip"

	cipqlog "github.com/quic-go/connect-ip-go/qlog"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// countingTrace is a connection's qlog trace. connect-ip-go reports each
// packet it drops (source not assigned to the peer, destination outside the
// advertised routes, ...) only as a qlog event and a log line, so the
// server counts those events here; with a file, every event (quic-go's and
// connect-ip-go's) is also written as qlog.
//
// Cost: with a trace set, quic-go builds an event for every packet it sends
// and receives; the recorder ignores those unless a file is open.
type countingTrace struct {
	// count gets each drop's reason; fromPeer: the packet came from the
	// peer (else it was ours to send).
	count func(reason string, fromPeer bool)
	// migrated, when set, gets the peer's new address each time the
	// connection's active path moved to another remote address (quic-go's
	// TupleAssigned event for the active tuple; on the server that is the
	// client's connection migration, RFC 9000 §9).
	migrated func(remote netip.AddrPort)
	file     *qlogwriter.FileSeq
}

func (t *countingTrace) AddProducer() qlogwriter.Recorder {
	r := &countingRecorder{count: t.count, migrated: t.migrated}
	if t.file != nil {
		r.file = t.file.AddProducer()
	}
	return r
}

type countingRecorder struct {
	count    func(reason string, fromPeer bool)
	migrated func(remote netip.AddrPort)
	file     qlogwriter.Recorder
}

func (r *countingRecorder) RecordEvent(ev qlogwriter.Event) {
	if pp, ok := ev.(cipqlog.PacketProcessed); ok && pp.Outcome == cipqlog.PacketDropped {
		r.count(string(pp.Reason), pp.Source == cipqlog.EndpointPeer)
	}
	if ta, ok := ev.(qlog.TupleAssigned); ok && ta.TupleID == "" && r.migrated != nil {
		remote := ta.Remote.IPv4
		if !remote.IsValid() {
			remote = ta.Remote.IPv6
		}
		r.migrated(remote)
	}
	if r.file != nil {
		r.file.RecordEvent(ev)
	}
}

func (r *countingRecorder) Close() error {
	if r.file != nil {
		return r.file.Close()
	}
	return nil
}
