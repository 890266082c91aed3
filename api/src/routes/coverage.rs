//! `GET /scans/{scan_id}/coverage` (issue 35): per live host, the
//! technologies found with their evidence, the templates the scanner had,
//! how many ran and why the others did not, and the requests sent.

use std::collections::BTreeMap;

use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};
use uuid::Uuid;

use super::ApiTags;
use crate::auth::{Caller, CanRead};
use crate::error::{Error, Result};
use crate::state::AppState;
use scanfleet_core::store::coverage::{self, CoverageRow};
use scanfleet_core::store::scans;

/// What a scan covered, host by host.
#[derive(Debug, Object)]
pub struct ScanCoverage {
    pub scan_id: Uuid,
    /// Live hosts, by name; a host appears once its templates finished.
    pub hosts: Vec<HostCoverage>,
}

/// One live host of a scan.
#[derive(Debug, Object)]
pub struct HostCoverage {
    pub host: String,
    /// Technologies found (the `auto` engine's detection and the HTTP
    /// probe; other engines report what the probe saw).
    pub technologies: Vec<Technology>,
    pub templates: TemplateCoverage,
    /// Requests sent to the host during the scan: probe, detection and
    /// templates, retries and redirect hops included.
    pub requests: i64,
}

/// A technology and what named it.
#[derive(Debug, Object)]
pub struct Technology {
    /// Lower-case name (`wordpress`, `nginx`, `apache-tomcat`).
    pub name: String,
    /// The version, where a detector extracted one.
    pub version: Option<String>,
    /// What named it: `template:<id>` (`template:tech-detect:<matcher>`),
    /// `header:<name>: <value>`, `cookie:<name>`, `meta:generator: <value>`,
    /// `body:<marker>`.
    pub evidence: Vec<String>,
}

/// The scanner's templates for the host: `run` plus every `skipped`
/// count is `total`.
#[derive(Debug, Object)]
pub struct TemplateCoverage {
    /// Every template the scanner node holds, runnable or not.
    pub total: i64,
    /// Templates run on the host (detection included).
    pub run: i64,
    /// Templates not run, by reason: `technology_absent` (the `auto`
    /// engine found nothing they apply to), `needs_oob` (out-of-band, and no
    /// interactsh server configured), `needs_wordlist` (a payload file the
    /// node does not have), `unsupported_protocol` (DNS, TCP, headless,
    /// self-contained or third-party requests), `unsupported_feature` (an
    /// HTTP feature the engine does not run), `unreadable` (does not
    /// parse), `brute_force` (over 80 requests: left to `full`),
    /// `not_selected` (outside a `quick` or `recon` selection).
    pub skipped: BTreeMap<String, i64>,
}

impl From<CoverageRow> for HostCoverage {
    fn from(c: CoverageRow) -> Self {
        HostCoverage {
            host: c.host,
            technologies: c
                .technologies
                .into_iter()
                .map(|t| Technology {
                    name: t.name,
                    version: t.version,
                    evidence: t.evidence,
                })
                .collect(),
            templates: TemplateCoverage {
                total: c.total,
                run: c.run,
                skipped: c.skipped,
            },
            requests: c.requests,
        }
    }
}

pub struct CoverageApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Scans")]
impl CoverageApi {
    /// What a scan covered on each host
    ///
    /// Technologies found with their evidence, templates run and skipped
    /// (by reason) and requests sent, per live host. 404 when the scan is
    /// not the caller's, as for the scan itself.
    #[oai(
        path = "/scans/:scan_id/coverage",
        method = "get",
        operation_id = "get_scan_coverage"
    )]
    async fn get_scan_coverage(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        scan_id: Path<Uuid>,
    ) -> Result<Json<ScanCoverage>> {
        let db = state.db.get().await?;
        scans::revision(&db, me.user.id, scan_id.0)
            .await?
            .ok_or(Error::NotFound("scan"))?;
        let hosts = coverage::of_scan(&**db, scan_id.0).await?;
        Ok(Json(ScanCoverage {
            scan_id: scan_id.0,
            hosts: hosts.into_iter().map(HostCoverage::from).collect(),
        }))
    }
}
