package guest

import (
	"strings"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// TrustBundle is where guest-init writes the system CA bundle plus
// RunSpec.Net.TrustCA, and TrustEnv the variables that point tools at it.
const TrustBundle = "/run/crackbox/ca-bundle.pem"

var TrustEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"}

// CommandEnv is the command's environment: the host's RunSpec.Env plus, when the run has
// a proxy, the variables common tools read to find it. Proxy values from the host
// replace any same-named entries in Env.
func CommandEnv(rs *control.RunSpec) []string {
	url := rs.Net.ProxyURL
	var add [][2]string
	if url != "" {
		add = [][2]string{
			{"HTTP_PROXY", url}, {"HTTPS_PROXY", url}, {"ALL_PROXY", url},
			{"http_proxy", url}, {"https_proxy", url}, {"all_proxy", url},
			{"NO_PROXY", "localhost,127.0.0.1"}, {"no_proxy", "localhost,127.0.0.1"},
			{"npm_config_proxy", url}, {"npm_config_https_proxy", url},
			{"PIP_PROXY", url},
		}
	}
	if rs.Net.TrustCA != "" {
		for _, k := range TrustEnv {
			add = append(add, [2]string{k, TrustBundle})
		}
	}
	if len(add) == 0 {
		return append([]string(nil), rs.Env...)
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
