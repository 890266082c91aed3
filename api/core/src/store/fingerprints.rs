//! Fingerprints: one row per target and finding identity (see
//! [`crate::fingerprint`]) holding its life across scans: the user's triage
//! `status`, the scans' `state` (`open` or `fixed`), first and last seen,
//! occurrences. The ingester records every finding's fingerprint in the
//! transaction that records the finding ([`record`]), and a completed scan
//! fixes the fingerprints it would have found but did not ([`complete`]).
//! Reports read a scan's changes: the counts ([`changes_so_far`]), its new
//! and regressed findings ([`changed_findings`]) and the fingerprints it
//! fixed ([`stream_fixed_by_scan`]).

use std::sync::LazyLock;

use chrono::{DateTime, NaiveDate, Utc};
use futures::TryStreamExt as _;
use scanfleet_common::Severity;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use crate::error::Error;
use crate::fingerprint::{Change, FindingStatus};

/// The template id of the HTTP probe every engine runs on every host it
/// reaches (the scanner's `PROBE_TEMPLATE_ID`).
pub const PROBE_TEMPLATE_ID: &str = "http-probe";

/// The fingerprint half of recording a page of findings
/// ([`crate::store::findings::record_findings`], one statement): each
/// fingerprint of the page is upserted once and answers what it became:
/// - unknown on the target: a new row, `new`;
/// - known and `fixed`: `open` again, `regressed` (a user's `fixed` status
///   goes back to `open`);
/// - known and open: `recurring`, its status kept (sticky triage; an
///   `accepted_risk` past its day is `open` again).
///
/// A fingerprint seen again by the same scan (a replayed event, or two
/// spellings of one URL) keeps the change of its first occurrence there.
///
/// It reads the CTE `s` (the scan's target, its row locked `FOR UPDATE`
/// before anything is written: the ingester holds it already) and the
/// page's rows `n`, where `fingerprint_id` is set on the first finding of
/// each fingerprint only (`ON CONFLICT` cannot touch a row twice in one
/// statement) and `ord` follows the fingerprints' order, so two scans of
/// one target running side by side lock the rows they share in the same
/// order. `$1` is the scan, `$2` its user. The scan's lock keeps the scan,
/// and so its target, in place until the commit, which is what lets a
/// fingerprint name its target and its first and last scans without a
/// foreign key checked on every row (migrations 0032 and 0044).
pub(crate) const RECORD_SIGHTINGS: &str = "INSERT INTO fingerprints AS fp (
         id, user_id, target_id, fingerprint, template_id, name, severity, severity_rank,
         host, matched_at, first_seen_at, last_seen_at, first_scan_id, last_scan_id)
     SELECT n.fingerprint_id, $2, s.target_id, n.fingerprint, n.template_id, n.name,
            n.severity, n.severity_rank, n.host, n.normalised, now(), now(), $1, $1
     FROM s, n WHERE n.fingerprint_id IS NOT NULL
     ORDER BY n.ord
     ON CONFLICT (target_id, fingerprint) DO UPDATE SET
         name = EXCLUDED.name, severity = EXCLUDED.severity,
         severity_rank = EXCLUDED.severity_rank, host = EXCLUDED.host,
         matched_at = EXCLUDED.matched_at, last_seen_at = now(),
         occurrences = fp.occurrences + (fp.last_scan_id IS DISTINCT FROM $1)::int,
         last_change = CASE WHEN fp.last_scan_id = $1 THEN fp.last_change
                            WHEN fp.state = 'fixed' THEN 'regressed'
                            ELSE 'recurring' END,
         status = CASE
             WHEN fp.last_scan_id IS DISTINCT FROM $1 AND fp.status = 'fixed' THEN 'open'
             WHEN fp.status = 'accepted_risk' AND fp.accepted_until < current_date
                 THEN 'open'
             ELSE fp.status END,
         accepted_until = CASE
             WHEN fp.accepted_until < current_date THEN NULL
             ELSE fp.accepted_until END,
         state = 'open', fixed_at = NULL, last_scan_id = $1
     RETURNING fp.id, fp.fingerprint, fp.last_change, fp.status, fp.first_seen_at";

/// A completed scan's changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChangeCounts {
    pub new: i32,
    pub recurring: i32,
    pub regressed: i32,
    pub fixed: i32,
}

/// A scan's changes counted from its findings (distinct fingerprints by
/// change) and the fingerprints it fixed; `$1` is the scan.
const COUNT_CHANGES: &str = "(SELECT count(DISTINCT fingerprint_id)::int FROM findings
         WHERE scan_id = $1 AND change = 'new') AS new,
     (SELECT count(DISTINCT fingerprint_id)::int FROM findings
         WHERE scan_id = $1 AND change = 'recurring') AS recurring,
     (SELECT count(DISTINCT fingerprint_id)::int FROM findings
         WHERE scan_id = $1 AND change = 'regressed') AS regressed,
     (SELECT count(*)::int FROM fingerprint_fixes WHERE scan_id = $1) AS fixed";

