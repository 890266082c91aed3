//! Registrations and pending interactions in Redis, so any instance can
//! serve any session and a restart loses nothing.
//!
//! Keys (all with a sliding expiry of `eviction_secs`, refreshed on
//! register, callback and poll), tagged by the correlation id so that on a
//! Redis Cluster both are in one slot, as the scripts need:
//! - `{prefix}:oob:{<correlation-id>}:reg`: hash of `secret`, `aes` (the raw
//!   AES key, base64) and `wrapped` (the same key wrapped to the client,
//!   computed once at registration).
//! - `{prefix}:oob:{<correlation-id>}:int`: list of interaction JSON, oldest
//!   first. Items are stored in the clear and encrypted when polled, as
//!   the Go server's in-memory store does: a callback is then one script
//!   call, with no key lookup or AES work on the hot path.
//!
//! Each operation is one Lua script, so checks and writes are atomic across
//! instances (two servers registering one id, a poll racing a callback).

use std::sync::LazyLock;
use std::time::Duration;

use fred::interfaces::ClientLike;
use fred::prelude::{Client, Value};
use fred::types::scripts::Script;
use fred::types::FromValue;
use scanfleet_bus::RedisTarget;
use scanfleet_common::keys::Keys;
use scanfleet_common::secret::Secret;
use scanfleet_common::settings::RedisSettings;

use crate::error::OobError;

/// Interactions kept per id before the oldest are dropped: a flood of
/// callbacks for one id must not grow Redis without bound.
pub const MAX_PENDING: u64 = 100_000;
/// Interactions one poll takes at most (the oldest first); the rest wait
/// for the next poll. Bounds the size of an answer (about 650 bytes an
/// item) and the memory the server needs to build it.
pub const MAX_PER_POLL: u64 = 10_000;

static REGISTER: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(
        r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'secret', ARGV[1], 'aes', ARGV[2], 'wrapped', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"#,
    )
});

static RECORD: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local n = redis.call('RPUSH', KEYS[2], ARGV[1])
if n > tonumber(ARGV[3]) then redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1) end
redis.call('EXPIRE', KEYS[2], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"#,
    )
});

static POLL: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(
        r#"
local reg = redis.call('HMGET', KEYS[1], 'secret', 'aes', 'wrapped')
if not reg[1] then return {0} end
if string.lower(reg[1]) ~= string.lower(ARGV[1]) then return {1} end
local items = redis.call('LRANGE', KEYS[2], 0, tonumber(ARGV[3]) - 1)
if #items > 0 then redis.call('LTRIM', KEYS[2], #items, -1) end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return {2, reg[2], reg[3], items}
"#,
    )
});

static DEREGISTER: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(
        r#"
local secret = redis.call('HGET', KEYS[1], 'secret')
if not secret then return 0 end
if string.lower(secret) ~= string.lower(ARGV[1]) then return 1 end
redis.call('DEL', KEYS[1], KEYS[2])
return 2
"#,
    )
});

/// What a poll or deregister found for an id and secret.
#[derive(Debug, PartialEq, Eq)]
pub enum Access<T> {
    /// Never registered, deregistered or evicted.
    UnknownId,
    WrongSecret,
    Granted(T),
}

/// The registration's keys and the interactions taken by one poll.
#[derive(Debug, PartialEq, Eq)]
pub struct Polled {
    /// The raw AES key, base64.
    pub aes_key: String,
    /// The AES key wrapped to the client (the answer's `aes_key`).
    pub wrapped_key: String,
    /// Interaction JSON, oldest first.
    pub interactions: Vec<String>,
}

/// The Redis side of the server; cheap to clone.
#[derive(Clone)]
pub struct Store {
    redis: Client,
    keys: Keys,
    /// The sliding expiry, in seconds.
    ttl: u64,
}

impl Store {
    /// Connects to the single server at `url` and checks that Redis
    /// answers (see [`connect_to`](Self::connect_to)).
    pub async fn connect(url: &str, prefix: &str, ttl: u64) -> Result<Store, OobError> {
        let redis = RedisSettings {
            url: Secret::new(url),
            sentinels: Vec::new(),
            sentinel_master: String::new(),
            cluster_nodes: Vec::new(),
            prefix: prefix.to_string(),
        };
        Store::connect_to(&redis, ttl).await
    }

