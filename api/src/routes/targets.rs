//! `/targets`: the caller's domains. Domains are parsed into [`Domain`]
//! here; per-tier target limits answer 403 with an upgrade prompt. Each
//! target shows its ownership proof, checked by `POST .../verify`
//! (see [`scanfleet_core::ownership`]).

use chrono::{DateTime, Utc};
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use uuid::Uuid;

use super::{page, ApiTags};
use crate::auth::{Caller, CanRead, CanWrite};
use crate::contract::{self, DomainList, DomainName, PageLimit, PageOffset, RpsPerHost};
use crate::error::{Error, Result};
use crate::json_body::JsonBody;
use crate::state::AppState;
use scanfleet_core::store::targets::{self, ImportLine, TargetRow};

use crate::contract::bounds::IMPORT_MAX;

/// A domain the caller owns and scans.
#[derive(Debug, Object)]
pub struct Target {
    pub id: Uuid,
    /// Lower-case hostname; internationalised names in punycode.
    pub domain: String,
    pub organization: String,
    pub created_at: DateTime<Utc>,
    /// Proof that the caller controls the domain.
    pub verification: Verification,
    /// The target's ceiling on requests a second to any one of its hosts:
    /// the tier's default when created without one (demo and monthly 50,
    /// yearly and admin 100; `GET /subscriptions/tiers`), changed with
    /// `PATCH /targets/{target_id}`; null for a target made before tiers
    /// set it: the scanner's default (50).
    pub max_rps_per_host: Option<i64>,
}

/// Ownership proof of a target. Publish `scanfleet-verification=<token>` as
/// a DNS TXT record on the domain or on `_scanfleet.<domain>`, or as a line
/// of `/.well-known/scanfleet-verification.txt` on the domain, then call
/// `POST /targets/{target_id}/verify`.
#[derive(Debug, Object)]
pub struct Verification {
    /// `unverified`, `verified` or `expired` (checked again before the next
    /// scan).
    pub status: String,
    /// This target's own random token.
    pub token: String,
    /// `dns_txt`, `http_file` or `admin` once proven.
    pub method: Option<String>,
    pub verified_at: Option<DateTime<Utc>>,
    /// When the proof is checked again; null when it does not expire (set
    /// by an administrator).
    pub expires_at: Option<DateTime<Utc>>,
}

impl From<TargetRow> for Target {
    fn from(t: TargetRow) -> Self {
        let status = t.proof.status_at(Utc::now()).as_str().to_string();
        Target {
            id: t.id,
            domain: t.domain,
            organization: t.organization,
            created_at: t.created_at,
            verification: Verification {
                status,
                token: t.proof.token,
                method: t.proof.method,
                verified_at: t.proof.verified_at,
                expires_at: t.proof.expires_at,
            },
            max_rps_per_host: t.max_rps_per_host.map(i64::from),
        }
    }
}

#[derive(Debug, Object)]
pub struct TargetCreate {
    /// A bare hostname such as `example.com` (no scheme, port or path; not an
    /// IP address or wildcard). Internationalised names are accepted.
    pub domain: DomainName,
    /// Free text, up to 200 characters; empty when absent.
    pub organization: Option<String>,
    /// At most this many requests a second to any one host of the target,
    /// across all of a scan's work (1 to 1000); the tier's default when
    /// absent.
    pub max_rps_per_host: Option<RpsPerHost>,
}

/// What `PATCH /targets/{target_id}` changes; an absent field stays as it
/// is.
#[derive(Debug, Object)]
pub struct TargetUpdate {
    /// At most this many requests a second to any one host of the target
    /// (1 to 1000), for the scans queued from now on.
    pub max_rps_per_host: Option<RpsPerHost>,
}

#[derive(Debug, Object)]
pub struct TargetImport {
    /// Up to 500 domains.
    pub domains: DomainList,
}

/// A target created by an import.
#[derive(Debug, Object)]
pub struct ImportedTarget {
    pub id: Uuid,
    pub domain: String,
}

/// Why one domain of an import was not imported.
#[derive(Debug, Object)]
pub struct ImportFailure {
    /// `domains[i]`, the position in the request.
    pub field: String,
    /// The domain as sent.
    pub domain: String,
    /// `invalid`, `duplicate` (earlier in the same list), `exists` (the caller
    /// already has it) or `limit_reached` (the tier's target limit).
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Object)]
pub struct ImportResult {
    /// Targets created.
    pub imported: i64,
    /// Domains not imported: invalid, duplicate or over the target limit.
    pub failed: i64,
    /// The created targets, in request order.
    pub targets: Vec<ImportedTarget>,
    /// One entry per failed domain, in request order.
    pub failures: Vec<ImportFailure>,
}

#[derive(ApiResponse)]
pub enum TargetList {
    /// The caller's targets, newest first.
    #[oai(status = 200)]
    Ok(Json<Vec<Target>>, #[oai(header = "X-Total-Count")] i64),
}

#[derive(ApiResponse)]
pub enum TargetCreated {
    /// The target was added.
    #[oai(status = 201)]
    Created(Json<Target>),
}

#[derive(ApiResponse)]
pub enum TargetDeleted {
    /// The target, its scans, findings and schedules are gone.
    #[oai(status = 204)]
    NoContent,
}

pub struct TargetsApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Targets")]
impl TargetsApi {
    /// List the caller's targets
    #[oai(path = "/targets", method = "get", operation_id = "list_targets")]
    async fn list_targets(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        /// Page size, 1 to 500 (default 50).
        limit: Query<Option<PageLimit>>,
        /// Items to skip.
        offset: Query<Option<PageOffset>>,
    ) -> Result<TargetList> {
        let page = page(contract::raw(limit.0), contract::raw(offset.0))?;
        let db = state.db.get().await?;
        let (list, total) = targets::list(&**db, me.user.id, None, page).await?;
        Ok(TargetList::Ok(
            Json(list.into_iter().map(Into::into).collect()),
            total,
        ))
    }

