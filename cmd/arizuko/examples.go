package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// examples is the Examples section of every command's --help, by command path.
// Kept in one place so a new command without examples fails TestEveryCommandHasExamples.
var examples = map[string]string{
	"arizuko": `arizuko init
arizuko folder add demo --agent "python3 /home/node/agent.py"
arizuko serve &
arizuko chat demo`,
	"arizuko init": `sudo arizuko init                     # /var/lib/arizuko
arizuko init --data ~/arizuko`,
	"arizuko serve": `arizuko serve
arizuko serve --data /var/lib/arizuko --log-level debug
arizuko serve --nats nats://n1:4222,nats://n2:4222,nats://n3:4222`,
	"arizuko runner": `arizuko token add kvm-host-1 --kind runner
arizuko runner --nats nats://n1:4222,nats://n2:4222 --server https://arizuko.internal:7480 --token azk_… --capacity 4 --label kvm=true`,
	"arizuko adapter": `arizuko adapter test http://127.0.0.1:7490/arizuko --secret "$SECRET" --chat slack:C0123/1700000000.000100
SLACK_SIGNING_SECRET=… SLACK_BOT_TOKEN=xoxb-… arizuko adapter slack --listen 127.0.0.1:7490`,
	"arizuko adapter test": `ARIZUKO_ADAPTER_SECRET=… arizuko adapter test http://127.0.0.1:7490/arizuko --chat slack:C0123/1700000000.000100`,
	"arizuko adapter slack": `SLACK_SIGNING_SECRET=… SLACK_BOT_TOKEN=xoxb-… arizuko adapter slack --listen 127.0.0.1:7490
arizuko adapter slack --listen 0.0.0.0:7490 --callback http://slack-adapter.internal:7490   # the daemon elsewhere`,
	"arizuko chat": `arizuko chat demo
arizuko chat corp/eng --topic release`,
	"arizuko folder": `arizuko folder add demo --agent "python3 /home/node/agent.py"
arizuko folder ls`,
	"arizuko folder add": `arizuko folder add demo --agent "python3 /home/node/agent.py"
arizuko folder add corp/eng --name "Engineering" --memory 1024 --cpus 2`,
	"arizuko folder ls": `arizuko folder ls --json`,
	"arizuko folder rm": `arizuko folder rm corp/eng`,
	"arizuko folder set": `arizuko folder set demo --agent "claude -p --mcp-config /home/node/.arizuko/mcp.json"
arizuko folder set demo --env MCP_CONNECT_TIMEOUT_MS=60000 --unset-env DEBUG
arizuko folder set demo --stdout-reply          # deliver the agent's stdout when it calls no reply tool
arizuko folder set demo --stdout-reply=off`,
	"arizuko folder home": `arizuko folder home demo
cp CLAUDE.md "$(arizuko folder home demo --create)/"`,
	"arizuko folder budget": `arizuko folder budget demo            # show
arizuko folder budget demo 50         # at most 50 turns per 24 h
arizuko folder budget demo default`,
	"arizuko home": `arizuko home push demo examples/agents/scripted
arizuko home log demo`,
	"arizuko home log":     `arizuko home log demo --json`,
	"arizuko home diff":    `arizuko home diff demo 3 4             # what turn 4's commit changed`,
	"arizuko home restore": `arizuko home restore demo --version 3   # the next turn starts from version 3`,
	"arizuko home push": `arizuko home push demo examples/agents/scripted
arizuko home push corp/eng ./backup/corp-eng`,
	"arizuko home pull": `arizuko home pull demo ./backup/demo`,
	"arizuko route": `arizuko route add --seq 10 --match 'platform=term' --target demo
arizuko route ls`,
	"arizuko route add": `arizuko route add --seq 10 --match 'platform=term' --target demo
arizuko route add --seq 20 --match 'platform=slack chat_jid=slack:C0123*' --target corp/eng#support`,
	"arizuko route ls": `arizuko route ls`,
	"arizuko route rm": `arizuko route rm 3`,
	"arizuko grant": `arizuko grant add folder:demo inject:ANTHROPIC_API_KEY@api.anthropic.com demo
arizuko grant ls`,
	"arizuko grant add": `arizuko grant add folder:demo inject:ANTHROPIC_API_KEY@api.anthropic.com demo
arizuko grant add folder:demo shell:env:GIT_AUTHOR_NAME demo
arizuko grant add --deny user:mallory '*' corp`,
	"arizuko grant ls":       `arizuko grant ls --json`,
	"arizuko grant rm":       `arizuko grant rm 7`,
	"arizuko grant member":   `arizuko grant member user:alice role:operator`,
	"arizuko grant unmember": `arizuko grant unmember user:alice role:operator`,
	"arizuko grant members":  `arizuko grant members`,
	"arizuko audit":          `arizuko audit`,
	"arizuko network": `arizuko network allow demo api.anthropic.com
arizuko network ls demo`,
	"arizuko network allow": `arizuko network allow demo api.anthropic.com '*.githubusercontent.com'`,
	"arizuko network deny":  `arizuko network deny corp/eng pypi.org`,
	"arizuko network rm":    `arizuko network rm demo api.anthropic.com`,
	"arizuko network ls":    `arizuko network ls demo`,
	"arizuko secret": `arizuko secret set demo ANTHROPIC_API_KEY < key.txt
arizuko secret ls demo`,
	"arizuko secret set": `arizuko secret set demo ANTHROPIC_API_KEY       # reads the value from stdin
printf %s "$KEY" | arizuko secret set demo ANTHROPIC_API_KEY`,
	"arizuko secret rm":     `arizuko secret rm demo ANTHROPIC_API_KEY`,
	"arizuko secret ls":     `arizuko secret ls demo`,
	"arizuko secret rotate": `arizuko secret rotate`,
	"arizuko secret keygen": `arizuko secret keygen > /etc/arizuko/secrets.key`,
	"arizuko send":          `arizuko send web:demo "hello"`,
	"arizuko resolve":       `arizuko resolve term:alice --platform term`,
	"arizuko messages":      `arizuko messages web:demo --json`,
	"arizuko turns": `arizuko turns ls
arizuko turns show 12`,
	"arizuko observe": `arizuko observe ls
arizuko observe rm acme globex`,
	"arizuko observe ls": `arizuko observe ls
arizuko observe ls acme               # what acme observes`,
	"arizuko observe rm": `arizuko observe rm acme globex        # acme no longer sees globex's messages`,
	"arizuko token": `arizuko token add grafana --kind read
arizuko token ls`,
	"arizuko token add": `arizuko token add grafana --kind read
arizuko token add slack-bot --kind adapter --platform slack`,
	"arizuko token ls": `arizuko token ls --json`,
	"arizuko hook": `arizuko hook add corp/eng --secret
arizuko hook ls`,
	"arizuko hook add": `arizuko hook add corp/eng --secret      # GitHub: Content type JSON, Secret as printed
arizuko hook add alerts --per-minute 10
curl -d 'disk full on db1' -H 'Content-Type: text/plain' http://127.0.0.1:7480/hook/azh_…`,
	"arizuko hook ls": `arizuko hook ls --json`,
	"arizuko hook rm": `arizuko hook rm 3`,
	"arizuko schedule": `arizuko schedule add corp/eng "0 9 * * 1-5" "Summarize yesterday's issues" --tz Europe/Prague
arizuko schedule ls`,
	"arizuko schedule add": `arizuko schedule add corp/eng "0 9 * * 1-5" "Summarize yesterday's issues" --tz Europe/Prague
arizuko schedule add ops @hourly "Check the backup log"`,
	"arizuko schedule ls": `arizuko schedule ls --json`,
	"arizuko schedule rm": `arizuko schedule rm 2`,
	"arizuko token rm":    `arizuko token rm grafana`,
	"arizuko turns ls":    `arizuko turns ls --json`,
	"arizuko turns show":  `arizuko turns show 12`,
}

