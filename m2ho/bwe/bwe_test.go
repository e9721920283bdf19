package bwe

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// feed drives the common scenario, RTT 100 ms:
//
//	t=0    1000 B  opens interval 1
//	t=50   1000 B
//	t=100   500 B  closes interval 1: 2000 B / 0.1 s = 20000 B/s; opens 2 with 500 B
//	t=150  3000 B
//	t=200     0 B  closes interval 2: 3500 B / 0.1 s = 35000 B/s
//
// It returns the rate after each sample.
func feed(e Estimator) []float64 {
	rtt := 100 * time.Millisecond
	steps := []struct{ at, b int }{{0, 1000}, {50, 1000}, {100, 500}, {150, 3000}, {200, 0}}
	var out []float64
	for _, s := range steps {
		e.Sample(ms(s.at), s.b, rtt)
		out = append(out, e.Rate())
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestEstimatorsHandComputed(t *testing.T) {
	tests := []struct {
		name string
		e    Estimator
		want []float64
	}{
		// PerRTT: the last closed interval's rate.
		{"perrtt", NewPerRTT(), []float64{0, 0, 20000, 20000, 35000}},
		// Westwood: Bw_0 = 20000 (initialised from b_0);
		// Bw_1 = 19/21·20000 + 2/21·(35000+20000)/2 = (380000+55000)/21 = 435000/21.
		{"westwood", NewWestwood(), []float64{0, 0, 20000, 20000, 435000.0 / 21}},
		// Tustin τ = 0.5 s, T = 0.1 s: α = (1-0.1)/(1+0.1) = 9/11;
		// Bw_1 = 9/11·20000 + (2/11)/2·55000 = (180000+55000)/11 = 235000/11.
		{"tustin", NewTustin(500 * time.Millisecond), []float64{0, 0, 20000, 20000, 235000.0 / 11}},
		// ABEC β = 0.9, 1 RTT per interval. Interval 1 initialises
		// S = 2000 B, T̄ = 0.1 s → 20000 B/s. Interval 2: s = 35000,
		// U = 0.1·|35000-20000| = 1500, N = 0.1/0.1 = 1, s̄ = 35000,
		// τ = 0.1·(1 + 1500/35000) = 0.1·73/70, 2τ = 14.6/70,
		// α = (14.6/70 - 7/70)/(14.6/70 + 7/70) = 7.6/21.6 = 19/54;
		// S = 19/54·2000 + 35/54·3500 = 160500/54; T̄ = 0.1;
		// Bw = 160500/5.4.
		{"abec", NewABEC(0.9, 1), []float64{0, 0, 20000, 20000, 160500 / 5.4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := feed(tc.e)
			for i := range tc.want {
				if !near(got[i], tc.want[i]) {
					t.Fatalf("step %d: rate %.6f, want %.6f (all %v)", i, got[i], tc.want[i], got)
				}
			}
			tc.e.Reset()
			if r := tc.e.Rate(); r != 0 {
				t.Fatalf("after Reset rate %v, want 0", r)
			}
			// After Reset the same input gives the same answer.
			if got2 := feed(tc.e); !near(got2[4], tc.want[4]) {
				t.Fatalf("after Reset final rate %v, want %v", got2[4], tc.want[4])
			}
		})
	}
}

// ABEC's default interval is 2 RTTs: with RTT 100 ms the interval only
// closes 200 ms after it opened.
func TestABECIntervalAtLeastRTTs(t *testing.T) {
	e := NewABEC(DefaultABECBeta, DefaultABECRTTs)
	rtt := 100 * time.Millisecond
	e.Sample(ms(0), 1000, rtt)
	e.Sample(ms(150), 1000, rtt)
	if e.Rate() != 0 {
		t.Fatalf("closed before 2 RTTs: %v", e.Rate())
	}
	e.Sample(ms(200), 0, rtt) // 2000 B / 0.2 s
	if !near(e.Rate(), 10000) {
		t.Fatalf("rate %v, want 10000", e.Rate())
	}
}

// Westwood's pole drags a step: after a step from 20000 to 35000 the
// estimate moves only 1/21 of the way per sample pair.
func TestWestwoodStepSlow(t *testing.T) {
	e := NewWestwood()
	rtt := 100 * time.Millisecond
	e.Sample(ms(0), 2000, rtt)
	e.Sample(ms(100), 3500, rtt) // closes 2000 B → 20000
	e.Sample(ms(200), 3500, rtt) // closes 3500 B → 35000: Bw = 435000/21
	e.Sample(ms(300), 0, rtt)    // closes 3500 → 35000: Bw = 19/21·435000/21 + 2/21·35000
	want := 19.0/21*435000/21 + 2.0/21*35000
	if !near(e.Rate(), want) {
		t.Fatalf("rate %v, want %v", e.Rate(), want)
	}
}

func TestNoRTTNoInterval(t *testing.T) {
	for _, name := range Names {
		mk, err := ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		e := mk()
		e.Sample(ms(0), 1000, 0)
		e.Sample(ms(500), 1000, 0)
		if e.Rate() != 0 {
			t.Fatalf("%s: rate %v without an RTT", name, e.Rate())
		}
		// Once an RTT is known the accumulated bytes close: 2000+… over 0.6 s.
		e.Sample(ms(600), 0, 100*time.Millisecond)
		if !near(e.Rate(), 2000/0.6) {
			t.Fatalf("%s: rate %v, want %v", name, e.Rate(), 2000/0.6)
		}
	}
}

func TestByName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string
	}{{"perrtt", "*bwe.PerRTT"}, {"M2HO", "*bwe.PerRTT"}, {"", "*bwe.PerRTT"}, {"westwood", "*bwe.Westwood"}, {"tustin", "*bwe.Tustin"}, {"abec", "*bwe.ABEC"}} {
		mk, err := ByName(tc.name)
		if err != nil {
			t.Fatalf("%q: %v", tc.name, err)
		}
		if got := typeName(mk()); got != tc.want {
			t.Fatalf("%q: %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := ByName("vegas"); err == nil {
		t.Fatal("unknown name accepted")
	}
}

func typeName(e Estimator) string {
	switch e.(type) {
	case *PerRTT:
		return "*bwe.PerRTT"
	case *Westwood:
		return "*bwe.Westwood"
	case *Tustin:
		return "*bwe.Tustin"
	case *ABEC:
		return "*bwe.ABEC"
	}
	return "?"
}

func TestSampleAllocs(t *testing.T) {
	for _, name := range Names {
		mk, _ := ByName(name)
		e := mk()
		i := 0
		if n := testing.AllocsPerRun(1000, func() {
			i++
			e.Sample(ms(i*10), 1400, 30*time.Millisecond)
		}); n != 0 {
			t.Fatalf("%s: %v allocs per Sample", name, n)
		}
	}
}
