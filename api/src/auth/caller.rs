//! The caller of an operation, resolved once per request by the operation's
//! security scheme: an operation takes a [`Caller<P>`] (a Bearer token, or
//! an API key with permission `P`) or a [`BearerCaller`] (Bearer only), and
//! never authenticates by hand.
//!
//! Both are security schemes of the contract (`BearerAuth`, `ApiKeyAuth`,
//! as [`super::scheme`] declares them): they extract the raw credential
//! through those schemes, then resolve it ([`AppState::authenticate`]), so
//! each failure keeps its precise problem (expired, revoked, missing
//! permission, demo tier).

use std::marker::PhantomData;
use std::ops::Deref;

use poem::{Request, RequestBody};
use poem_openapi::registry::Registry;
use poem_openapi::{ApiExtractor, ApiExtractorType, ExtractParamOptions};

use super::identity::{Access, Identity};
use super::scheme::{BearerAuth, Credentials};
use crate::error::ApiError;
use crate::state::AppState;

/// What an API key must be allowed to do for an operation.
pub trait Permission: Send + Sync + 'static {
    const ACCESS: Access;
}

/// GET operations.
pub struct CanRead;
/// Starting and stopping scans, running schedules now.
pub struct CanScan;
/// Creating, changing and deleting targets and schedules.
pub struct CanWrite;

impl Permission for CanRead {
    const ACCESS: Access = Access::Read;
}
impl Permission for CanScan {
    const ACCESS: Access = Access::Scan;
}
impl Permission for CanWrite {
    const ACCESS: Access = Access::Write;
}

/// The caller of an operation open to Bearer tokens and to API keys with
/// permission `P`.
pub struct Caller<P: Permission> {
    pub identity: Identity,
    permission: PhantomData<P>,
}

/// The caller of a Bearer-only operation (auth, API keys, subscription
/// changes).
pub struct BearerCaller {
    pub identity: Identity,
}

impl<P: Permission> Deref for Caller<P> {
    type Target = Identity;

    fn deref(&self) -> &Identity {
        &self.identity
    }
}

impl Deref for BearerCaller {
    type Target = Identity;

    fn deref(&self) -> &Identity {
        &self.identity
    }
}

/// The process's state, which the app puts in every request.
fn state(req: &Request) -> poem::Result<&AppState> {
    req.data::<AppState>().ok_or_else(|| {
        poem::Error::from(ApiError(scanfleet_core::Error::Unexpected(
            anyhow::anyhow!("the request carries no application state"),
        )))
    })
}

impl<'a, P: Permission> ApiExtractor<'a> for Caller<P> {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::SecurityScheme];

    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        Credentials::register(registry);
    }

    fn security_schemes() -> Vec<&'static str> {
        Credentials::security_schemes()
    }

    async fn from_request(
        req: &'a Request,
        body: &mut RequestBody,
        param_opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        let credentials = Credentials::from_request(req, body, param_opts).await?;
        let identity = state(req)?
            .authenticate(&credentials, P::ACCESS)
            .await
            .map_err(ApiError)?;
        Ok(Caller {
            identity,
            permission: PhantomData,
        })
    }
}

impl<'a> ApiExtractor<'a> for BearerCaller {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::SecurityScheme];

    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        BearerAuth::register(registry);
    }

    fn security_schemes() -> Vec<&'static str> {
        BearerAuth::security_schemes()
    }

    async fn from_request(
        req: &'a Request,
        body: &mut RequestBody,
        param_opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        let bearer = BearerAuth::from_request(req, body, param_opts).await?;
        let identity = state(req)?
            .authenticate_bearer(&bearer)
            .await
            .map_err(ApiError)?;
        Ok(BearerCaller { identity })
    }
}