/// Whether scan `scan` (an alias of a `scans` row) would have run the
/// template of fingerprint `fp` (an alias of a `fingerprints` row) on its
/// host, in SQL: the coverage rule that both the fixed rule ([`complete`])
/// and the diff of two scans apply.
/// - its host was reached (every reached host has the probe's finding, so
///   the hosts of the scan's findings are the hosts it looked at);
/// - `full` runs every template; `quick` those of severity medium and worse
///   (and the probe); `recon` runs no vulnerability template, so it covers
///   only the probe's findings; `retest` only the fingerprint retested.
pub(crate) fn covers_sql(scan: &str, fp: &str) -> String {
    format!(
        "({fp}.host IN (SELECT host FROM findings WHERE scan_id = {scan}.id)
          AND CASE {scan}.engine
              WHEN 'full' THEN true
              WHEN 'quick' THEN {fp}.severity_rank <= 2 OR {fp}.template_id = '{PROBE_TEMPLATE_ID}'
              WHEN 'recon' THEN {fp}.template_id = '{PROBE_TEMPLATE_ID}'
              WHEN 'retest' THEN {fp}.id = {scan}.retest_of
              ELSE false END)"
    )
}

/// The fixed rule, applied when `scan_id` completes: an open fingerprint of
/// the scan's target that the scan did not find becomes `fixed` only when
/// the scan would have run its template on its host ([`covers_sql`]), and
/// nothing seen since the scan was created (by a scan running alongside)
/// is fixed by it.
///
/// Then counts the scan's changes into `scan_changes` (once); the ingester
/// then keeps the ids of its worst findings there
/// (`store::findings::keep_worst`).
///
/// The target is looked up on its own (an init plan), so the fingerprints
/// are always read by the target's index: joined on the scan's row, a
/// plan made while the table was small read every open fingerprint of
/// every target at each completion.
pub async fn complete(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
) -> Result<ChangeCounts, Error> {
    static FIX: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH fixed AS (
                 UPDATE fingerprints fp SET state = 'fixed', fixed_at = now()
                 FROM scans s
                 WHERE s.id = $1
                   AND fp.target_id = (SELECT target_id FROM scans WHERE id = $1)
                   AND fp.state = 'open'
                   AND fp.last_scan_id IS DISTINCT FROM s.id
                   AND fp.last_seen_at < s.created_at
                   AND {}
                 RETURNING fp.id, fp.fixed_at)
             INSERT INTO fingerprint_fixes (fingerprint_id, scan_id, fixed_at)
             SELECT id, $1, fixed_at FROM fixed
             ON CONFLICT DO NOTHING",
            covers_sql("s", "fp")
        )
    });
    static COUNT: LazyLock<String> = LazyLock::new(|| {
        format!(
            "INSERT INTO scan_changes (scan_id, new, recurring, regressed, fixed)
             SELECT $1, {COUNT_CHANGES}
             ON CONFLICT (scan_id) DO UPDATE SET fixed = EXCLUDED.fixed
             RETURNING new, recurring, regressed, fixed"
        )
    });
    db.execute(&db.prepare_cached(&FIX).await?, &[&scan_id])
        .await?;
    let row = db
        .query_one(&db.prepare_cached(&COUNT).await?, &[&scan_id])
        .await?;
    ChangeCounts::try_from(&row)
}

impl TryFrom<&Row> for ChangeCounts {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        Ok(ChangeCounts {
            new: row.try_get("new")?,
            recurring: row.try_get("recurring")?,
            regressed: row.try_get("regressed")?,
            fixed: row.try_get("fixed")?,
        })
    }
}

/// A completed scan's changes as [`complete`] kept them.
const CHANGES_OF: &str =
    "SELECT new, recurring, regressed, fixed FROM scan_changes WHERE scan_id = $1";

/// The changes counted when `scan_id` completed; `None` before.
pub async fn changes_of(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
) -> Result<Option<ChangeCounts>, Error> {
    let stmt = db.prepare_cached(CHANGES_OF).await?;
    let row = db.query_opt(&stmt, &[&scan_id]).await?;
    row.as_ref().map(ChangeCounts::try_from).transpose()
}

/// The changes of `scan_id` as its findings stand now: while it runs, its
/// new, recurring and regressed findings so far (fixed stays 0 until it
/// completes); once completed, what [`complete`] counted.
pub async fn changes_so_far(db: &impl GenericClient, scan_id: Uuid) -> Result<ChangeCounts, Error> {
    // Counting a scan of 100,000 findings takes a tenth of a second; a
    // completed one has its counts kept.
    if let Some(kept) = db.query_opt(CHANGES_OF, &[&scan_id]).await? {
        return ChangeCounts::try_from(&kept);
    }
    let row = db
        .query_one(&format!("SELECT {COUNT_CHANGES}"), &[&scan_id])
        .await?;
    ChangeCounts::try_from(&row)
}

