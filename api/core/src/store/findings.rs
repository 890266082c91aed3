//! Findings of scans: idempotent insertion for the ingester (the dedup rule
//! of the contract, `template_id:matched_at`, first occurrence wins, and the
//! scan's counters move only for rows actually inserted), reads for scan
//! detail, intel and reports, and the triage status.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use chrono::{DateTime, NaiveDate, Utc};
use futures::TryStreamExt as _;
use scanfleet_common::events::{Classification, Evidence, FindingEvent, RecordedFinding};
use scanfleet_common::jobs::Engine;
use scanfleet_common::Severity;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use crate::error::Error;
use crate::fingerprint::{fingerprint_of_normalised, normalise_matched_at, Change, FindingStatus};
use crate::store::fingerprints;
use crate::store::scans::ScanRow;

#[derive(Debug, Clone)]
pub struct FindingRow {
    pub id: Uuid,
    pub scan_id: Uuid,
    pub user_id: Uuid,
    pub template_id: String,
    pub name: String,
    pub severity: Severity,
    pub status: FindingStatus,
    pub host: String,
    pub matched_at: String,
    pub description: String,
    pub remediation: String,
    pub matcher_name: Option<String>,
    pub extracted_results: Vec<String>,
    pub created_at: DateTime<Utc>,
    /// Its identity across the target's scans (`None` only for a finding
    /// whose fingerprint row is gone).
    pub fingerprint: Option<String>,
    /// When the target first had it.
    pub first_seen_at: Option<DateTime<Utc>>,
    /// How it relates to the target's earlier scans.
    pub change: Option<Change>,
    /// The last day an `accepted_risk` status holds (`None` for any other
    /// status, or a risk accepted with no end).
    pub accepted_until: Option<NaiveDate>,
}

/// A finding's columns with its fingerprint's (`findings f LEFT JOIN
/// fingerprints fp`); the status is the fingerprint's, so triage is sticky.
pub(crate) const COLUMNS: &str = "f.id, f.scan_id, f.user_id, f.template_id, f.name, f.severity, \
     CASE WHEN fp.status = 'accepted_risk' AND fp.accepted_until < current_date THEN 'open' \
     ELSE COALESCE(fp.status, f.status) END AS status, f.host, \
     f.matched_at, f.description, f.remediation, f.matcher_name, f.extracted_results, \
     f.created_at, fp.fingerprint, fp.first_seen_at, f.change, \
     CASE WHEN fp.status = 'accepted_risk' AND NOT fp.accepted_until < current_date \
     THEN fp.accepted_until END AS accepted_until";

/// The join [`COLUMNS`] reads from.
pub(crate) const FROM: &str = "findings f LEFT JOIN fingerprints fp ON fp.id = f.fingerprint_id";

/// The names of a finding's columns that a row joined with its scan
/// renames (the scan's `id`, `status` and `created_at` come first).
struct Names {
    id: &'static str,
    scan_id: &'static str,
    status: &'static str,
    created_at: &'static str,
}

/// A row of [`COLUMNS`].
const PLAIN: Names = Names {
    id: "id",
    scan_id: "scan_id",
    status: "status",
    created_at: "created_at",
};

/// A row of `scans::COLUMNS` followed by [`JOINED_COLUMNS`].
const JOINED: Names = Names {
    id: "finding_id",
    scan_id: "id",
    status: "finding_status",
    created_at: "finding_created_at",
};

/// A finding's columns after its scan's (the shared `user_id` is the scan's).
const JOINED_COLUMNS: &str = "f.id AS finding_id, f.template_id, f.name, f.severity, \
     CASE WHEN fp.status = 'accepted_risk' AND fp.accepted_until < current_date THEN 'open' \
     ELSE COALESCE(fp.status, f.status) END AS finding_status, f.host, f.matched_at, f.description, \
     f.remediation, f.matcher_name, f.extracted_results, f.created_at AS finding_created_at, \
     fp.fingerprint, fp.first_seen_at, f.change, \
     CASE WHEN fp.status = 'accepted_risk' AND NOT fp.accepted_until < current_date \
     THEN fp.accepted_until END AS accepted_until";

/// Read by column name, so a reordered SELECT cannot swap fields; an
/// unknown severity is an error rather than a silent `info`.
impl TryFrom<&Row> for FindingRow {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        FindingRow::read(row, &PLAIN)
    }
}

