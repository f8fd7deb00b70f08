-- A folder's agent environment (a JSON list of KEY=VALUE, not secret: the
-- guest sees it) and its opt-in to deliver the agent's final stdout as the
-- reply of a turn that called no reply tool.
ALTER TABLE folders ADD COLUMN agent_env TEXT NOT NULL DEFAULT '[]';
ALTER TABLE folders ADD COLUMN stdout_reply INTEGER NOT NULL DEFAULT 0;

-- The bounded tail of what the agent wrote (stdout and stderr) in each
-- attempt of a turn, for `arizuko turns show`.
CREATE TABLE turn_outputs (
	turn_id    BIGINT NOT NULL,
	attempt    INTEGER NOT NULL,
	exit_code  INTEGER,
	output     TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	PRIMARY KEY (turn_id, attempt)
);
