//! Targets: the caller's domains.
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

pub struct TargetsApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Targets")]
impl TargetsApi {
    /// List the caller's targets
    #[oai(path = "/targets", method = "get", operation_id = "list_targets")]
    async fn list_targets(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        #[oai(name = "limit")] _limit: Query<Option<i64>>,
        #[oai(name = "offset")] _offset: Query<Option<i64>>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /targets"))
    }

    /// Add a target
    #[oai(path = "/targets", method = "post", operation_id = "create_target")]
    async fn create_target(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /targets"))
    }

    /// Delete a target and all its scan data
    #[oai(
        path = "/targets/:target_id",
        method = "delete",
        operation_id = "delete_target"
    )]
    async fn delete_target(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _target_id: Path<Uuid>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("DELETE /targets/target_id"))
    }

    /// Import up to 500 domains
    #[oai(
        path = "/targets/import",
        method = "post",
        operation_id = "import_targets"
    )]
    async fn import_targets(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /targets/import"))
    }
}
