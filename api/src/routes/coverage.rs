//! `GET /scans/{scan_id}/coverage` (issue 35): per live host, the
//! technologies found with their evidence, the templates the scanner had,
//! how many ran and why the others did not, and the requests sent.

use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};
use uuid::Uuid;

use super::ApiTags;
use crate::auth::{Caller, CanRead};
use crate::error::{Error, Result};
use crate::state::AppState;
use scanfleet_core::store::coverage;
use scanfleet_core::store::scans;
use scanfleet_report::coverage::HostCoverage;

/// What a scan covered, host by host.
#[derive(Debug, Object)]
pub struct ScanCoverage {
    pub scan_id: Uuid,
    /// Live hosts, by name; a host appears once its templates finished.
    pub hosts: Vec<HostCoverage>,
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
