package api

import "github.com/crackbox/crackbox/pkg/arizuko/service"

// Class is what a route does; it decides which token kinds may call it,
// before the acl gate decides on the folder.
type Class string

const (
	Public   Class = "public"   // no token needed
	Read     Class = "read"     // reads: admin and read tokens
	Write    Class = "write"    // changes: admin tokens only
	Ingest   Class = "ingest"   // posting inbound messages: admin and adapter tokens
	Outbound Class = "outbound" // reading an outbound queue: admin, read and adapter tokens
	Fleet    Class = "fleet"    // a runner pulling turns: admin and runner tokens
)

// Route is one registered method and path pattern.
type Route struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Class  Class  `json:"class"`
}

// classes names the routes whose class is not the one their method implies.
var classes = map[string]Class{
	"POST /v1/messages": Ingest,
	"POST /v1/resolve":  Read, // a dry run: stores nothing
	"GET /v1/outbound":  Outbound,

	"GET /v1/fleet/whoami":   Fleet,
	"POST /v1/fleet/claim":   Fleet,
	"POST /v1/fleet/outcome": Fleet,
	"POST /v1/fleet/renew":   Fleet,
	"POST /v1/fleet/mcp":     Fleet,

	"POST /v1/fleet/home/latest":   Fleet,
	"POST /v1/fleet/home/chunks":   Fleet,
	"POST /v1/fleet/home/upload":   Fleet,
	"POST /v1/fleet/home/manifest": Fleet,
}

// classOf is the class of an authenticated route: its entry in classes, else
// Read for GET and Write for every other method.
func classOf(method, path string) Class {
	if c, ok := classes[method+" "+path]; ok {
		return c
	}
	if method == "GET" {
		return Read
	}
	return Write
}

func (c Class) allows(kind string) bool {
	switch kind {
	case service.KindAdmin:
		return true
	case service.KindRead:
		return c == Read || c == Outbound
	case service.KindAdapter:
		return c == Ingest || c == Outbound
	case service.KindRunner:
		return c == Fleet
	case service.KindTenant:
		// The grants keep it to its tree; whole-tree routes refuse it there.
		return c == Read || c == Write || c == Ingest
	}
	return false
}
