//! Shared state of one api process, handed to every handler through poem's
//! `Data` extractor. Cheap to clone: everything inside is reference-counted.
//! The core's context ([`Core`]: database, Redis, queue, ownership gate) is
//! reached through it directly (`state.db`), as it derefs to it.

use std::ops::Deref;
use std::sync::Arc;

use scanfleet_common::Settings;
use scanfleet_core::Core;

use crate::auth::cache::AuthCache;
use crate::auth::tokens::JwtKeys;
use crate::hub::Hub;
use crate::payments::Payments;
use crate::webhooks::guard::Guard;

#[derive(Clone)]
pub struct AppState {
    pub core: Core,
    /// The process's shared reader of scan streams for WebSocket listeners.
    pub hub: Arc<Hub>,
    pub settings: Arc<Settings>,
    pub jwt: JwtKeys,
    /// A real argon2id hash of a random password, verified against when a
    /// login names an unknown email, so that both cases take the same time.
    pub dummy_password_hash: Arc<str>,
    /// Who credentials belong to, kept between requests; see
    /// [`crate::auth::cache`].
    pub auth_cache: Arc<AuthCache>,
    /// Serialised scan details by revision; see [`crate::detail_cache`].
    pub detail_cache: Arc<crate::detail_cache::DetailCache>,
    /// The payment provider, built once from the settings at start-up.
    pub payments: Arc<Payments>,
    /// Where a webhook may be sent (its resolver and hosts map), built once
    /// at start-up and shared by the webhook routes and the dispatchers.
    pub(crate) webhook_guard: Arc<Guard>,
}

impl Deref for AppState {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}
