//! Shared state of one api process, handed to every handler through poem's
//! `Data` extractor. Cheap to clone: everything inside is reference-counted.

use std::sync::Arc;

use scanfleet_bus::{RedisTarget, ScanQueue};
use scanfleet_common::keys::Keys;
use scanfleet_common::Settings;

use crate::auth::cache::AuthCache;
use crate::auth::tokens::JwtKeys;
use crate::ownership::Ownership;
use crate::store::Db;
use crate::ws::Hub;

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    /// Shared client for short commands; blocking reads use their own connections.
    pub redis: fred::clients::Client,
    /// Where Redis is, for the clients of blocking reads.
    pub redis_target: RedisTarget,
    /// Producer end of the scan queue, on `redis`.
    pub scan_queue: ScanQueue,
    /// The process's shared reader of scan streams for WebSocket listeners.
    pub hub: Arc<Hub>,
    pub settings: Arc<Settings>,
    pub keys: Keys,
    pub jwt: JwtKeys,
    /// A real argon2id hash of a random password, verified against when a
    /// login names an unknown email, so that both cases take the same time.
    pub dummy_password_hash: Arc<str>,
    /// Who credentials belong to, kept between requests; see
    /// [`crate::auth::cache`].
    pub auth_cache: Arc<AuthCache>,
    /// Serialised scan details by revision; see [`crate::detail_cache`].
    pub detail_cache: Arc<crate::detail_cache::DetailCache>,
    /// Ownership checks with the fleet's network settings, and whether
    /// scans require a proof.
    pub ownership: Ownership,
}
