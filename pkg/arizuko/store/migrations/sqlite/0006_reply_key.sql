-- The idempotency key of an outbound message a turn wrote: "<turn>:<attempt>:<sequence>".
-- A turn run again after its runner died writes the same keys, and a key stored
-- once is never stored twice, so the chat gets one reply.
ALTER TABLE messages ADD COLUMN reply_key TEXT;
CREATE UNIQUE INDEX messages_reply_key ON messages(reply_key);
