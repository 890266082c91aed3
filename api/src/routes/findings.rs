//! `/findings`: triage of individual findings.

use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};
use uuid::Uuid;

use super::scans::Vulnerability;
use super::ApiTags;
use crate::auth::{Caller, CanWrite};
use crate::contract::FindingStatusName;
use crate::error::{Error, Result};
use crate::json_body::JsonBody;
use crate::state::AppState;
use scanfleet_core::store::findings::{self, STATUSES};

#[derive(Debug, Object)]
pub struct FindingUpdate {
    /// `open`, `confirmed`, `false_positive`, `accepted_risk` or `fixed`.
    pub status: FindingStatusName,
}

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
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        finding_id: Path<Uuid>,
        body: JsonBody<FindingUpdate>,
    ) -> Result<Json<Vulnerability>> {
        if !STATUSES.contains(&&*body.status) {
            return Err(Error::invalid(
                "status",
                format!("must be one of {}", STATUSES.join(", ")),
            )
            .into());
        }
        let db = state.db.get().await?;
        let finding = findings::set_status(&**db, me.user.id, finding_id.0, &body.status)
            .await?
            .ok_or(Error::NotFound("finding"))?;
        Ok(Json(Vulnerability::from(&finding)))
    }
}
