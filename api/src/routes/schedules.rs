//! `/schedules`: recurring scans of a target with a five-field cron
//! expression in UTC ([`CronSpec`]), firing at most every 5 minutes.
//!
//! The scheduler turns due schedules into scans; `run-now` starts one at once
//! through the same path as `POST /scans` ([`scans::create_scan`]), so it
//! counts against the tier's scan limit like any other scan.

use chrono::{DateTime, Utc};
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use scanfleet_common::jobs::Engine;
use uuid::Uuid;

use super::{page, ApiTags};
use crate::auth::{Caller, CanRead, CanScan, CanWrite};
use crate::contract::{self, CronExpression, EngineName, PageLimit, PageOffset};
pub use crate::dto::ScheduleOut;
use crate::error::{Error, Result};
use crate::json_body::JsonBody;
use crate::state::AppState;
use scanfleet_core::cron::CronSpec;
use scanfleet_core::store::schedules::{self, NewSchedule, ScheduleUpdate};

#[derive(Debug, Object)]
pub struct ScheduleCreate {
    /// One of the caller's targets.
    pub target_id: Uuid,
    /// `full` (default), `quick` or `recon`.
    pub engine: Option<EngineName>,
    /// Five fields (minute hour day-of-month month day-of-week), UTC, firing
    /// at most every 5 minutes; e.g. `0 9 * * 1` (Mondays at 09:00).
    pub cron_expression: CronExpression,
}

/// Any of the fields; absent ones stay as they are. `next_run` is recomputed.
#[derive(Debug, Object)]
pub struct ScheduleUpdateRequest {
    /// `full`, `quick` or `recon`.
    pub engine: Option<EngineName>,
    /// Five-field cron expression, UTC, at most every 5 minutes.
    pub cron_expression: Option<CronExpression>,
    /// A disabled schedule does not run until enabled again.
    pub enabled: Option<bool>,
}

#[derive(Debug, Object)]
pub struct RunNowResponse {
    /// The scan that was created (status `queued`).
    pub scan_id: Uuid,
}

#[derive(ApiResponse)]
pub enum CreateResponse {
    /// The schedule was created, enabled.
    #[oai(status = 201)]
    Created(Json<ScheduleOut>),
}

#[derive(ApiResponse)]
pub enum ListResponse {
    /// The caller's schedules, newest first.
    #[oai(status = 200)]
    Ok(Json<Vec<ScheduleOut>>, #[oai(header = "X-Total-Count")] i64),
}

#[derive(ApiResponse)]
pub enum DeleteResponse {
    /// The schedule was deleted; its past scans remain.
    #[oai(status = 204)]
    Deleted,
}

#[derive(ApiResponse)]
pub enum RunNowResult {
    /// A scan was queued.
    #[oai(status = 202)]
    Accepted(Json<RunNowResponse>),
}

fn parse_engine(raw: &str) -> Result<Engine, Error> {
    Engine::parse(raw)
        .filter(|e| Engine::ALL.contains(e))
        .ok_or_else(|| Error::invalid("engine", "must be full, quick, recon or auto"))
}

/// The spec and its next firing after now.
fn parse_cron(raw: &str) -> Result<(CronSpec, DateTime<Utc>)> {
    let spec =
        CronSpec::parse(raw).map_err(|e| Error::invalid("cron_expression", e.to_string()))?;
    let next = spec
        .next_after(Utc::now())
        .ok_or_else(|| Error::invalid("cron_expression", "never fires again"))?;
    Ok((spec, next))
}

pub struct SchedulesApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Schedules")]
impl SchedulesApi {
    /// List the caller's schedules
    #[oai(path = "/schedules", method = "get", operation_id = "list_schedules")]
    async fn list_schedules(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        /// Page size, 1 to 500 (default 50).
        limit: Query<Option<PageLimit>>,
        /// Items to skip.
        offset: Query<Option<PageOffset>>,
    ) -> Result<ListResponse> {
        let page = page(contract::raw(limit.0), contract::raw(offset.0))?;
        let db = state.db.get().await?;
        let (list, total) = schedules::list(&**db, me.user.id, page).await?;
        Ok(ListResponse::Ok(
            Json(list.into_iter().map(Into::into).collect()),
            total,
        ))
    }

