//! Findings: triage status.
//!
//! The operations here are part of the contract but not provided by this
//! version yet: each answers 501 problem+json.

use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::OpenApi;
use uuid::Uuid;

use super::ApiTags;
use crate::auth::Credentials;
use crate::error::{Error, Result};
use crate::state::AppState;

pub struct FindingsApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Findings")]
impl FindingsApi {
    /// Set a finding's status
    #[oai(
        path = "/findings/:finding_id",
        method = "patch",
        operation_id = "update_finding"
    )]
    async fn update_finding(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _finding_id: Path<Uuid>,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("PATCH /findings/finding_id"))
    }
}
