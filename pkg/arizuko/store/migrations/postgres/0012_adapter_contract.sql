-- The secret the daemon signs its calls to an adapter with, and the outbound
-- message an edit row replaces (0: a message of its own).
ALTER TABLE adapters ADD COLUMN secret TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN edit_of BIGINT NOT NULL DEFAULT 0;
