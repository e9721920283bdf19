package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseRecvLine(t *testing.T) {
	tests := []struct {
		line  string
		ok    bool
		err   bool
		bytes int64
		s, e  float64
	}{
		{line: "[  5]   0.00-0.10   sec  1.25 MBytes   105 Mbits/sec                  ", ok: true, bytes: 1310720, s: 0, e: 0.1},
		{line: "[  5]  12.30-12.40  sec  1280 KBytes  104858 Kbits/sec", ok: true, bytes: 1280 * 1024, s: 12.3, e: 12.4},
		{line: "[  5]   0.10-0.20   sec  0.00 Bytes  0.00 bits/sec", ok: true, bytes: 0, s: 0.1, e: 0.2},
		{line: "[  5]   0.00-1.00   sec  12.0 MBytes   101 Mbits/sec                  receiver"},
		{line: "[ ID] Interval           Transfer     Bitrate"},
		{line: "[  5] local 127.0.0.1 port 5299 connected to 127.0.0.1 port 42316"},
		{line: "Server listening on 5201 (test #1)"},
		{line: "[SUM]   0.00-0.10   sec  1.25 MBytes   105 Mbits/sec"},
		{line: "[  5]   0.20-0.10   sec  1.25 MBytes   105 Mbits/sec", err: true},
		{line: "[  5]   x-0.10   sec  1.25 MBytes   105 Mbits/sec", err: true},
		{line: "[  5]   0.00-0.10   sec  1.25 Parsecs   105 Mbits/sec", err: true},
	}
	for _, tc := range tests {
		iv, ok, err := ParseRecvLine(tc.line)
		if (err != nil) != tc.err || ok != tc.ok {
			t.Errorf("%q: ok %v err %v, want ok %v err %v", tc.line, ok, err, tc.ok, tc.err)
			continue
		}
		if ok && (iv.Bytes != tc.bytes || iv.Start != tc.s || iv.End != tc.e) {
			t.Errorf("%q: %+v, want %d bytes %v-%v", tc.line, iv, tc.bytes, tc.s, tc.e)
		}
	}
}

