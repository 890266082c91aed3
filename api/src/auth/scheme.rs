//! The two security schemes of the contract. They only extract the raw
//! credential; [`super::identity`] decides what it is worth, so that each
//! failure gets its precise problem (expired, revoked, missing permission).

use poem_openapi::auth::{ApiKey, Bearer};
use poem_openapi::SecurityScheme;

/// `Authorization: Bearer <JWT access token>`.
#[derive(SecurityScheme)]
#[oai(ty = "bearer", bearer_format = "JWT")]
pub struct BearerAuth(pub Bearer);

/// `X-API-Key: sfk_...` (monthly and yearly tiers).
#[derive(SecurityScheme)]
#[oai(ty = "api_key", key_name = "X-API-Key", key_in = "header")]
pub struct ApiKeyAuth(pub ApiKey);

/// Either scheme, for the endpoints that accept API keys.
#[derive(SecurityScheme)]
pub enum Credentials {
    Bearer(BearerAuth),
    ApiKey(ApiKeyAuth),
}

impl From<BearerAuth> for Credentials {
    fn from(b: BearerAuth) -> Self {
        Credentials::Bearer(b)
    }
}
