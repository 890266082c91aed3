//! Authentication: passwords, tokens, and turning request credentials into
//! an [`Identity`].
//!
//! # Layout
//! - [`password`]: argon2id hashing, off the async runtime.
//! - [`tokens`]: JWT access tokens and opaque refresh tokens.
//! - [`scheme`]: the OpenAPI security schemes (Bearer JWT, `X-API-Key`).
//! - [`identity`]: who is calling, and what they may do.
//! - [`caller`]: the caller of an operation, resolved by its security scheme.
//! - [`cache`]: identities kept between requests, dropped on any change.
//! - [`account`]: register, sign-in check and password change, shared by
//!   the API and the web console.

pub(crate) mod account;
pub(crate) mod cache;
pub(crate) mod caller;
pub(crate) mod identity;
pub(crate) mod password;
pub(crate) mod scheme;
pub mod tokens;

pub(crate) use caller::{BearerCaller, Caller, CanRead, CanScan, CanWrite};
pub(crate) use identity::Identity;
pub(crate) use scheme::BearerAuth;
