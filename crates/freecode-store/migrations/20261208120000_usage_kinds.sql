-- The kinds of tokens `freecode usage` prices apart that a span did not hold: the reasoning
-- tokens of an answer, and the part of its cache writes made for an hour (billed at their own
-- rate). Spans indexed before these columns existed have neither: every rollout watermark is
-- invalidated (an inode no file has), so the next refresh forgets each session's spans and
-- reads its rollout log again, whole (the message logs and metas are kept).

ALTER TABLE idx_model_spans ADD COLUMN reasoning INTEGER NOT NULL DEFAULT 0;
ALTER TABLE idx_model_spans ADD COLUMN cacheWrite1h INTEGER NOT NULL DEFAULT 0;
UPDATE idx_sessions SET evIno = -1;
