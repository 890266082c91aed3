//! The web console: the whole service in a browser, served by the api at
//! `/` beside the REST API (`/api/v1`). Pages are rendered here (askama
//! templates in `api/console/templates`, compiled into the binary); htmx
//! swaps fragments for filters, triage and notifications; one small script
//! of ours (`api/console/assets/console.js`) follows a live scan over
//! server-sent events and keeps the theme. No request leaves for another
//! origin.
//!
//! Handlers call the core's use cases and store, as the REST handlers do,
//! never the REST handlers themselves. Sessions, CSRF and the security
//! headers are in [`session`]. Console requests do not count against the
//! tier's API request budget; sign-in and register are limited per client
//! address as the API's are (see [`crate::ratelimit`]).
//!
//! # Layout
//! - [`session`]: the cookie session, CSRF checks, security headers.
//! - [`page`]: the header of every page, errors as pages, redirects.
//! - [`form`]: form bodies.
//! - [`assets`]: embedded static files under content-hashed paths.
//! - [`auth`], [`dashboard`], [`targets`], [`scans`], [`findings`],
//!   [`webhooks`], [`settings`]: the screens.

pub mod assets;
pub mod auth;
pub mod dashboard;
pub mod findings;
pub mod form;
pub mod page;
pub mod scans;
pub mod session;
pub mod settings;
pub mod targets;
pub mod webhooks;

use poem::{get, post, Endpoint, EndpointExt, Route};

/// Every console route, behind the console's guard.
pub fn endpoint() -> impl Endpoint {
    Route::new()
        .at("/", get(dashboard::dashboard))
        .at("/signin", get(auth::signin_page).post(auth::signin))
        .at("/register", get(auth::register_page).post(auth::register))
        .at("/signout", post(auth::signout))
        .at("/targets", get(targets::index).post(targets::add))
        .at("/targets/import", post(targets::import_domains))
        .at("/targets/:target_id", get(targets::show))
        .at("/targets/:target_id/verify", post(targets::verify))
        .at("/targets/:target_id/scans", post(targets::start_scan))
        .at("/targets/:target_id/triage", post(targets::triage))
        .at("/targets/:target_id/export", get(targets::export))
        .at(
            "/targets/:target_id/findings/:finding_id/status",
            post(targets::row_status),
        )
        .at("/scans", get(scans::index))
        .at("/scans/:scan_id", get(scans::show))
        .at("/scans/:scan_id/stop", post(scans::stop))
        .at("/scans/:scan_id/events", get(scans::events))
        .at("/scans/:scan_id/report", get(scans::report))
        .at("/findings/:finding_id", get(findings::show))
        .at("/findings/:finding_id/status", post(findings::set_status))
        .at("/findings/:finding_id/retest", post(findings::retest))
        .at(
            "/schedules",
            get(settings::schedules_list).post(settings::schedules_create),
        )
        .at("/schedules/:schedule_id", post(settings::schedules_change))
        .at("/notifications", get(settings::notifications_list))
        .at(
            "/notifications/read-all",
            post(settings::notifications_read_all),
        )
        .at(
            "/notifications/:id/read",
            post(settings::notifications_read),
        )
        .at("/webhooks", get(webhooks::index).post(webhooks::create))
        .at("/webhooks/:id", get(webhooks::show).post(webhooks::act))
        .at(
            "/webhooks/:id/deliveries/:delivery_id/redeliver",
            post(webhooks::redeliver),
        )
        .at("/account", get(settings::account_show))
        .at("/account/name", post(settings::account_name))
        .at("/account/password", post(settings::account_password))
        .at("/account/keys", post(settings::account_key_create))
        .at("/account/upgrade", post(settings::account_upgrade))
        .at(
            "/account/keys/:key_id/revoke",
            post(settings::account_key_revoke),
        )
        .at("/admin", get(settings::admin_show))
        .at("/admin/users/:user_id", post(settings::admin_user))
        .at(
            "/admin/nodes/:node_id/drain",
            post(settings::admin_node_drain),
        )
        .nest(assets::PREFIX.as_str(), assets::endpoint())
        .around(session::guard)
}
