-- 0002: stable queue entry ids (at-least-once delivery: peek with ids, acknowledge by id) and
-- reconciling reads that acknowledge what they returned. See migrations/sqlite/0002_entry_ids.sql.
--
-- An entry's append index moves when its queue is renumbered (sw_compact), so an entry also keeps the
-- index it was appended with (cursors.queued_id, system_events.eid): unique within its session's queue
-- and never reused, because queue_heads.appended only grows (a deleted session's head is now emptied,
-- not removed). The functions below replace their 0001 versions; only the lines that write or read the
-- id changed, plus the two new functions at the end.

ALTER TABLE cursors ADD COLUMN queued_id bigint NOT NULL DEFAULT 0;
UPDATE cursors SET queued_id = queued_idx WHERE queued_idx > 0;
ALTER TABLE system_events ADD COLUMN eid bigint NOT NULL DEFAULT 0;
UPDATE system_events SET eid = idx;

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
    UPDATE queue_heads h SET appended = h.appended + 1, last_wake = coalesce(v_wake, h.last_wake)
     WHERE h.session_key = p_watcher RETURNING h.appended INTO v_idx;
    UPDATE cursors c SET queued_idx = v_idx, queued_id = v_idx, queued_ls = p_ls, queued_ts = p_ts,
                         queued_quiet = p_quiet,
                         wake_seq = coalesce(v_wake, c.wake_seq)
     WHERE c.target = p_target AND c.watcher = p_watcher;
    RETURN v_idx;
END $$;

CREATE OR REPLACE FUNCTION sw_append_generic(p_session text, p_text text, p_ctx text, p_ts bigint, p_cap integer)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_idx bigint;
    v_dr  bigint;
BEGIN
    PERFORM sw_ensure_head(p_session);
    PERFORM 1 FROM system_events e JOIN queue_heads h ON h.session_key = e.session_key
     WHERE e.session_key = p_session AND e.idx > h.drained AND h.appended - e.idx < p_cap
       AND e.context_key IS NOT DISTINCT FROM p_ctx AND e.text = p_text;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE queue_heads h SET appended = h.appended + 1 WHERE h.session_key = p_session
    RETURNING h.appended, h.drained INTO v_idx, v_dr;
    INSERT INTO system_events (session_key, idx, eid, context_key, text, ts)
    VALUES (p_session, v_idx, v_idx, p_ctx, p_text, p_ts);
    DELETE FROM system_events e WHERE e.session_key = p_session AND (e.idx <= v_dr OR v_idx - e.idx >= p_cap);
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
        -- current take the next index of their watcher's queue: bump those heads first...
        UPDATE queue_heads h SET appended = h.appended + 1, last_wake = v_wake
         WHERE h.session_key IN (
               SELECT c.watcher FROM cursors c
                WHERE c.target = p_key
                  AND ((c.material < v_seq AND c.watcher IS DISTINCT FROM p_actor_id) OR c.queued_idx = -1)
                  AND c.provenance = 'explicit'
                  AND NOT EXISTS (SELECT 1 FROM queue_heads h2 WHERE h2.session_key = c.watcher
                                     AND c.queued_idx > h2.drained AND h2.appended - c.queued_idx < p_cap
                                     AND c.queued_ls = c.last_seen));
        -- ...then move the cursors (frozen-watermark rule) and fill the requeued slots from their heads.
        -- The requeue test gives the same answer after the bump: a bumped head only ever makes its
        -- slot less live, and heads that were not bumped did not change.
        UPDATE cursors c
           SET notified = CASE WHEN c.notified = c.last_seen THEN v_seq ELSE c.notified END,
               material = v_seq, updated_at = p_now,
               (queued_idx, queued_id, queued_ls, queued_ts, queued_quiet, wake_seq) = (
                   SELECT CASE WHEN q.requeue THEN q.appended ELSE c.queued_idx END,
                          CASE WHEN q.requeue THEN q.appended ELSE c.queued_id END,
                          CASE WHEN q.requeue THEN c.last_seen ELSE c.queued_ls END,
                          CASE WHEN q.requeue THEN p_now ELSE c.queued_ts END,
                          CASE WHEN q.requeue THEN false ELSE c.queued_quiet END,
                          CASE WHEN q.requeue THEN v_wake ELSE c.wake_seq END
                     FROM (SELECT h.appended,
                                  c.provenance = 'explicit' AND NOT coalesce(
                                      c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap
                                      AND c.queued_ls = c.last_seen, false) AS requeue
                             FROM (SELECT 1) one
                             LEFT JOIN queue_heads h ON h.session_key = c.watcher) q)
         WHERE c.target = p_key
           AND ((c.material < v_seq AND c.watcher IS DISTINCT FROM p_actor_id) OR c.queued_idx = -1);
        GET DIAGNOSTICS v_n = ROW_COUNT;  -- rows marked above count twice: only "any moved?" matters
        v_moved := v_moved + v_n;
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

