-- What a finding's page shows beyond the template's text: the template's
-- references and classification (CVE, CWE, CVSS) as the node reported them,
-- and the request and response the match was judged on, each cut by the
-- node (4 KiB and 8 KiB). Nullable: findings recorded before, and findings
-- without an exchange (a probe's own), have none. Long values are TOASTed
-- and compressed out of the row, so lists that do not read them pay nothing.
ALTER TABLE findings
    ADD COLUMN classification jsonb,
    ADD COLUMN request text,
    ADD COLUMN response text;