func TestReadersNameTheLine(t *testing.T) {
	tests := []struct {
		name string
		read func(string) error
		in   string
		want string
	}{
		{"capacity header", func(s string) error { _, err := ReadCapacity(strings.NewReader(s), "c.tsv"); return err },
			"t\tmbps\n", "c.tsv:1: header"},
		{"capacity number", func(s string) error { _, err := ReadCapacity(strings.NewReader(s), "c.tsv"); return err },
			"t_s\tmbps\tcell\ttype\n0.0\t10\ta\tsub6\n0.1\tfast\ta\tsub6\n", "c.tsv:3: mbps"},
		{"capacity order", func(s string) error { _, err := ReadCapacity(strings.NewReader(s), "c.tsv"); return err },
			"t_s\tmbps\tcell\ttype\n0.1\t10\ta\tsub6\n0.1\t10\ta\tsub6\n", "c.tsv:3: t_s"},
		{"capacity empty", func(s string) error { _, err := ReadCapacity(strings.NewReader(s), "c.tsv"); return err },
			"", "c.tsv: empty"},
		{"handover type", func(s string) error { _, err := ReadHandovers(strings.NewReader(s), "h.tsv"); return err },
			"report_s\tcommand_s\tra_s\tfrom\tto\ttype\n1\t1.1\t1.2\ta\tb\tdiagonal\n", "h.tsv:2: type"},
		{"handover order", func(s string) error { _, err := ReadHandovers(strings.NewReader(s), "h.tsv"); return err },
			"report_s\tcommand_s\tra_s\tfrom\tto\ttype\n1\t1.3\t1.2\ta\tb\thorizontal\n", "h.tsv:2: want 0 <= report_s"},
		{"handover fields", func(s string) error { _, err := ReadHandovers(strings.NewReader(s), "h.tsv"); return err },
			"report_s\tcommand_s\tra_s\tfrom\tto\ttype\n1\t1.1\n", "h.tsv:2: 2 fields"},
		{"false alarm", func(s string) error { _, err := ReadFalseAlarms(strings.NewReader(s), "f.tsv"); return err },
			"report_s\ta1_s\n2\t1\n", "f.tsv:2:"},
		{"emulator json", func(s string) error { _, err := ReadEmulatorSummary([]byte(s), "e.json"); return err },
			`{"valid":true}`, "e.json: start_unix_ns"},
		{"iperf3 error", func(s string) error { _, err := ReadIperf3Sender([]byte(s), "i.json"); return err },
			`{"error":"unable to connect"}`, "i.json: iperf3 reported: unable to connect"},
		{"iperf3 receiver", func(s string) error { _, err := ReadIperf3Sender([]byte(s), "i.json"); return err },
			`{"intervals":[{"streams":[{"start":0,"end":0.1,"bytes":5,"sender":false}]}]}`, "intervals[0].streams[0].sender"},
		{"recv log", func(s string) error { _, err := ReadRecvLog(strings.NewReader(s), "r.log"); return err },
			"123\tServer listening\nxyz\t[  5] 0.00-0.10 sec 1 KBytes 8 Kbits/sec\n", "r.log:2: timestamp"},
	}
	for _, tc := range tests {
		err := tc.read(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestReadersGood(t *testing.T) {
	hos, err := ReadHandovers(strings.NewReader("report_s\tcommand_s\tra_s\tfrom\tto\ttype\r\n4.854\t5.000\t5.060\ta\tb\tsub6-to-mmwave\r\n\n"), "h")
	want := []HandoverRow{{Report: 4.854, Command: 5, RA: 5.06, From: "a", To: "b", Type: "sub6-to-mmwave", OverflowDrops: -1, FlushedHoles: -1, FlushedEarly: -1}}
	if err != nil || !reflect.DeepEqual(hos, want) {
		t.Errorf("handovers %+v %v, want %+v", hos, err, want)
	}
	// With the per-handover counters.
	hos, err = ReadHandovers(strings.NewReader("report_s\tcommand_s\tra_s\tfrom\tto\ttype\toverflow_drops\tflushed_holes\tflushed_early\n4.854\t5.000\t5.060\ta\tb\tsub6-to-mmwave\t12\t3\t40\n"), "h")
	want = []HandoverRow{{Report: 4.854, Command: 5, RA: 5.06, From: "a", To: "b", Type: "sub6-to-mmwave", OverflowDrops: 12, FlushedHoles: 3, FlushedEarly: 40}}
	if err != nil || !reflect.DeepEqual(hos, want) {
		t.Errorf("handovers with counters %+v %v, want %+v", hos, err, want)
	}
	if _, err = ReadHandovers(strings.NewReader("report_s\tcommand_s\tra_s\tfrom\tto\ttype\toverflow_drops\tflushed_holes\tflushed_early\n4.854\t5.000\t5.060\ta\tb\thorizontal\t-1\t3\t40\n"), "h"); err == nil || !strings.Contains(err.Error(), "h:2: overflow_drops") {
		t.Errorf("negative count: %v", err)
	}
	s, err := ReadIperf3Sender([]byte(`{"start":{"timestamp":{"timesecs":17}},"intervals":[{"streams":[{"start":0,"end":0.1,"bytes":5,"retransmits":2,"rtt":70123,"snd_cwnd":9,"sender":true}]}]}`), "i")
	if err != nil || s.TimeSecs != 17 || len(s.Intervals) != 1 || s.Intervals[0] != (SenderInterval{End: 0.1, Bytes: 5, Retransmits: 2, RTTus: 70123, CwndBytes: 9}) {
		t.Errorf("sender %+v %v", s, err)
	}
}

func FuzzParseRecvLine(f *testing.F) {
	for _, s := range []string{"[  5]   0.00-0.10   sec  1.25 MBytes   105 Mbits/sec", "[ ID] Interval", "[  5] 1e308-1e309 sec 1 GBytes 1 x", "[", "[]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		iv, ok, err := ParseRecvLine(s)
		if ok && (err != nil || iv.End < iv.Start || iv.Bytes < 0 || iv.Start < 0) {
			t.Fatalf("%q: accepted %+v err %v", s, iv, err)
		}
	})
}

func FuzzReadHandovers(f *testing.F) {
	f.Add("report_s\tcommand_s\tra_s\tfrom\tto\ttype\n1\t1.1\t1.2\ta\tb\thorizontal\n")
	f.Add("report_s\tcommand_s\tra_s\tfrom\tto\ttype\nNaN\t1\t1\ta\tb\thorizontal\n")
	f.Fuzz(func(t *testing.T, s string) {
		hos, err := ReadHandovers(strings.NewReader(s), "h")
		if err != nil {
			return
		}
		for i, h := range hos {
			if h.Report > h.Command || h.Command > h.RA || (i > 0 && h.Command < hos[i-1].Command) {
				t.Fatalf("accepted out-of-order row %+v", h)
			}
		}
	})
}

func FuzzReadCapacity(f *testing.F) {
	f.Add("t_s\tmbps\tcell\ttype\n0.0\t10\ta\tsub6\n0.1\t0\ta\tsub6\n")
	f.Add("t_s\tmbps\tcell\ttype\n0.0\t-1\ta\tsub6\n")
	f.Fuzz(func(t *testing.T, s string) {
		caps, err := ReadCapacity(strings.NewReader(s), "c")
		if err != nil {
			return
		}
		for i, c := range caps {
			if c.Mbps < 0 || (i > 0 && c.T <= caps[i-1].T) {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}

func FuzzReadIperf3Sender(f *testing.F) {
	f.Add([]byte(`{"start":{"timestamp":{"timesecs":17}},"intervals":[{"streams":[{"start":0,"end":0.1,"bytes":5,"sender":true}]}]}`))
	f.Add([]byte(`{"intervals":[{"streams":[]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ReadIperf3Sender(b, "i")
		if err != nil {
			return
		}
		for _, iv := range s.Intervals {
			if iv.End < iv.Start || iv.Bytes < 0 || iv.RTTus < 0 {
				t.Fatalf("accepted %+v", iv)
			}
		}
	})
}

func FuzzReadRecvLog(f *testing.F) {
	f.Add("1\t[  5]   0.00-0.10   sec  1.25 MBytes   105 Mbits/sec\n2\tServer listening\n")
	f.Fuzz(func(t *testing.T, s string) {
		ivs, err := ReadRecvLog(strings.NewReader(s), "r")
		if err != nil {
			return
		}
		for _, iv := range ivs {
			if iv.ArrivalNs <= 0 || iv.End < iv.Start {
				t.Fatalf("accepted %+v", iv)
			}
		}
	})
}

func TestParseVariants(t *testing.T) {
	vs, err := ParseVariants([]string{"pass", "m2ho", "lam2"}, []string{"lam2=--default-mode m2ho  --lambda 2"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Variant{{Name: "pass", Args: []string{"--default-mode", "pass"}}, {Name: "m2ho", Args: []string{"--default-mode", "m2ho"}},
		{Name: "lam2", Args: []string{"--default-mode", "m2ho", "--lambda", "2"}}}
	if !reflect.DeepEqual(vs, want) {
		t.Errorf("%+v, want %+v", vs, want)
	}
	for _, bad := range [][]string{{"quic2"}, {"pass", "pass"}, {}} {
		if _, err := ParseVariants(bad, nil); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	if _, err := ParseVariants([]string{"x"}, []string{"x y=--a"}); err == nil {
		t.Error("bad definition name accepted")
	}
	// Defined tunnel variants start the server: by their mode, with the
	// server's defaults (or the builtin's of that name), or with the
	// arguments after '|'; a builtin redefined as plain TCP does not.
	vs, err = ParseVariants([]string{"q1", "q2", "q3", "quic", "quic-wave"}, []string{
		"q1=--default-mode quic --tunnel-count-drops",
		"q2=--default-mode m2ho --flow tcp dst-port 5201 mode=quic+m2ho",
		"q3=--default-mode quic | --pacer wave",
		"quic=--default-mode quic --tunnel-reader-yield=false",
		"quic-wave=--default-mode m2ho",
	})
	if err != nil {
		t.Fatal(err)
	}
	wantServer := [][]string{{}, {}, {"--pacer", "wave"}, {"--pacer", "none"}, nil}
	for i, v := range vs {
		if !reflect.DeepEqual(v.ServerArgs, wantServer[i]) {
			t.Errorf("%s: server args %q, want %q", v.Name, v.ServerArgs, wantServer[i])
		}
	}
	if !reflect.DeepEqual(vs[2].Args, []string{"--default-mode", "quic"}) {
		t.Errorf("q3: run args %q", vs[2].Args)
	}
	if _, err := ParseVariants([]string{"x"}, []string{"x=--a | --b | --c"}); err == nil {
		t.Error("two '|' accepted")
	}
}

// A second bench into the same --out replaces the earlier one's runs
// (their logs append), and refuses to touch anything that is not one.
func TestClearRuns(t *testing.T) {
	dir := t.TempDir()
	if n, err := clearRuns(dir); n != 0 || err != nil {
		t.Fatalf("no runs/: %d %v", n, err)
	}
	for _, p := range []string{"runs/pass-1/run.json", "runs/pass-1/verdicts.tsv", "runs/m2ho-12/emu/mm-down.log", "runs/quic+m2ho-1/run.json"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := clearRuns(dir); n != 3 || err != nil {
		t.Fatalf("cleared %d, %v; want 3", n, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "runs")); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
	for _, bad := range []string{"runs/notes.txt", "runs/mine/data.csv"} {
		d := t.TempDir()
		keep := filepath.Join(d, "runs/pass-1/run.json")
		for _, p := range []string{keep, filepath.Join(d, bad)} {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := clearRuns(d); err == nil || !strings.Contains(err.Error(), filepath.Join(d, filepath.Dir(bad))) && !strings.Contains(err.Error(), filepath.Join(d, bad)) {
			t.Errorf("%s: %v, want an error naming it", bad, err)
		}
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s: the run beside it was removed: %v", bad, err)
		}
	}
}
