// Package httpjson is the JSON-over-HTTP plumbing both daemons and their
// clients share: the bearer check, the {"error","message"} envelope, a
// strict request decoder and a client that sends a bearer token and turns
// an error answer into a typed error.
package httpjson