// folderArgs are the commands whose first argument is a folder; chatArgs those
// whose first argument is a chat.
var (
	folderArgs = []string{"arizuko chat", "arizuko folder rm", "arizuko folder budget",
		"arizuko folder set", "arizuko folder home",
		"arizuko network allow", "arizuko network deny", "arizuko network rm", "arizuko network ls"}
	chatArgs = []string{"arizuko send", "arizuko resolve", "arizuko messages"}
)

// decorate fills each command's Example from examples and adds folder and chat
// completion to the commands that take them.
func (a *app) decorate(c *cobra.Command) {
	path := c.CommandPath()
	if ex, ok := examples[path]; ok {
		c.Example = "  " + strings.ReplaceAll(ex, "\n", "\n  ")
	}
	for _, p := range folderArgs {
		if p == path {
			c.ValidArgsFunction = a.completeFirst(func(f string) string { return f })
		}
	}
	for _, p := range chatArgs {
		if p == path {
			// Every folder is reachable directly as the chat web:<folder>.
			c.ValidArgsFunction = a.completeFirst(func(f string) string { return "web:" + f })
		}
	}
	for _, sub := range c.Commands() {
		a.decorate(sub)
	}
}

// completeFirst completes the first argument with each folder through name.
func (a *app) completeFirst(name func(folder string) string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		_ = a.withService(cmd.Context(), func(ctx context.Context, s service.Service) error {
			fs, err := s.ListFolders(ctx)
			for _, f := range fs {
				out = append(out, name(f.Path)+"\t"+f.DisplayName)
			}
			return err
		})
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