CREATE OR REPLACE FUNCTION sw_delete_session(p_lock bigint, p_key text, p_agent text, p_ctx text, p_cap integer)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_found   boolean;
    v_touched text[];
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    DELETE FROM sessions s WHERE s.session_key = p_key AND s.agent_id = p_agent;
    v_found := FOUND;
    DELETE FROM upstream_links l WHERE l.session_key = p_key AND l.agent_id = p_agent;
    DELETE FROM events e WHERE e.session_key = p_key AND e.agent_id = p_agent;
    DELETE FROM heads h WHERE h.session_key = p_key AND h.agent_id = p_agent;
    DELETE FROM messages m WHERE m.session_key = p_key AND m.agent_id = p_agent;
    WITH a AS (DELETE FROM cursors c WHERE c.target = p_key RETURNING c.watcher::text AS w),
         b AS (DELETE FROM system_events e WHERE e.context_key = p_ctx RETURNING e.session_key::text AS w)
    SELECT array_agg(DISTINCT u.w) INTO v_touched FROM (SELECT w FROM a UNION SELECT w FROM b) u WHERE u.w <> p_key;
    DELETE FROM cursors c WHERE c.watcher = p_key;
    DELETE FROM watch_mutes m WHERE m.watcher = p_key OR m.target = p_key;
    DELETE FROM system_events e WHERE e.session_key = p_key;
    -- The head stays (emptied): its append counter keeps entry ids unique if the key comes back.
    UPDATE queue_heads h SET drained = h.appended WHERE h.session_key = p_key;
    PERFORM sw_compact(t.w, p_cap) FROM unnest(coalesce(v_touched, '{}')) AS t(w);
    RETURN v_found;
END $$;

-- A watcher's live queue, oldest first: notice slots (o_target set) and generic entries. o_idx now
-- carries the entry's stable id (the column keeps its 0001 name so the signature is unchanged); the
-- order is still the live append index.
CREATE OR REPLACE FUNCTION sw_queue(p_session text, p_cap integer)
RETURNS TABLE (o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text, o_text text)
LANGUAGE sql STABLE AS $$
    SELECT q.id, q.target, q.ls, q.ts, q.quiet, q.ctx, q.text FROM (
        SELECT c.queued_idx AS pos, c.queued_id AS id, c.target::text AS target, c.queued_ls AS ls,
               c.queued_ts AS ts, c.queued_quiet AS quiet, NULL::text AS ctx, NULL::text AS text
          FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher
         WHERE c.watcher = p_session AND c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap
        UNION ALL
        SELECT e.idx, e.eid, NULL, NULL, e.ts, false, e.context_key::text, e.text
          FROM system_events e JOIN queue_heads h ON h.session_key = e.session_key
         WHERE e.session_key = p_session AND e.idx > h.drained AND h.appended - e.idx < p_cap) q
    ORDER BY q.pos;
$$;

