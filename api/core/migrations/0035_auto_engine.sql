-- The `auto` engine, per-host politeness and per-host coverage (issue 35).

-- `auto`: technology detection, then each host's own templates plus a
-- baseline. Schedules may run it too.
ALTER TABLE scans DROP CONSTRAINT scans_engine_check;
ALTER TABLE scans ADD CONSTRAINT scans_engine_check
    CHECK (engine IN ('full', 'quick', 'recon', 'retest', 'auto'));
ALTER TABLE schedules DROP CONSTRAINT schedules_engine_check;
ALTER TABLE schedules ADD CONSTRAINT schedules_engine_check
    CHECK (engine IN ('full', 'quick', 'recon', 'auto'));

-- A target's ceiling on requests a second to any one of its hosts; NULL:
-- the scanner node's own (`SCANFLEET_SCANNER__PER_HOST_RPS`, 50).
ALTER TABLE targets ADD COLUMN max_rps_per_host integer
    CHECK (max_rps_per_host BETWEEN 1 AND 1000);

-- What a scan did on each live host, as the node reported it once the
-- host's templates finished: one row per (scan, host), written again
-- (the same values) when an event is replayed.
CREATE TABLE scan_host_coverage (
    scan_id      uuid NOT NULL REFERENCES scans (id) ON DELETE CASCADE,
    host         text NOT NULL,
    technologies jsonb NOT NULL DEFAULT '[]',
    total        bigint NOT NULL,
    run          bigint NOT NULL,
    skipped      jsonb NOT NULL DEFAULT '{}',
    requests     bigint NOT NULL,
    PRIMARY KEY (scan_id, host)
);
