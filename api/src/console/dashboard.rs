//! The dashboard: summary cards, the 30-day chart (SVG drawn here, no
//! script), recent scans.

use askama::Template;
use chrono::{Duration, Utc};
use poem::handler;
use poem::web::{Data, Query};

use super::page::{self, Chrome, PageResult, Visitor};
use crate::state::AppState;
use scanfleet_core::store::dashboard::{self as store, ChartDay, RecentScan, Summary, CHART_DAYS};

/// One bar pair of the chart, in SVG user units.
pub struct Bar {
    pub x: i64,
    pub scans_y: i64,
    pub scans_h: i64,
    pub vulns_y: i64,
    pub vulns_h: i64,
    pub label: String,
}

/// The chart's drawing: 30 days, scans and vulnerabilities side by side,
/// each scaled to its own maximum.
pub struct Chart {
    pub bars: Vec<Bar>,
    pub max_scans: i64,
    pub max_vulns: i64,
    pub first_day: String,
    pub last_day: String,
}

const CHART_HEIGHT: i64 = 120;
const DAY_WIDTH: i64 = 20;

fn chart(days: &[ChartDay]) -> Chart {
    let today = Utc::now().date_naive();
    let first = today - Duration::days(i64::from(CHART_DAYS) - 1);
    let max_scans = days.iter().map(|d| d.scans).max().unwrap_or(0);
    let max_vulns = days.iter().map(|d| d.vulnerabilities).max().unwrap_or(0);
    let height = |v: i64, max: i64| {
        if v <= 0 || max <= 0 {
            0
        } else {
            (v * CHART_HEIGHT / max).max(2)
        }
    };
    let bars = (0..i64::from(CHART_DAYS))
        .map(|i| {
            let date = first + Duration::days(i);
            let day = days.iter().find(|d| d.date == date);
            let (scans, vulns) = day.map_or((0, 0), |d| (d.scans, d.vulnerabilities));
            let (sh, vh) = (height(scans, max_scans), height(vulns, max_vulns));
            Bar {
                x: i * DAY_WIDTH,
                scans_y: CHART_HEIGHT - sh,
                scans_h: sh,
                vulns_y: CHART_HEIGHT - vh,
                vulns_h: vh,
                label: format!("{date}: {scans} scans, {vulns} findings"),
            }
        })
        .collect();
    Chart {
        bars,
        max_scans,
        max_vulns,
        first_day: first.to_string(),
        last_day: today.to_string(),
    }
}

#[derive(Template)]
#[template(path = "dashboard.html")]
struct Dashboard {
    chrome: Chrome,
    summary: Summary,
    recent: Vec<RecentScan>,
    /// Scans running: the recent scans refresh themselves while any is.
    active: i64,
    chart: Chart,
    total_days_scans: i64,
    total_days_vulns: i64,
}

/// The recent scans alone, as the dashboard refreshes them.
#[derive(Template)]
#[template(path = "recent_block.html")]
struct RecentBlock {
    recent: Vec<RecentScan>,
    active: i64,
}

#[derive(serde::Deserialize, Default)]
pub struct DashboardQuery {
    #[serde(default)]
    part: String,
}

#[handler]
pub async fn dashboard(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Query(q): Query<DashboardQuery>,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let db = state.db.get().await?;
    let mut summary = store::summary(&db, me.user.id).await?;
    if q.part == "recent" {
        return page::html(&RecentBlock {
            active: summary.active_scans,
            recent: std::mem::take(&mut summary.recent_scans),
        });
    }
    let chrome = Chrome::load(&state, me, "dashboard").await?;
    let days = store::charts(&**db, me.user.id).await?;
    let recent = std::mem::take(&mut summary.recent_scans);
    page::html(&Dashboard {
        chrome,
        total_days_scans: days.iter().map(|d| d.scans).sum(),
        total_days_vulns: days.iter().map(|d| d.vulnerabilities).sum(),
        chart: chart(&days),
        active: summary.active_scans,
        summary,
        recent,
    })
}