impl FindingRow {
    fn read(row: &Row, names: &Names) -> Result<Self, Error> {
        let extracted: serde_json::Value = row.try_get("extracted_results")?;
        Ok(FindingRow {
            id: row.try_get(names.id)?,
            scan_id: row.try_get(names.scan_id)?,
            user_id: row.try_get("user_id")?,
            template_id: row.try_get("template_id")?,
            name: row.try_get("name")?,
            severity: row.try_get("severity")?,
            status: row.try_get(names.status)?,
            host: row.try_get("host")?,
            matched_at: row.try_get("matched_at")?,
            description: row.try_get("description")?,
            remediation: row.try_get("remediation")?,
            matcher_name: row.try_get("matcher_name")?,
            extracted_results: serde_json::from_value(extracted).map_err(|e| {
                Error::Unexpected(anyhow::Error::new(e).context("extracted_results of a finding"))
            })?,
            created_at: row.try_get(names.created_at)?,
            fingerprint: row.try_get("fingerprint")?,
            first_seen_at: row.try_get("first_seen_at")?,
            change: row.try_get("change")?,
            accepted_until: row.try_get("accepted_until")?,
        })
    }
}

/// Records a batch of findings of one scan and returns how many were new.
/// A finding whose dedup key the scan already has (from an earlier batch,
/// a replayed event, or earlier in this batch) is skipped, so the first
/// occurrence wins; the scan's counters grow by the new rows only. Each
/// finding's fingerprint is recorded in the same statement (see
/// [`fingerprints::RECORD_SIGHTINGS`]) and the finding carries its change
/// and its fingerprint's status. Call it in the transaction that
/// acknowledges the events.
pub async fn insert_findings(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
    user_id: Uuid,
    findings: &[FindingEvent],
) -> Result<u64, Error> {
    Ok(record_findings(db, scan_id, user_id, findings).await?.0)
}

/// One page of findings recorded in one statement: the scan's row locked
/// (`s`), the page's rows (`n`, see [`PageRows`]), the fingerprints
/// upserted ([`fingerprints::RECORD_SIGHTINGS`]), the findings inserted
/// with their fingerprint's id, change and status, and the scan's counters
/// moved by the rows actually inserted (not at all when none was new). It
/// answers each fingerprint's change and first sighting, and the number
/// of findings inserted on every row.
static RECORD_PAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH s AS (SELECT target_id FROM scans WHERE id = $1 FOR UPDATE),
 n AS (SELECT * FROM unnest($3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
                            $8::text[], $9::text[], $10::text[], $11::text[], $12::jsonb[],
                            $13::text[], $14::jsonb[], $15::text[], $16::text[], $17::uuid[],
                            $18::text[], $19::text[], $20::smallint[])
       WITH ORDINALITY AS n(id, template_id, name, severity, host, matched_at,
                            description, remediation, matcher_name, extracted, dedup_key,
                            classification, request, response, fingerprint_id, fingerprint,
                            normalised, severity_rank, ord)),
 fp AS ({sightings}),
 inserted AS (
     INSERT INTO findings (id, scan_id, user_id, template_id, name, severity, host,
                           matched_at, description, remediation, matcher_name,
                           extracted_results, dedup_key, fingerprint_id, change,
                           status, classification, request, response)
     SELECT n.id, $1, $2, n.template_id, n.name, n.severity, n.host, n.matched_at,
            n.description, n.remediation, n.matcher_name, n.extracted, n.dedup_key,
            fp.id, fp.last_change, fp.status, n.classification, n.request, n.response
     FROM n JOIN fp ON fp.fingerprint = n.fingerprint
     ON CONFLICT (scan_id, dedup_key) DO NOTHING
     RETURNING severity),
 counts AS (
     SELECT count(*)::int AS total,
            count(*) FILTER (WHERE severity = 'critical')::int AS critical,
            count(*) FILTER (WHERE severity = 'high')::int AS high,
            count(*) FILTER (WHERE severity = 'medium')::int AS medium,
            count(*) FILTER (WHERE severity = 'low')::int AS low,
            count(*) FILTER (WHERE severity = 'info')::int AS info
     FROM inserted),
 moved AS (
     UPDATE scans s SET findings_count = s.findings_count + c.total,
            critical_count = s.critical_count + c.critical,
            high_count = s.high_count + c.high,
            medium_count = s.medium_count + c.medium,
            low_count = s.low_count + c.low, info_count = s.info_count + c.info,
            updated_at = now()
     FROM counts c
     WHERE s.id = $1 AND c.total > 0
     RETURNING c.total)
 SELECT fp.fingerprint, fp.last_change, fp.first_seen_at,
        COALESCE((SELECT total FROM moved), 0) AS inserted
 FROM fp",
        sightings = fingerprints::RECORD_SIGHTINGS
    )
});

