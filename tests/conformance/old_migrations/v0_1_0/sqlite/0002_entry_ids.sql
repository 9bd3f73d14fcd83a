-- 0002: stable queue entry ids, for at-least-once delivery (peek with ids, then acknowledge by id).
-- An entry's append index moves when the queue is renumbered, so an entry also keeps the index it was
-- appended with: unique within its session's queue and never reused, because queue_heads.appended only
-- grows (from this version on a deleted session's queue head is emptied, not removed).
ALTER TABLE cursors ADD COLUMN queued_id INTEGER NOT NULL DEFAULT 0;
UPDATE cursors SET queued_id = queued_idx WHERE queued_idx > 0;
ALTER TABLE system_events ADD COLUMN eid INTEGER NOT NULL DEFAULT 0;
UPDATE system_events SET eid = idx
