package signaling_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/internal/jsonv1"
)

// agree decodes line with both decoders and fails unless they agree: the
// same Event for a good line; both an unknown kind; both a *ParseError
// naming the same field.
func agree(t *testing.T, d *signaling.Decoder, line []byte) {
	t.Helper()
	want, werr := jsonv1.ParseLine(line)
	got, gerr := d.Decode(line)
	var uk *jsonv1.UnknownKindError
	switch {
	case werr == nil:
		if gerr != nil {
			t.Fatalf("%q:\nnew decoder fails: %v\nold gives %+v", line, gerr, want)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n new %+v\n old %+v", line, got, want)
		}
	case errors.As(werr, &uk):
		if !signaling.IsUnknownKind(gerr) {
			t.Fatalf("%q: old says unknown kind %q, new says %v (%+v)", line, uk.Kind, gerr, got)
		}
	default:
		var gpe, wpe *signaling.ParseError
		if !errors.As(gerr, &gpe) {
			t.Fatalf("%q: old fails (%v), new gives %+v, %v", line, werr, got, gerr)
		}
		if signaling.IsUnknownKind(gerr) {
			t.Fatalf("%q: old fails (%v), new says unknown kind", line, werr)
		}
		errors.As(werr, &wpe)
		if gpe.Field != wpe.Field {
			t.Fatalf("%q: new error %v, old %v: fields differ", line, gerr, werr)
		}
	}
}

// seedLines are the FORMAT.md examples, the round-trip events written out
// and lines that exercise the corners of the grammar.
func seedLines() [][]byte {
	var out [][]byte
	for _, l := range signaling.FormatExamples {
		out = append(out, []byte(l))
	}
	for _, e := range signaling.RoundTripEvents() {
		b, err := signaling.AppendJSON(nil, &e)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	for _, l := range []string{
		`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":0.5,"bytes":1,"cell":"1","serving":{}}`,
		`{"t":"0000-01-01T00:00:00+23:59","kind":"ra","reason":"other","result":"failure"}`,
		`{"t":"2023-02-16t22:44:53z","kind":"ra","reason":"other","result":"failure"}`,
		`{"t":"2023-02-16T22:44:53,5Z","kind":"ra","reason":"other","result":"failure"}`,
		`{"t":"2023-02-16T22:44:53.1234567891234Z","kind":"ra","reason":"other","result":"failure"}`,
		`{"t":"2024-02-29T23:59:59.5-00:30","kind":"ra","reason":"other","result":"failure"}`,
		`{"t":"2023-02-29T00:00:00Z","kind":"ra","reason":"other","result":"failure"}`,
		`{"t":"2023-02-16T24:00:00Z","kind":"ra","reason":"other","result":"failure"}`,
		`{"T":"2023-02-16T22:44:53Z","KIND":"mac","Rb":1,"bytEs":-0,"\u212aind":"mac","ſerving":{"ID":"x"}}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":1e-400,"bytes":9223372036854775807}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"sn-release","target":{"type":"lte"},"inferred":false}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"sn-release","target":{"type":"lte"},"inferred":null}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"sn-release","target":{"type":"lte"},"inferred":true,"inferred":null}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"lte-anchor","target":{"type":"lte"},"INFERRED":true}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"lte-anchor","target":{"type":"lte"},"inferred":"true"}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"lte-anchor","target":{"type":"lte"},"inferred":1}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"lte-anchor","target":{"type":"lte"},"inferred":{}}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ho","ho":"lte-anchor","target":{"type":"lte"},"inferred":tru}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"report","event":"A2","serving":{"type":"mmwave"},"inferred":true}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":0.5,"bytes":1,"inferred":"x"}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":1e400,"bytes":1}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":0.5,"bytes":9223372036854775808}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":0.5,"bytes":-9223372036854775808}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"mac","rb":null,"rb":0.5,"bytes":1,"bytes":null}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"report","event":"A3","serving":{"id":"a"},"serving":{"type":"lte"},"neighbor":{"rsrp":1},"neighbor":null}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"report","event":"A3","serving":{"id":"a\ud83d\ude00\ud800x\udc00\u00e9\/"},"x":[1,{"a":[true,false,null]},"s"]}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"report","event":"A3","serving":{"id":"\xff\xfe ok \xe2\x82"}}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"report","event":"A3","serving":{"id":"é","rsrq":-0.0,"rsrp":-1.5E+2}}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"","x":1}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"unknown"}`,
		`{"t":5,"kind":"ra","rb":"x"}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"gnss","rb":"x"}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ra","serving":[],"reason":"other","result":"failure"}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ra","reason":"other","result":"failure"} x`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ra","reason":"other","result":"failure",}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ra","reason":"other","result":"fail\ure"}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ra","reason":"other","result":"fail` + "\t" + `ure"}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ra","reason":"other","result":01}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ra","reason":"other","result":-}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ra","reason":"other","result":1.}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ra","reason":"other","result":1e}`,
		`{"t":"2023-02-16T22:44:53Z","kind":"ra","reason":"other","result":tru}`,
		"\u00a0 \v{\"t\":\"2023-02-16T22:44:53Z\",\r\"kind\" : \"ra\",\n\"reason\":\"other\",\t\"result\":\"failure\"}\u0085",
		`null`, `[]`, `"s"`, `1`, `true`, `{}`, `{"t":"2023-02-16T22:44:53Z"`, `{"t"}`, `{,}`, `{"t":"x",,}`,
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		`{"x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
		`{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
		`{"serving":{"x":` + strings.Repeat("{\"a\":", 9998) + "1" + strings.Repeat("}", 9998) + `}}`,
		`{"serving":{"x":` + strings.Repeat("{\"a\":", 9999) + "1" + strings.Repeat("}", 9999) + `}}`,
	} {
		out = append(out, []byte(l))
	}
	return out
}

