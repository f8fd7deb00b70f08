package jail

import "github.com/crackbox/crackbox/pkg/jail/host"

// Accelerators Spec.Accel may name; pkg/jail/host decides what auto becomes on this host.
const (
	AccelAuto = host.AccelAuto
	AccelKVM  = host.AccelKVM
	AccelTCG  = host.AccelTCG
)
