package jail

// SetVMMJail turns the VMM jail on or off for the benchmark that measures its cost.
func SetVMMJail(on bool) { vmmJailOff = !on }
