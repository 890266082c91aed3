//! `/dashboard`: totals, the last 5 scans, and per-day activity.

use chrono::{DateTime, NaiveDate, Utc};
use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;
use uuid::Uuid;

use super::ApiTags;
use crate::auth::{Caller, CanRead};
use crate::error::Result;
use crate::payload::{self, Direct};
use crate::state::AppState;
use scanfleet_core::store::dashboard::{self, ChartDay, RecentScan};

#[derive(Debug, Object, Serialize)]
pub struct RecentScanOut {
    pub id: Uuid,
    pub target_domain: String,
    pub engine: String,
    pub status: String,
    /// 0 to 100; 100 when completed.
    pub progress: i32,
    #[serde(serialize_with = "payload::rfc3339")]
    pub created_at: DateTime<Utc>,
    pub findings_count: i64,
    pub critical_count: i64,
    pub high_count: i64,
    pub medium_count: i64,
    pub low_count: i64,
}

impl From<RecentScan> for RecentScanOut {
    fn from(s: RecentScan) -> Self {
        RecentScanOut {
            id: s.id,
            target_domain: s.target_domain,
            engine: s.engine.as_str().to_string(),
            status: s.status.as_str().to_string(),
            progress: s.progress.into(),
            created_at: s.created_at,
            findings_count: s.findings_count.into(),
            critical_count: s.critical_count.into(),
            high_count: s.high_count.into(),
            medium_count: s.medium_count.into(),
            low_count: s.low_count.into(),
        }
    }
}

#[derive(Debug, Object, Serialize)]
pub struct DashboardSummary {
    /// Number of the caller's targets.
    pub total_targets: i64,
    /// Scans of every status.
    pub total_scans: i64,
    /// Scans pending or running.
    pub active_scans: i64,
    /// Sum of findings_count over all scans.
    pub total_vulnerabilities: i64,
    /// Sum of critical findings over all scans.
    pub critical_count: i64,
    /// Sum of high findings over all scans.
    pub high_count: i64,
    /// The last 5 scans, newest first.
    pub recent_scans: Vec<RecentScanOut>,
}

#[derive(Debug, Object)]
pub struct ChartPoint {
    /// UTC day, YYYY-MM-DD.
    pub date: NaiveDate,
    /// Scans created that day.
    pub scans: i64,
    /// Sum of findings_count of the scans completed that day.
    pub vulnerabilities: i64,
}

impl From<ChartDay> for ChartPoint {
    fn from(d: ChartDay) -> Self {
        ChartPoint {
            date: d.date,
            scans: d.scans,
            vulnerabilities: d.vulnerabilities,
        }
    }
}

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
        state: Data<&AppState>,
        me: Caller<CanRead>,
    ) -> Result<Direct<DashboardSummary>> {
        let db = state.db.get().await?;
        let s = dashboard::summary(&db, me.user.id).await?;
        Ok(Direct(DashboardSummary {
            total_targets: s.total_targets,
            total_scans: s.total_scans,
            active_scans: s.active_scans,
            total_vulnerabilities: s.total_vulnerabilities,
            critical_count: s.critical_count,
            high_count: s.high_count,
            recent_scans: s.recent_scans.into_iter().map(Into::into).collect(),
        }))
    }

    /// Scans and vulnerabilities per day, last 30 days
    ///
    /// Oldest day first; days without activity are omitted.
    #[oai(
        path = "/dashboard/charts",
        method = "get",
        operation_id = "get_dashboard_charts"
    )]
    async fn get_dashboard_charts(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
    ) -> Result<Json<Vec<ChartPoint>>> {
        let db = state.db.get().await?;
        Ok(Json(
            dashboard::charts(&**db, me.user.id)
                .await?
                .into_iter()
                .map(Into::into)
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directly_serialised_summary_is_the_contracts_document() {
        let recent = |i: i64| RecentScanOut {
            id: Uuid::new_v4(),
            target_domain: format!("s{i}.example.test"),
            engine: "quick".into(),
            status: "completed".into(),
            progress: 100,
            created_at: Utc::now(),
            findings_count: i,
            critical_count: 0,
            high_count: 1,
            medium_count: 2,
            low_count: 3,
        };
        payload::same_json(&DashboardSummary {
            total_targets: 2,
            total_scans: 3,
            active_scans: 1,
            total_vulnerabilities: 7,
            critical_count: 0,
            high_count: 1,
            recent_scans: vec![recent(1), recent(2)],
        })
        .unwrap();
    }
}