/// The rows of a page as [`RECORD_PAGE`] reads them, one array a column:
/// the batch's distinct findings sorted by fingerprint (stable, so the
/// first finding of a fingerprint, which gives its fields, leads its
/// group), each finding's id made in the batch's order (the order found).
struct PageRows<'a> {
    ids: Vec<Uuid>,
    findings: Vec<(&'a FindingEvent, &'a str)>,
    keys: Vec<String>,
    /// The fingerprint row's id on the first finding of each fingerprint.
    fingerprint_ids: Vec<Option<Uuid>>,
    /// The normalised `matched_at` on the first finding of each
    /// fingerprint.
    normalised: Vec<Option<String>>,
}

impl<'a> PageRows<'a> {
    fn new(
        batch: &'a [(&'a FindingEvent, String)],
        keys: &[String],
        normalised: &[String],
    ) -> Self {
        let ids: Vec<Uuid> = batch.iter().map(|_| Uuid::now_v7()).collect();
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
        let mut rows = PageRows {
            ids: Vec::with_capacity(batch.len()),
            findings: Vec::with_capacity(batch.len()),
            keys: Vec::with_capacity(batch.len()),
            fingerprint_ids: Vec::with_capacity(batch.len()),
            normalised: Vec::with_capacity(batch.len()),
        };
        for (at, &i) in order.iter().enumerate() {
            let (f, dedup_key) = &batch[i];
            let first = at == 0 || keys[order[at - 1]] != keys[i];
            rows.ids.push(ids[i]);
            rows.findings.push((f, dedup_key.as_str()));
            rows.keys.push(keys[i].clone());
            rows.fingerprint_ids.push(first.then(Uuid::now_v7));
            rows.normalised.push(first.then(|| normalised[i].clone()));
        }
        rows
    }
}

/// [`insert_findings`], also answering each distinct finding's identity on
/// the target as recorded (for the WebSocket listeners, once committed).
pub async fn record_findings(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
    user_id: Uuid,
    findings: &[FindingEvent],
) -> Result<(u64, Vec<RecordedFinding>), Error> {
    let mut seen = HashSet::new();
    let batch: Vec<(&FindingEvent, String)> = findings
        .iter()
        .map(|f| (f, f.dedup_key()))
        .filter(|(_, key)| seen.insert(key.clone()))
        .collect();
    if batch.is_empty() {
        return Ok((0, Vec::new()));
    }
    let normalised: Vec<String> = batch
        .iter()
        .map(|(f, _)| normalise_matched_at(&f.matched_at))
        .collect();
    let keys: Vec<String> = batch
        .iter()
        .zip(&normalised)
        .map(|((f, _), n)| fingerprint_of_normalised(&f.template_id, n))
        .collect();
    let page = PageRows::new(&batch, &keys, &normalised);
    let column = |field: fn(&FindingEvent) -> &str| -> Vec<&str> {
        page.findings.iter().map(|(f, _)| field(f)).collect()
    };
    let severities: Vec<Severity> = page.findings.iter().map(|(f, _)| f.severity).collect();
    let ranks: Vec<i16> = severities.iter().map(|s| i16::from(s.rank())).collect();
    let matchers: Vec<Option<&str>> = page
        .findings
        .iter()
        .map(|(f, _)| f.matcher_name.as_deref())
        .collect();
    let extracted: Vec<serde_json::Value> = page
        .findings
        .iter()
        .map(|(f, _)| serde_json::json!(f.extracted_results))
        .collect();
    let dedup: Vec<&str> = page.findings.iter().map(|(_, k)| *k).collect();
    let classifications: Vec<Option<serde_json::Value>> = page
        .findings
        .iter()
        .map(|(f, _)| (!f.classification.is_empty()).then(|| serde_json::json!(f.classification)))
        .collect();
    let evidence = |part: fn(&Evidence) -> &str| -> Vec<Option<&str>> {
        page.findings
            .iter()
            .map(|(f, _)| f.evidence.as_ref().map(|e| part(e)))
            .collect()
    };
    let rows = db
        .query(
            &db.prepare_cached(&RECORD_PAGE).await?,
            &[
                &scan_id,
                &user_id,
                &page.ids,
                &column(|f| &f.template_id),
                &column(|f| &f.name),
                &severities,
                &column(|f| &f.host),
                &column(|f| &f.matched_at),
                &column(|f| &f.description),
                &column(|f| &f.remediation),
                &matchers,
                &extracted,
                &dedup,
                &classifications,
                &evidence(|e| &e.request),
                &evidence(|e| &e.response),
                &page.fingerprint_ids,
                &page.keys,
                &page.normalised,
                &ranks,
            ],
        )
        .await?;
    identities(&batch, &keys, &rows)
}