-- Acknowledge by id, first half: under the writer lock, return the live entries with these stable ids
-- and take them out of the queue (other entries stay; unknown ids are skipped). The caller acknowledges
-- the session-state ones (sw_ack) in the same transaction, as a drain does.
CREATE OR REPLACE FUNCTION sw_take_entries(p_lock bigint, p_session text, p_ids bigint[], p_cap integer)
RETURNS TABLE (o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text, o_text text)
LANGUAGE plpgsql AS $$
DECLARE
    v_live bigint[];
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    SELECT array_agg(q.o_idx) INTO v_live FROM sw_queue(p_session, p_cap) q WHERE q.o_idx = ANY (p_ids);
    IF v_live IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM sw_queue(p_session, p_cap) q WHERE q.o_idx = ANY (v_live);
    UPDATE cursors c SET queued_idx = 0 WHERE c.watcher = p_session AND c.queued_id = ANY (v_live);
    DELETE FROM system_events e WHERE e.session_key = p_session AND e.eid = ANY (v_live);
    PERFORM sw_compact(p_session, p_cap);
END $$;

-- A watcher's session_status read of p_target covered (p_after, p_last] (store.base.Store.reconcile):
-- when the read starts at or before the cursor and reaches past it, last_seen moves to p_last and the
-- pair's notice is withdrawn, or replaced by one quoting p_last when notify-eligible events lie beyond
-- the page. o_changed: the cursor moved; o_wake: a notice was queued where none was live (it wakes, as a reopen does).
CREATE OR REPLACE FUNCTION sw_reconcile(p_lock bigint, p_watcher text, p_target text, p_after bigint,
                                        p_last bigint, p_ctx text, p_now bigint, p_cap integer, p_channel text,
                                        p_origin text, OUT o_changed boolean, OUT o_wake boolean,
                                        OUT o_wake_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_ls    bigint;
    v_mat   bigint;
    v_prov  text;
    v_live  boolean;
    v_quiet boolean;
BEGIN
    o_changed := false;
    o_wake := false;
    -- Most reads are not a watcher's: answer those without the writer lock.
    SELECT c.last_seen INTO v_ls FROM cursors c WHERE c.target = p_target AND c.watcher = p_watcher;
    IF NOT FOUND OR p_after > v_ls OR p_last <= v_ls THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    SELECT c.last_seen, c.material, c.provenance INTO v_ls, v_mat, v_prov
      FROM cursors c WHERE c.target = p_target AND c.watcher = p_watcher;
    IF NOT FOUND OR p_after > v_ls OR p_last <= v_ls THEN
        RETURN;  -- not a watcher, a page that skipped events, or nothing new in it
    END IF;
    o_changed := true;
    v_quiet := v_prov = 'ambient-group';
    SELECT c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap INTO v_live
      FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher
     WHERE c.target = p_target AND c.watcher = p_watcher;
    v_live := coalesce(v_live, false);
    IF v_mat > p_last THEN
        UPDATE cursors c SET last_seen = p_last, notified = c.material, updated_at = p_now
         WHERE c.target = p_target AND c.watcher = p_watcher;
        PERFORM sw_append_notice(p_watcher, p_target, p_last, p_ctx, p_now, p_cap, v_quiet, NOT v_live);
        IF NOT v_live AND NOT v_quiet THEN
            o_wake := true;
            SELECT c.wake_seq INTO o_wake_seq FROM cursors c WHERE c.target = p_target AND c.watcher = p_watcher;
            PERFORM sw_notify(p_channel, p_origin, ARRAY[p_watcher], ARRAY[p_target], ARRAY[o_wake_seq]);
        END IF;
    ELSE
        UPDATE cursors c SET last_seen = p_last, notified = p_last, material = p_last, updated_at = p_now
         WHERE c.target = p_target AND c.watcher = p_watcher;
        PERFORM sw_remove_slot(p_watcher, p_target, p_cap);
    END IF;
END $$;
