-- Tokens of kind runner: a fleet host pulling turns (`arizuko runner`).
-- SQLite cannot change a CHECK, so the table is rebuilt with the same rows.
CREATE TABLE api_tokens_new (
	id         INTEGER PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	kind       TEXT NOT NULL CHECK (kind IN ('admin', 'read', 'adapter', 'runner')),
	platform   TEXT NOT NULL DEFAULT '', -- adapter tokens only
	sum        BLOB NOT NULL UNIQUE,
	created_by TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);
INSERT INTO api_tokens_new (id, name, kind, platform, sum, created_by, created_at)
	SELECT id, name, kind, platform, sum, created_by, created_at FROM api_tokens;
DROP TABLE api_tokens;
ALTER TABLE api_tokens_new RENAME TO api_tokens;
