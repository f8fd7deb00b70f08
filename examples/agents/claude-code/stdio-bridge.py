#!/usr/bin/env python3
"""Expose the folder's MCP socket as a stdio MCP server.

Claude Code starts MCP servers as child processes speaking on stdin/stdout;
this bridge copies bytes both ways between them and the unix socket the host
bridges into the guest ($ARIZUKO_MCP_SOCKET, /run/ipc/gated.sock).
"""
import os
import socket
import sys
import threading


def main():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ.get("ARIZUKO_MCP_SOCKET", "/run/ipc/gated.sock"))

    def up():
        while True:
            b = os.read(sys.stdin.fileno(), 65536)
            if not b:
                s.shutdown(socket.SHUT_WR)
                return
            s.sendall(b)

    threading.Thread(target=up, daemon=True).start()
    while True:
        b = s.recv(65536)
        if not b:
            return
        os.write(sys.stdout.fileno(), b)


if __name__ == "__main__":
    main()
