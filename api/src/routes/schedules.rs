//! Schedules: recurring scans.
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

pub struct SchedulesApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Schedules")]
impl SchedulesApi {
    /// List the caller's schedules
    #[oai(path = "/schedules", method = "get", operation_id = "list_schedules")]
    async fn list_schedules(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        #[oai(name = "limit")] _limit: Query<Option<i64>>,
        #[oai(name = "offset")] _offset: Query<Option<i64>>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /schedules"))
    }

    /// Create a schedule
    #[oai(path = "/schedules", method = "post", operation_id = "create_schedule")]
    async fn create_schedule(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /schedules"))
    }

    /// Change a schedule
    #[oai(
        path = "/schedules/:schedule_id",
        method = "put",
        operation_id = "update_schedule"
    )]
    async fn update_schedule(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _schedule_id: Path<Uuid>,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("PUT /schedules/schedule_id"))
    }

    /// Delete a schedule
    #[oai(
        path = "/schedules/:schedule_id",
        method = "delete",
        operation_id = "delete_schedule"
    )]
    async fn delete_schedule(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _schedule_id: Path<Uuid>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("DELETE /schedules/schedule_id"))
    }

    /// Run a schedule's scan now
    #[oai(
        path = "/schedules/:schedule_id/run-now",
        method = "post",
        operation_id = "run_schedule_now"
    )]
    async fn run_schedule_now(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _schedule_id: Path<Uuid>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /schedules/schedule_id/run-now"))
    }
}
