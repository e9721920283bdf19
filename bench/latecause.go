package bench

import (
	"fmt"
	"sort"
	"strings"
)

// lateCauses renders the late deliveries by cause, largest first, as
// percentages of all late deliveries ("" when none were late).
func lateCauses(c map[string]int64) string {
	var total int64
	keys := make([]string, 0, len(c))
	for k, n := range c {
		if n > 0 {
			total += n
			keys = append(keys, k)
		}
	}
	if total == 0 {
		return ""
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.1f %%", k, 100*float64(c[k])/float64(total))
	}
	return strings.Join(parts, ", ")
}
