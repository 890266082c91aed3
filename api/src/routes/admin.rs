//! `/admin`: user administration for the admin role, and the override of
//! target ownership proof.

use chrono::{DateTime, Utc};
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use uuid::Uuid;

use super::{page, ApiTags};
use crate::auth::BearerCaller;
use crate::contract::{self, PageLimit, PageOffset, RoleName, TierSlug};
use crate::error::{Error, Result};
use crate::json_body::JsonBody;
use crate::routes::targets::Target;
use crate::state::AppState;
use scanfleet_core::ownership::Method;
use scanfleet_core::store::users::{self, AdminChange, User};
use scanfleet_core::store::{sessions, targets, tiers};

/// A user as administrators see it.
#[derive(Debug, Object)]
pub struct AdminUser {
    pub id: Uuid,
    pub email: String,
    pub full_name: String,
    pub role: String,
    pub tier_slug: String,
    pub disabled: bool,
    pub created_at: DateTime<Utc>,
}

impl From<User> for AdminUser {
    fn from(u: User) -> Self {
        AdminUser {
            id: u.id,
            email: u.email,
            full_name: u.full_name,
            role: u.role,
            tier_slug: u.tier_slug,
            disabled: u.disabled,
            created_at: u.created_at,
        }
    }
}

/// Any of the fields; absent ones stay as they are.
#[derive(Debug, Object)]
pub struct AdminUserUpdate {
    /// `demo`, `monthly`, `yearly` or `admin`.
    pub tier_slug: Option<TierSlug>,
    /// `user` or `admin`.
    pub role: Option<RoleName>,
    /// A disabled user cannot log in; their sessions are revoked.
    pub disabled: Option<bool>,
}

