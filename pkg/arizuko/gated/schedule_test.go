package gated

import (
	"context"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
)

// An agent granted schedule_task on its own folder ({self}) schedules
// there and nowhere else: not into another tenant, not into its child; a
// bad cron or zone is a readable error that stores nothing.
func TestScheduleTaskStaysInItsGrant(t *testing.T) {
	e := newToolEnv(t, "corp")
	e.grant(t, "folder:corp", "mcp:schedule_task", acl.SelfSegment, acl.Allow)
	cs := e.connect(t, e.turn)
	cases := []struct {
		args map[string]any
		want string // "" for success
	}{
		{map[string]any{"cron": "@hourly", "prompt": "check the queue"}, ""},
		{map[string]any{"cron": "@hourly", "prompt": "x", "folder": "hr"}, "permission denied"},
		{map[string]any{"cron": "@hourly", "prompt": "x", "folder": "corp/eng"}, "permission denied"},
		{map[string]any{"cron": "61 * * * *", "prompt": "x"}, "cron \"61 * * * *\""},
		{map[string]any{"cron": "@daily", "tz": "Mars/Olympus", "prompt": "x"}, "time zone \"Mars/Olympus\""},
		{map[string]any{"cron": "CRON_TZ=Asia/Tokyo @daily", "prompt": "x"}, "--tz"},
		{map[string]any{"cron": "@daily", "prompt": " "}, "prompt is empty"},
	}
	for _, c := range cases {
		text, isErr := call(t, cs, "schedule_task", c.args)
		if c.want == "" && isErr || c.want != "" && (!isErr || !strings.Contains(text, c.want)) {
			t.Errorf("schedule_task %v = %q (error %v), want %q", c.args, text, isErr, c.want)
		}
	}
	ss, err := e.st.ListSchedules(context.Background())
	if err != nil || len(ss) != 1 || ss[0].Folder != "corp" || ss[0].Owner != "folder:corp" || ss[0].TZ != "UTC" {
		t.Fatalf("schedules %+v %v, want corp's one", ss, err)
	}
}