/// A finding of a scan's change lists, as a reader recognises it.
#[derive(Debug, Clone)]
pub struct ChangedFinding {
    pub severity: Severity,
    pub name: String,
    pub template_id: String,
    pub host: String,
    pub matched_at: String,
}

impl TryFrom<&Row> for ChangedFinding {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        Ok(ChangedFinding {
            severity: row.try_get::<_, Severity>("severity")?,
            name: row.try_get("name")?,
            template_id: row.try_get("template_id")?,
            host: row.try_get("host")?,
            matched_at: row.try_get("matched_at")?,
        })
    }
}

/// The first `limit` of `scan_id`'s findings with `change`, one per
/// fingerprint (its first occurrence in the scan), worst first, then by
/// host and URL.
pub async fn changed_findings(
    db: &impl GenericClient,
    scan_id: Uuid,
    change: Change,
    limit: i64,
) -> Result<Vec<ChangedFinding>, Error> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT severity, name, template_id, host, matched_at FROM (
                 SELECT DISTINCT ON (f.fingerprint_id) f.severity, f.name, f.template_id,
                        f.host, f.matched_at
                 FROM findings f
                 WHERE f.scan_id = $1 AND f.change = $2 AND f.fingerprint_id IS NOT NULL
                 ORDER BY f.fingerprint_id, f.created_at, f.id) c
             ORDER BY {rank}, host, matched_at
             LIMIT $3",
            rank = scanfleet_common::sql::severity_rank("severity")
        )
    });
    let rows = db
        .query(&*SQL, &[&scan_id, &change.as_str(), &limit])
        .await?;
    rows.iter().map(ChangedFinding::try_from).collect()
}

/// A fingerprint a completed scan fixed, with the finding that found it
/// last (its text for reports that describe the rule).
#[derive(Debug, Clone)]
pub struct FixedFingerprint {
    pub fingerprint_id: Uuid,
    pub fingerprint: String,
    pub template_id: String,
    pub name: String,
    pub severity: Severity,
    pub host: String,
    /// In its normal form (see [`crate::fingerprint`]).
    pub matched_at: String,
    /// The triage status as it stands today.
    pub status: FindingStatus,
    /// The last day an `accepted_risk` status holds.
    pub accepted_until: Option<NaiveDate>,
    pub fixed_at: DateTime<Utc>,
    pub last_finding_id: Uuid,
    pub description: String,
    pub remediation: String,
    pub extracted_results: Vec<String>,
}

impl TryFrom<&Row> for FixedFingerprint {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        let extracted: serde_json::Value = row.try_get("extracted_results")?;
        Ok(FixedFingerprint {
            fingerprint_id: row.try_get("id")?,
            fingerprint: row.try_get("fingerprint")?,
            template_id: row.try_get("template_id")?,
            name: row.try_get("name")?,
            severity: row.try_get::<_, Severity>("severity")?,
            host: row.try_get("host")?,
            matched_at: row.try_get("matched_at")?,
            status: row.try_get("status")?,
            accepted_until: row.try_get("accepted_until")?,
            fixed_at: row.try_get("fixed_at")?,
            last_finding_id: row.try_get("last_finding_id")?,
            description: row.try_get("description")?,
            remediation: row.try_get("remediation")?,
            extracted_results: serde_json::from_value(extracted).map_err(|e| {
                Error::Unexpected(anyhow::Error::new(e).context("extracted_results of a finding"))
            })?,
        })
    }
}

impl From<&FixedFingerprint> for ChangedFinding {
    fn from(f: &FixedFingerprint) -> Self {
        ChangedFinding {
            severity: f.severity,
            name: f.name.clone(),
            template_id: f.template_id.clone(),
            host: f.host.clone(),
            matched_at: f.matched_at.clone(),
        }
    }
}

/// The fingerprints `scan_id` fixed as Postgres sends them, worst first,
/// then by host and URL; the first `limit` when given. A fixed fingerprint
/// always has a finding: scans go only with their target, and its
/// fingerprints with it.
pub async fn stream_fixed_by_scan(
    db: &impl GenericClient,
    scan_id: Uuid,
    limit: Option<i64>,
) -> Result<impl futures::Stream<Item = Result<FixedFingerprint, Error>>, Error> {
    let sql = format!(
        "SELECT fp.id, fp.fingerprint, fp.template_id, fp.name, fp.severity, fp.host,
                fp.matched_at, {EFFECTIVE_STATUS} AS status, x.fixed_at,
                CASE WHEN fp.status = 'accepted_risk' AND NOT fp.accepted_until < current_date
                     THEN fp.accepted_until END AS accepted_until,
                lf.id AS last_finding_id, lf.description, lf.remediation, lf.extracted_results
         FROM fingerprint_fixes x
         JOIN fingerprints fp ON fp.id = x.fingerprint_id
         JOIN LATERAL (SELECT f.id, f.description, f.remediation, f.extracted_results
                       FROM findings f WHERE f.fingerprint_id = fp.id
                       ORDER BY f.created_at DESC, f.id DESC LIMIT 1) lf ON true
         WHERE x.scan_id = $1
         ORDER BY fp.severity_rank, fp.host, fp.matched_at, fp.id
         LIMIT $2"
    );
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&scan_id, &limit];
    let rows = db.query_raw(&sql, params).await?;
    Ok(futures::TryStreamExt::map_err(rows, Error::from)
        .and_then(|row| std::future::ready(FixedFingerprint::try_from(&row))))
}

