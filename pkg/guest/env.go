package guest

import (
	"strings"

	"github.com/crackbox/crackbox/pkg/control"
)

// CommandEnv is the command's environment: the host's RunSpec.Env plus, when the run has
// a proxy, the variables common tools read to find it. Proxy values from the host
// replace any same-named entries in Env.
func CommandEnv(rs *control.RunSpec) []string {
	url := rs.Net.ProxyURL
	if url == "" {
		return append([]string(nil), rs.Env...)
	}
	add := [][2]string{
		{"HTTP_PROXY", url}, {"HTTPS_PROXY", url}, {"ALL_PROXY", url},
		{"http_proxy", url}, {"https_proxy", url}, {"all_proxy", url},
		{"NO_PROXY", "localhost,127.0.0.1"}, {"no_proxy", "localhost,127.0.0.1"},
		{"npm_config_proxy", url}, {"npm_config_https_proxy", url},
		{"PIP_PROXY", url},
	}
	drop := map[string]bool{}
	for _, kv := range add {
		drop[kv[0]] = true
	}
	out := make([]string, 0, len(rs.Env)+len(add))
	for _, kv := range rs.Env {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] {
			out = append(out, kv)
		}
	}
	for _, kv := range add {
		out = append(out, kv[0]+"="+kv[1])
	}
	return out
}
