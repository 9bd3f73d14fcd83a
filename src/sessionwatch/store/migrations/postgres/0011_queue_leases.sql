-- 0011: delivery leases (docs/http.md, "Delivery"). A drain that answers over a network leases the
-- entries it hands out to one holder until a time; other drains (on any gateway) skip live-leased
-- entries, so two concurrent drains never answer with the same entry, and an entry whose holder died
-- (a gateway killed mid-answer) is back in the queue once its lease runs out. Keyed by the entry's
-- stable id, which a queue never reuses, so a row left behind by an entry taken out otherwise matches
-- nothing. Written under the writer lock (postgres_functions.sql: sw_lease, sw_settle, sw_drain).
CREATE TABLE queue_leases (
    session_key text COLLATE "C" NOT NULL,
    eid         bigint NOT NULL,
    holder      text COLLATE "C" NOT NULL,
    until       bigint NOT NULL,
    PRIMARY KEY (session_key, eid)
);
