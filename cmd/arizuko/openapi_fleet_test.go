package main

import (
	"context"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// The fleet routes' real answers (a runner's identity, and refusals of
// claims, outcomes and tool sessions for dispatches the runner does not
// hold) validate against the document.
func TestOpenAPIFleetSamples(t *testing.T) {
	srv, router, l := specServer(t, fleetTurns(t))
	rt, err := l.AddToken(service.WithPrincipal(context.Background(), service.AdminPrincipal), service.TokenIn{Name: "host-1", Kind: service.KindRunner})
	if err != nil {
		t.Fatal(err)
	}
	claim := `{"turn":7,"attempt":1,"dispatch":"d-1","folder":"acme"}`
	steps := []struct {
		method, path, token, body string
		header                    map[string]string
		status                    int
	}{
		{"GET", "/v1/fleet/whoami", rt.Secret, "", nil, 200},
		{"GET", "/v1/fleet/whoami", "azk_wrong", "", nil, 401},
		{"POST", "/v1/fleet/claim", rt.Secret, claim, nil, 409},
		{"POST", "/v1/fleet/claim", rt.Secret, `{"turn":"x"}`, nil, 400},
		{"POST", "/v1/fleet/outcome", rt.Secret, `{"turn":7,"attempt":1,"dispatch":"d-1","folder":"acme","exit":0}`, nil, 409},
		{"POST", "/v1/fleet/renew", rt.Secret, claim, nil, 409},
		{"POST", "/v1/fleet/mcp", rt.Secret, "", map[string]string{"Upgrade": "arizuko-mcp", "Connection": "Upgrade", "X-Arizuko-Claim": claim}, 409},
		{"POST", "/v1/fleet/mcp", rt.Secret, "", map[string]string{"Upgrade": "arizuko-mcp", "X-Arizuko-Claim": "{"}, 400},
		{"POST", "/v1/fleet/home/latest", rt.Secret, claim, nil, 409},
		{"POST", "/v1/fleet/home/chunks", rt.Secret, `{"turn":7,"attempt":1,"dispatch":"d-1","folder":"acme","hashes":[]}`, nil, 409},
		{"POST", "/v1/fleet/home/manifest", rt.Secret, `{"entries":[]}`, map[string]string{"X-Arizuko-Claim": claim}, 409},
		{"POST", "/v1/fleet/home/upload", rt.Secret, "", map[string]string{"X-Arizuko-Claim": "{"}, 400},
		{"GET", "/v1/folders", rt.Secret, "", nil, 403},
	}
	for _, st := range steps {
		checkStep(t, router, srv.URL, st.method, st.path, st.token, st.body, st.header, st.status)
	}
}
