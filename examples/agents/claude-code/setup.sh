#!/bin/sh
# Set up a folder whose turns run Claude Code in a guest.
#
#   ANTHROPIC_API_KEY=sk-ant-... ./setup.sh demo
#
# Needs Claude Code installed on the host under /usr or /opt (the guest sees
# them read-only), e.g. `npm install -g @anthropic-ai/claude-code` as root.
set -eu
folder=${1:-demo}
here=$(cd "$(dirname "$0")" && pwd)
: "${ANTHROPIC_API_KEY:?set ANTHROPIC_API_KEY to the key the agent should use}"

# In print mode Claude Code connects its MCP servers without waiting for them;
# in a slow guest the model would be asked before the gated tools exist, so
# it waits for them (MCP_CONNECTION_NONBLOCKING=false) and gives them a
# minute to connect. No telemetry, update checks or other traffic the guest
# may not send anyway.
arizuko folder add "$folder" \
  --agent "claude -p --mcp-config /home/node/.arizuko/mcp.json --allowedTools mcp__gated --output-format text" \
  --env MCP_CONNECTION_NONBLOCKING=false \
  --env MCP_CONNECT_TIMEOUT_MS=60000 \
  --env CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1

# The folder's home is the guest's home: put the MCP config, the stdio
# bridge and the instructions there. `arizuko folder home` resolves it from
# the data dir as the daemon does (--data, $ARIZUKO_DATA or data_dir).
home=$(arizuko folder home --create "$folder")
mkdir -p "$home/.arizuko"
cp "$here/mcp.json" "$here/stdio-bridge.py" "$home/.arizuko/"
cp "$here/CLAUDE.md" "$home/CLAUDE.md"

# Egress: the model API only.
arizuko network allow "$folder" api.anthropic.com

# The credential is a sealed folder secret that never enters the guest: the
# inject grant gives Claude Code a placeholder in ANTHROPIC_API_KEY, and the
# turn's proxy swaps it for the key in HTTPS requests to api.anthropic.com
# alone (the guest trusts the proxy's per-turn CA through NODE_EXTRA_CA_CERTS).
printf '%s' "$ANTHROPIC_API_KEY" | arizuko secret set "folder:$folder" ANTHROPIC_API_KEY
arizuko grant add "folder:$folder" inject:ANTHROPIC_API_KEY@api.anthropic.com "$folder"
arizuko grant add "folder:$folder" mcp:submit_turn "$folder"

echo "ready: run \`arizuko serve\`, then \`arizuko chat $folder\`"
