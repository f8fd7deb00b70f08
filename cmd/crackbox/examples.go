package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples is the Examples section of every command's --help, by command path.
// Kept in one place so a new command without examples fails TestEveryCommandHasExamples.
var examples = map[string]string{
	"crackbox": `crackbox run --allow github.com,pypi.org -- pip install requests
crackbox runs ls
crackbox doctor`,
	"crackbox run": `# fetch from two hosts; everything else is blocked and named at exit
crackbox run --allow github.com,pypi.org -- pip install requests
# an interactive shell: -i forwards stdin, -t gives it a terminal
crackbox run --allow '*.githubusercontent.com' --allow github.com -it -- bash
# pipe data in: without -i the command's stdin is empty
tar c src | crackbox run -i --net none -- tar tv
# find out which hosts an installer needs
crackbox run --learn -- ./install.sh
# no network at all, the work directory read-only
crackbox run --net none --ro -- make check`,
	"crackbox runs": `crackbox runs ls
crackbox runs show 20261130-0102`,
	"crackbox runs ls": `crackbox runs ls
crackbox runs ls --json | jq -r '.[] | select(.exit != 0) | .id'`,
	"crackbox runs show": `crackbox runs show 20261130-010203-ab12
crackbox runs show 2026113      # a unique prefix is enough`,
	"crackbox gc": `sudo crackbox gc`,
	"crackbox doctor": `crackbox doctor
crackbox doctor --json | jq -r '.[] | select(.status == "fail") | .fix'`,
	"crackbox proxy": `crackbox proxy serve --config /etc/crackbox/crackbox.toml`,
	"crackbox proxy serve": `crackbox proxy serve --config /etc/crackbox/crackbox.toml
crackbox proxy serve --listen 127.0.0.1:3128 --client 10.0.0.5 --allow github.com
CRACKBOX_ADMIN_SECRET=s3cret crackbox proxy serve --admin 0.0.0.0:3129
crackbox proxy serve --registry nats://nats1:4222,nats://nats2:4222,nats://nats3:4222 --replica gw-a`,
	"crackbox setup": `sudo crackbox setup
crackbox setup --dry-run`,
	"crackbox state": `crackbox state
crackbox state --admin http://10.0.0.1:3129 --json`,
}

// applyExamples fills each command's Example from examples.
func applyExamples(c *cobra.Command) {
	if ex, ok := examples[c.CommandPath()]; ok {
		c.Example = indent(ex)
	}
	for _, sub := range c.Commands() {
		applyExamples(sub)
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
