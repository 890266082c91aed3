-- The ingester's place in each scan's event stream, and whether it has
-- applied the scan's terminal event (after which later events of the stream
-- are dropped: nothing emitted after a stop is recorded).
ALTER TABLE scans ADD COLUMN events_cursor text NOT NULL DEFAULT '0-0';
ALTER TABLE scans ADD COLUMN events_closed boolean NOT NULL DEFAULT false;
-- How many times the reaper put a queued scan whose job was lost back in the
-- queue (once at most).
ALTER TABLE scans ADD COLUMN requeued smallint NOT NULL DEFAULT 0;

-- The scheduler sleeps until the next due schedule; a change to a schedule
-- wakes it.
CREATE OR REPLACE FUNCTION notify_schedules_changed() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('scanfleet_schedules', '');
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER schedules_changed
    AFTER INSERT OR UPDATE OR DELETE ON schedules
    FOR EACH STATEMENT EXECUTE FUNCTION notify_schedules_changed();
