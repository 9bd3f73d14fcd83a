-- 0007: a watcher's queue reads cost its queue (at most N entries), not the number of targets it watches
-- (see sqlite/0007 and store/sqlite_queue.py for the model). The live notice slots form a chain through
-- the cursor rows, newest first: queue_heads.last_slot is the target of the newest notice append, and
-- cursors.queued_prev the target of the watcher's notice appended just before this one. A notice append
-- sets both in the row writes it makes anyway; a compaction (sw_compact) relinks exactly the live slots.
-- Reads (sw_queue) follow the chain by the cursors primary key, at most N steps, stopping at the first
-- node that is missing, not live, or whose queued_id does not decrease (a node re-appended since).
-- This migration defines sw_relink_queues and redefines: sw_compact, sw_append_notice, sw_record,
-- sw_queue.
ALTER TABLE queue_heads ADD COLUMN last_slot text COLLATE "C";
ALTER TABLE cursors ADD COLUMN queued_prev text COLLATE "C";

-- Every watcher's chain from its cursors: queued slots linked in append order (dead ones end a walk),
-- each head pointing at its newest. The backfill below, and a change of the stored queue cap (a larger
-- cap makes older appends live again, which a chain cut at an earlier compaction may not reach).
CREATE FUNCTION sw_relink_queues() RETURNS void
LANGUAGE sql AS $$
    UPDATE cursors c SET queued_prev = l.prev
      FROM (SELECT x.target, x.watcher, lag(x.target) OVER (PARTITION BY x.watcher ORDER BY x.queued_idx) AS prev
              FROM cursors x WHERE x.queued_idx > 0) l
     WHERE c.target = l.target AND c.watcher = l.watcher AND c.queued_prev IS DISTINCT FROM l.prev;
    UPDATE queue_heads h SET last_slot = (SELECT c.target FROM cursors c WHERE c.watcher = h.session_key
                                             AND c.queued_idx > 0 ORDER BY c.queued_idx DESC LIMIT 1);
$$;
SELECT sw_relink_queues();

-- The chain walk of p_session's queue (newest first); p_over steps over slots just taken out
-- (queued_idx = 0, queued_id kept) for sw_compact. o_go: may the walk go on past this node (a row with
-- o_go false ends it). At most p_bound rows.
CREATE FUNCTION sw_walk(p_session text, p_cap integer, p_over boolean, p_bound integer)
RETURNS TABLE (o_target text, o_idx bigint, o_id bigint, o_prev text, o_ls bigint, o_ts bigint, o_quiet boolean,
               o_live boolean, o_go boolean, o_n integer)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE chain AS (
        SELECT c.target::text AS target, c.queued_idx AS idx, c.queued_id AS id, c.queued_prev::text AS prev,
               c.queued_ls AS ls, c.queued_ts AS ts, c.queued_quiet AS quiet,
               c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap AS live,
               (c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap) OR (p_over AND c.queued_idx = 0) AS go,
               1 AS n
          FROM queue_heads h JOIN cursors c ON c.target = h.last_slot AND c.watcher = h.session_key
         WHERE h.session_key = p_session
        UNION ALL
        SELECT c.target::text, c.queued_idx, c.queued_id, c.queued_prev::text, c.queued_ls, c.queued_ts, c.queued_quiet,
               c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap,
               (c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap) OR (p_over AND c.queued_idx = 0),
               w.n + 1
          FROM chain w JOIN cursors c ON c.target = w.prev AND c.watcher = p_session
          JOIN queue_heads h ON h.session_key = p_session
         WHERE w.go AND w.n < p_bound AND c.queued_id < w.id)
    SELECT * FROM chain;
$$;