    /// Add a target
    ///
    /// 409 when the caller already has the domain; 403 with an upgrade prompt
    /// when the tier's target limit (demo 5, monthly 100, yearly 500) is reached.
    #[oai(path = "/targets", method = "post", operation_id = "create_target")]
    async fn create_target(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        body: JsonBody<TargetCreate>,
    ) -> Result<TargetCreated> {
        let domain = crate::validate::domain(&body.domain, "domain")?;
        let organization = crate::validate::organization(body.organization.as_deref())?;
        let max_rps = body
            .max_rps_per_host
            .map(contract::rps_per_host)
            .transpose()?;
        let target =
            scanfleet_core::targets::add(&state.core, me.user.id, &domain, &organization, max_rps)
                .await?;
        Ok(TargetCreated::Created(Json(target.into())))
    }

    /// Delete a target and all its scan data
    ///
    /// Its active scans are stopped first; its scans, findings and schedules
    /// are deleted with it.
    #[oai(
        path = "/targets/:target_id",
        method = "delete",
        operation_id = "delete_target"
    )]
    async fn delete_target(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        target_id: Path<Uuid>,
    ) -> Result<TargetDeleted> {
        scanfleet_core::targets::delete(&state.core, me.user.id, target_id.0).await?;
        Ok(TargetDeleted::NoContent)
    }

    /// Show one target
    #[oai(
        path = "/targets/:target_id",
        method = "get",
        operation_id = "get_target"
    )]
    async fn get_target(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        target_id: Path<Uuid>,
    ) -> Result<Json<Target>> {
        let db = state.db.get().await?;
        let target = targets::find(&db, me.user.id, target_id.0)
            .await?
            .ok_or(Error::NotFound("target"))?;
        Ok(Json(target.into()))
    }

    /// Change a target
    ///
    /// Its `max_rps_per_host` (1 to 1000; a 422 naming the field outside
    /// that), for the scans queued from now on. An absent field stays as it
    /// is.
    #[oai(
        path = "/targets/:target_id",
        method = "patch",
        operation_id = "update_target"
    )]
    async fn update_target(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        target_id: Path<Uuid>,
        body: JsonBody<TargetUpdate>,
    ) -> Result<Json<Target>> {
        let max_rps = body
            .max_rps_per_host
            .map(contract::rps_per_host)
            .transpose()?;
        let db = state.db.get().await?;
        let target = match max_rps {
            Some(v) => targets::set_max_rps_per_host(&**db, me.user.id, target_id.0, v).await?,
            None => targets::find(&db, me.user.id, target_id.0).await?,
        }
        .ok_or(Error::NotFound("target"))?;
        Ok(Json(target.into()))
    }

    /// Prove ownership of a target
    ///
    /// Checks at once, and accepts the first that holds: a DNS TXT record
    /// `scanfleet-verification=<token>` on the domain or on
    /// `_scanfleet.<domain>`; or that value as a line of
    /// `/.well-known/scanfleet-verification.txt` served by the domain (HTTPS,
    /// then HTTP; redirects only within the domain). 200 with the target
    /// when proven; 422 (`verification_failed`) naming, per method, what
    /// was found instead. A proof lasts
    /// `SCANFLEET_TARGETS__VERIFICATION_TTL_DAYS` days (30).
    #[oai(
        path = "/targets/:target_id/verify",
        method = "post",
        operation_id = "verify_target"
    )]
    async fn verify_target(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        target_id: Path<Uuid>,
    ) -> Result<Json<Target>> {
        let row = scanfleet_core::targets::verify(&state.core, me.user.id, target_id.0).await?;
        Ok(Json(row.into()))
    }

    /// Import up to 500 domains
    ///
    /// One transaction; invalid domains, repeats within the list, domains the
    /// caller already has and those over the tier's target limit count as
    /// `failed` (each explained in `failures`); the rest are created.
    #[oai(
        path = "/targets/import",
        method = "post",
        operation_id = "import_targets"
    )]
    async fn import_targets(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        body: JsonBody<TargetImport>,
    ) -> Result<Json<ImportResult>> {
        if body.domains.len() > IMPORT_MAX {
            return Err(Error::invalid(
                "domains",
                format!("an import takes at most {IMPORT_MAX} domains"),
            )
            .into());
        }
        let domains: Vec<String> = body.0.domains.0.into_iter().map(|d| d.0).collect();
        let lines = scanfleet_core::targets::import(&state.core, me.user.id, &domains).await?;
        let mut result = ImportResult {
            imported: 0,
            failed: 0,
            targets: Vec::new(),
            failures: Vec::new(),
        };
        for (i, line) in lines.into_iter().enumerate() {
            let (reason, message) = match line {
                ImportLine::Imported(t) => {
                    result.imported += 1;
                    result.targets.push(ImportedTarget {
                        id: t.id,
                        domain: t.domain,
                    });
                    continue;
                }
                ImportLine::Invalid(e) => ("invalid", e.message().to_string()),
                ImportLine::DuplicateInImport => {
                    ("duplicate", "appears earlier in this list".to_string())
                }
                ImportLine::AlreadyExists => ("exists", "you already have this target".to_string()),
                ImportLine::LimitReached => {
                    ("limit_reached", "over your tier's target limit".to_string())
                }
            };
            result.failed += 1;
            result.failures.push(ImportFailure {
                field: format!("domains[{i}]"),
                domain: domains[i].clone(),
                reason: reason.to_string(),
                message,
            });
        }
        Ok(Json(result))
    }
}
