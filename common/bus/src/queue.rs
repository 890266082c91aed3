//! The scan queue: [`ScanJob`]s from the api and the scheduler to the
//! scanner nodes, on Redis, with leases.
//!
//! # Layout (keys under `<prefix>:{<prefix>:queue:scans}`, one hash tag, so
//! on a Redis Cluster every script's keys are in one slot)
//! - `jobs`: hash, scan id -> job JSON, for every job not finished yet.
//! - `waiting`: list of the ids waiting for a node, oldest first.
//! - `leases`: sorted set of held ids, scored by the end of their lease in
//!   milliseconds of the Redis server's own clock (`TIME`), so nodes'
//!   clocks never matter.
//! - `holders`: hash, held id -> the node holding it.
//! - `wake`: list of wake-up tokens, at most one per waiting job: a push
//!   (or a job put back) adds one, and an idle node blocks on the list
//!   ([`ScanQueue::wait_for_work`], `BLPOP` on a connection of its own)
//!   instead of polling; one token wakes one node. Tokens are hints only:
//!   a claim that finds nothing clears the stale ones, and a node that
//!   waited its whole timeout claims anyway, so a token lost (Redis lost
//!   its data, a node died holding one) costs at most one timeout.
//! - `sweep`: the lock of the lease-expiry sweep (`SET NX PX`, held by one
//!   node at a time, [`crate::nodes::sweep`]).
//!
//! Every change is one Lua script, so a job is always exactly one of
//! waiting, held or finished, whatever crashes when.
//!
//! # Life of a job
//! [`ScanQueue::push`] adds it (once per scan: a second push of the same
//! scan does nothing). A node [`claim`](ScanQueue::claim)s the oldest
//! waiting job with a lease, [`renew`](ScanQueue::renew)s the lease while
//! it runs the scan and [`finish`](ScanQueue::finish)es it. A lease that
//! ran out (its node died) is put back at the head of `waiting` by the
//! sweep ([`REQUEUE_EXPIRED_LUA`]), which runs at each heartbeat of the
//! one node holding the sweep lock ([`crate::nodes::sweep`]); the scan's own attempt count (the node's
//! `scan_attempts` key) limits how often that happens.
//!
//! # After Redis lost data
//! A renewal tells the node what became of its job: still held, put back
//! (its lease lapsed while Redis was away: taken again), gone (Redis lost
//! its data: written back from the node's copy) or held by another node
//! (this node must let go). So a restart without persistence leaves every
//! running scan held by the node running it.
//!
//! These scripts run on the reconnecting clients of [`crate::connect`];
//! apalis sees the queue through [`crate::tasks::ScanTasks`], its backend.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use fred::clients::Client;
use fred::types::scripts::Script;
use fred::types::Value;
use scanfleet_common::jobs::ScanJob;
use scanfleet_common::keys::Keys;
use uuid::Uuid;

use crate::connect::until_redis_answers;
use crate::BusError;

/// Adds a wake-up token to `wake` unless there are as many as jobs
/// waiting in `waiting` already (Lua, for the scripts that make a job wait).
pub(crate) const WAKE_LUA: &str = r#"
local function wake_one(waiting, wake)
  if redis.call('LLEN', wake) < redis.call('LLEN', waiting) then
    redis.call('RPUSH', wake, '1')
  end
end
"#;

/// Adds a job unless its scan has one, and wakes one idle node.
/// KEYS: jobs, waiting, wake. ARGV: id, job. Returns 1 when added.
static PUSH: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(format!(
        r#"{WAKE_LUA}
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  wake_one(KEYS[2], KEYS[3])
  return 1
end
return 0
"#
    ))
});

/// Milliseconds of the server's clock, as every script reads it.
pub(crate) const NOW: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"#;

