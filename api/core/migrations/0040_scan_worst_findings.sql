-- A completed scan never changes: its worst findings (the first of them in
-- the order a scan's page and its reports list them: severity, host, time,
-- id) are kept when it completes, as its changes are, so that the page of
-- a scan of 100,000 findings does not read them all on every view. Scans
-- completed before this keep NULL and are read as before.
ALTER TABLE scan_changes ADD COLUMN worst_findings uuid[];
