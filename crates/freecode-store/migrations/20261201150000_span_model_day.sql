-- The model and the time of each indexed span, so that stats can say tokens and time by model
-- and by day (`Stats::models`, `Stats::days`). Spans indexed before these columns existed have
-- neither: every rollout watermark is invalidated (an inode no file has), so the next refresh
-- forgets each session's spans and reads its rollout log again, whole (the message logs and
-- metas are kept).

ALTER TABLE idx_model_spans ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE idx_model_spans ADD COLUMN at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE idx_tool_spans ADD COLUMN at INTEGER NOT NULL DEFAULT 0;
UPDATE idx_sessions SET evIno = -1;
