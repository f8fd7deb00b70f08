package proxy

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// denyText explains a refusal to whoever reads the body, which is usually an
// AI agent: it must learn that the block is policy, not a fault to route around.
func denyText(host string, port int, reason, detail string) string {
	var b strings.Builder
	target := host
	if port != 0 {
		target = host + ":" + strconv.Itoa(port)
	}
	if target == "" {
		target = "this connection"
	}
	switch reason {
	case ReasonUpstreamError, ReasonUpstreamTimeout:
		fmt.Fprintf(&b, "crackbox egress proxy: %s is allowed by the sandbox policy, but the upstream could not be reached (%s).\n", target, reason)
		if detail != "" {
			fmt.Fprintf(&b, "detail: %s\n", detail)
		}
		b.WriteString("This is a network problem on the way to the host, not a policy decision; retrying later may help.\n")
		return b.String()
	case ReasonBadRequest:
		fmt.Fprintf(&b, "crackbox egress proxy: bad request: %s\n", detail)
		b.WriteString("Send absolute-form HTTP requests (GET http://host/path) or CONNECT host:port.\n")
		return b.String()
	case ReasonTooManyConns:
		fmt.Fprintf(&b, "crackbox egress proxy: connection refused: %s\n", detail)
		return b.String()
	}
	fmt.Fprintf(&b, "crackbox egress proxy: the sandbox egress policy blocked %s.\n", target)
	switch reason {
	case ReasonAllowlist:
		fmt.Fprintf(&b, "reason: %s (the host is not on this sandbox's allowlist)\n", reason)
	case ReasonPort:
		fmt.Fprintf(&b, "reason: %s (the host is allowed, but not on this port)\n", reason)
	case ReasonPrivateAddress:
		if detail == "" {
			detail = "the destination address is one the proxy refuses"
		}
		fmt.Fprintf(&b, "reason: %s (%s)\n", reason, detail)
	case ReasonUnknownClient:
		fmt.Fprintf(&b, "reason: %s (this source address is not a registered sandbox)\n", reason)
	default:
		fmt.Fprintf(&b, "reason: %s\n", reason)
	}
	b.WriteString("This is a deliberate policy decision, not a network fault. Retrying, or going through another proxy, DNS server or IP address, will not work: all traffic leaving this sandbox passes this policy.\n")
	if reason == ReasonPrivateAddress {
		b.WriteString("If the task needs this host, stop and ask the operator to open its address as said above.\n")
	} else {
		b.WriteString("If the task needs this host, stop and ask the operator to add it to the allowlist.\n")
	}
	return b.String()
}

// statusFor maps a reason to the HTTP status of the refusal.
func statusFor(reason string) int {
	switch reason {
	case ReasonUpstreamError:
		return http.StatusBadGateway
	case ReasonUpstreamTimeout:
		return http.StatusGatewayTimeout
	case ReasonBadRequest:
		return http.StatusBadRequest
	case ReasonTooManyConns:
		return http.StatusServiceUnavailable
	}
	return http.StatusForbidden
}

// refusal returns a complete refusal response that closes the connection.
func refusal(host string, port int, reason, detail string) string {
	return refusalStatus(0, host, port, reason, detail)
}

// refusalStatus is refusal with an explicit status; 0 picks the reason's.
func refusalStatus(status int, host string, port int, reason, detail string) string {
	body := denyText(host, port, reason, detail)
	if status == 0 {
		status = statusFor(reason)
	}
	return fmt.Sprintf("HTTP/1.1 %d %s\r\n%s: %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), ErrorHeader, reason, len(body), body)
}