/// Sets a fingerprint's triage status, and the status of every finding
/// recorded with it (which moves those scans' revisions, so no kept scan
/// detail shows the old status).
pub async fn set_status(
    db: &impl GenericClient,
    fingerprint_id: Uuid,
    status: FindingStatus,
    until: Option<NaiveDate>,
) -> Result<(), Error> {
    db.execute(
        "UPDATE fingerprints SET status = $2, accepted_until = $3 WHERE id = $1",
        &[&fingerprint_id, &status, &until],
    )
    .await?;
    db.execute(
        "UPDATE findings SET status = $2 WHERE fingerprint_id = $1 AND status <> $2",
        &[&fingerprint_id, &status],
    )
    .await?;
    Ok(())
}

/// A finding's identity on its target as a live listener sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// When the target first had it; `None` when it is new (the ingester
    /// has not recorded it yet).
    pub first_seen_at: Option<DateTime<Utc>>,
    pub change: Change,
}

/// What the finding of `scan_id` with `fingerprint` (see
/// [`crate::fingerprint::fingerprint`]) on `target_id` is, by the rule [`record`]
/// applies, whether or not the ingester has recorded it yet (the live
/// stream runs ahead of the ingester): the change recorded by this scan;
/// else `regressed` when the fingerprint is fixed, `recurring` when it is
/// open, `new` when the target never had it.
pub async fn identity(
    db: &impl GenericClient,
    scan_id: Uuid,
    target_id: Uuid,
    fingerprint: &str,
) -> Result<Identity, Error> {
    let row = db
        .query_opt(
            "SELECT first_seen_at,
                    CASE WHEN last_scan_id = $3 THEN last_change
                         WHEN state = 'fixed' THEN 'regressed'
                         ELSE 'recurring' END AS change
             FROM fingerprints WHERE target_id = $1 AND fingerprint = $2",
            &[&target_id, &fingerprint, &scan_id],
        )
        .await?;
    let Some(row) = row else {
        return Ok(Identity {
            first_seen_at: None,
            change: Change::New,
        });
    };
    let change: Change = row.try_get("change")?;
    Ok(Identity {
        first_seen_at: Some(row.try_get("first_seen_at")?),
        change,
    })
}

/// One fingerprint of a target as lists show it.
#[derive(Debug, Clone)]
pub struct FingerprintRow {
    pub id: Uuid,
    pub target_id: Uuid,
    pub fingerprint: String,
    pub template_id: String,
    pub name: String,
    pub severity: Severity,
    pub host: String,
    pub matched_at: String,
    pub status: FindingStatus,
    pub accepted_until: Option<NaiveDate>,
    pub state: String,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub first_scan_id: Option<Uuid>,
    pub last_scan_id: Option<Uuid>,
    pub fixed_at: Option<DateTime<Utc>>,
    pub occurrences: i32,
    /// What its last scan recorded.
    pub last_change: Change,
    /// The finding of its last occurrence, for triage and retest.
    pub last_finding_id: Option<Uuid>,
}

/// The status as it stands today: an accepted risk past its day is open.
const EFFECTIVE_STATUS: &str = "CASE WHEN fp.status = 'accepted_risk' \
     AND fp.accepted_until < current_date THEN 'open' ELSE fp.status END";

impl TryFrom<&Row> for FingerprintRow {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        let severity = row.try_get::<_, Severity>("severity")?;
        Ok(FingerprintRow {
            id: row.try_get("id")?,
            target_id: row.try_get("target_id")?,
            fingerprint: row.try_get("fingerprint")?,
            template_id: row.try_get("template_id")?,
            name: row.try_get("name")?,
            severity,
            host: row.try_get("host")?,
            matched_at: row.try_get("matched_at")?,
            status: row.try_get("status")?,
            accepted_until: row.try_get("accepted_until")?,
            state: row.try_get("state")?,
            first_seen_at: row.try_get("first_seen_at")?,
            last_seen_at: row.try_get("last_seen_at")?,
            first_scan_id: row.try_get("first_scan_id")?,
            last_scan_id: row.try_get("last_scan_id")?,
            fixed_at: row.try_get("fixed_at")?,
            occurrences: row.try_get("occurrences")?,
            last_change: row.try_get("last_change")?,
            last_finding_id: row.try_get("last_finding_id")?,
        })
    }
}

/// Filters of a target's fingerprint list.
#[derive(Debug, Clone, Default)]
pub struct FingerprintFilter {
    pub state: Option<String>,
    pub status: Option<FindingStatus>,
    pub severity: Option<Severity>,
    /// `new`, `recurring` or `regressed` (open fingerprints whose last
    /// scan recorded that change), or `fixed` (fixed ones).
    pub change: Option<String>,
    /// Text the name, template id, host or URL contains (any case).
    pub text: Option<String>,
}

