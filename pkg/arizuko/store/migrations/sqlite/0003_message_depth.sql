-- Delegation depth of a message written by delegate_group or escalate_group,
-- so the host (never the agent) bounds a chain of delegations.
ALTER TABLE messages ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