    /// Connects as every other process does (`scanfleet_bus::connect`): a
    /// single server, the master the sentinels name (followed after a
    /// failover) or a Redis Cluster, reconnecting for good, commands
    /// queued while Redis is away for at most the bus's command timeout (a
    /// listener must not wait on them for ever: a DNS resolver gave up
    /// long before); and checks that Redis answers.
    pub async fn connect_to(redis: &RedisSettings, ttl: u64) -> Result<Store, OobError> {
        let target = RedisTarget::from_settings(redis)?;
        let client = scanfleet_bus::connect(&target, "oob").await?;
        Ok(Store {
            redis: client,
            keys: Keys::new(&redis.prefix),
            ttl,
        })
    }

    /// Runs `script` on the registration and interaction keys of
    /// `correlation_id`: EVALSHA, loading the script on a server that does
    /// not know it yet (a new or restarted Redis).
    async fn eval<R: FromValue>(
        &self,
        script: &Script,
        correlation_id: &str,
        args: Vec<String>,
    ) -> Result<R, OobError> {
        let keys = vec![
            self.keys.oob_registration(correlation_id),
            self.keys.oob_interactions(correlation_id),
        ];
        // While a cluster moves the keys' slot, a script finding one key
        // moved and not the other is refused (`TRYAGAIN`): try again.
        let mut tries = 0;
        loop {
            match script
                .evalsha_with_reload(&self.redis, keys.clone(), args.clone())
                .await
            {
                Err(e) if e.details().starts_with("TRYAGAIN") && tries < 50 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                result => return Ok(result?),
            }
        }
    }

    /// Stores a new registration; `false` when the id is already taken.
    pub async fn register(
        &self,
        correlation_id: &str,
        secret: &str,
        aes_key: &str,
        wrapped_key: &str,
    ) -> Result<bool, OobError> {
        let args = vec![
            secret.to_string(),
            aes_key.to_string(),
            wrapped_key.to_string(),
            self.ttl.to_string(),
        ];
        let created: i64 = self.eval(&REGISTER, correlation_id, args).await?;
        Ok(created == 1)
    }

    /// Appends an interaction for a registered id; `false` (nothing stored)
    /// when the id is not registered.
    pub async fn record(&self, correlation_id: &str, json: String) -> Result<bool, OobError> {
        let args = vec![json, self.ttl.to_string(), MAX_PENDING.to_string()];
        let stored: i64 = self.eval(&RECORD, correlation_id, args).await?;
        Ok(stored == 1)
    }

    /// Takes (reads and deletes, atomically) the oldest pending
    /// interactions, at most [`MAX_PER_POLL`].
    pub async fn poll(
        &self,
        correlation_id: &str,
        secret: &str,
    ) -> Result<Access<Polled>, OobError> {
        let args = vec![
            secret.to_string(),
            self.ttl.to_string(),
            MAX_PER_POLL.to_string(),
        ];
        let answer: Value = self.eval(&POLL, correlation_id, args).await?;
        let Value::Array(mut parts) = answer else {
            return Err(OobError::RedisShape("poll answer is not an array"));
        };
        match parts.first().and_then(Value::as_i64) {
            Some(0) => return Ok(Access::UnknownId),
            Some(1) => return Ok(Access::WrongSecret),
            Some(2) if parts.len() == 4 => {}
            _ => return Err(OobError::RedisShape("poll answer has no known status")),
        }
        let items = parts.pop().unwrap_or(Value::Null);
        let text = |v: Option<Value>| v.and_then(|v| v.into_string()).unwrap_or_default();
        let wrapped_key = text(parts.pop());
        let aes_key = text(parts.pop());
        let interactions = match items {
            Value::Array(items) => items.into_iter().filter_map(Value::into_string).collect(),
            _ => Vec::new(),
        };
        Ok(Access::Granted(Polled {
            aes_key,
            wrapped_key,
            interactions,
        }))
    }

    /// Removes a registration and whatever it still holds.
    pub async fn deregister(
        &self,
        correlation_id: &str,
        secret: &str,
    ) -> Result<Access<()>, OobError> {
        let args = vec![secret.to_string()];
        let status: i64 = self.eval(&DEREGISTER, correlation_id, args).await?;
        Ok(match status {
            0 => Access::UnknownId,
            1 => Access::WrongSecret,
            _ => Access::Granted(()),
        })
    }

    /// Closes the connection.
    pub async fn quit(&self) {
        let _ = self.redis.quit().await;
    }
}
