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

pub mod account;
pub mod cache;
pub mod caller;
pub mod identity;
pub mod password;
pub mod scheme;
pub mod tokens;

pub use caller::{BearerCaller, Caller, CanRead, CanScan, CanWrite};
pub use identity::{Access, Identity};
pub use scheme::{BearerAuth, Credentials};