/// Takes the oldest waiting job with a lease. KEYS: waiting, jobs, leases,
/// holders, wake. ARGV: node, lease ms, "1" when a wake-up token woke the
/// node. Returns {id, job} or nil.
///
/// It also keeps the wake-up tokens at most one per waiting job: none left
/// when nothing waits (a token that woke a node for nothing goes), and one
/// passed on when jobs wait but no token does (a burst, or tokens lost).
/// An idle node's claim after its wait timed out finds nothing and costs
/// one `LPOP` inside the script.
static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(
        r#"
while true do
  local id = redis.call('LPOP', KEYS[1])
  if not id then
    if ARGV[3] == '1' then redis.call('DEL', KEYS[5]) end
    return false
  end
  local job = redis.call('HGET', KEYS[2], id)
  if job then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), id)
    redis.call('HSET', KEYS[4], id, ARGV[1])
    local left = redis.call('LLEN', KEYS[1])
    local tokens = redis.call('LLEN', KEYS[5])
    if left == 0 then
      if tokens > 0 then redis.call('DEL', KEYS[5]) end
    elseif tokens > left then
      redis.call('LTRIM', KEYS[5], 0, left - 1)
    elseif tokens == 0 then
      redis.call('RPUSH', KEYS[5], '1')
    end
    return {id, job}
  end
end
"#,
    )
});

/// Extends a lease. KEYS: jobs, leases, holders, waiting. ARGV: id, node,
/// lease ms, job. Returns 1 held, 2 taken again after it was put back, 3
/// written back after Redis lost it, -1 held by another node.
static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(format!(
        r#"{NOW}
local holder = redis.call('HGET', KEYS[3], ARGV[1])
if holder and holder ~= ARGV[2] then return -1 end
local state = 1
if not holder then
  if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
    redis.call('LREM', KEYS[4], 0, ARGV[1])
    state = 2
  else
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
    state = 3
  end
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
return state
"#
    ))
});

/// Removes a job for good, unless another node holds it. KEYS: jobs,
/// leases, holders, waiting. ARGV: id, node. Returns 1 when removed.
static FINISH: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(
        r#"
local holder = redis.call('HGET', KEYS[3], ARGV[1])
if holder and holder ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('LREM', KEYS[4], 0, ARGV[1])
return 1
"#,
    )
});

/// Puts a job this node holds back at the head of the queue (a node
/// leaving), and wakes an idle node for it. KEYS: jobs, leases, holders,
/// waiting, wake. ARGV: id, node.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(format!(
        r#"{WAKE_LUA}
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('LPUSH', KEYS[4], ARGV[1])
  wake_one(KEYS[4], KEYS[5])
end
return 1
"#
    ))
});

/// The sweep, as a Lua function for the scripts that run it: puts jobs
/// whose lease ended back at the head of the queue and wakes idle nodes
/// for them; returns the ids moved. Needs [`NOW`] and [`WAKE_LUA`] before.
pub(crate) const REQUEUE_EXPIRED_LUA: &str = r#"
local function requeue_expired(leases, holders, jobs, waiting, wake, most)
  local ids = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, most)
  for _, id in ipairs(ids) do
    redis.call('ZREM', leases, id)
    redis.call('HDEL', holders, id)
    if redis.call('HEXISTS', jobs, id) == 1 then
      redis.call('LPUSH', waiting, id)
      wake_one(waiting, wake)
    end
  end
  return ids
end
"#;

/// The sweep alone. KEYS: leases, holders, jobs, waiting, wake. ARGV: most
/// to move. Returns the ids moved.
static REQUEUE_EXPIRED: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(format!(
        r#"{NOW}{WAKE_LUA}{REQUEUE_EXPIRED_LUA}
return requeue_expired(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], tonumber(ARGV[1]))
"#
    ))
});

/// Where each of some jobs stands. KEYS: jobs, leases, holders. ARGV: ids.
/// Returns per id {has job, holder or false, ms of lease left or false}
/// (a job put back has no holder).
static INSPECT: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(format!(
        r#"{NOW}
local out = {{}}
for i, id in ipairs(ARGV) do
  local lease = redis.call('ZSCORE', KEYS[2], id)
  local left = false
  if lease then left = tonumber(lease) - now end
  out[i] = {{redis.call('HEXISTS', KEYS[1], id), redis.call('HGET', KEYS[3], id), left}}
end
return out
"#
    ))
});

