package m2ho

// Flow is the controller's per-flow state. The packet path owns the memory
// (one Flow embedded in each flow-table entry, so a new flow allocates
// nothing here) and hands it to the controller with every packet.
type Flow struct {
	// Fields are the controller's own; the packet path never reads them.
	_ struct{}
}
