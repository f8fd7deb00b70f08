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

arizuko folder add "$folder" \
  --agent "claude -p --mcp-config /home/node/.arizuko/mcp.json --allowedTools mcp__gated --output-format text"

# The folder's home (<data>/homes/<name>, each '/' written %2F) is the
# guest's home: put the MCP config, the stdio bridge and the instructions there.
data=${ARIZUKO_DATA:-/var/lib/arizuko}
home="$data/homes/$(printf '%s' "$folder" | sed 's,/,%2F,g')"
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