/// Most expired leases moved per call.
pub(crate) const REQUEUE_BATCH: u32 = 100;

/// What a renewal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// The lease was this node's and is extended.
    Held,
    /// The lease had lapsed and the job was waiting again (Redis was away
    /// longer than a lease, or the node stalled): it is this node's again.
    Retaken,
    /// The job was gone: Redis lost its data. It is written back, held by
    /// this node; events the scan wrote before may be lost too.
    Restored,
    /// Another node holds the job now: this node must stop the scan
    /// without reporting anything more.
    TakenOver,
}

/// Where a job stands, for the reaper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// No job: never pushed, finished, or lost with Redis's data.
    Missing,
    /// Waiting for a node.
    Waiting,
    /// Held by `node` under a lease that has not run out.
    Held { node: String },
    /// Held by `node` under a lease that ran out, and not put back: no
    /// live node is left to do it.
    Lapsed { node: String },
}

/// The queue, on one of the process's shared clients. Cheap to clone.
#[derive(Clone)]
pub struct ScanQueue {
    redis: Client,
    jobs: String,
    waiting: String,
    leases: String,
    holders: String,
    wake: String,
}

impl ScanQueue {
    pub fn new(redis: Client, keys: &Keys) -> ScanQueue {
        ScanQueue {
            redis,
            jobs: keys.scan_queue_jobs(),
            waiting: keys.scan_queue_waiting(),
            leases: keys.scan_queue_leases(),
            holders: keys.scan_queue_holders(),
            wake: keys.scan_queue_wake(),
        }
    }

    /// The client the queue runs on.
    pub fn client(&self) -> &Client {
        &self.redis
    }

    /// Adds the job of a scan; false when the scan has a job already (a
    /// push repeated by the reaper or after a timeout adds nothing). Sent
    /// again for up to 3 s (`PUSH_RETRY_FOR`) while Redis does not answer it
    /// (a cluster moving the queue's slot runs out of redirections, a
    /// restarted connection cancels what was queued on it): a repeat is
    /// harmless, since the job is written only where there is none.
    #[tracing::instrument(skip_all, fields(scan_id = %job.scan_id))]
    pub async fn push(&self, job: &ScanJob) -> Result<bool, BusError> {
        let encoded = encode(job)?;
        let keys = vec![
            self.jobs.as_str(),
            self.waiting.as_str(),
            self.wake.as_str(),
        ];
        let args = vec![job.scan_id.to_string(), encoded];
        let added: i64 = until_redis_answers(
            job.scan_id,
            "queueing the scan",
            Some(PUSH_RETRY_FOR),
            || eval(&PUSH, &self.redis, keys.clone(), args.clone()),
        )
        .await?;
        Ok(added == 1)
    }

    /// Takes the oldest waiting job for `node`, held for `lease`.
    pub async fn claim(&self, node: &str, lease: Duration) -> Result<Option<ScanJob>, BusError> {
        self.claim_woken(node, lease, false).await
    }

    /// [`claim`](Self::claim) by a node a wake-up token woke (`woken`): when
    /// nothing waits, the stale tokens go.
    pub async fn claim_woken(
        &self,
        node: &str,
        lease: Duration,
        woken: bool,
    ) -> Result<Option<ScanJob>, BusError> {
        let reply: Option<(String, String)> = eval(
            &CLAIM,
            &self.redis,
            vec![
                self.waiting.as_str(),
                self.jobs.as_str(),
                self.leases.as_str(),
                self.holders.as_str(),
                self.wake.as_str(),
            ],
            vec![
                node.to_string(),
                millis(lease),
                if woken { "1" } else { "0" }.to_string(),
            ],
        )
        .await?;
        let Some((id, json)) = reply else {
            return Ok(None);
        };
        match serde_json::from_str::<ScanJob>(&json) {
            Ok(job) => Ok(Some(job)),
            Err(source) => {
                // A job no node can read would be taken forever: it goes.
                let scan_id = Uuid::parse_str(&id).unwrap_or_default();
                self.finish_id(&id, node).await?;
                Err(BusError::BadJob { scan_id, source })
            }
        }
    }

