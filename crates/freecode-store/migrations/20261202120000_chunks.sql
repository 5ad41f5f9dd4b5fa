-- Search by meaning: the conversation cut into chunks (a user turn with what followed it, cut
-- to the embedder's window), each with its vector once embedded. Derived from the index's own
-- message rows, which are derived from the files: everything here can be dropped and rebuilt.

CREATE TABLE IF NOT EXISTS idx_chunks (
  id        INTEGER PRIMARY KEY,
  sessionId TEXT NOT NULL,
  line      INTEGER NOT NULL, -- the first message's line in messages.jsonl (1-based)
  endLine   INTEGER NOT NULL, -- the last message's line
  msgId     TEXT NOT NULL,    -- the first message
  at        INTEGER NOT NULL, -- the first message's timestamp, ms
  hash      INTEGER NOT NULL, -- of the text embedded (a vector is reused for the same text)
  vec       BLOB              -- the unit vector, one signed byte a dimension; NULL until embedded
);
CREATE INDEX IF NOT EXISTS idx_chunks_session ON idx_chunks(sessionId, line);
CREATE INDEX IF NOT EXISTS idx_chunks_hash ON idx_chunks(hash);
CREATE INDEX IF NOT EXISTS idx_chunks_pending ON idx_chunks(id) WHERE vec IS NULL;

-- How far each session's messages are chunked: the messages.jsonl watermark the chunks were
-- made from, and the first line of the last chunk (which grows while the turn goes on).
CREATE TABLE IF NOT EXISTS idx_chunk_state (
  sessionId TEXT PRIMARY KEY,
  logIno    INTEGER NOT NULL,
  logOffset INTEGER NOT NULL,
  openLine  INTEGER NOT NULL
);

-- The embedder the chunks and vectors are for (one row): another model or window starts over.
CREATE TABLE IF NOT EXISTS idx_embed_model (
  only       INTEGER PRIMARY KEY CHECK (only = 1),
  model      TEXT NOT NULL,
  windowSize INTEGER NOT NULL
);

-- A message by its line: chunks and hits point at messages so.
CREATE INDEX IF NOT EXISTS idx_messages_session_line ON idx_messages(sessionId, line);
