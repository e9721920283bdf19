package signaling

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// formatExamples are the example lines of FORMAT.md; the test below keeps
// both lists identical, so the specification's examples always parse.
var formatExamples = []string{
	`{"t":"2023-02-16T22:44:59.886Z","kind":"report","event":"A3","serving":{"id":"88","type":"sub6","rsrp":-96,"rsrq":-15.5},"neighbor":{"id":"393","type":"sub6","rsrp":-91,"rsrq":-13}}`,
	`{"t":"2023-02-16T22:45:11.254Z","kind":"report","event":"A5","serving":{"id":"393","type":"sub6","rsrp":-90,"rsrq":-12},"neighbor":{"id":"522","type":"mmwave","rsrp":-88,"rsrq":0}}`,
	`{"t":"2023-02-16T22:45:20.168Z","kind":"report","event":"B1","serving":{"type":"lte","rsrp":-84,"rsrq":-13},"neighbor":{"id":"524","type":"mmwave","rsrp":-97,"rsrq":-10.5}}`,
	`{"t":"2023-02-16T22:45:04.589Z","kind":"report","event":"A3","serving":{"type":"lte","rsrp":-95,"rsrq":-19},"neighbor":{"type":"lte"}}`,
	`{"t":"2023-02-16T22:47:39.742Z","kind":"report","event":"A2","serving":{"id":"524","type":"mmwave","rsrp":-118,"rsrq":-15}}`,
	`{"t":"2023-02-06T01:38:48.036Z","kind":"report","event":"periodic","serving":{"type":"lte","rsrp":-76,"rsrq":-9}}`,
	`{"t":"2023-02-16T22:45:11.3Z","kind":"ho","ho":"sn-change","serving":{"id":"393","type":"sub6"},"target":{"id":"522","type":"mmwave"}}`,
	`{"t":"2023-02-16T22:45:04.658Z","kind":"ho","ho":"lte-anchor","serving":{"id":"393","type":"sub6"},"target":{"id":"393","type":"sub6"}}`,
	`{"t":"2023-02-16T22:44:53.17Z","kind":"ho","ho":"sn-addition","serving":{"type":"lte"},"target":{"id":"88","type":"sub6"}}`,
	`{"t":"2023-02-16T22:45:40Z","kind":"ho","ho":"sn-release","serving":{"id":"524","type":"mmwave"},"target":{"type":"lte"}}`,
	`{"t":"2023-02-16T22:45:41.5Z","kind":"ho","ho":"intra-nr","target":{"id":"cell-B","type":"mmwave"}}`,
	`{"t":"2023-02-16T22:47:40.021Z","kind":"ho","ho":"sn-release","serving":{"id":"524","type":"mmwave"},"target":{"type":"lte"},"inferred":true}`,
	`{"t":"2023-02-16T22:44:59.997Z","kind":"ra","reason":"handover","result":"success"}`,
	`{"t":"2023-02-16T22:45:32.193Z","kind":"ra","reason":"ul-data","result":"failure"}`,
	`{"t":"2023-02-16T22:45:00.000125Z","kind":"mac","rb":0.95,"bytes":12000,"cell":"88"}`,
	`{"t":"2023-02-16T22:45:00.00025Z","kind":"mac","rb":0,"bytes":0}`,
	`{"t":"2023-02-16T22:45:00.000375Z","kind":"mac","rb":0.5,"bytes":6000,"serving":{"id":"88","type":"sub6"}}`,
}

func TestFormatMDExamples(t *testing.T) {
	b, err := os.ReadFile("FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	var inDoc []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, `{"t"`) {
			inDoc = append(inDoc, line)
		}
	}
	if !slices.Equal(inDoc, formatExamples) {
		t.Errorf("FORMAT.md examples differ from formatExamples:\n%s", strings.Join(inDoc, "\n"))
	}
	kinds := map[Kind]bool{}
	for _, l := range formatExamples {
		e, err := ParseLine([]byte(l))
		if err != nil {
			t.Errorf("%s: %v", l, err)
			continue
		}
		kinds[e.Kind] = true
		// Examples are written as the Writer writes them.
		out, err := AppendJSON(nil, &e)
		if err != nil || strings.TrimSuffix(string(out), "\n") != l {
			t.Errorf("example not in canonical form:\n got %s want %s (%v)", out, l, err)
		}
	}
	if len(kinds) != 4 {
		t.Errorf("examples cover kinds %v, want all four", kinds)
	}
}
