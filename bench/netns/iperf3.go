package netns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Iperf3Result is what the bench needs from one iperf3 -J run.
type Iperf3Result struct {
	// BitsPerSecond is end.sum_received.bits_per_second: goodput at the
	// receiver.
	BitsPerSecond float64
	// SentBitsPerSecond is end.sum_sent.bits_per_second.
	SentBitsPerSecond float64
	// ReceivedBytes is end.sum_received.bytes.
	ReceivedBytes int64
	// Retransmits is end.sum_sent.retransmits (TCP only).
	Retransmits int64
	// Seconds is end.sum_received.seconds.
	Seconds float64
}

// ParseIperf3 reads the JSON iperf3 -J prints. An "error" member (iperf3
// reports failures inside the JSON) or a missing end.sum_received is an
// error naming the field.
func ParseIperf3(b []byte) (Iperf3Result, error) {
	var doc struct {
		Error *string `json:"error"`
		End   *struct {
			SumSent *struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Retransmits   int64   `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived *struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Bytes         int64   `json:"bytes"`
				Seconds       float64 `json:"seconds"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return Iperf3Result{}, fmt.Errorf("iperf3 JSON: %w", err)
	}
	if doc.Error != nil {
		return Iperf3Result{}, fmt.Errorf("iperf3 reported: %s", *doc.Error)
	}
	if doc.End == nil || doc.End.SumReceived == nil {
		return Iperf3Result{}, errors.New("iperf3 JSON: end.sum_received missing")
	}
	r := Iperf3Result{
		BitsPerSecond: doc.End.SumReceived.BitsPerSecond,
		ReceivedBytes: doc.End.SumReceived.Bytes,
		Seconds:       doc.End.SumReceived.Seconds,
	}
	if r.BitsPerSecond < 0 || r.ReceivedBytes < 0 || r.Seconds < 0 {
		return Iperf3Result{}, fmt.Errorf("iperf3 JSON: end.sum_received has negative values (%v bit/s, %d bytes, %v s)", r.BitsPerSecond, r.ReceivedBytes, r.Seconds)
	}
	if s := doc.End.SumSent; s != nil {
		r.SentBitsPerSecond, r.Retransmits = s.BitsPerSecond, s.Retransmits
	}
	return r, nil
}

// Iperf3Options configure one measurement.
type Iperf3Options struct {
	Seconds int    // -t; 0 means 5
	CC      string // -C; "" means cubic
	Port    int    // 0 means 5201
	Reverse bool   // -R: the server sends (downlink, as towards a phone)
}

// Iperf3 runs one iperf3 TCP test from clientNS to a one-shot server
// (iperf3 -s -1) in serverNS bound to server, and returns the client's
// JSON summary.
func (t *Topo) Iperf3(clientNS, serverNS string, server netip.Addr, o Iperf3Options) (Iperf3Result, error) {
	if o.Seconds == 0 {
		o.Seconds = 5
	}
	if o.CC == "" {
		o.CC = "cubic"
	}
	if o.Port == 0 {
		o.Port = 5201
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		return Iperf3Result{}, fmt.Errorf("iperf3 is not installed: %w", err)
	}
	port := strconv.Itoa(o.Port)
	srv := t.Exec(serverNS, "iperf3", "-s", "-1", "-B", server.String(), "-p", port)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return Iperf3Result{}, err
	}
	// Closed when the server has exited; srvErr is then its exit status.
	var srvErr error
	srvDone := make(chan struct{})
	go func() { srvErr = srv.Wait(); close(srvDone) }()
	stopServer := func() {
		select {
		case <-srvDone:
		case <-time.After(5 * time.Second):
			srv.Process.Kill()
			<-srvDone
		}
	}
	if err := t.waitListening(serverNS, port, srvDone); err != nil {
		srv.Process.Kill()
		<-srvDone
		return Iperf3Result{}, fmt.Errorf("%w (server exit: %v); server said: %s", err, srvErr, bytes.TrimSpace(srvOut.Bytes()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.Seconds+30)*time.Second)
	defer cancel()
	args := []string{"netns", "exec", t.NSName(clientNS), "iperf3", "-c", server.String(), "-p", port,
		"-t", strconv.Itoa(o.Seconds), "-J", "-C", o.CC}
	if o.Reverse {
		args = append(args, "-R")
	}
	cli := exec.CommandContext(ctx, "ip", args...)
	var stderr bytes.Buffer
	cli.Stderr = &stderr
	out, cerr := cli.Output()
	stopServer()
	r, perr := ParseIperf3(out)
	if perr != nil {
		return r, fmt.Errorf("iperf3 client in %s: %v; %w; stderr: %s; JSON: %s", clientNS, cerr, perr, bytes.TrimSpace(stderr.Bytes()), excerpt(out, 600))
	}
	return r, nil
}

// excerpt is the start of b, cut at n bytes with a note of the rest.
func excerpt(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) <= n {
		return string(b)
	}
	return fmt.Sprintf("%s... (%d more bytes)", b[:n], len(b)-n)
}

// waitListening polls ss in ns until a TCP socket listens on port.
func (t *Topo) waitListening(ns, port string, exited <-chan struct{}) error {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("iperf3 server exited early")
		default:
		}
		out, err := t.Exec(ns, "ss", "-Hltn", "sport = :"+port).Output()
		if err == nil && strings.TrimSpace(string(out)) != "" {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("iperf3 server in %s not listening on port %s after 5s", ns, port)
}