    /// Extends `node`'s lease on `job` and says what became of it.
    pub async fn renew(
        &self,
        job: &ScanJob,
        node: &str,
        lease: Duration,
    ) -> Result<Renewal, BusError> {
        let state: i64 = eval(
            &RENEW,
            &self.redis,
            self.all_keys(),
            vec![
                job.scan_id.to_string(),
                node.to_string(),
                millis(lease),
                encode(job)?,
            ],
        )
        .await?;
        Ok(match state {
            1 => Renewal::Held,
            2 => Renewal::Retaken,
            3 => Renewal::Restored,
            _ => Renewal::TakenOver,
        })
    }

    /// Removes the job of `scan_id` for good (the scan is over), unless
    /// another node holds it now.
    pub async fn finish(&self, scan_id: Uuid, node: &str) -> Result<(), BusError> {
        self.finish_id(&scan_id.to_string(), node).await
    }

    async fn finish_id(&self, id: &str, node: &str) -> Result<(), BusError> {
        let _: i64 = eval(
            &FINISH,
            &self.redis,
            self.all_keys(),
            vec![id.to_string(), node.to_string()],
        )
        .await?;
        Ok(())
    }

    /// Puts a job `node` holds back at the head of the queue, for another
    /// node to take at once.
    pub async fn release(&self, scan_id: Uuid, node: &str) -> Result<(), BusError> {
        let _: i64 = eval(
            &RELEASE,
            &self.redis,
            self.all_keys(),
            vec![scan_id.to_string(), node.to_string()],
        )
        .await?;
        Ok(())
    }

    /// Puts back the jobs whose lease ran out (their node died); the ids.
    /// Nodes run the sweep under a lock ([`crate::nodes::sweep`]); this one
    /// runs it unconditionally.
    pub async fn requeue_expired(&self) -> Result<Vec<Uuid>, BusError> {
        let ids: Vec<String> = eval(
            &REQUEUE_EXPIRED,
            &self.redis,
            vec![
                self.leases.as_str(),
                self.holders.as_str(),
                self.jobs.as_str(),
                self.waiting.as_str(),
                self.wake.as_str(),
            ],
            vec![REQUEUE_BATCH.to_string()],
        )
        .await?;
        Ok(ids.iter().filter_map(|s| Uuid::parse_str(s).ok()).collect())
    }

    /// Where the jobs of `scan_ids` stand.
    pub async fn inspect(&self, scan_ids: &[Uuid]) -> Result<HashMap<Uuid, JobState>, BusError> {
        if scan_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let reply: Vec<Value> = eval(
            &INSPECT,
            &self.redis,
            vec![
                self.jobs.as_str(),
                self.leases.as_str(),
                self.holders.as_str(),
            ],
            scan_ids.iter().map(Uuid::to_string).collect::<Vec<_>>(),
        )
        .await?;
        Ok(scan_ids
            .iter()
            .zip(reply)
            .map(|(id, entry)| (*id, job_state(entry)))
            .collect())
    }

    /// Ids of the jobs waiting for a node, oldest first.
    pub async fn waiting(&self) -> Result<Vec<Uuid>, BusError> {
        use fred::interfaces::ListInterface;
        let ids: Vec<String> = self.redis.lrange(&self.waiting, 0, -1).await?;
        Ok(ids.iter().filter_map(|s| Uuid::parse_str(s).ok()).collect())
    }

    /// How many jobs wait for a node.
    pub async fn depth(&self) -> Result<u64, BusError> {
        use fred::interfaces::ListInterface;
        Ok(self.redis.llen(&self.waiting).await?)
    }

    /// The job of `scan_id`, if it has one.
    pub async fn job(&self, scan_id: Uuid) -> Result<Option<ScanJob>, BusError> {
        use fred::interfaces::HashesInterface;
        let json: Option<String> = self.redis.hget(&self.jobs, scan_id.to_string()).await?;
        json.map(|j| {
            serde_json::from_str(&j).map_err(|source| BusError::BadJob { scan_id, source })
        })
        .transpose()
    }

