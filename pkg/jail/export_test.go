package jail

// SetVMMJail turns the VMM jail on or off for the benchmark that measures its cost.
func SetVMMJail(on bool) { vmmJailOff = !on }

// ClaimVMMUID holds a vmm uid as a concurrent run would, until release is called.
func ClaimVMMUID(base string) (uid uint32, release func(), err error) {
	c, err := claimVMMUID(base)
	if err != nil {
		return 0, nil, err
	}
	return c.UID, c.release, nil
}

// SecretPaths lets the guest secrets test check that every mask has a case.
var SecretPaths = secretPaths

// CgroupSupport lets the guest test know whether this host gives runs a cgroup leaf.
var CgroupSupport = cgroupSupport
