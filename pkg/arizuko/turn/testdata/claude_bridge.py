#!/usr/bin/env python3
"""Test agent: what a Claude Code turn needs, with the API key injected, never held.

It runs `claude --version`, then starts the folder's MCP server the way Claude Code
does, from ~/.arizuko/mcp.json (examples/agents/claude-code: python3 stdio-bridge.py),
lists its tools over stdio and replies through it with both.
"""
import json
import os
import subprocess
import sys


def log(msg):
    print("check: " + msg, file=sys.stderr, flush=True)


def main():
    sys.stdin.read()
    home = os.environ["HOME"]
    log("claude --version")
    ver = subprocess.run(["claude", "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=480)
    log("claude: %r" % ver.stdout)
    version = (ver.stdout.strip() or "exit %d: %s" % (ver.returncode, ver.stderr.strip()[-200:]))

    cfg = json.load(open(os.path.join(home, ".arizuko", "mcp.json")))["mcpServers"]["gated"]
    log("starting %s" % cfg)
    srv = subprocess.Popen([cfg["command"]] + cfg["args"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    next_id = [0]

    def request(method, params):
        next_id[0] += 1
        srv.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next_id[0], "method": method, "params": params}).encode() + b"\n")
        srv.stdin.flush()
        while True:
            line = srv.stdout.readline()
            if not line:
                raise RuntimeError("mcp server closed stdout")
            msg = json.loads(line)
            if msg.get("id") == next_id[0]:
                if "error" in msg:
                    raise RuntimeError(msg["error"].get("message"))
                return msg["result"]

    request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "claude-bridge-check", "version": "1"}})
    srv.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}}).encode() + b"\n")
    srv.stdin.flush()
    log("initialized")
    tools = sorted(t["name"] for t in request("tools/list", {}).get("tools", []))
    # The example injects the API key: the guest holds a placeholder at most.
    key = os.environ.get("ANTHROPIC_API_KEY", "none")[:len("crackbox-secret-")]
    request("tools/call", {"name": "reply", "arguments": {"text": "claude=%s key=%s tools=%s" % (version, key, ",".join(tools))}})
    srv.stdin.close()
    srv.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
