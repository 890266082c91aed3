//! API keys for machine access.
//!
//! The operations here are part of the contract but not provided by this
//! version yet: each answers 501 problem+json.

use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::OpenApi;
use uuid::Uuid;

use super::ApiTags;
use crate::auth::BearerAuth;
use crate::error::{Error, Result};
use crate::state::AppState;

pub struct ApiKeysApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::ApiKeys")]
impl ApiKeysApi {
    /// Create an API key
    #[oai(path = "/api-keys", method = "post", operation_id = "create_api_key")]
    async fn create_api_key(
        &self,
        _state: Data<&AppState>,
        _auth: BearerAuth,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /api-keys"))
    }

    /// List the caller's API keys, masked
    #[oai(path = "/api-keys", method = "get", operation_id = "list_api_keys")]
    async fn list_api_keys(
        &self,
        _state: Data<&AppState>,
        _auth: BearerAuth,
        #[oai(name = "limit")] _limit: Query<Option<i64>>,
        #[oai(name = "offset")] _offset: Query<Option<i64>>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /api-keys"))
    }

    /// Revoke and delete an API key
    #[oai(
        path = "/api-keys/:key_id",
        method = "delete",
        operation_id = "delete_api_key"
    )]
    async fn delete_api_key(
        &self,
        _state: Data<&AppState>,
        _auth: BearerAuth,
        _key_id: Path<Uuid>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("DELETE /api-keys/key_id"))
    }
}
