package ledger

// ClassPeakGOPS returns the datasheet's dense int8 peak of one GPU of a
// known hardware class (hardware.go), for reports that compare a measured
// figure with it.
func ClassPeakGOPS(class string) (uint64, bool) {
	c, ok := gpuClasses[class]
	return c.PeakGOPS, ok
}
