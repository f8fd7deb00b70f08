-- The secret the daemon signs its calls to an adapter with, and the outbound
-- message an edit row replaces (0: a message of its own).
ALTER TABLE adapters ADD COLUMN secret TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN edit_of INTEGER NOT NULL DEFAULT 0;
