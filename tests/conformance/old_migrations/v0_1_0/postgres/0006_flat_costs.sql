-- 0006: costs that follow the work a call does, not the size of the store (see sqlite/0006 and
-- store/sqlite_upkeep.py for the same model on SQLite).

-- The restart sweep's lagging pairs (material > last_seen): only those rows are in this index, keyed
-- by target like the fan-out that moves them.
CREATE INDEX cursors_lagging ON cursors (target) WHERE material > last_seen;

-- The number of events, kept in meta so the row cap never counts the whole log: event_rows rows
-- with a sequence up to event_rows_upto; rows recorded since are counted here (the newest rows only),
-- deletes subtract what they removed (sw_forget_rows). Call under the writer lock.
CREATE FUNCTION sw_event_rows() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_hi    bigint;
    v_kept  bigint;
    v_upto  bigint;
    v_total bigint;
BEGIN
    v_hi := coalesce((SELECT e.sequence FROM events e ORDER BY e.sequence DESC LIMIT 1), 0);
    SELECT m.value::bigint INTO v_kept FROM meta m WHERE m.key = 'event_rows';
    SELECT m.value::bigint INTO v_upto FROM meta m WHERE m.key = 'event_rows_upto';
    IF v_kept IS NULL OR v_upto IS NULL THEN  -- the first prune on this store counts once
        v_total := (SELECT count(*) FROM events e WHERE e.sequence <= v_hi);
        v_upto := v_hi;
    ELSIF v_hi > v_upto THEN
        v_total := v_kept + (SELECT count(*) FROM events e WHERE e.sequence > v_upto AND e.sequence <= v_hi);
        v_upto := v_hi;
    ELSE
        RETURN v_kept;
    END IF;
    INSERT INTO meta (key, value) VALUES ('event_rows', v_total::text), ('event_rows_upto', v_upto::text)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    RETURN v_total;
END $$;

CREATE FUNCTION sw_forget_rows(p_sequences bigint[]) RETURNS void
LANGUAGE sql AS $$
    UPDATE meta m SET value = (m.value::bigint - (SELECT count(*) FROM unnest(p_sequences) s
                                                  WHERE s <= (SELECT u.value::bigint FROM meta u
                                                               WHERE u.key = 'event_rows_upto')))::text
     WHERE m.key = 'event_rows';
$$;

CREATE OR REPLACE FUNCTION sw_delete_session(p_lock bigint, p_key text, p_agent text, p_ctx text, p_cap integer)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_found   boolean;
    v_touched text[];
    v_gone    bigint[];
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    DELETE FROM sessions s WHERE s.session_key = p_key AND s.agent_id = p_agent;
    v_found := FOUND;
    DELETE FROM upstream_links l WHERE l.session_key = p_key AND l.agent_id = p_agent;
    WITH d AS (DELETE FROM events e WHERE e.session_key = p_key AND e.agent_id = p_agent RETURNING e.sequence)
    SELECT array_agg(d.sequence) INTO v_gone FROM d;
    IF v_gone IS NOT NULL THEN
        PERFORM sw_forget_rows(v_gone);
    END IF;
    DELETE FROM heads h WHERE h.session_key = p_key AND h.agent_id = p_agent;
    DELETE FROM messages m WHERE m.session_key = p_key AND m.agent_id = p_agent;
    WITH a AS (DELETE FROM cursors c WHERE c.target = p_key RETURNING c.watcher::text AS w),
         b AS (DELETE FROM system_events e WHERE e.context_key = p_ctx RETURNING e.session_key::text AS w)
    SELECT array_agg(DISTINCT u.w) INTO v_touched FROM (SELECT w FROM a UNION SELECT w FROM b) u WHERE u.w <> p_key;
    DELETE FROM cursors c WHERE c.watcher = p_key;
    DELETE FROM watch_mutes m WHERE m.watcher = p_key OR m.target = p_key;
    DELETE FROM system_events e WHERE e.session_key = p_key;
    UPDATE queue_heads h SET drained = h.appended WHERE h.session_key = p_key;
    PERFORM sw_compact(t.w, p_cap) FROM unnest(coalesce(v_touched, '{}')) AS t(w);
    RETURN v_found;
END $$;

