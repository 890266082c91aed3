//! Scans: creation, listing, detail, stop, intel and reports.
//!
//! The operations here are part of the contract but not provided by this
//! version yet: each answers 501 problem+json.

use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::OpenApi;
use uuid::Uuid;

use super::ApiTags;
use crate::auth::Credentials;
use crate::error::{Error, Result};
use crate::state::AppState;

pub struct ScansApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Scans")]
impl ScansApi {
    /// List the caller's scans
    #[oai(path = "/scans", method = "get", operation_id = "list_scans")]
    async fn list_scans(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        #[oai(name = "target_id")] _target_id: Query<Option<Uuid>>,
        #[oai(name = "status")] _status: Query<Option<String>>,
        #[oai(name = "limit")] _limit: Query<Option<i64>>,
        #[oai(name = "offset")] _offset: Query<Option<i64>>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /scans"))
    }

    /// Start a scan
    #[oai(path = "/scans", method = "post", operation_id = "create_scan")]
    async fn create_scan(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /scans"))
    }

    /// Scan detail with findings
    #[oai(path = "/scans/:scan_id", method = "get", operation_id = "get_scan")]
    async fn get_scan(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _scan_id: Path<Uuid>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /scans/scan_id"))
    }

    /// Stop a queued, pending or running scan
    #[oai(
        path = "/scans/:scan_id/stop",
        method = "post",
        operation_id = "stop_scan"
    )]
    async fn stop_scan(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _scan_id: Path<Uuid>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /scans/scan_id/stop"))
    }

    /// Correlated intelligence of a scan
    #[oai(
        path = "/scans/:scan_id/intel",
        method = "get",
        operation_id = "get_scan_intel"
    )]
    async fn get_scan_intel(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _scan_id: Path<Uuid>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /scans/scan_id/intel"))
    }

    /// A formatted report of a scan
    #[oai(
        path = "/scans/:scan_id/report",
        method = "get",
        operation_id = "get_scan_report"
    )]
    async fn get_scan_report(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _scan_id: Path<Uuid>,
        #[oai(name = "format")] _format: Query<Option<String>>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /scans/scan_id/report"))
    }
}