/// What [`RECORD_PAGE`] answered, per finding of the batch: its identity
/// on the target; and how many findings were inserted.
fn identities(
    batch: &[(&FindingEvent, String)],
    keys: &[String],
    rows: &[Row],
) -> Result<(u64, Vec<RecordedFinding>), Error> {
    let mut inserted = 0;
    let mut by_key = HashMap::with_capacity(rows.len());
    for row in rows {
        inserted = row.try_get::<_, i32>("inserted")?;
        let change: Change = row.try_get("last_change")?;
        let first_seen_at: DateTime<Utc> = row.try_get("first_seen_at")?;
        by_key.insert(
            row.try_get::<_, String>("fingerprint")?,
            (change, first_seen_at),
        );
    }
    let identities = batch
        .iter()
        .zip(keys)
        .map(|((_, dedup_key), key)| {
            let (change, first_seen_at) = by_key.get(key).ok_or_else(|| {
                Error::Unexpected(anyhow::anyhow!("fingerprint {key:?} was not recorded"))
            })?;
            Ok(RecordedFinding {
                dedup_key: dedup_key.clone(),
                fingerprint: key.clone(),
                first_seen_at: *first_seen_at,
                change: change.as_str().to_string(),
            })
        })
        .collect::<Result<_, Error>>()?;
    Ok((u64::try_from(inserted).unwrap_or(0), identities))
}

/// One of the user's scans with its findings worst first (in the order
/// found within a severity, as the reports list them), in one
/// statement; `None` when the user has no such scan.
pub async fn scan_with_findings(
    db: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
    scan_id: Uuid,
) -> Result<Option<(ScanRow, Vec<FindingRow>)>, Error> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {}, {JOINED_COLUMNS}
             FROM scans s JOIN targets t ON t.id = s.target_id
             LEFT JOIN findings f ON f.scan_id = s.id
             LEFT JOIN fingerprints fp ON fp.id = f.fingerprint_id
             WHERE s.id = $1 AND s.user_id = $2
             ORDER BY {rank}, f.created_at, f.id",
            crate::store::scans::COLUMNS,
            rank = *SEVERITY_RANK
        )
    });
    let stmt = db.prepare_cached(&SQL).await?;
    let rows = db.query(&stmt, &[&scan_id, &user_id]).await?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let scan = ScanRow::try_from(first)?;
    let mut list = Vec::with_capacity(rows.len());
    for row in &rows {
        // A scan without findings is one row with NULL finding columns.
        if row.try_get::<_, Option<Uuid>>("finding_id")?.is_some() {
            list.push(FindingRow::read(row, &JOINED)?);
        }
    }
    Ok(Some((scan, list)))
}

/// The order findings stream in for a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingOrder {
    /// Critical first; by host, then in the order found, within a severity.
    BySeverity,
    /// Hosts with the worst findings first (then by name), each host's
    /// findings critical first, in the order found within a severity.
    ByHost,
}

/// A finding's severity rank in SQL, critical 0 to info 4
/// (`Severity::rank`).
static SEVERITY_RANK: LazyLock<String> =
    LazyLock::new(|| scanfleet_common::sql::severity_rank("f.severity"));

