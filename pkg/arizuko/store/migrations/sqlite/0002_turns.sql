-- Turn-pipeline state: outbound delivery, sessions per (folder, topic), turn
-- records, observers and adapter callbacks.
ALTER TABLE messages ADD COLUMN direction TEXT NOT NULL DEFAULT 'in' CHECK (direction IN ('in', 'out'));
-- Outbound only: pending until the adapter accepts it, then sent, or failed after the retry bound.
ALTER TABLE messages ADD COLUMN status TEXT NOT NULL DEFAULT '' CHECK (status IN ('', 'pending', 'sent', 'failed'));
ALTER TABLE messages ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN next_attempt_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN turn_id INTEGER NOT NULL DEFAULT 0;
CREATE INDEX messages_outbox ON messages(next_attempt_at) WHERE status = 'pending';

CREATE TABLE sessions (
	folder       TEXT NOT NULL REFERENCES folders(path) ON DELETE CASCADE,
	topic        TEXT NOT NULL DEFAULT '',
	session_id   TEXT NOT NULL,
	parent_topic TEXT NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL,
	PRIMARY KEY (folder, topic)
);

CREATE TABLE turns (
	id             INTEGER PRIMARY KEY,
	folder         TEXT NOT NULL,
	topic          TEXT NOT NULL DEFAULT '',
	session_id     TEXT NOT NULL DEFAULT '',
	status         TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
	outcome        TEXT NOT NULL DEFAULT '',
	attempts       INTEGER NOT NULL DEFAULT 0,
	first_message  INTEGER NOT NULL DEFAULT 0,
	last_message   INTEGER NOT NULL DEFAULT 0,
	depth          INTEGER NOT NULL DEFAULT 0, -- delegation depth, tracked by the host
	exit_code      INTEGER,
	egress_summary TEXT NOT NULL DEFAULT '',
	error          TEXT NOT NULL DEFAULT '',
	started_at     INTEGER NOT NULL DEFAULT 0,
	ended_at       INTEGER NOT NULL DEFAULT 0,
	created_at     INTEGER NOT NULL
);
CREATE INDEX turns_folder ON turns(folder, id);
CREATE INDEX turns_open ON turns(status) WHERE status IN ('queued', 'running');

CREATE TABLE observers (
	observer   TEXT NOT NULL REFERENCES folders(path) ON DELETE CASCADE,
	source     TEXT NOT NULL REFERENCES folders(path) ON DELETE CASCADE,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (observer, source)
);

CREATE TABLE adapters (
	platform     TEXT PRIMARY KEY,
	callback_url TEXT NOT NULL,
	created_at   INTEGER NOT NULL
);
