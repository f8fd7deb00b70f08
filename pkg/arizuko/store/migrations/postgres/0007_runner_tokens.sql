-- Tokens of kind runner: a fleet host pulling turns (`arizuko runner`).
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_kind_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_kind_check CHECK (kind IN ('admin', 'read', 'adapter', 'runner'));