    /// Create a schedule
    ///
    /// The schedule starts enabled; `next_run` is the expression's next
    /// firing in UTC.
    #[oai(path = "/schedules", method = "post", operation_id = "create_schedule")]
    async fn create_schedule(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        body: JsonBody<ScheduleCreate>,
    ) -> Result<CreateResponse> {
        let engine = parse_engine(body.engine.as_deref().unwrap_or("full"))?;
        let (spec, next_run) = parse_cron(&body.cron_expression)?;
        let db = state.db.get().await?;
        let schedule = schedules::create(
            &**db,
            NewSchedule {
                user_id: me.user.id,
                target_id: body.target_id,
                engine,
                cron_expression: spec.as_str(),
                next_run,
            },
        )
        .await?;
        tracing::info!(user_id = %me.user.id, schedule_id = %schedule.id, "schedule created");
        Ok(CreateResponse::Created(Json(schedule.into())))
    }

    /// Change a schedule
    ///
    /// Any of engine, cron_expression and enabled; `next_run` is recomputed.
    #[oai(
        path = "/schedules/:schedule_id",
        method = "put",
        operation_id = "update_schedule"
    )]
    async fn update_schedule(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        schedule_id: Path<Uuid>,
        body: JsonBody<ScheduleUpdateRequest>,
    ) -> Result<Json<ScheduleOut>> {
        let engine = body.engine.as_deref().map(parse_engine).transpose()?;
        let cron = body
            .cron_expression
            .as_deref()
            .map(parse_cron)
            .transpose()?;
        let db = state.db.get().await?;
        let current = schedules::find(&**db, me.user.id, schedule_id.0)
            .await?
            .ok_or(Error::NotFound("schedule"))?;
        let (expression, next_run) = match &cron {
            Some((spec, next)) => (spec.as_str().to_string(), *next),
            // The stored expression was valid when stored; the next firing
            // moves on with time.
            None => {
                let (spec, next) = parse_cron(&current.cron_expression)?;
                (spec.as_str().to_string(), next)
            }
        };
        let updated = schedules::update(
            &**db,
            me.user.id,
            current.id,
            ScheduleUpdate {
                engine: engine.unwrap_or(current.engine),
                cron_expression: &expression,
                enabled: body.enabled.unwrap_or(current.enabled),
                next_run,
            },
        )
        .await?;
        Ok(Json(updated.into()))
    }

    /// Delete a schedule
    #[oai(
        path = "/schedules/:schedule_id",
        method = "delete",
        operation_id = "delete_schedule"
    )]
    async fn delete_schedule(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        schedule_id: Path<Uuid>,
    ) -> Result<DeleteResponse> {
        let db = state.db.get().await?;
        schedules::delete(&**db, me.user.id, schedule_id.0).await?;
        Ok(DeleteResponse::Deleted)
    }

    /// Run a schedule's scan now
    ///
    /// Creates a scan of the schedule's target with its engine, exactly as
    /// `POST /scans` does: it counts against the tier's scan limit (403 with
    /// an upgrade prompt when reached). Works on disabled schedules too.
    #[oai(
        path = "/schedules/:schedule_id/run-now",
        method = "post",
        operation_id = "run_schedule_now"
    )]
    async fn run_schedule_now(
        &self,
        state: Data<&AppState>,
        me: Caller<CanScan>,
        schedule_id: Path<Uuid>,
    ) -> Result<RunNowResult> {
        let schedule = {
            let db = state.db.get().await?;
            schedules::find(&**db, me.user.id, schedule_id.0)
                .await?
                .ok_or(Error::NotFound("schedule"))?
        };
        let scan = scanfleet_core::scans::start_scan(
            &state.core,
            &me.user,
            schedule.target_id,
            schedule.engine,
            Some(schedule.id),
        )
        .await?;
        let db = state.db.get().await?;
        schedules::mark_run(&**db, schedule.id, scan.created_at).await?;
        tracing::info!(user_id = %me.user.id, schedule_id = %schedule.id, scan_id = %scan.id, "schedule run now");
        Ok(RunNowResult::Accepted(Json(RunNowResponse {
            scan_id: scan.id,
        })))
    }
}
