package m2ho

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// FuzzController drives a controller with an arbitrary mix of events and
// packets decoded from the input and checks the invariants of every
// verdict: only pure uplink ACKs are ever dropped, a rewrite only lowers
// the window, never for an unknown scale, and never below two segments
// unless the original was; downlink packets always pass.
func FuzzController(f *testing.F) {
	f.Add([]byte{0, 3, 1, 2, 2, 1, 200, 3, 1, 1, 4, 0})
	f.Add([]byte{1, 9, 9, 9, 9, 2, 1, 0, 0, 3, 2, 2, 5, 5, 5, 5, 5})
	f.Add([]byte{4, 0, 0, 0, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Fuzz(func(t *testing.T, in []byte) {
		db := NewSMaxDB()
		db.Observe(cell(sub6, "A"), 50000)
		c := New(Config{SMaxDB: db})
		var flows [3]Flow
		for i := range flows {
			c.Attach(t0, &flows[i])
		}
		now := t0
		next := func() byte {
			if len(in) == 0 {
				return 0
			}
			b := in[0]
			in = in[1:]
			return b
		}
		types := []signaling.CellType{unk, sub6, mmw, lte}
		for len(in) > 0 {
			now = now.Add(time.Duration(next()) * time.Millisecond)
			switch op := next() % 6; op {
			case 0: // report
				ev := &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasEvent(next() % 10),
					Serving:  signaling.Cell{Type: types[next()%4]},
					Neighbor: signaling.Cell{ID: string('A' + rune(next()%3)), Type: types[next()%4]}}
				c.OnEvent(now, ev)
			case 1: // command
				c.OnEvent(now, &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOKind(next() % 6),
					Target: signaling.Cell{ID: string('A' + rune(next()%3)), Type: types[next()%4]}})
			case 2: // random access
				c.OnEvent(now, &signaling.Event{Kind: signaling.KindRandomAccess, RAResult: signaling.RAResult(next() % 4)})
			case 3: // MAC slot
				c.OnEvent(now, &signaling.Event{Kind: signaling.KindMACSlot, RBRatio: float64(next()) / 255, Bytes: int(next()) * 100})
			case 4, 5: // packet
				fl := &flows[next()%3]
				p := &Packet{Dir: Dir(next() % 2), Flags: next() & 0x1f, Window: uint16(next())<<8 | uint16(next()),
					WScale: int8(next()%17) - 1, MSS: uint16(next()) * 8, PayloadLen: int(next() % 3 * 100),
					HasTS: next()%2 == 0, TSval: uint32(next()), TSecr: uint32(next())}
				p.Seq, p.Ack = uint32(next())<<24|uint32(next()), uint32(next())<<24|uint32(next())
				v := c.OnPacket(now, fl, p)
				switch v.Action {
				case Pass:
				case Drop:
					if p.Dir != Uplink || !p.IsPureACK() {
						t.Fatalf("dropped %+v", p)
					}
				case Rewrite:
					if p.Dir != Uplink || p.WScale < 0 || v.Window >= p.Window {
						t.Fatalf("rewrite %+v of %+v", v, p)
					}
					ws := uint(p.WScale)
					if ws > 14 {
						ws = 14
					}
					mss := int(p.MSS)
					if mss == 0 {
						mss = DefaultMSS
					}
					if int(v.Window)<<ws < 2*mss {
						t.Fatalf("rewrite below 2 MSS: %+v of %+v", v, p)
					}
				default:
					t.Fatalf("action %d", v.Action)
				}
			}
		}
	})
}

// FuzzUnmarshalSMaxDB: any bytes either fail to load with an error or
// load to a database whose stored form loads again to the same contents.
func FuzzUnmarshalSMaxDB(f *testing.F) {
	f.Add([]byte(`{"version":1,"cells":[{"id":"a","type":"sub6","smax_bytes":5}]}`))
	f.Add([]byte(`{"version":1,"cells":[{"id":"a","type":"lte","smax_bytes":5},{"id":"a","type":"lte","smax_bytes":9}]}`))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"version":1,"cells":[],"answers":[{"report":"nr-a2","serving":"mmwave","answered":0.5,"unanswered":7.05},{"report":"lte-b1","serving":"lte","answered":3,"unanswered":0}]}`))
	f.Add([]byte(`{"version":1,"cells":[],"answers":[{"report":"nr-a2","serving":"mmwave","answered":0,"unanswered":0}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		db, err := UnmarshalSMaxDB(b)
		if err != nil {
			return
		}
		out, err := db.Snapshot().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		re, err := UnmarshalSMaxDB(out)
		if err != nil {
			t.Fatalf("reloading a marshalled db: %v", err)
		}
		again, _ := re.Snapshot().Marshal()
		if re.Len() != db.Len() || string(again) != string(out) || len(re.AnswerCounts()) != len(db.AnswerCounts()) {
			t.Fatalf("cells %d, answer kinds %d after reload, want %d, %d", re.Len(), len(re.AnswerCounts()), db.Len(), len(db.AnswerCounts()))
		}
	})
}
