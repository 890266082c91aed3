-- Who changed a finding's triage status, from what, to what, when and why.
-- Written in the transaction that changes the status. Keyed by the
-- fingerprint, since the status belongs to it (every occurrence carries
-- it); a finding recorded before fingerprints existed is kept by its id.
CREATE TABLE finding_status_history (
    id              uuid PRIMARY KEY,
    fingerprint_id  uuid REFERENCES fingerprints (id) ON DELETE CASCADE,
    finding_id      uuid REFERENCES findings (id) ON DELETE CASCADE,
    -- Who made the change; NULL once that account is deleted.
    actor_id        uuid REFERENCES users (id) ON DELETE SET NULL,
    actor_email     text NOT NULL,
    from_status     text NOT NULL,
    to_status       text NOT NULL,
    accepted_until  date,
    reason          text NOT NULL DEFAULT '',
    changed_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (fingerprint_id IS NOT NULL OR finding_id IS NOT NULL)
);
CREATE INDEX finding_status_history_fingerprint_idx
    ON finding_status_history (fingerprint_id, changed_at) WHERE fingerprint_id IS NOT NULL;
CREATE INDEX finding_status_history_finding_idx
    ON finding_status_history (finding_id, changed_at) WHERE finding_id IS NOT NULL;
