-- Tokens of kind tenant: an operator of one top-level folder and everything
-- below it (`arizuko token add NAME --tenant acme`).
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_kind_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_kind_check CHECK (kind IN ('admin', 'read', 'adapter', 'runner', 'tenant'));
ALTER TABLE api_tokens ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
