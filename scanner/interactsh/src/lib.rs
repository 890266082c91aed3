//! The interactsh out-of-band protocol (v1.3.x), both halves.
//!
//! A template that needs an out-of-band channel puts a payload host
//! (`<correlation-id><nonce>.<domain>`) into its requests; if the target
//! resolves or contacts that host, an interactsh server records the
//! interaction and the scanner fetches it by polling. This crate holds what
//! the engine (the client) and our `scanfleet-oob` server (the other end)
//! share, so both speak the same bytes; it links no server framework, no
//! Redis and no CLI, and `reqwest` (with tokio) only for the client, behind
//! the `client` feature: the server never calls it, so does not link it.
//!
//! The key design decision is the protocol's own: the client registers an
//! RSA public key, the server answers each poll with a per-registration
//! AES key wrapped to it and the interactions encrypted under that key, so
//! that nobody but the registering client reads them.
//!
//! # Imports
//! Registry crates only (serde, the RSA/AES crates, `reqwest`), and no
//! crate of ours, not even `scanfleet-common`. `scanfleet-oob` imports it
//! for the server side and its client side is the engine's, so it must not
//! import the engine, the oob server, a server framework, Redis or a
//! command-line parser.
//!
//! # Layout
//! - [`wire`]: the JSON bodies (registration, poll answer, [`Interaction`]).
//! - [`id`]: correlation ids, nonces, and the 33-character window matching.
//! - [`crypto`]: RSA-OAEP key wrapping and AES-256-CTR items (CFB fallback).
//! - `client` (feature `client`): `Session`, the async client the engine
//!   uses.

#[cfg(feature = "client")]
pub mod client;
pub mod crypto;
pub mod id;
pub mod wire;

#[cfg(feature = "client")]
pub use client::{decrypt_interaction, ClientError, ItemError, Session, SessionConfig};
pub use crypto::{AesKey, CryptoError, KeyPair};
pub use id::{find_ids, find_ids_in_text, IdMatch, CORRELATION_ID_LEN, NONCE_LEN, UNIQUE_ID_LEN};
pub use wire::{DeregisterRequest, Interaction, PollResponse, RegisterRequest, EVICTED_MESSAGE};
