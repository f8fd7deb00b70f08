-- Core control plane: tenants, routing, grants, inbound messages, secrets, audit.
-- Times are unix milliseconds.
CREATE TABLE folders (
	path             TEXT PRIMARY KEY,
	display_name     TEXT NOT NULL DEFAULT '',
	agent_command    TEXT NOT NULL DEFAULT '[]', -- JSON array of argv
	guest_memory_mib INTEGER NOT NULL DEFAULT 0,  -- 0: instance default
	guest_cpus       INTEGER NOT NULL DEFAULT 0,
	created_at       INTEGER NOT NULL
);

CREATE TABLE routes (
	id         INTEGER PRIMARY KEY,
	seq        INTEGER NOT NULL,
	match      TEXT NOT NULL DEFAULT '',
	target     TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX routes_order ON routes(seq, id);

CREATE TABLE acl (
	id           INTEGER PRIMARY KEY,
	principal    TEXT NOT NULL,
	action       TEXT NOT NULL,
	scope        TEXT NOT NULL,
	effect       TEXT NOT NULL CHECK (effect IN ('allow', 'deny')),
	params       TEXT NOT NULL DEFAULT '',
	granted_by   TEXT NOT NULL DEFAULT '',
	grant_option INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL,
	UNIQUE (principal, action, scope, effect, params)
);

CREATE TABLE acl_membership (
	member     TEXT NOT NULL,
	role       TEXT NOT NULL,
	granted_by TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	PRIMARY KEY (member, role)
);

CREATE TABLE chats (
	jid            TEXT PRIMARY KEY,
	platform       TEXT NOT NULL DEFAULT '',
	agent_cursor   INTEGER NOT NULL DEFAULT 0, -- last message id the agent has seen
	engaged_folder TEXT NOT NULL DEFAULT '',
	engaged_topic  TEXT NOT NULL DEFAULT '',
	engaged_at     INTEGER NOT NULL DEFAULT 0,
	created_at     INTEGER NOT NULL
);

CREATE TABLE messages (
	id          INTEGER PRIMARY KEY,
	chat_jid    TEXT NOT NULL REFERENCES chats(jid),
	platform    TEXT NOT NULL DEFAULT '',
	room        TEXT NOT NULL DEFAULT '',
	sender      TEXT NOT NULL DEFAULT '',
	text        TEXT NOT NULL DEFAULT '',
	reply_to    TEXT NOT NULL DEFAULT '',
	verb        TEXT NOT NULL DEFAULT '',
	platform_id TEXT NOT NULL DEFAULT '',
	folder      TEXT NOT NULL DEFAULT '', -- resolved at ingest; '' when unrouted
	topic       TEXT NOT NULL DEFAULT '',
	how         TEXT NOT NULL DEFAULT '', -- router.How, plus 'observe' rows
	created_at  INTEGER NOT NULL
);
CREATE INDEX messages_chat ON messages(chat_jid, id);
CREATE INDEX messages_folder ON messages(folder, id);
-- Adapters retry deliveries; the platform's own id makes the retry a no-op.
CREATE UNIQUE INDEX messages_platform_id ON messages(chat_jid, platform_id) WHERE platform_id != '';

CREATE TABLE secrets (
	scope_kind TEXT NOT NULL, -- folder or user
	scope_id   TEXT NOT NULL,
	name       TEXT NOT NULL,
	value      BLOB NOT NULL, -- sealed by pkg/secrets, AAD = (scope_kind, scope_id, name)
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (scope_kind, scope_id, name)
);

CREATE TABLE network_rules (
	folder     TEXT NOT NULL REFERENCES folders(path) ON DELETE CASCADE,
	host       TEXT NOT NULL,
	effect     TEXT NOT NULL CHECK (effect IN ('allow', 'deny')),
	created_at INTEGER NOT NULL,
	PRIMARY KEY (folder, host)
);

CREATE TABLE audit_log (
	id        INTEGER PRIMARY KEY,
	at        INTEGER NOT NULL,
	principal TEXT NOT NULL,
	action    TEXT NOT NULL,
	scope     TEXT NOT NULL,
	decision  TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
	reason    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_at ON audit_log(at);

-- Seed grants (kept equal to acl.Seeds by a test).
INSERT INTO acl (principal, action, scope, effect, granted_by, grant_option, created_at) VALUES
	('role:member', 'mcp:reply', '{self}', 'allow', 'seed', 0, 0),
	('role:member', 'mcp:send', '{self}', 'allow', 'seed', 0, 0),
	('role:operator', '*', '**', 'allow', 'seed', 1, 0);
