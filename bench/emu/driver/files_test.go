package driver

import (
	"reflect"
	"testing"

	"github.com/m2ho/m2ho/bench/emu"
)

// The scenario files on disk are the embedded ones, loaded through the
// file-system wrapper.
func TestLoadScenarioFromDisk(t *testing.T) {
	disk, err := LoadScenario("../scenarios/mixed-drive.yaml", emu.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	md, err := Builtin("mixed-drive", emu.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(disk.Config.Schedule, md.Config.Schedule) || disk.Name != "mixed-drive" {
		t.Fatalf("disk (%s) and builtin differ", disk.Name)
	}
}