/// A scan's findings as Postgres sends them, one row at a time, sorted by
/// the database: a report of any size holds none of them twice.
pub async fn stream_for_scan(
    db: &impl GenericClient,
    scan_id: Uuid,
    order: FindingOrder,
) -> Result<impl futures::Stream<Item = Result<FindingRow, Error>>, Error> {
    let rank = &*SEVERITY_RANK;
    let order_by = match order {
        FindingOrder::BySeverity => format!("{rank}, f.host, f.created_at, f.id"),
        FindingOrder::ByHost => format!(
            "min({rank}) OVER (PARTITION BY f.host), f.host, {rank}, \
             f.created_at, f.id"
        ),
    };
    let sql = format!("SELECT {COLUMNS} FROM {FROM} WHERE f.scan_id = $1 ORDER BY {order_by}");
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&scan_id];
    let rows = db.query_raw(&sql, params).await?;
    Ok(futures::TryStreamExt::map_err(rows, Error::from)
        .and_then(|row| std::future::ready(FindingRow::try_from(&row))))
}

/// How many of a completed scan's worst findings [`keep_worst`] keeps (a
/// scan's page lists 200).
pub const KEPT_WORST: i64 = 200;

/// The ids of a scan's `$2` worst findings, in [`worst_of_scan`]'s order:
/// Postgres keeps only the top rows while it sorts, so a scan of 100,000
/// findings costs one pass, not a full sort (with the join under the
/// `LIMIT` it sorted every finding of the scan, on disk).
fn worst_ids_sql() -> String {
    let rank = &*SEVERITY_RANK;
    format!(
        "SELECT f.id FROM findings f WHERE f.scan_id = $1
         ORDER BY {rank}, f.host, f.created_at, f.id LIMIT $2"
    )
}

/// Keeps the ids of a scan's [`KEPT_WORST`] worst findings with its
/// changes (`scan_changes`, written first): a completed scan's findings do
/// not change, so its page reads them by id instead of picking them from
/// all its findings on every view. Called by the ingester when it
/// completes, after [`fingerprints::complete`] counted its changes.
pub async fn keep_worst(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
) -> Result<(), Error> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE scan_changes SET worst_findings = ARRAY({}) WHERE scan_id = $1",
            worst_ids_sql()
        )
    });
    db.execute(&db.prepare_cached(&SQL).await?, &[&scan_id, &KEPT_WORST])
        .await?;
    Ok(())
}

/// The `limit` worst findings of a scan (by severity, then host), as
/// [`stream_for_scan`] orders them. A completed scan's are read by the ids
/// [`keep_worst`] kept (when they cover `limit`); a running one's (or one
/// completed before they were kept) are picked from all its findings.
pub async fn worst_of_scan(
    db: &impl GenericClient,
    scan_id: Uuid,
    limit: i64,
) -> Result<Vec<FindingRow>, Error> {
    let kept: Option<Vec<Uuid>> = db
        .query_opt(
            "SELECT worst_findings FROM scan_changes WHERE scan_id = $1",
            &[&scan_id],
        )
        .await?
        .map(|r| r.try_get::<_, Option<Vec<Uuid>>>("worst_findings"))
        .transpose()?
        .flatten();
    // Fewer kept than [`KEPT_WORST`]: the scan has no more findings.
    let covers = |ids: &Vec<Uuid>| limit <= KEPT_WORST || (ids.len() as i64) < KEPT_WORST;
    let rows = match kept.filter(covers) {
        Some(ids) => {
            db.query(
                &format!(
                    "SELECT {COLUMNS} FROM unnest($1::uuid[]) WITH ORDINALITY AS w(id, ord)
                     JOIN findings f ON f.id = w.id
                     LEFT JOIN fingerprints fp ON fp.id = f.fingerprint_id
                     ORDER BY w.ord LIMIT $2"
                ),
                &[&ids, &limit],
            )
            .await?
        }
        None => {
            // The page's ids first, from the findings alone, then their
            // rows.
            let sql = format!(
                "WITH page AS ({ids})
                 SELECT {COLUMNS} FROM page JOIN findings f ON f.id = page.id
                      LEFT JOIN fingerprints fp ON fp.id = f.fingerprint_id
                 ORDER BY {rank}, f.host, f.created_at, f.id",
                ids = worst_ids_sql(),
                rank = *SEVERITY_RANK
            );
            db.query(&sql, &[&scan_id, &limit]).await?
        }
    };
    rows.iter().map(FindingRow::try_from).collect()
}

/// One of the user's findings; None when it is not theirs.
pub async fn find(
    db: &impl GenericClient,
    user_id: Uuid,
    finding_id: Uuid,
) -> Result<Option<FindingRow>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM {FROM} WHERE f.id = $1 AND f.user_id = $2"),
            &[&finding_id, &user_id],
        )
        .await?;
    row.as_ref().map(FindingRow::try_from).transpose()
}