impl FingerprintFilter {
    /// Whether the kept counts answer the total (they are kept per state,
    /// status, severity and last change; text is not counted).
    fn counted(&self) -> bool {
        self.text.is_none()
    }
}

/// The filters of a target's fingerprint list, on `fp` (a fingerprint or
/// a count row): target `$1`, state `$2`, status as it stands today `$3`,
/// severity rank `$4`, and the change in the parameter `change` names:
/// `new`, `recurring` or `regressed` (open fingerprints whose last scan
/// recorded that change), or `fixed` (fixed ones).
fn list_conditions(change: &str) -> String {
    format!(
        "fp.target_id = $1 AND ($2::text IS NULL OR fp.state = $2)
         AND ($3::text IS NULL OR ({EFFECTIVE_STATUS}) = $3)
         AND ($4::smallint IS NULL OR fp.severity_rank = $4)
         AND ({change}::text IS NULL OR CASE WHEN {change} = 'fixed' THEN fp.state = 'fixed'
              ELSE fp.state = 'open' AND fp.last_change = {change} END)"
    )
}

/// The text a search looks in (`$8`, a `LIKE` pattern, lower-case), as the
/// fingerprint stands; migration 0037 defines it once.
const TEXT_MATCHES: &str =
    "scanfleet_fingerprint_text(fp.name, fp.template_id, fp.host, fp.matched_at) LIKE $8";

/// Whether the target is the user's (`$5`), and the list's total from the
/// counts the triggers of `fingerprint_counts` keep (a few dozen rows a
/// target) rather than from counting up to 100,000 fingerprints; the same
/// conditions apply (the change in `$6`), the lapsed-acceptance date being
/// in the count's key.
static LIST_TOTAL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT EXISTS (SELECT 1 FROM targets WHERE id = $1 AND user_id = $5) AS owned,
                (SELECT COALESCE(sum(fp.n), 0)::bigint FROM fingerprint_counts fp
                 WHERE {conditions}) AS total",
        conditions = list_conditions("$6")
    )
});

/// The page first: the last finding is looked up for the page's rows only,
/// not for every row the offset skips (the change in `$7`).
static LIST_PAGE: LazyLock<String> = LazyLock::new(|| list_page(&list_conditions("$7")));

/// Candidates of a text search past which fetching each by its id costs
/// more than the broad reading of [`BROAD`]: they are a tenth of 100,000
/// (a search that matches nearly everything, such as the target's domain).
pub const SEARCH_CANDIDATES: i64 = 10_000;

/// Rows of the target's search text that [`INDEXED`] looks at first: when
/// a tenth of them or more match, the text is broad and the trigram index
/// is not read (gathering 100,000 matches from it costs more than reading
/// the target's text, and the answer would overflow anyway).
const SEARCH_SAMPLE: i64 = 1_000;

/// The page with every filter and its total, the text included (`$8`),
/// from the fingerprints the trigram index of migration 0037 names for the
/// text and those still pending for it, fetched by id and each checked
/// against the fingerprint as it stands (so an index behind the
/// fingerprints gives the same answer). Past [`SEARCH_CANDIDATES`] (`$10`),
/// or when a sample of the target's text ([`SEARCH_SAMPLE`]) says the text
/// is broad, it reads nothing and says `overflow`. Whether the target is
/// the user's (`$9`) and the total on every row, one row with no
/// fingerprint when the page is empty; the change in `$7`.
static INDEXED: LazyLock<String> = LazyLock::new(|| {
    filtered(
        &format!(
            "sample AS MATERIALIZED (
                 SELECT count(*) > 0 AND count(*) FILTER (WHERE x.text LIKE $8) * 10 >= count(*)
                        AS broad
                 FROM (SELECT s.text FROM fingerprint_search s WHERE s.target_id = $1
                       LIMIT {SEARCH_SAMPLE}) x),
             candidates AS MATERIALIZED (
                 SELECT ARRAY(SELECT s.fingerprint_id FROM fingerprint_search s
                              WHERE NOT (SELECT broad FROM sample)
                                AND s.target_id = $1 AND s.text LIKE $8
                              UNION ALL
                              SELECT p.fingerprint_id FROM fingerprint_search_pending p
                              WHERE NOT (SELECT broad FROM sample) AND p.target_id = $1
                              LIMIT $10::bigint + 1) AS ids),
             overflow AS (SELECT (SELECT broad FROM sample) OR cardinality(ids) > $10::bigint
                                 AS overflow
                          FROM candidates),"
        ),
        "fp.id = ANY ((SELECT ids FROM candidates)::uuid[])
         AND NOT (SELECT overflow FROM overflow) AND",
        "(SELECT overflow FROM overflow)",
    )
});

