package inject

import "fmt"

// CheckValue refuses a value New would refuse, so a store of secrets can
// refuse it when it is set rather than fail every later run that injects it.
func CheckValue(name, value string) error {
	if len(value) < MinValueLen {
		return fmt.Errorf("secret %s: value is %d bytes, injection needs at least %d (a shorter value would be scrubbed out of unrelated response bytes by chance): %w",
			name, len(value), MinValueLen, ErrBadSecret)
	}
	return nil
}