/// What a finding's own page shows beyond its row: the template's
/// references and classification, and the exchange it was matched on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FindingDetail {
    pub classification: Classification,
    /// `None` for findings recorded without one (a probe's own, or recorded
    /// before the exchange was kept).
    pub evidence: Option<Evidence>,
}

/// One of the user's findings with its [`FindingDetail`]; `None` when the
/// user has no such finding.
pub async fn find_with_detail(
    db: &impl GenericClient,
    user_id: Uuid,
    finding_id: Uuid,
) -> Result<Option<(FindingRow, FindingDetail)>, Error> {
    let row = db
        .query_opt(
            &format!(
                "SELECT {COLUMNS}, f.classification, f.request, f.response
                 FROM {FROM} WHERE f.id = $1 AND f.user_id = $2"
            ),
            &[&finding_id, &user_id],
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    let finding = FindingRow::try_from(&row)?;
    let classification = match row.try_get::<_, Option<serde_json::Value>>("classification")? {
        Some(v) => serde_json::from_value(v).map_err(|e| {
            Error::Unexpected(anyhow::Error::new(e).context("classification of a finding"))
        })?,
        None => Classification::default(),
    };
    let request: Option<String> = row.try_get("request")?;
    let response: Option<String> = row.try_get("response")?;
    let evidence = match (request, response) {
        (None, None) => None,
        (request, response) => Some(Evidence {
            request: request.unwrap_or_default(),
            response: response.unwrap_or_default(),
        }),
    };
    Ok(Some((
        finding,
        FindingDetail {
            classification,
            evidence,
        },
    )))
}

/// A change of a finding's triage status, as its history records it.
#[derive(Debug, Clone, Copy)]
pub struct StatusChange<'a> {
    pub status: FindingStatus,
    /// Kept for `accepted_risk` only.
    pub until: Option<NaiveDate>,
    /// Why, in the user's words; may be empty.
    pub reason: &'a str,
    /// The email of the user making the change, kept with the entry.
    pub actor_email: &'a str,
}

/// Sets the triage status of one of the user's findings on its
/// fingerprint, so that every occurrence, earlier and later, carries it;
/// `until` is kept for `accepted_risk` only. A change that changes
/// something is written to the finding's status history in the same
/// statement sequence (call it in a transaction). None when the finding is
/// not theirs.
pub async fn set_status(
    db: &impl GenericClient,
    user_id: Uuid,
    finding_id: Uuid,
    change: &StatusChange<'_>,
) -> Result<Option<FindingRow>, Error> {
    let until = change
        .until
        .filter(|_| change.status == FindingStatus::AcceptedRisk);
    let owned = db
        .query_opt(
            "SELECT f.fingerprint_id, COALESCE(fp.status, f.status) AS status,
                    fp.accepted_until
             FROM findings f LEFT JOIN fingerprints fp ON fp.id = f.fingerprint_id
             WHERE f.id = $1 AND f.user_id = $2",
            &[&finding_id, &user_id],
        )
        .await?;
    let Some(owned) = owned else {
        return Ok(None);
    };
    let fingerprint_id: Option<Uuid> = owned.try_get("fingerprint_id")?;
    let before: FindingStatus = owned.try_get("status")?;
    let before_until: Option<NaiveDate> = owned.try_get("accepted_until")?;
    if let Some(fingerprint_id) = fingerprint_id {
        fingerprints::set_status(db, fingerprint_id, change.status, until).await?;
    } else {
        // Moves the scan's revision, as the fingerprint's occurrences do.
        db.execute(
            "UPDATE findings SET status = $2 WHERE id = $1",
            &[&finding_id, &change.status],
        )
        .await?;
    }
    if before != change.status || before_until != until {
        db.execute(
            "INSERT INTO finding_status_history
                 (id, fingerprint_id, finding_id, actor_id, actor_email, from_status,
                  to_status, accepted_until, reason)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &Uuid::now_v7(),
                &fingerprint_id,
                &fingerprint_id.is_none().then_some(finding_id),
                &user_id,
                &change.actor_email,
                &before,
                &change.status,
                &until,
                &change.reason,
            ],
        )
        .await?;
    }
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM {FROM} WHERE f.id = $1"),
            &[&finding_id],
        )
        .await?;
    row.as_ref().map(FindingRow::try_from).transpose()
}