/// A text search that matches many of the target's fingerprints, without
/// reading all their rows (wide, and rewritten by every sighting;
/// computing their text is most of the cost): the target's rows of the
/// search table (migration 0037, found by migration 0038's index) hold the
/// text already lower-cased, and a fingerprint that is not pending has its
/// text there as it stands (the pending ones are checked against the
/// fingerprint).
/// - `missed`: the target's fingerprints whose text does not match, few
///   when the text is broad;
/// - the total: the kept counts of the other filters ([`LIST_TOTAL`]'s)
///   less the missed ones those filters keep (none to fetch without
///   filters);
/// - the page: the target's fingerprints in the list's order with the
///   other filters (the list's index), each checked against its search
///   text, until the page is full, reading at most [`SEARCH_CANDIDATES`]
///   (`$10`) of them: a page that comes out short of what the total
///   promises was cut there ([`searched`] asks [`SCANNED`] then).
///
/// Says `overflow` (and reads no page) past `$10` missed ones to fetch;
/// [`SCANNED`] answers then. The parameters and answer of [`INDEXED`].
static BROAD: LazyLock<String> = LazyLock::new(|| {
    let conditions = list_conditions("$7");
    format!(
        "WITH pending AS MATERIALIZED (
             SELECT DISTINCT p.fingerprint_id AS id FROM fingerprint_search_pending p
             WHERE p.target_id = $1),
         missed AS MATERIALIZED (
             SELECT s.fingerprint_id AS id FROM fingerprint_search s
             WHERE s.target_id = $1 AND NOT s.text LIKE $8
               AND s.fingerprint_id NOT IN (SELECT id FROM pending)
             UNION ALL
             SELECT fp.id FROM pending JOIN fingerprints fp ON fp.id = pending.id
             WHERE fp.target_id = $1 AND NOT {TEXT_MATCHES}),
         filters AS (
             SELECT $2::text IS NULL AND $3::text IS NULL AND $4::smallint IS NULL
                    AND $7::text IS NULL AS none),
         overflow AS (
             SELECT NOT (SELECT none FROM filters)
                    AND (SELECT count(*) FROM missed) > $10::bigint AS overflow),
         page AS (
             SELECT w.id FROM (
                 SELECT fp.id, fp.severity_rank, fp.first_seen_at,
                        CASE WHEN fp.id IN (SELECT id FROM pending) THEN {TEXT_MATCHES}
                             ELSE COALESCE((SELECT s.text FROM fingerprint_search s
                                            WHERE s.fingerprint_id = fp.id) LIKE $8, false)
                        END AS hit
                 FROM fingerprints fp
                 WHERE NOT (SELECT overflow FROM overflow) AND {conditions}
                 ORDER BY fp.severity_rank, fp.first_seen_at DESC, fp.id
                 LIMIT $10::bigint) w
             WHERE w.hit
             ORDER BY w.severity_rank, w.first_seen_at DESC, w.id
             LIMIT $5 OFFSET $6),
         head AS (
             SELECT EXISTS (SELECT 1 FROM targets WHERE id = $1 AND user_id = $9) AS owned,
                    (SELECT COALESCE(sum(fp.n), 0)::bigint FROM fingerprint_counts fp
                     WHERE {conditions})
                    - CASE WHEN (SELECT none FROM filters) THEN (SELECT count(*) FROM missed)
                           WHEN (SELECT overflow FROM overflow) THEN 0
                           ELSE (SELECT count(*) FROM fingerprints fp
                                 WHERE fp.id = ANY (ARRAY(SELECT id FROM missed))
                                   AND {conditions}) END AS total,
                    (SELECT overflow FROM overflow) AS overflow)
         SELECT head.owned, head.total, head.overflow, r.*
         FROM head LEFT JOIN LATERAL ({rows}) r ON true
         ORDER BY r.severity_rank, r.first_seen_at DESC, r.id",
        rows = page_rows(),
    )
});

/// [`INDEXED`] by reading every fingerprint of the target; it takes the
/// first nine of its parameters.
static SCANNED: LazyLock<String> = LazyLock::new(|| filtered("", "", "false"));

/// A text search's statement: the CTEs `before` the one of the matching
/// fingerprints, what narrows that one (`only`, ending in `AND`, or
/// empty), and whether the search gave up (`overflow`).
fn filtered(before: &str, only: &str, overflow: &str) -> String {
    format!(
        "WITH {before}
         matched AS MATERIALIZED (
             SELECT fp.id, fp.severity_rank, fp.first_seen_at FROM fingerprints fp
             WHERE {only} {conditions} AND {TEXT_MATCHES}),
         page AS (
             SELECT id FROM matched ORDER BY severity_rank, first_seen_at DESC, id
             LIMIT $5 OFFSET $6),
         head AS (
             SELECT EXISTS (SELECT 1 FROM targets WHERE id = $1 AND user_id = $9) AS owned,
                    (SELECT count(*) FROM matched) AS total, {overflow} AS overflow)
         SELECT head.owned, head.total, head.overflow, r.*
         FROM head LEFT JOIN LATERAL ({rows}) r ON true
         ORDER BY r.severity_rank, r.first_seen_at DESC, r.id",
        conditions = list_conditions("$7"),
        rows = page_rows(),
    )
}

