-- 0007: a watcher's queue reads cost its queue (at most N entries), not the number of targets it watches.
-- The live notice slots of a queue form a chain through the cursor rows, newest first:
-- queue_heads.last_slot is (the slot key of) the target of the newest notice append, and cursors.queued_prev that of
-- the watcher's notice appended just before this one. A notice append sets both in the row writes it
-- makes anyway (the head's index bump, the slot's fill); a compaction relinks exactly the live slots.
-- Reads follow the chain by the cursors primary key, at most N steps, stopping at the first node that is
-- missing, not live, or not older (queued_id not decreasing: a node re-appended since). Liveness is a
-- threshold on the append index, so dead nodes are the chain's oldest suffix. (An index on
-- (watcher, queued_idx) would have cost a second index write per fan-out row: measured 7x slower on the
-- wide fan-out; a list of targets in the head made every fan-out head write ~500 bytes: -27% on the
-- widest fan-out.) See store/sqlite/queue_model.py.
-- The chain stores slot keys (small integers, slot_keys) rather than key text: the widest fan-out
-- rewrites every head and slot row it touches, and a key text in each cost 13% there.
CREATE TABLE slot_keys (
    id     INTEGER PRIMARY KEY,
    target TEXT NOT NULL UNIQUE
) STRICT;
ALTER TABLE queue_heads ADD COLUMN last_slot INTEGER;
-- prev_slot is transient: the fan-out's bump hands the head's previous newest slot to the fill.
ALTER TABLE queue_heads ADD COLUMN prev_slot INTEGER;
ALTER TABLE cursors ADD COLUMN queued_prev INTEGER;
-- Backfill: link every queued slot of each watcher in append order (dead ones end the walk), and point
-- each head at its newest. Same statements as store/sqlite/queue_model.py RELINK_ALL.
INSERT INTO slot_keys (target) SELECT DISTINCT target FROM cursors WHERE queued_idx > 0 ON CONFLICT DO NOTHING;
UPDATE cursors SET queued_prev = l.prev FROM (
    SELECT c.target, c.watcher, lag(k.id) OVER (PARTITION BY c.watcher ORDER BY c.queued_idx) AS prev
      FROM cursors c JOIN slot_keys k ON k.target = c.target WHERE c.queued_idx > 0) l
 WHERE cursors.target = l.target AND cursors.watcher = l.watcher;
UPDATE queue_heads SET last_slot = (SELECT k.id FROM cursors c JOIN slot_keys k ON k.target = c.target
                                     WHERE c.watcher = queue_heads.session_key AND c.queued_idx > 0
                                     ORDER BY c.queued_idx DESC LIMIT 1);
