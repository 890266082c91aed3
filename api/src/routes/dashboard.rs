//! Dashboard: summary and charts.
//!
//! The operations here are part of the contract but not provided by this
//! version yet: each answers 501 problem+json.

use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::OpenApi;

use super::ApiTags;
use crate::auth::Credentials;
use crate::error::{Error, Result};
use crate::state::AppState;

pub struct DashboardApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Dashboard")]
impl DashboardApi {
    /// Totals and the last 5 scans
    #[oai(
        path = "/dashboard/summary",
        method = "get",
        operation_id = "get_dashboard_summary"
    )]
    async fn get_dashboard_summary(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /dashboard/summary"))
    }

    /// Scans and vulnerabilities per day, last 30 days
    #[oai(
        path = "/dashboard/charts",
        method = "get",
        operation_id = "get_dashboard_charts"
    )]
    async fn get_dashboard_charts(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /dashboard/charts"))
    }
}
