package jail

// SecretPaths lets the guest secrets test check that every mask has a case.
var SecretPaths = secretPaths
