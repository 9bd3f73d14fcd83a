-- 0007: a watcher's queue reads cost its queue (at most N entries), not the number of targets it watches.
-- queue_heads.slots is a JSON array of targets that covers every live notice slot of the queue, oldest
-- append first, at most N long: each notice append pushes its target (dropping the first element when
-- full) in the same row update that takes the append index, and each compaction rewrites it to exactly
-- the live slots. Reads look those targets up by the cursors primary key and keep the live ones, instead
-- of walking cursors_by_watcher. (An index on (watcher, queued_idx) would have cost a second index write
-- per fan-out row: measured 7x slower on the wide fan-out.)
ALTER TABLE queue_heads ADD COLUMN slots TEXT NOT NULL DEFAULT '[]';
-- Backfill: the slots live under the stored cap (20 when none is stored yet), oldest first.
UPDATE queue_heads SET slots = coalesce((
    SELECT json_group_array(target) FROM (
        SELECT c.target FROM cursors c
         WHERE c.watcher = queue_heads.session_key AND c.queued_idx > queue_heads.drained
           AND queue_heads.appended - c.queued_idx < coalesce(
               (SELECT value FROM data_settings WHERE name = 'queue_cap'), 20)
         ORDER BY c.queued_idx)), '[]');