func TestDecoderAgreesOnSeeds(t *testing.T) {
	var d signaling.Decoder
	for _, l := range seedLines() {
		agree(t, &d, l)
	}
}

// Pieces the mutator splices in: keys of the schema in several spellings,
// values of every JSON type, broken tokens.
var pieces = []string{
	`"t"`, `"kind"`, `"event"`, `"serving"`, `"neighbor"`, `"ho"`, `"target"`, `"reason"`, `"result"`,
	`"rb"`, `"bytes"`, `"cell"`, `"inferred"`, `"id"`, `"type"`, `"rsrp"`, `"rsrq"`, `"KIND"`, `"Serving"`, `"\u0074"`, `"InFerred"`,
	`"report"`, `"mac"`, `"ho"`, `"ra"`, `"A3"`, `"B1"`, `"sn-change"`, `"mmwave"`, `"lte"`, `"sub6"`,
	`"2023-02-16T22:44:53Z"`, `"2023-02-16T22:44:53.123456789+01:00"`, `"9999-12-31T23:59:59-01:00"`,
	`null`, `true`, `false`, `0`, `-0`, `1`, `0.5`, `1e3`, `-1.5e-3`, `1e400`, `2147483648`, `-1`,
	`{}`, `[]`, `{"id":"88"}`, `{"type":"sub6","rsrp":-90}`, `[1,[2,{}]]`, `""`, `"\\"`, `"\ud800"`, `"\u00e9"`,
	`,`, `:`, `{`, `}`, `[`, `]`, `"`, `\`, " ", "\t", "\r", "\n", "\x00", "\xff", "é", `\u`, `/`,
}

func mutate(r *rand.Rand, line []byte) []byte {
	b := append([]byte(nil), line...)
	for n := 1 + r.IntN(3); n > 0; n-- {
		pos := 0
		if len(b) > 0 {
			pos = r.IntN(len(b) + 1)
		}
		switch r.IntN(4) {
		case 0: // insert a piece
			p := pieces[r.IntN(len(pieces))]
			b = append(b[:pos], append([]byte(p), b[pos:]...)...)
		case 1: // delete a range
			end := min(len(b), pos+1+r.IntN(8))
			b = append(b[:pos], b[end:]...)
		case 2: // replace a byte
			if pos < len(b) {
				b[pos] = byte(r.IntN(256))
			}
		case 3: // insert a key-value member after an opening brace
			if i := bytes.IndexByte(b[pos:], '{'); i >= 0 {
				at := pos + i + 1
				kv := pieces[r.IntN(21)] + ":" + pieces[r.IntN(len(pieces))] + ","
				b = append(b[:at], append([]byte(kv), b[at:]...)...)
			}
		}
	}
	return b
}

// TestDecoderAgreesOnMutations runs the differential check on random
// mutations of the seed lines (a fixed seed, so failures reproduce).
func TestDecoderAgreesOnMutations(t *testing.T) {
	n := 50_000
	if testing.Short() {
		n = 5_000
	}
	r := rand.New(rand.NewPCG(1, 2))
	seeds := seedLines()
	var d signaling.Decoder
	good := 0
	for i := 0; i < n; i++ {
		l := mutate(r, seeds[r.IntN(len(seeds))])
		if _, err := jsonv1.ParseLine(l); err == nil {
			good++
		}
		agree(t, &d, l)
	}
	if good < n/20 {
		t.Errorf("only %d of %d mutated lines are valid: the test exercises little but errors", good, n)
	}
	t.Logf("%d lines, %d valid", n, good)
}

func FuzzDecoderAgrees(f *testing.F) {
	for _, l := range seedLines() {
		f.Add(l)
	}
	var d signaling.Decoder // shared: state must not leak between lines
	f.Fuzz(func(t *testing.T, line []byte) {
		agree(t, &d, line)
	})
}

func TestDecoderReuseAndInterning(t *testing.T) {
	var d signaling.Decoder
	a := []byte(`{"t":"2023-02-16T22:45:00.000125Z","kind":"mac","rb":0.95,"bytes":12000,"cell":"88"}`)
	e1, err := d.Decode(a)
	if err != nil {
		t.Fatal(err)
	}
	// The event shares no memory with the line.
	copy(a[bytes.Index(a, []byte(`"88"`))+1:], "99")
	if e1.Serving.ID != "88" {
		t.Errorf("event changed with its line: %q", e1.Serving.ID)
	}
	e2, _ := d.Decode([]byte(`{"t":"2023-02-16T22:45:00.00025Z","kind":"mac","rb":0,"bytes":0,"cell":"88"}`))
	if e2.Serving.ID != "88" || e2.Time.Equal(e1.Time) || e2.Bytes != 0 {
		t.Errorf("second event %+v", e2)
	}
	// More distinct IDs than the table holds still decode right.
	for i := range 1000 {
		id := fmt.Sprint("c", i)
		e, err := d.Decode(fmt.Appendf(nil, `{"t":"2023-02-16T22:45:00Z","kind":"mac","rb":0,"bytes":0,"cell":%q}`, id))
		if err != nil || e.Serving.ID != id {
			t.Fatalf("id %s: %+v %v", id, e, err)
		}
	}
}

// Lines of the two kinds that come at rate: a MAC slot every 125 µs on
// mmWave, and measurement reports.
var (
	macLine    = []byte(`{"t":"2023-02-16T22:45:00.000125Z","kind":"mac","rb":0.95,"bytes":12000,"cell":"88"}`)
	reportLine = []byte(`{"t":"2023-02-16T22:44:59.886Z","kind":"report","event":"A3","serving":{"id":"88","type":"sub6","rsrp":-96,"rsrq":-15.5},"neighbor":{"id":"393","type":"sub6","rsrp":-91,"rsrq":-13}}`)
)

func TestDecoderAllocs(t *testing.T) {
	var d signaling.Decoder
	for name, line := range map[string][]byte{"mac": macLine, "report": reportLine} {
		if _, err := d.Decode(line); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(1000, func() { d.Decode(line) }); n != 0 {
			t.Errorf("%s: %v allocations per line", name, n)
		}
	}
	// The whole line path: read a line from a stream, decode, hand over.
	for name, line := range map[string][]byte{"mac": macLine, "report": reportLine} {
		in := bytes.Repeat(append(line, '\n'), 2000)
		lr := signaling.NewLineReader(bytes.NewReader(in), 0)
		var sink signaling.Event
		if n := testing.AllocsPerRun(1000, func() {
			l, err := lr.Next()
			if err != nil {
				t.Fatal(err)
			}
			if sink, err = d.Decode(l); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s line path: %v allocations per line", name, n)
		}
		_ = sink
	}
}

// repeater reads buf over and over.
type repeater struct {
	buf []byte
	off int
}

func (r *repeater) Read(p []byte) (int, error) {
	n := copy(p, r.buf[r.off:])
	r.off = (r.off + n) % len(r.buf)
	return n, nil
}

// BenchmarkLinePath measures the socket path without the socket: read a
// line from a stream, decode it, hand the Event to a callback; the old
// decoder (encoding/json) and Decoder in the same run.
func BenchmarkLinePath(b *testing.B) {
	for _, kind := range []struct {
		name string
		line []byte
	}{{"mac", macLine}, {"report", reportLine}} {
		var d signaling.Decoder
		for _, dec := range []struct {
			name string
			fn   func([]byte) (signaling.Event, error)
		}{{"old", jsonv1.ParseLine}, {"new", d.Decode}} {
			b.Run(kind.name+"/"+dec.name, func(b *testing.B) {
				lr := signaling.NewLineReader(&repeater{buf: bytes.Repeat(append(kind.line, '\n'), 100)}, 0)
				var got int
				sink := func(e signaling.Event) { got += e.Bytes }
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					l, err := lr.Next()
					if err != nil && err != io.EOF {
						b.Fatal(err)
					}
					e, err := dec.fn(l)
					if err != nil {
						b.Fatal(err)
					}
					sink(e)
				}
				reportCPU(b, cpu)
			})
		}
	}
}

// The RFC 3339 fast path gives time.Parse's instant on every day of years
// 0000-9999 at several times of day and offsets.
func TestDecoderTimesAgree(t *testing.T) {
	var d signaling.Decoder
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		y, mo, dd := r.IntN(10000), 1+r.IntN(12), 1+r.IntN(31)
		ts := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", y, mo, dd, r.IntN(24), r.IntN(60), r.IntN(60))
		if r.IntN(2) == 0 {
			ts += "." + fmt.Sprintf("%09d", r.IntN(1_000_000_000))[:1+r.IntN(9)]
		}
		switch r.IntN(3) {
		case 0:
			ts += "Z"
		default:
			ts += fmt.Sprintf("%c%02d:%02d", "+-"[r.IntN(2)], r.IntN(24), r.IntN(60))
		}
		agree(t, &d, []byte(`{"t":"`+ts+`","kind":"ra","reason":"other","result":"failure"}`))
	}
}
