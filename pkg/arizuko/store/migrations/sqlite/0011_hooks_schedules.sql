-- Webhooks: a POST to /hook/<token> becomes a message in the folder's chat.
-- Only the SHA-256 of the token is kept; the HMAC secret is sealed by the
-- secrets ring because checking a signature needs the secret itself.
CREATE TABLE hooks (
	id          INTEGER PRIMARY KEY,
	folder      TEXT NOT NULL REFERENCES folders(path) ON DELETE CASCADE,
	sum         BLOB NOT NULL UNIQUE,
	secret      BLOB, -- sealed; NULL: no signature required
	per_minute  INTEGER NOT NULL,
	owner       TEXT NOT NULL,
	created_at  INTEGER NOT NULL
);
CREATE INDEX hooks_folder ON hooks(folder);

-- Scheduled turns: next_run is the next firing (unix ms); firing moves it
-- with a compare-and-set, so one firing happens per due time.
CREATE TABLE schedules (
	id         INTEGER PRIMARY KEY,
	folder     TEXT NOT NULL REFERENCES folders(path) ON DELETE CASCADE,
	cron       TEXT NOT NULL,
	tz         TEXT NOT NULL,
	prompt     TEXT NOT NULL,
	next_run   INTEGER NOT NULL,
	last_run   INTEGER NOT NULL DEFAULT 0,
	owner      TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX schedules_next ON schedules(next_run);