/// One change of a finding's triage status.
#[derive(Debug, Clone)]
pub struct HistoryEntry {
    pub id: Uuid,
    /// Who made it (their email at the time).
    pub actor_email: String,
    pub from_status: FindingStatus,
    pub to_status: FindingStatus,
    pub accepted_until: Option<NaiveDate>,
    pub reason: String,
    pub changed_at: DateTime<Utc>,
}

/// The status history of one of the user's findings, oldest first: the
/// changes of its fingerprint (made through any of its occurrences), or of
/// the finding alone when it has no fingerprint. None when the finding is
/// not theirs.
pub async fn status_history(
    db: &impl GenericClient,
    user_id: Uuid,
    finding_id: Uuid,
) -> Result<Option<Vec<HistoryEntry>>, Error> {
    let Some(owned) = db
        .query_opt(
            "SELECT fingerprint_id FROM findings WHERE id = $1 AND user_id = $2",
            &[&finding_id, &user_id],
        )
        .await?
    else {
        return Ok(None);
    };
    let fingerprint_id: Option<Uuid> = owned.try_get("fingerprint_id")?;
    let rows = db
        .query(
            "SELECT id, actor_email, from_status, to_status, accepted_until, reason, changed_at
             FROM finding_status_history
             WHERE ($1::uuid IS NOT NULL AND fingerprint_id = $1)
                OR ($1::uuid IS NULL AND finding_id = $2)
             ORDER BY changed_at, id",
            &[&fingerprint_id, &finding_id],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(HistoryEntry {
                id: r.try_get("id")?,
                actor_email: r.try_get("actor_email")?,
                from_status: r.try_get("from_status")?,
                to_status: r.try_get("to_status")?,
                accepted_until: r.try_get("accepted_until")?,
                reason: r.try_get("reason")?,
                changed_at: r.try_get("changed_at")?,
            })
        })
        .collect::<Result<Vec<_>, Error>>()
        .map(Some)
}

/// A scan as a diff needs it.
#[derive(Debug, Clone, Copy)]
pub struct DiffScan {
    pub id: Uuid,
    pub target_id: Uuid,
    pub engine: Engine,
    pub created_at: DateTime<Utc>,
    /// `None` until the scan completes.
    pub completed_at: Option<DateTime<Utc>>,
}

impl TryFrom<&Row> for DiffScan {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        Ok(DiffScan {
            id: row.try_get("id")?,
            target_id: row.try_get("target_id")?,
            engine: row.try_get("engine")?,
            created_at: row.try_get("created_at")?,
            completed_at: row.try_get("completed_at")?,
        })
    }
}

impl From<&ScanRow> for DiffScan {
    fn from(scan: &ScanRow) -> Self {
        DiffScan {
            id: scan.id,
            target_id: scan.target_id,
            engine: scan.engine,
            created_at: scan.created_at,
            completed_at: scan.completed_at,
        }
    }
}

/// One of the user's scans; `None` when it is not theirs.
pub async fn diff_scan(
    db: &impl GenericClient,
    user_id: Uuid,
    scan_id: Uuid,
) -> Result<Option<DiffScan>, Error> {
    let row = db
        .query_opt(
            "SELECT id, target_id, engine, created_at, completed_at FROM scans
             WHERE id = $1 AND user_id = $2",
            &[&scan_id, &user_id],
        )
        .await?;
    row.as_ref().map(DiffScan::try_from).transpose()
}

/// The completed scan of the same target created last before `scan`; of
/// `engine` only when given (a diff compares like with like by default,
/// a report names the scan before it whatever its engine).
pub async fn previous_completed(
    db: &impl GenericClient,
    scan: &DiffScan,
    engine: Option<Engine>,
) -> Result<Option<DiffScan>, Error> {
    let row = db
        .query_opt(
            "SELECT id, target_id, engine, created_at, completed_at FROM scans
             WHERE target_id = $1 AND status = 'completed' AND id <> $2
               AND (created_at, id) < ($3, $2)
               AND ($4::text IS NULL OR engine = $4)
             ORDER BY created_at DESC, id DESC LIMIT 1",
            &[&scan.target_id, &scan.id, &scan.created_at, &engine],
        )
        .await?;
    row.as_ref().map(DiffScan::try_from).transpose()
}

