//go:build !race

package sharefs

const memScale = 1
