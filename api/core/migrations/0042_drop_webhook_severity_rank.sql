-- Severity ranks in SQL are written by the code from its own severity list
-- (`scanfleet_common::sql::severity_rank`), so the webhook filters and the
-- finding orders use one rule; migration 0027's function is no longer
-- called.
DROP FUNCTION webhook_severity_rank(text);
