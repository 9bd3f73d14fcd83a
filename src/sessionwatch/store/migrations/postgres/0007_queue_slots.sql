-- 0007: a watcher's queue reads cost its queue (at most N entries), not the number of targets it watches
-- (see sqlite/0007 and store/sqlite/queue_model.py for the model). The live notice slots form a chain through
-- the cursor rows, newest first: queue_heads.last_slot is the target of the newest notice append, and
-- cursors.queued_prev the target of the watcher's notice appended just before this one. A notice append
-- sets both in the row writes it makes anyway; a compaction (sw_compact) relinks exactly the live slots.
-- Reads (sw_queue) follow the chain by the cursors primary key, at most N steps, stopping at the first
-- node that is missing, not live, or whose queued_id does not decrease (a node re-appended since).
-- The functions that maintain and walk the chain are in store/postgres_functions.sql (sw_walk,
-- sw_compact, sw_append_notice, sw_record, sw_queue); this migration adds the columns and backfills.
ALTER TABLE queue_heads ADD COLUMN last_slot text COLLATE "C";
ALTER TABLE cursors ADD COLUMN queued_prev text COLLATE "C";

-- Backfill: link every queued slot of each watcher in append order (dead ones end a walk), and point
-- each head at its newest. The same two statements run on a change of the stored queue cap
-- (store/data_settings.py: a larger cap makes older appends live again).
UPDATE cursors c SET queued_prev = l.prev
  FROM (SELECT x.target, x.watcher, lag(x.target) OVER (PARTITION BY x.watcher ORDER BY x.queued_idx) AS prev
          FROM cursors x WHERE x.queued_idx > 0) l
 WHERE c.target = l.target AND c.watcher = l.watcher AND c.queued_prev IS DISTINCT FROM l.prev;
UPDATE queue_heads h SET last_slot = (SELECT c.target FROM cursors c WHERE c.watcher = h.session_key
                                         AND c.queued_idx > 0 ORDER BY c.queued_idx DESC LIMIT 1);