/// The columns of a page's rows (`page` holds their ids).
fn page_rows() -> String {
    format!(
        "SELECT fp.id, fp.target_id, fp.fingerprint, fp.template_id, fp.name,
                fp.severity, fp.severity_rank, fp.host, fp.matched_at,
                {EFFECTIVE_STATUS} AS status,
                fp.accepted_until, fp.state, fp.first_seen_at, fp.last_seen_at,
                fp.first_scan_id, fp.last_scan_id, fp.fixed_at, fp.occurrences, fp.last_change,
                (SELECT f.id FROM findings f
                 WHERE f.fingerprint_id = fp.id AND f.scan_id = fp.last_scan_id
                 LIMIT 1) AS last_finding_id
         FROM page JOIN fingerprints fp ON fp.id = page.id"
    )
}

fn list_page(conditions: &str) -> String {
    format!(
        "WITH page AS (
             SELECT fp.id FROM fingerprints fp WHERE {conditions}
             ORDER BY fp.severity_rank, fp.first_seen_at DESC, fp.id
             LIMIT $5 OFFSET $6)
         {rows}
         ORDER BY fp.severity_rank, fp.first_seen_at DESC, fp.id",
        rows = page_rows()
    )
}

/// `%text%` with `LIKE`'s own characters (`\\`, `%`, `_`) taken literally.
fn like_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('%');
    for c in text.chars() {
        if matches!(c, '\\' | '%' | '_') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// A text search's head row and page: [`INDEXED`], then [`BROAD`] when its
/// candidates overflow (and the page lies within the fingerprints
/// [`BROAD`] reads one by one), then [`SCANNED`] when that overflows or
/// its page was cut short; `None` when the target is not the user's.
async fn searched(
    db: &impl deadpool_postgres::GenericClient,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync); 10],
    (limit, offset): (i64, i64),
) -> Result<Option<(Row, Vec<Row>)>, Error> {
    let overflows = |rows: &[Row]| -> Result<bool, Error> {
        let overflow = rows.first().map(|r| r.try_get::<_, bool>("overflow"));
        Ok(overflow.transpose()? == Some(true))
    };
    let stmt = db.prepare_cached(&INDEXED).await?;
    let mut rows = db.query(&stmt, params).await?;
    let mut answered = !overflows(&rows)?;
    if !answered && limit.saturating_add(offset) <= SEARCH_CANDIDATES {
        let stmt = db.prepare_cached(&BROAD).await?;
        rows = db.query(&stmt, params).await?;
        answered = !overflows(&rows)? && !cut_short(&rows, (limit, offset))?;
    }
    if !answered {
        let stmt = db.prepare_cached(&SCANNED).await?;
        rows = db.query(&stmt, &params[..9]).await?;
    }
    let Some(head) = rows.first().cloned() else {
        return Err(Error::Unexpected(anyhow::anyhow!(
            "the filtered list gave no row"
        )));
    };
    if !head.try_get::<_, bool>("owned")? {
        return Ok(None);
    }
    // An empty page is one row without a fingerprint.
    rows.retain(|r| matches!(r.try_get::<_, Option<Uuid>>("id"), Ok(Some(_))));
    Ok(Some((head, rows)))
}

/// Whether a page of [`BROAD`] holds fewer fingerprints than its total
/// leaves after the offset: its reading stopped before the page was full.
fn cut_short(rows: &[Row], (limit, offset): (i64, i64)) -> Result<bool, Error> {
    let Some(head) = rows.first() else {
        return Ok(false);
    };
    let total: i64 = head.try_get("total")?;
    let expected = (total - offset).clamp(0, limit.max(0));
    let got = rows
        .iter()
        .filter(|r| matches!(r.try_get::<_, Option<Uuid>>("id"), Ok(Some(_))))
        .count();
    Ok((got as i64) < expected)
}

