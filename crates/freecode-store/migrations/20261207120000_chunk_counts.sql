-- A search by meaning asks, before it embeds its query, whether any session's chunks are behind
-- its log (`chunks_stale`): with this index SQLite answers from the index alone, not by reading
-- every session's row (each holds its whole meta.json).

CREATE INDEX IF NOT EXISTS idx_sessions_log ON idx_sessions(id, logIno, logOffset);