/// Two scans of one target compared by fingerprint. `new` and `regressed`
/// are the scan's findings of that `change`, so the diff never contradicts
/// the scan's changes, its report or its notification.
#[derive(Debug, Default)]
pub struct Diff {
    /// In the scan, not in the other, `change` new, and the other scan
    /// would have found it.
    pub new: Vec<FindingRow>,
    /// In the scan, not in the other, `change` regressed, and the other
    /// scan would have found it.
    pub regressed: Vec<FindingRow>,
    /// In the other scan (its findings), not in the scan, which would have
    /// found it, and fixed by a scan between the two.
    pub fixed: Vec<FindingRow>,
    /// Fingerprints in both.
    pub unchanged: i64,
    /// Fingerprints in one of the two only that are none of the above: the
    /// other scan could not have found them (its engine does not run the
    /// template, it did not reach the host, it retested another finding),
    /// or they were already open (`recurring`) and the other scan missed
    /// them without fixing them.
    pub not_compared: i64,
}

/// Compares `scan` with `against` (scans of one target) by the coverage
/// rule of the fixed rule ([`fingerprints::covers_sql`]); lists are worst
/// first. With no `against`, the scan's new and regressed findings are
/// new and regressed, its recurring ones not compared.
pub async fn diff(
    db: &impl GenericClient,
    scan: &DiffScan,
    against: Option<&DiffScan>,
) -> Result<Diff, Error> {
    // A row per finding of $1 that $2 lacks, with whether $2 would have
    // found it (false without $2) and whether a scan between the two
    // ($3, $4] fixed its fingerprint.
    static ONLY_IN: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {COLUMNS}, COALESCE({covers}, false) AS covered,
                    EXISTS (SELECT 1 FROM fingerprint_fixes x JOIN scans xs ON xs.id = x.scan_id
                            WHERE x.fingerprint_id = f.fingerprint_id
                              AND xs.created_at > $3 AND xs.created_at <= $4) AS fixed_between
             FROM {FROM} LEFT JOIN scans other ON other.id = $2
             WHERE f.scan_id = $1 AND NOT EXISTS (
                 SELECT 1 FROM findings o
                 WHERE o.scan_id = $2 AND o.fingerprint_id = f.fingerprint_id)
             ORDER BY {rank}, f.created_at, f.id",
            covers = fingerprints::covers_sql("other", "fp"),
            rank = *SEVERITY_RANK
        )
    });
    let (from, to) = match against {
        Some(a) if a.created_at > scan.created_at => (scan.created_at, a.created_at),
        Some(a) => (a.created_at, scan.created_at),
        None => (scan.created_at, scan.created_at),
    };
    let other = against.map(|a| a.id);
    let mut out = Diff::default();
    let mut seen = HashSet::new();
    for row in db
        .query(ONLY_IN.as_str(), &[&scan.id, &other, &from, &to])
        .await?
    {
        let finding = FindingRow::try_from(&row)?;
        if !seen.insert(finding.fingerprint.clone()) {
            continue;
        }
        let covered = against.is_none() || row.try_get::<_, bool>("covered")?;
        match (covered, finding.change) {
            (true, Some(Change::New)) => out.new.push(finding),
            (true, Some(Change::Regressed)) => out.regressed.push(finding),
            _ => out.not_compared += 1,
        }
    }
    let Some(against) = against else {
        return Ok(out);
    };
    seen.clear();
    for row in db
        .query(ONLY_IN.as_str(), &[&against.id, &scan.id, &from, &to])
        .await?
    {
        let finding = FindingRow::try_from(&row)?;
        if !seen.insert(finding.fingerprint.clone()) {
            continue;
        }
        if row.try_get::<_, bool>("covered")? && row.try_get::<_, bool>("fixed_between")? {
            out.fixed.push(finding);
        } else {
            out.not_compared += 1;
        }
    }
    out.unchanged = db
        .query_one(
            "SELECT count(DISTINCT f.fingerprint_id) AS unchanged FROM findings f
             WHERE f.scan_id = $1 AND EXISTS (
                 SELECT 1 FROM findings o
                 WHERE o.scan_id = $2 AND o.fingerprint_id = f.fingerprint_id)",
            &[&scan.id, &against.id],
        )
        .await?
        .try_get("unchanged")?;
    Ok(out)
}