/// One page of a target's fingerprints, worst first and most recently
/// found (`first_seen_at`) first within a severity, with the total; `None` when the target is
/// not the user's. Two prepared statements (a text search: one, two when
/// it matches many, three when it matches many with other filters that
/// keep many of the rest), cached on the connection.
pub async fn list_for_target(
    db: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
    target_id: Uuid,
    filter: &FingerprintFilter,
    (limit, offset): (i64, i64),
) -> Result<Option<(Vec<FingerprintRow>, i64)>, Error> {
    let rank = filter.severity.map(|s| i16::from(s.rank()));
    let (head, rows) = if filter.counted() {
        let stmt = db.prepare_cached(&LIST_TOTAL).await?;
        let head = db
            .query_one(
                &stmt,
                &[
                    &target_id,
                    &filter.state,
                    &filter.status,
                    &rank,
                    &user_id,
                    &filter.change,
                ],
            )
            .await?;
        if !head.try_get::<_, bool>("owned")? {
            return Ok(None);
        }
        let stmt = db.prepare_cached(&LIST_PAGE).await?;
        let rows = db
            .query(
                &stmt,
                &[
                    &target_id,
                    &filter.state,
                    &filter.status,
                    &rank,
                    &limit,
                    &offset,
                    &filter.change,
                ],
            )
            .await?;
        (head, rows)
    } else {
        let text = filter
            .text
            .as_ref()
            .map(|t| like_pattern(&t.to_lowercase()));
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 10] = [
            &target_id,
            &filter.state,
            &filter.status,
            &rank,
            &limit,
            &offset,
            &filter.change,
            &text,
            &user_id,
            &SEARCH_CANDIDATES,
        ];
        match searched(db, &params, (limit, offset)).await? {
            Some(found) => found,
            None => return Ok(None),
        }
    };
    let total: i64 = head.try_get("total")?;
    let list = rows
        .iter()
        .map(FingerprintRow::try_from)
        .collect::<Result<_, _>>()?;
    Ok(Some((list, total)))
}

/// The fingerprint of one of the user's findings as lists show it; None
/// when the finding is not theirs or has no fingerprint.
pub async fn row_of_finding(
    db: &impl GenericClient,
    user_id: Uuid,
    finding_id: Uuid,
) -> Result<Option<FingerprintRow>, Error> {
    let row = db
        .query_opt(
            &format!(
                "SELECT fp.id, fp.target_id, fp.fingerprint, fp.template_id, fp.name,
                        fp.severity, fp.host, fp.matched_at, {EFFECTIVE_STATUS} AS status,
                        fp.accepted_until, fp.state, fp.first_seen_at, fp.last_seen_at,
                        fp.first_scan_id, fp.last_scan_id, fp.fixed_at, fp.occurrences, fp.last_change,
                        (SELECT l.id FROM findings l
                         WHERE l.fingerprint_id = fp.id AND l.scan_id = fp.last_scan_id
                         LIMIT 1) AS last_finding_id
                 FROM findings f JOIN fingerprints fp ON fp.id = f.fingerprint_id
                 WHERE f.id = $1 AND f.user_id = $2"
            ),
            &[&finding_id, &user_id],
        )
        .await?;
    row.as_ref().map(FingerprintRow::try_from).transpose()
}

/// What a retest of one finding runs: its fingerprint's template on its
/// host.
#[derive(Debug, Clone)]
pub struct RetestSubject {
    pub fingerprint_id: Uuid,
    pub target_id: Uuid,
    pub host: String,
    pub template_id: String,
}

/// The subject of a retest of one of the user's findings; `None` when the
/// finding is not theirs (or has no fingerprint).
pub async fn retest_subject(
    db: &impl GenericClient,
    user_id: Uuid,
    finding_id: Uuid,
) -> Result<Option<RetestSubject>, Error> {
    let row = db
        .query_opt(
            "SELECT fp.id, fp.target_id, fp.host, fp.template_id
             FROM findings f JOIN fingerprints fp ON fp.id = f.fingerprint_id
             WHERE f.id = $1 AND f.user_id = $2",
            &[&finding_id, &user_id],
        )
        .await?;
    row.map(|r| {
        Ok(RetestSubject {
            fingerprint_id: r.try_get("id")?,
            target_id: r.try_get("target_id")?,
            host: r.try_get("host")?,
            template_id: r.try_get("template_id")?,
        })
    })
    .transpose()
}

/// Inserts a scan of engine `retest` for `subject`, unless the user has
/// `max_running` retests queued or running already (`None` then). Retests
/// are not counted in the tier's scan usage. A per-user advisory lock makes
/// the count and the insert one step for concurrent requests.
pub async fn insert_retest(
    db: &mut deadpool_postgres::Client,
    user_id: Uuid,
    subject: &RetestSubject,
    max_running: i64,
) -> Result<Option<crate::store::scans::ScanRow>, Error> {
    let tx = db.transaction().await?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('retest:' || $1::uuid::text, 0))",
        &[&user_id],
    )
    .await?;
    let running: i64 = tx
        .query_one(
            "SELECT count(*) AS running FROM scans
             WHERE user_id = $1 AND engine = 'retest'
               AND status IN ('queued', 'pending', 'running')",
            &[&user_id],
        )
        .await?
        .try_get("running")?;
    if running >= max_running {
        return Ok(None);
    }
    let row = tx
        .query_one(
            &format!(
                "WITH s AS (
                     INSERT INTO scans (id, user_id, target_id, engine, retest_of)
                     VALUES ($1, $2, $3, 'retest', $4) RETURNING *)
                 SELECT {} FROM s JOIN targets t ON t.id = s.target_id",
                crate::store::scans::COLUMNS
            ),
            &[
                &Uuid::now_v7(),
                &user_id,
                &subject.target_id,
                &subject.fingerprint_id,
            ],
        )
        .await?;
    tx.commit().await?;
    Ok(Some(crate::store::scans::ScanRow::try_from(&row)?))
}
