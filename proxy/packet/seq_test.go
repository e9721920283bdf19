package packet

import "testing"

func TestSeqCompareWraps(t *testing.T) {
	cases := []struct {
		a, b uint32
		less bool // a before b
	}{
		{1, 2, true},
		{2, 1, false},
		{0xffffff00, 0x10, true}, // b is past the wrap: still after a
		{0x10, 0xffffff00, false},
		{0, 0x7fffffff, true},
		{0x7fffffff, 0x80000000, true},
		{0xffffffff, 0, true},
	}
	for _, c := range cases {
		if got := SeqLess(c.a, c.b); got != c.less {
			t.Errorf("SeqLess(%#x, %#x) = %v, want %v", c.a, c.b, got, c.less)
		}
		if got := SeqGreater(c.b, c.a); got != c.less {
			t.Errorf("SeqGreater(%#x, %#x) = %v, want %v", c.b, c.a, got, c.less)
		}
		if got := SeqGEQ(c.a, c.b); got == c.less {
			t.Errorf("SeqGEQ(%#x, %#x) = %v, want %v", c.a, c.b, got, !c.less)
		}
		if got := SeqLEQ(c.b, c.a); got == c.less {
			t.Errorf("SeqLEQ(%#x, %#x) = %v, want %v", c.b, c.a, got, !c.less)
		}
	}
	for _, a := range []uint32{0, 1, 0x7fffffff, 0x80000000, 0xffffffff} {
		if SeqLess(a, a) || SeqGreater(a, a) || !SeqLEQ(a, a) || !SeqGEQ(a, a) {
			t.Errorf("%#x compared with itself", a)
		}
	}
}
