#!/usr/bin/env python3
"""A tiny scripted arizuko agent, used by the tests and as a template.

It reads the turn's prompt on stdin, talks MCP (newline-delimited JSON-RPC)
over the folder's socket ($ARIZUKO_MCP_SOCKET, /run/ipc/gated.sock in the
guest) and acts on the last message's text:

  FAIL                      exit 1 without replying (the host retries)
  STDOUT <text>             print <text> on stdout (and 20 KB of noise on stderr
                            around it) and exit 0 without calling a reply tool
  DELEGATE <folder> <chat>  delegate_group(folder, rest of text, chat)
  ESCALATE <chat>           escalate_group(rest of text, chat)
  TRY <tool> <json-args>    call any tool and reply with what it answered
  PROBE                     reply with what this guest can see of other folders
                            and whether it can fetch a host off its allowlist
  anything else             reply "echo: <text>", noting observed context
"""
import json
import os
import re
import socket
import sys
import time


class MCP:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rwb")
        self.next_id = 0
        self.request("initialize", {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "scripted-agent", "version": "1"},
        })
        self.notify("notifications/initialized", {})

    def send(self, msg):
        self.file.write(json.dumps(msg).encode() + b"\n")
        self.file.flush()

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method, params):
        self.next_id += 1
        want = self.next_id
        self.send({"jsonrpc": "2.0", "id": want, "method": method, "params": params})
        while True:
            line = self.file.readline()
            if not line:
                raise RuntimeError("mcp socket closed")
            msg = json.loads(line)
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(msg["error"].get("message", "mcp error"))
                return msg["result"]

    def call(self, tool, args):
        res = self.request("tools/call", {"name": tool, "arguments": args})
        text = "".join(c.get("text", "") for c in res.get("content", []))
        return bool(res.get("isError")), text

    def tools(self):
        return [t["name"] for t in self.request("tools/list", {}).get("tools", [])]


def unescape(s):
    return s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")


def main():
    prompt = sys.stdin.read()
    texts = re.findall(r"<messages[^>]*>(.*?)</messages>", prompt, re.S)
    msgs = re.findall(r"<message [^>]*>(.*?)</message>", texts[0] if texts else "", re.S)
    last = unescape(msgs[-1]) if msgs else ""
    observed = re.findall(r"<observed folder=\"([^\"]*)\">(.*?)</observed>", prompt, re.S)

    if last.startswith("FAIL"):
        print("failing on purpose", file=sys.stderr)
        return 1
    if last.startswith("STDOUT "):
        # The pauses keep the order of the two streams in the host's tail.
        for i in range(400):
            print("noise %04d %s" % (i, "x" * 40), file=sys.stderr)
        sys.stderr.flush()
        time.sleep(0.2)
        print(last[len("STDOUT "):])
        sys.stdout.flush()
        time.sleep(0.2)
        print("stderr after the answer", file=sys.stderr)
        return 0

    mcp = MCP(os.environ.get("ARIZUKO_MCP_SOCKET", "/run/ipc/gated.sock"))
    tools = mcp.tools()
    print("tools:", ",".join(tools), file=sys.stderr)
    words = last.split(" ", 3)
    note = ""
    if observed:
        note = " [observed " + ",".join(f"{name}:{len(re.findall('<message ', body))}" for name, body in observed) + "]"

    if words[0] == "DELEGATE" and len(words) >= 3:
        err, text = mcp.call("delegate_group", {"folder": words[1], "chat_jid": words[2],
                                                "prompt": words[3] if len(words) > 3 else "go"})
        mcp.call("reply", {"text": ("delegation refused: " if err else "delegated: ") + text})
    elif words[0] == "ESCALATE" and len(words) >= 2:
        rest = last.split(" ", 2)
        err, text = mcp.call("escalate_group", {"chat_jid": rest[1], "prompt": rest[2] if len(rest) > 2 else "help"})
        mcp.call("reply", {"text": ("escalation refused: " if err else "escalated: ") + text})
    elif words[0] == "TRY" and len(words) >= 2:
        rest = last.split(" ", 2)
        args = json.loads(rest[2]) if len(rest) > 2 else {}
        err, text = mcp.call(rest[1], args)
        mcp.call("reply", {"text": ("denied: " if err else "ok: ") + text})
    elif words[0] == "PROBE":
        seen = []
        for path in ["/run/ipc", os.path.dirname(os.environ.get("HOME", "/home/node"))]:
            try:
                seen.append(path + "=" + ",".join(sorted(os.listdir(path))))
            except OSError as e:
                seen.append(path + "!" + e.strerror)
        try:
            import urllib.request
            urllib.request.urlopen("http://blocked.invalid/", timeout=20)
            seen.append("fetch=open")
        except Exception as e:
            seen.append("fetch=" + type(e).__name__)
        with open(os.path.join(os.environ.get("HOME", "."), "probe.txt"), "w") as f:
            f.write(os.environ.get("ARIZUKO_FOLDER", "") + "\n")
        mcp.call("reply", {"text": "probe: " + " ".join(seen) + " env=" +
                           ",".join(sorted(k for k in os.environ if k.endswith("_KEY") or k.endswith("TOKEN"))) + note})
    else:
        mcp.call("reply", {"text": "echo: " + last + note})
    if "submit_turn" in tools:
        mcp.call("submit_turn", {"status": "ok", "result": "handled " + (words[0] if words else "")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
