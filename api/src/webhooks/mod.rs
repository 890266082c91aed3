//! Outbound webhooks and Slack (issue 27): the signing scheme, the SSRF
//! guard, event bodies and the dispatcher that sends what the outbox holds
//! (`scanfleet_core::outbox`, `scanfleet_core::store::webhooks`). The
//! endpoints are `routes::webhooks`.
//!
//! # Layout
//! - [`sign`]: Standard Webhooks signatures and secrets.
//! - [`guard`]: which URLs and addresses a webhook may reach.
//! - [`render`]: generic bodies in the API's shapes, Slack Block Kit.
//! - [`dispatch`]: claiming, sending, retrying, disabling.
//! - [`manage`]: creating, rotating, testing and redelivering, shared by
//!   the API and the web console.

pub(crate) mod dispatch;
pub(crate) mod guard;
pub(crate) mod manage;
pub(crate) mod render;
pub mod sign;

use std::sync::Arc;

use scanfleet_core::store::{listen, webhooks};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::state::AppState;

/// Starts the process's dispatcher tasks (none when the settings say 0)
/// and the listener that wakes them.
pub(crate) fn spawn(state: &AppState, stop: CancellationToken) -> Vec<JoinHandle<()>> {
    let settings = &state.settings;
    if settings.webhooks.dispatchers == 0 {
        return Vec::new();
    }
    let dispatcher = Arc::new(dispatch::Dispatcher::new(
        state.db.clone(),
        (*state.webhook_guard).clone(),
        settings.webhooks.clone(),
        format!("{}/api/v1", settings.api.public_url),
    ));
    let wake = Arc::new(Notify::new());
    // Every outbox `NOTIFY` wakes the dispatchers that wait.
    let waker = wake.clone();
    let mut tasks = vec![tokio::spawn(listen::wake_on(
        settings.database_url.expose().to_string(),
        webhooks::NOTIFY_CHANNEL,
        "webhooks",
        stop.clone(),
        move || waker.notify_waiters(),
    ))];
    for _ in 0..settings.webhooks.dispatchers {
        tasks.push(tokio::spawn(
            dispatcher.clone().run(wake.clone(), stop.clone()),
        ));
    }
    tasks
}