-- Renumber a queue's live entries to the top of its index range after a removal from the middle, drop
-- dead generic rows, and relink the slot chain over exactly the live slots (sqlite_queue._compact).
-- The live slots come from the chain walk, which steps over the slots the caller just took out; when
-- the walk meets a deleted cursor row (bulk deletions: delete-session, reset, stale-cursor expiry, an
-- unwatch linked behind a live slot) they come from the watcher's cursors instead.
-- Negative indices first: no transient key collisions.
CREATE OR REPLACE FUNCTION sw_compact(p_session text, p_cap integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_app    bigint;
    v_dr     bigint;
    v_last   text;
    v_bound  integer := 2 * p_cap + 1;  -- live slots, those just taken out, and the node ending the walk
    v_slots  text[];
    v_prev   text;
    v_go     boolean;
    v_n      integer;
    v_scan   boolean := false;
    v_moved  bigint;
BEGIN
    PERFORM sw_ensure_head(p_session);
    SELECT h.appended, h.drained, h.last_slot INTO v_app, v_dr, v_last FROM queue_heads h WHERE h.session_key = p_session;
    SELECT coalesce(array_agg(w.o_target ORDER BY w.o_n) FILTER (WHERE w.o_live), '{}'),
           (array_agg(w.o_prev ORDER BY w.o_n DESC))[1], (array_agg(w.o_go ORDER BY w.o_n DESC))[1], max(w.o_n)
      INTO v_slots, v_prev, v_go, v_n
      FROM sw_walk(p_session, p_cap, true, v_bound) w;
    IF v_n IS NULL THEN
        v_scan := v_last IS NOT NULL;  -- the newest node was deleted
    ELSIF v_go AND v_prev IS NOT NULL THEN
        v_scan := v_n >= v_bound
                  OR NOT EXISTS (SELECT 1 FROM cursors c WHERE c.target = v_prev AND c.watcher = p_session);
    END IF;
    IF v_scan THEN
        SELECT coalesce(array_agg(c.target::text ORDER BY c.queued_idx DESC), '{}') INTO v_slots FROM cursors c
         WHERE c.watcher = p_session AND c.queued_idx > v_dr AND v_app - c.queued_idx < p_cap;
    END IF;
    -- One statement numbers the live entries (one snapshot), moves both kinds and relinks the slots.
    WITH live AS (
        SELECT l.slot, l.ref, l.idx, l.prev, v_app - count(*) OVER () + row_number() OVER (ORDER BY l.idx) AS new_idx
          FROM (SELECT true AS slot, c.target::text AS ref, c.queued_idx AS idx, c.queued_prev::text AS prev
                  FROM cursors c
                 WHERE c.target = ANY (v_slots) AND c.watcher = p_session
                UNION ALL
                SELECT false, NULL, e.idx, NULL FROM system_events e
                 WHERE e.session_key = p_session AND e.idx > v_dr AND v_app - e.idx < p_cap) l),
    linked AS (
        SELECT l.ref, l.idx, l.prev, l.new_idx, lag(l.ref) OVER (ORDER BY l.idx) AS new_prev FROM live l WHERE l.slot),
    slots AS (
        UPDATE cursors c SET queued_idx = k.new_idx, queued_prev = k.new_prev FROM linked k
         WHERE (k.new_idx <> k.idx OR k.prev IS DISTINCT FROM k.new_prev) AND c.watcher = p_session AND c.target = k.ref
        RETURNING 1),
    generic AS (
        UPDATE system_events e SET idx = -l.new_idx FROM live l
         WHERE NOT l.slot AND l.new_idx <> l.idx AND e.session_key = p_session AND e.idx = l.idx
        RETURNING 1)
    SELECT (SELECT count(*) FROM slots) + (SELECT count(*) FROM generic) INTO v_moved;
    IF v_slots[1] IS DISTINCT FROM v_last THEN
        UPDATE queue_heads h SET last_slot = v_slots[1] WHERE h.session_key = p_session;
    END IF;
    UPDATE system_events e SET idx = -e.idx WHERE e.session_key = p_session AND e.idx < 0;
    DELETE FROM system_events e WHERE e.session_key = p_session AND (e.idx <= v_dr OR v_app - e.idx >= p_cap);
END $$;

CREATE OR REPLACE FUNCTION sw_append_notice(p_watcher text, p_target text, p_ls bigint, p_ctx text, p_ts bigint,
                                 p_cap integer, p_quiet boolean, p_wake boolean) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_live    boolean;
    v_quoted  bigint;
    v_same    bigint;
    v_removed boolean;
    v_idx     bigint;
    v_wake    bigint;
BEGIN
    SELECT c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap, c.queued_ls INTO v_live, v_quoted
      FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher
     WHERE c.target = p_target AND c.watcher = p_watcher;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NOT p_quiet THEN
        IF v_live AND v_quoted = p_ls THEN
            RETURN NULL;
        END IF;
    ELSE
        SELECT count(*) INTO v_same FROM system_events e JOIN queue_heads h ON h.session_key = e.session_key
         WHERE e.session_key = p_watcher AND e.idx > h.drained AND h.appended - e.idx < p_cap
           AND e.context_key = p_ctx;
        IF v_live AND v_quoted = p_ls AND v_same = 0 THEN
            RETURN NULL;  -- exactly one entry with this context key, and its text is identical
        END IF;
        v_removed := v_live OR v_same > 0;
        IF v_same > 0 THEN
            DELETE FROM system_events e WHERE e.session_key = p_watcher AND e.context_key = p_ctx;
        END IF;
        IF v_live THEN
            UPDATE cursors c SET queued_idx = 0 WHERE c.target = p_target AND c.watcher = p_watcher;
        END IF;
        IF v_removed THEN
            PERFORM sw_compact(p_watcher, p_cap);
        END IF;
    END IF;
    IF NOT p_quiet AND v_live THEN
        -- One slot per pair: a reopen while the older notice is still queued replaces it.
        UPDATE cursors c SET queued_idx = 0 WHERE c.target = p_target AND c.watcher = p_watcher;
        PERFORM sw_compact(p_watcher, p_cap);
    END IF;
    IF p_wake AND NOT p_quiet THEN
        v_wake := nextval('wake_position');
    END IF;
    -- The slot takes the head's next index and, as its predecessor in the chain, the head's newest slot;
    -- then the head moves on (the same two row writes as without the chain).
    UPDATE cursors c SET queued_idx = h.appended + 1, queued_id = h.appended + 1, queued_prev = h.last_slot,
                         queued_ls = p_ls, queued_ts = p_ts, queued_quiet = p_quiet,
                         wake_seq = coalesce(v_wake, c.wake_seq)
      FROM queue_heads h
     WHERE h.session_key = p_watcher AND c.target = p_target AND c.watcher = p_watcher
    RETURNING c.queued_idx INTO v_idx;
    UPDATE queue_heads h SET appended = h.appended + 1, last_wake = coalesce(v_wake, h.last_wake),
                             last_slot = p_target
     WHERE h.session_key = p_watcher;
    RETURN v_idx;
END $$;

CREATE OR REPLACE FUNCTION sw_record(p_lock bigint, p_dedupe text, p_key text, p_session_id text, p_agent text, p_kind text,
                          p_actor_type text, p_actor_id text, p_run_id text, p_occurred_at bigint, p_summary text,
                          p_body text, p_watchers text[], p_only_if_watched boolean, p_mode integer, p_ctx text,
                          p_now bigint, p_cap integer, p_channel text, p_origin text,
                          p_link_updated_at bigint, p_link_ref text)
RETURNS TABLE (o_inserted boolean, o_sequence bigint, o_session_key text, o_agent_id text, o_kind text,
               o_actor_type text, o_occurred_at bigint, o_summary text, o_actor_id text, o_session_id text,
               o_run_id text, o_dedupe_key text, o_body text, o_wakes text[], o_wake_seqs bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    v_seq   bigint;
    v_n     bigint;
    v_moved bigint := 0;
    v_wake  bigint;
    v_ws    text[];
    v_ps    bigint[];
    r       record;
BEGIN
    IF p_only_if_watched AND NOT EXISTS (SELECT 1 FROM cursors c WHERE c.target = p_key) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    IF p_link_updated_at IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM upstream_links l WHERE l.session_key = p_key AND l.agent_id = p_agent
              AND l.updated_at = p_link_updated_at AND l.upstream_ref_json = p_link_ref) THEN
        RETURN;
    END IF;
    -- A duplicate dedupe key burns a sequence value, exactly as SQLite's AUTOINCREMENT does, so both
    -- backends number the same history the same way.
    INSERT INTO events (dedupe_key, session_key, session_id, agent_id, kind, actor_type, actor_id, run_id,
                        occurred_at, summary, body)
    VALUES (p_dedupe, p_key, p_session_id, p_agent, p_kind, p_actor_type, p_actor_id, p_run_id, p_occurred_at,
            p_summary, p_body)
    ON CONFLICT (dedupe_key) DO NOTHING
    RETURNING sequence INTO v_seq;
    IF v_seq IS NULL THEN
        RETURN QUERY SELECT false, e.sequence, e.session_key::text, e.agent_id::text, e.kind, e.actor_type,
                            e.occurred_at, e.summary, e.actor_id::text, e.session_id, e.run_id,
                            e.dedupe_key::text, e.body, NULL::text[], NULL::bigint[]
                       FROM events e WHERE e.dedupe_key = p_dedupe;
        IF NOT FOUND THEN
            o_inserted := false;
            RETURN NEXT;
        END IF;
        RETURN;
    END IF;
    INSERT INTO heads (session_key, agent_id, last_sequence, updated_at) VALUES (p_key, p_agent, v_seq, p_now)
    ON CONFLICT (session_key, agent_id) DO UPDATE SET last_sequence = excluded.last_sequence,
                                                      updated_at = excluded.updated_at;
    IF p_mode = 1 THEN
        -- Seed: overwrite the three watermarks (the queued notice stays); a new spawn lifts a mute.
        INSERT INTO queue_heads (session_key) SELECT DISTINCT u.w FROM unnest(p_watchers) AS u(w)
        ON CONFLICT DO NOTHING;
        INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at)
        SELECT DISTINCT u.w, p_key, v_seq, v_seq, v_seq, 'explicit', p_now FROM unnest(p_watchers) AS u(w)
        ON CONFLICT (target, watcher) DO UPDATE SET last_seen = v_seq, notified = v_seq, material = v_seq,
                                                    updated_at = p_now;
        DELETE FROM watch_mutes m WHERE m.target = p_key AND m.watcher = ANY (p_watchers);
    ELSIF p_mode = 2 AND (cardinality(p_watchers) > 0 OR EXISTS (SELECT 1 FROM cursors c WHERE c.target = p_key)) THEN
        -- Explicit rows whose live notice quotes an older last_seen (after a re-seed, or an acknowledge
        -- that consumed nothing) lose that entry first, so the append replacing it evicts nothing older.
        SELECT array_agg(c.watcher::text ORDER BY c.watcher) INTO v_ws
          FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher
         WHERE c.target = p_key AND c.provenance = 'explicit' AND c.watcher IS DISTINCT FROM p_actor_id
           AND c.queued_ls <> c.last_seen AND c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap;
        PERFORM sw_remove_slot(u.w, p_key, p_cap) FROM unnest(coalesce(v_ws, '{}')) AS u(w);
        v_ws := NULL;
        v_wake := nextval('wake_position');
        IF cardinality(p_watchers) > 0 THEN
            -- Producer-known watchers (not the actor, not muted): material update, creating the row.
            -- Explicit rows whose notice must be (re)queued are marked queued_idx = -1 for the fill below.
            INSERT INTO queue_heads (session_key)
            SELECT DISTINCT u.w FROM unnest(p_watchers) AS u(w)
             WHERE u.w IS DISTINCT FROM p_actor_id
               AND NOT EXISTS (SELECT 1 FROM watch_mutes m WHERE m.watcher = u.w AND m.target = p_key)
            ON CONFLICT DO NOTHING;
            INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at, queued_idx)
            SELECT DISTINCT u.w, p_key, 0, v_seq, v_seq, 'explicit', p_now, -1 FROM unnest(p_watchers) AS u(w)
             WHERE u.w IS DISTINCT FROM p_actor_id
               AND NOT EXISTS (SELECT 1 FROM watch_mutes m WHERE m.watcher = u.w AND m.target = p_key)
            ON CONFLICT (target, watcher) DO UPDATE
               SET notified = CASE WHEN cursors.notified = cursors.last_seen THEN v_seq ELSE cursors.notified END,
                   material = v_seq, updated_at = p_now,
                   queued_idx = CASE WHEN cursors.provenance = 'explicit' AND NOT EXISTS (
                                         SELECT 1 FROM queue_heads h WHERE h.session_key = cursors.watcher
                                            AND cursors.queued_idx > h.drained
                                            AND h.appended - cursors.queued_idx < p_cap
                                            AND cursors.queued_ls = cursors.last_seen)
                                     THEN -1 ELSE cursors.queued_idx END;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            v_moved := v_n;
        END IF;
        -- The fan-out, two statements whatever the number of watchers (and no join a bad row estimate
        -- could turn quadratic). Rows moved: every registered watcher except the actor (self-suppression)
        -- and the rows marked above. Those that are explicit and whose notice is not queued live and
        -- current are requeued: each takes its head's next index and, as its predecessor in the slot
        -- chain (see sw_compact), the head's newest slot; its wake_seq becomes v_wake, which no other
        -- row holds...
        UPDATE cursors c
           SET notified = CASE WHEN c.notified = c.last_seen THEN v_seq ELSE c.notified END,
               material = v_seq, updated_at = p_now,
               (queued_idx, queued_id, queued_prev, queued_ls, queued_ts, queued_quiet, wake_seq) = (
                   SELECT CASE WHEN q.requeue THEN q.appended + 1 ELSE c.queued_idx END,
                          CASE WHEN q.requeue THEN q.appended + 1 ELSE c.queued_id END,
                          CASE WHEN q.requeue THEN q.last_slot ELSE c.queued_prev END,
                          CASE WHEN q.requeue THEN c.last_seen ELSE c.queued_ls END,
                          CASE WHEN q.requeue THEN p_now ELSE c.queued_ts END,
                          CASE WHEN q.requeue THEN false ELSE c.queued_quiet END,
                          CASE WHEN q.requeue THEN v_wake ELSE c.wake_seq END
                     FROM (SELECT h.appended, h.last_slot,
                                  c.provenance = 'explicit' AND NOT coalesce(
                                      c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap
                                      AND c.queued_ls = c.last_seen, false) AS requeue
                             FROM (SELECT 1) one
                             LEFT JOIN queue_heads h ON h.session_key = c.watcher) q)
         WHERE c.target = p_key
           AND ((c.material < v_seq AND c.watcher IS DISTINCT FROM p_actor_id) OR c.queued_idx = -1);
        GET DIAGNOSTICS v_n = ROW_COUNT;  -- rows marked above count twice: only "any moved?" matters
        v_moved := v_moved + v_n;
        -- ...then the heads of the slots just requeued (found by their wake_seq) take that index, and
        -- p_key becomes their newest slot.
        IF v_n > 0 THEN
            UPDATE queue_heads h SET appended = h.appended + 1, last_wake = v_wake, last_slot = p_key
             WHERE h.session_key IN (SELECT c.watcher FROM cursors c WHERE c.target = p_key AND c.wake_seq = v_wake);
        END IF;
        IF v_moved > 0 THEN
            -- Queue-only (ambient) notices use replace semantics, one pair at a time.
            FOR r IN SELECT c.watcher, c.last_seen FROM cursors c
                      WHERE c.target = p_key AND c.material = v_seq AND c.provenance = 'ambient-group'
                      ORDER BY c.watcher
            LOOP
                PERFORM sw_append_notice(r.watcher, p_key, r.last_seen, p_ctx, p_now, p_cap, true, false);
            END LOOP;
            SELECT array_agg(c.watcher::text ORDER BY c.watcher), array_agg(c.wake_seq ORDER BY c.watcher)
              INTO v_ws, v_ps
              FROM cursors c WHERE c.target = p_key AND c.material = v_seq AND c.provenance = 'explicit';
            IF v_ws IS NOT NULL THEN
                PERFORM sw_notify(p_channel, p_origin, v_ws, array_fill(p_key, ARRAY[cardinality(v_ws)]), v_ps);
            END IF;
        END IF;
    END IF;
    o_inserted := true;
    o_sequence := v_seq;
    o_wakes := v_ws;
    o_wake_seqs := v_ps;
    RETURN NEXT;
END $$;

-- A watcher's live queue, oldest first: notice slots (o_target set) and generic entries. o_idx carries
-- the entry's stable id; the order is the live append index. Slots: the chain walk (sw_walk).
CREATE OR REPLACE FUNCTION sw_queue(p_session text, p_cap integer)
RETURNS TABLE (o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text, o_text text)
LANGUAGE sql STABLE AS $$
    SELECT q.id, q.target, q.ls, q.ts, q.quiet, q.ctx, q.text FROM (
        SELECT w.o_idx AS pos, w.o_id AS id, w.o_target AS target, w.o_ls AS ls, w.o_ts AS ts,
               w.o_quiet AS quiet, NULL::text AS ctx, NULL::text AS text
          FROM sw_walk(p_session, p_cap, false, p_cap + 1) w WHERE w.o_live
        UNION ALL
        SELECT e.idx, e.eid, NULL, NULL, e.ts, false, e.context_key::text, e.text
          FROM system_events e JOIN queue_heads h ON h.session_key = e.session_key
         WHERE e.session_key = p_session AND e.idx > h.drained AND h.appended - e.idx < p_cap) q
    ORDER BY q.pos;
$$;
