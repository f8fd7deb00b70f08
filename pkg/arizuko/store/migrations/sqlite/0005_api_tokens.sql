-- Scoped API tokens. Only the SHA-256 of a token is kept; the token itself is
-- shown once, when it is created.
CREATE TABLE api_tokens (
	id         INTEGER PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	kind       TEXT NOT NULL CHECK (kind IN ('admin', 'read', 'adapter')),
	platform   TEXT NOT NULL DEFAULT '', -- adapter tokens only
	sum        BLOB NOT NULL UNIQUE,
	created_by TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);