-- The prune's claim (same signature as before): one prune at a time across gateways, the shared
-- interval unless p_force. It deletes nothing now: the caller then runs sw_prune_step until done, each
-- step its own short transaction.
CREATE OR REPLACE FUNCTION sw_prune(p_prune_lock bigint, p_lock bigint, p_now bigint, p_cutoff bigint, p_max_rows bigint,
                                    p_force boolean, p_interval bigint, p_cap integer,
                                    OUT o_skipped boolean, OUT o_rows_deleted bigint, OUT o_cursors_deleted bigint,
                                    OUT o_heads_stamped bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_last text;
BEGIN
    o_skipped := false;
    o_rows_deleted := 0;
    o_cursors_deleted := 0;
    o_heads_stamped := 0;
    IF NOT pg_try_advisory_xact_lock(p_prune_lock) THEN
        o_skipped := true;
        RETURN;
    END IF;
    IF NOT p_force THEN
        SELECT m.value INTO v_last FROM meta m WHERE m.key = 'last_prune_at';
        IF v_last IS NOT NULL AND p_now - v_last::bigint < p_interval THEN
            o_skipped := true;
            RETURN;
        END IF;
    END IF;
    INSERT INTO meta (key, value) VALUES ('last_prune_at', p_now::text)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
END $$;

-- One bounded prune step: at most p_batch events (age first, then the row cap, the boundary found by
-- walking from the old end), or when p_slice > 0 the stale-cursor cleanup over the next p_slice
-- cursor rows (resuming at meta cursor_prune_at). o_more: call again. Skipped (o_more false) while
-- another gateway prunes.
CREATE FUNCTION sw_prune_step(p_prune_lock bigint, p_lock bigint, p_cutoff bigint, p_max_rows bigint,
                              p_batch integer, p_slice integer, p_cap integer,
                              OUT o_rows_deleted bigint, OUT o_cursors_deleted bigint, OUT o_heads_stamped bigint,
                              OUT o_more boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_seqs     bigint[];
    v_over     bigint;
    v_boundary bigint;
    v_n        bigint;
    v_at       text;
    v_t        text;
    v_w        text;
    v_rows     bigint;
    v_expired  text[];
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- a lost step is redone by the next prune
    o_rows_deleted := 0;
    o_cursors_deleted := 0;
    o_heads_stamped := 0;
    o_more := false;
    IF NOT pg_try_advisory_xact_lock(p_prune_lock) THEN
        RETURN;
    END IF;
    IF p_slice > 0 THEN
        PERFORM pg_advisory_xact_lock(p_lock);
        SELECT m.value INTO v_at FROM meta m WHERE m.key = 'cursor_prune_at';
        IF v_at IS NOT NULL THEN
            v_t := (v_at::jsonb) ->> 0;
            v_w := (v_at::jsonb) ->> 1;
        END IF;
        -- the slice in key order from the saved position, wrapping to the start for the rest
        CREATE TEMP TABLE IF NOT EXISTS sw_slice (n bigint, target text, watcher text, updated_at bigint)
            ON COMMIT DROP;
        INSERT INTO sw_slice
        SELECT row_number() OVER (ORDER BY s.part, s.target, s.watcher), s.target, s.watcher, s.updated_at FROM (
            (SELECT c.target::text AS target, c.watcher::text AS watcher, c.updated_at, 0 AS part FROM cursors c
              WHERE v_at IS NULL OR (c.target, c.watcher) > (v_t, v_w) ORDER BY c.target, c.watcher LIMIT p_slice)
            UNION ALL
            (SELECT c.target::text, c.watcher::text, c.updated_at, 1 FROM cursors c
              WHERE v_at IS NOT NULL AND (c.target, c.watcher) <= (v_t, v_w) ORDER BY c.target, c.watcher
              LIMIT p_slice)
            ORDER BY part, target, watcher LIMIT p_slice) s;
        SELECT count(*) INTO v_rows FROM sw_slice;
        WITH d AS (DELETE FROM cursors c USING sw_slice s
                    WHERE c.target = s.target AND c.watcher = s.watcher AND s.updated_at < p_cutoff
                   RETURNING c.watcher::text AS w)
        SELECT count(*), array_agg(DISTINCT d.w) INTO o_cursors_deleted, v_expired FROM d;
        PERFORM sw_compact(x.w, p_cap) FROM unnest(coalesce(v_expired, '{}')) AS x(w);
        IF v_rows < p_slice THEN
            DELETE FROM meta m WHERE m.key = 'cursor_prune_at';
        ELSE
            INSERT INTO meta (key, value)
            SELECT 'cursor_prune_at', jsonb_build_array(s.target, s.watcher)::text FROM sw_slice s WHERE s.n = v_rows
            ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        END IF;
        RETURN;
    END IF;
    -- Age: the time index finds the old rows (an index probe when nothing is old).
    SELECT array_agg(x.sequence) INTO v_seqs
      FROM (SELECT e.sequence FROM events e WHERE e.occurred_at < p_cutoff ORDER BY e.occurred_at LIMIT p_batch) x;
    IF v_seqs IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(p_lock);
        UPDATE heads h SET pruned_max_sequence = m.mx
          FROM (SELECT e.session_key, e.agent_id, max(e.sequence) AS mx FROM events e
                 WHERE e.sequence = ANY (v_seqs) GROUP BY e.session_key, e.agent_id) m
         WHERE h.session_key = m.session_key AND h.agent_id = m.agent_id AND m.mx > h.pruned_max_sequence;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        o_heads_stamped := v_n;
        DELETE FROM events e WHERE e.sequence = ANY (v_seqs);
        GET DIAGNOSTICS v_n = ROW_COUNT;
        o_rows_deleted := v_n;
        PERFORM sw_forget_rows(v_seqs);
        o_more := true;
        RETURN;
    END IF;
    -- Cap: the kept count says how many are over; the boundary is that many rows from the old end.
    PERFORM pg_advisory_xact_lock(p_lock);
    v_over := sw_event_rows() - p_max_rows;
    IF v_over <= 0 THEN
        RETURN;
    END IF;
    SELECT e.sequence INTO v_boundary FROM events e ORDER BY e.sequence LIMIT 1 OFFSET least(v_over, p_batch) - 1;
    UPDATE heads h SET pruned_max_sequence = m.mx
      FROM (SELECT e.session_key, e.agent_id, max(e.sequence) AS mx FROM events e
             WHERE e.sequence <= v_boundary GROUP BY e.session_key, e.agent_id) m
     WHERE h.session_key = m.session_key AND h.agent_id = m.agent_id AND m.mx > h.pruned_max_sequence;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    o_heads_stamped := v_n;
    WITH d AS (DELETE FROM events e WHERE e.sequence <= v_boundary RETURNING e.sequence)
    SELECT array_agg(d.sequence) INTO v_seqs FROM d;
    o_rows_deleted := coalesce(array_length(v_seqs, 1), 0);
    IF v_seqs IS NOT NULL THEN
        PERFORM sw_forget_rows(v_seqs);
    END IF;
    o_more := v_over > p_batch;
END $$;