    /// The node holding the job of `scan_id`, if one does.
    pub async fn holder(&self, scan_id: Uuid) -> Result<Option<String>, BusError> {
        use fred::interfaces::HashesInterface;
        Ok(self.redis.hget(&self.holders, scan_id.to_string()).await?)
    }

    /// Blocks on `wake` (a client of its own: the connection is held for
    /// the whole wait) until a wake-up token comes or `timeout` passes;
    /// true when a token came. The caller claims either way.
    pub async fn wait_for_work(&self, wake: &Client, timeout: Duration) -> Result<bool, BusError> {
        use fred::interfaces::{ClientLike, ListInterface};
        use fred::types::config::Options;
        // The client's own command timeout is shorter than the wait.
        let blocking = wake.with_options(&Options {
            timeout: Some(timeout + Duration::from_secs(5)),
            ..Options::default()
        });
        // fred answers a `BLPOP` that timed out (nil) with a timeout error.
        match blocking
            .blpop::<Option<(String, String)>, _>(&self.wake, timeout.as_secs_f64())
            .await
        {
            Ok(token) => Ok(token.is_some()),
            Err(e) if *e.kind() == fred::error::ErrorKind::Timeout => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Every key the queue's scripts touch, in the order the job scripts
    /// take them.
    pub(crate) fn all_keys(&self) -> Vec<&str> {
        vec![
            self.jobs.as_str(),
            self.leases.as_str(),
            self.holders.as_str(),
            self.waiting.as_str(),
            self.wake.as_str(),
        ]
    }
}

/// How long [`ScanQueue::push`] is tried again while Redis does not answer
/// it: within the api's own limit on a push (5 s), so that a scan that
/// cannot be queued is told so rather than timed out. (A `TRYAGAIN` is
/// retried inside [`eval`] on top of it; the api's limit bounds both.)
const PUSH_RETRY_FOR: Duration = Duration::from_secs(3);

/// How long a script is retried while its slot moves between cluster nodes.
const TRYAGAIN_FOR: Duration = Duration::from_secs(10);

/// Runs `script` (`EVALSHA`, loading it where missing). On a cluster whose
/// slot of these keys is being moved to another node, a script that finds
/// some of its keys moved and some not is refused with `TRYAGAIN` (fred
/// follows `MOVED` and `ASK`, which cover the rest): it is tried again,
/// 20 to 200 ms apart, for up to [`TRYAGAIN_FOR`].
pub(crate) async fn eval<R: fred::types::FromValue>(
    script: &Script,
    redis: &Client,
    keys: Vec<&str>,
    args: Vec<String>,
) -> Result<R, fred::error::Error> {
    let deadline = tokio::time::Instant::now() + TRYAGAIN_FOR;
    let mut pause = Duration::from_millis(20);
    loop {
        match script
            .evalsha_with_reload(redis, keys.clone(), args.clone())
            .await
        {
            Err(e)
                if e.details().starts_with("TRYAGAIN")
                    && tokio::time::Instant::now() + pause < deadline =>
            {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            result => return result,
        }
    }
}

fn encode(job: &ScanJob) -> Result<String, BusError> {
    serde_json::to_string(job).map_err(|source| BusError::BadJob {
        scan_id: job.scan_id,
        source,
    })
}

fn millis(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

/// One entry of [`INSPECT`]'s answer.
fn job_state(entry: Value) -> JobState {
    let Value::Array(parts) = entry else {
        return JobState::Missing;
    };
    let has_job = parts.first().and_then(Value::as_i64) == Some(1);
    let holder = parts.get(1).and_then(Value::as_string);
    let left = parts.get(2).and_then(Value::as_i64);
    match (has_job, holder) {
        (false, _) => JobState::Missing,
        (true, None) => JobState::Waiting,
        (true, Some(node)) if left.is_some_and(|ms| ms > 0) => JobState::Held { node },
        (true, Some(node)) => JobState::Lapsed { node },
    }
}
