package tunnel

import (
	"reflect"
	"testing"
)

// TestClientStatsAddCoversEveryCounter: m2ho run sums its clients'
// counters over redials with Add; a counter Add forgot would read 0 after
// the first redial. Each field gets its own value, twice.
func TestClientStatsAddCoversEveryCounter(t *testing.T) {
	var x ClientStats
	v := reflect.ValueOf(&x).Elem()
	for i := range v.NumField() {
		if v.Field(i).Kind() != reflect.Uint64 {
			t.Fatalf("field %s is %s: Add and this test sum uint64 counters", v.Type().Field(i).Name, v.Field(i).Kind())
		}
		v.Field(i).SetUint(uint64(i + 1))
	}
	var s ClientStats
	s.Add(x)
	s.Add(x)
	got := reflect.ValueOf(s)
	for i := range got.NumField() {
		if got.Field(i).Uint() != 2*uint64(i+1) {
			t.Errorf("%s: %d, want %d", got.Type().Field(i).Name, got.Field(i).Uint(), 2*(i+1))
		}
	}
}
