-- 0007: a watcher's queue reads cost its queue (at most N entries), not the number of targets it watches.
-- queue_heads.slots lists the targets that may hold a live notice slot of the queue, oldest append first,
-- each followed by a space (keys never hold whitespace); slot_count is its length, at most N. Each notice
-- append pushes its target (dropping the first when full) in the same row update that takes the append
-- index, and each compaction rewrites it to exactly the live slots. Reads look those targets up by the
-- cursors primary key and keep the live ones, instead of walking cursors_by_watcher. (An index on
-- (watcher, queued_idx) would have cost a second index write per fan-out row: measured 7x slower on the
-- wide fan-out.) See store/sqlite_queue.py.
ALTER TABLE queue_heads ADD COLUMN slots TEXT NOT NULL DEFAULT '';
ALTER TABLE queue_heads ADD COLUMN slot_count INTEGER NOT NULL DEFAULT 0;
-- Backfill: the slots live under the stored cap (20 when none is stored yet), oldest first (group_concat
-- as a window function concatenates in the window's order). Same statement as sqlite_queue.REBUILD_SLOTS.
UPDATE queue_heads SET (slots, slot_count) = (SELECT coalesce(max(l.listed), ''), count(*) FROM (
    SELECT group_concat(c.target || ' ', '') OVER (ORDER BY c.queued_idx ROWS BETWEEN UNBOUNDED PRECEDING
           AND UNBOUNDED FOLLOWING) AS listed
      FROM cursors c
     WHERE c.watcher = queue_heads.session_key AND c.queued_idx > queue_heads.drained
       AND queue_heads.appended - c.queued_idx < coalesce(
           (SELECT value FROM data_settings WHERE name = 'queue_cap'), 20)) l);
