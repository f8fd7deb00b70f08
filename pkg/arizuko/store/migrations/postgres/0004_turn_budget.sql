-- A folder's own cap on turns per sliding 24 h; NULL uses the instance
-- default ([turns] max_turns_per_day), 0 is unlimited.
ALTER TABLE folders ADD COLUMN max_turns_per_day INTEGER;
CREATE INDEX turns_started ON turns(folder, started_at);
