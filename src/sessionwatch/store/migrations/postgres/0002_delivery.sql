-- 0002: stable queue entry ids (at-least-once delivery: peek with ids, acknowledge by id) and
-- reconciling reads that acknowledge what they returned. See migrations/sqlite/0002_entry_ids.sql.
--
-- An entry's append index moves when its queue is renumbered (sw_compact), so an entry also keeps the
-- index it was appended with (cursors.queued_id, system_events.eid): unique within its session's queue
-- and never reused, because queue_heads.appended only grows (a deleted session's head is now emptied,
-- not removed). The functions that write and read the ids are in store/postgres_functions.sql.

ALTER TABLE cursors ADD COLUMN queued_id bigint NOT NULL DEFAULT 0;
UPDATE cursors SET queued_id = queued_idx WHERE queued_idx > 0;
ALTER TABLE system_events ADD COLUMN eid bigint NOT NULL DEFAULT 0;
UPDATE system_events SET eid = idx;