#[derive(ApiResponse)]
pub enum UserList {
    /// Users, newest first.
    #[oai(status = 200)]
    Ok(Json<Vec<AdminUser>>, #[oai(header = "X-Total-Count")] i64),
}

/// An administrator's decision on a target's ownership.
#[derive(Debug, Object)]
pub struct AdminTargetUpdate {
    /// true: mark the target verified (method `admin`, no expiry), for
    /// customers proven by other means; false: revoke any proof.
    pub verified: bool,
}

/// A scanner node as the fleet's registry holds it.
#[derive(Debug, Object)]
pub struct FleetNode {
    /// The node's name, unique per process.
    pub id: String,
    pub host: String,
    pub version: String,
    /// `live`, `draining` (finishing its scans, taking no more: shutting
    /// down, or asked to drain) or `lost` (silent past its lease: its scans
    /// go to other nodes; forgotten an hour later).
    pub state: String,
    /// Scans at once.
    pub slots_total: i64,
    pub slots_used: i64,
    pub running_scan_ids: Vec<Uuid>,
    pub started_at: DateTime<Utc>,
    pub last_heartbeat_at: DateTime<Utc>,
    /// Seconds since its last heartbeat.
    pub heartbeat_age_secs: f64,
}

impl FleetNode {
    fn of(n: scanfleet_bus::nodes::NodeRecord, now: DateTime<Utc>) -> FleetNode {
        let now_ms = now.timestamp_millis().max(0) as u64;
        let at = |ms: u64| DateTime::<Utc>::from_timestamp_millis(ms as i64).unwrap_or(now);
        FleetNode {
            state: n.state_at(now_ms).as_str().to_string(),
            slots_total: i64::from(n.slots_total),
            slots_used: n.running.len() as i64,
            started_at: at(n.started_at_ms),
            last_heartbeat_at: at(n.heartbeat_at_ms),
            heartbeat_age_secs: now_ms.saturating_sub(n.heartbeat_at_ms) as f64 / 1000.0,
            running_scan_ids: n.running,
            id: n.id,
            host: n.host,
            version: n.version,
        }
    }
}

/// Every node of the fleet's registry with its state now.
pub async fn fleet_nodes(state: &AppState) -> Result<Vec<FleetNode>, Error> {
    let now = Utc::now();
    let now_ms = now.timestamp_millis().max(0) as u64;
    let nodes = scanfleet_bus::nodes::list(&state.redis, &state.keys, now_ms).await?;
    Ok(nodes.into_iter().map(|n| FleetNode::of(n, now)).collect())
}

/// Asks node `id` to drain (see `POST /admin/nodes/{id}/drain`); the node,
/// `draining`, or None when no such node is registered.
pub async fn drain_node(state: &AppState, id: &str) -> Result<Option<FleetNode>, Error> {
    let now = Utc::now();
    let now_ms = now.timestamp_millis().max(0) as u64;
    let node = scanfleet_bus::nodes::request_drain(&state.redis, &state.keys, id, now_ms).await?;
    Ok(node.map(|n| FleetNode::of(n, now)))
}

#[derive(ApiResponse)]
pub enum DrainAccepted {
    /// The node is asked to drain: it takes no more jobs, lets its running
    /// scans finish, leaves the registry and exits. The node, `draining`
    /// (or `lost` if it is silent).
    #[oai(status = 202)]
    Accepted(Json<FleetNode>),
}

pub struct AdminApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Admin")]
impl AdminApi {
    /// List users
    #[oai(
        path = "/admin/users",
        method = "get",
        operation_id = "admin_list_users"
    )]
    async fn list_users(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        /// Page size, 1 to 500 (default 50).
        limit: Query<Option<PageLimit>>,
        /// Items to skip.
        offset: Query<Option<PageOffset>>,
    ) -> Result<UserList> {
        me.require_admin()?;
        let page = page(contract::raw(limit.0), contract::raw(offset.0))?;
        let db = state.db.get().await?;
        let (list, total) = users::list(&**db, page).await?;
        Ok(UserList::Ok(
            Json(list.into_iter().map(Into::into).collect()),
            total,
        ))
    }

    /// The scanner fleet
    ///
    /// Every node that announced itself within the last hour: its id,
    /// host, version, slots, running scans, start and last heartbeat. A node
    /// silent past its lease is `lost`; a node shutting down is `draining`.
    #[oai(
        path = "/admin/nodes",
        method = "get",
        operation_id = "admin_list_nodes"
    )]
    async fn list_nodes(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
    ) -> Result<Json<Vec<FleetNode>>> {
        me.require_admin()?;
        Ok(Json(fleet_nodes(&state).await?))
    }

    /// Drain a scanner node
    ///
    /// Asks the node to finish its running scans and take no more, as
    /// SIGTERM does but without the grace period's limit: it sees the
    /// request at once (or, if it was cut off from Redis, when it is back),
    /// lists itself `draining`, and exits when its last scan ends. Unknown
    /// (or forgotten) node: 404.
    #[oai(
        path = "/admin/nodes/:node_id/drain",
        method = "post",
        operation_id = "admin_drain_node"
    )]
    async fn drain(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        /// The node's id, as `GET /admin/nodes` lists it.
        node_id: Path<String>,
    ) -> Result<DrainAccepted> {
        me.require_admin()?;
        let node = drain_node(&state, &node_id.0)
            .await?
            .ok_or(Error::NotFound("node"))?;
        tracing::info!(admin = %me.user.id, node = %node.id, "node drain asked by admin");
        Ok(DrainAccepted::Accepted(Json(node)))
    }

    /// Mark any user's target verified, or revoke its proof
    #[oai(
        path = "/admin/targets/:target_id",
        method = "patch",
        operation_id = "admin_update_target"
    )]
    async fn update_target(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        target_id: Path<Uuid>,
        body: JsonBody<AdminTargetUpdate>,
    ) -> Result<Json<Target>> {
        me.require_admin()?;
        let db = state.db.get().await?;
        let proof = body.verified.then_some((Method::Admin.as_str(), None));
        let target = targets::set_proof(&**db, target_id.0, proof)
            .await?
            .ok_or(Error::NotFound("target"))?;
        tracing::info!(admin = %me.user.id, target_id = %target.id, verified = body.verified, "target ownership set by admin");
        Ok(Json(target.into()))
    }

    /// Change a user's tier, role or disabled flag
    #[oai(
        path = "/admin/users/:user_id",
        method = "patch",
        operation_id = "admin_update_user"
    )]
    async fn update_user(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        user_id: Path<Uuid>,
        body: JsonBody<AdminUserUpdate>,
    ) -> Result<Json<AdminUser>> {
        me.require_admin()?;
        let db = state.db.get().await?;
        if let Some(slug) = &body.tier_slug {
            if tiers::get(&**db, slug).await?.is_none() {
                return Err(Error::invalid(
                    "tier_slug",
                    "must be one of demo, monthly, yearly, admin",
                )
                .into());
            }
        }
        if let Some(role) = &body.role {
            if &**role != "user" && &**role != "admin" {
                return Err(Error::invalid("role", "must be `user` or `admin`").into());
            }
        }
        if user_id.0 == me.user.id
            && (body.disabled == Some(true) || body.role.as_deref() == Some("user"))
        {
            return Err(Error::conflict(
                "self_lockout",
                "administrators cannot disable or demote themselves",
            )
            .into());
        }
        let user = users::admin_update(
            &**db,
            user_id.0,
            AdminChange {
                tier_slug: body.tier_slug.as_deref(),
                role: body.role.as_deref(),
                disabled: body.disabled,
            },
        )
        .await?;
        if body.disabled == Some(true) {
            sessions::revoke_all_except(&**db, user.id, None, "account disabled").await?;
        }
        tracing::info!(admin = %me.user.id, user_id = %user.id, "user changed by admin");
        Ok(Json(user.into()))
    }
}
