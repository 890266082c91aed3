//! The provider's webhook signature scheme (Stripe's `Stripe-Signature`):
//! the header carries `t=<unix seconds>` and one or more `v1=<hex>` entries,
//! each an HMAC-SHA256 with the endpoint's signing secret over
//! `"{t}.{raw body}"`. A delivery is genuine when one `v1` matches (several
//! appear while a secret is being rolled) and `t` is within [`TOLERANCE_SECS`]
//! of now, which bounds replays of a captured delivery.
//!
//! HMAC is written out over `sha2` (RFC 2104, 20 lines) rather than pulling a
//! second digest generation into the build: the workspace's `sha2` 0.10 and
//! the current `hmac` crate speak different `digest` versions.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// How far the signed timestamp may be from now, either way.
pub const TOLERANCE_SECS: i64 = 300;

/// Why a signature was refused; the webhook answers 400 with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Stripe-Signature header is missing")]
    Missing,
    #[error("the Stripe-Signature header has no timestamp or no v1 signature")]
    Malformed,
    #[error("the signed timestamp is more than {TOLERANCE_SECS} s away from now")]
    OutsideTolerance,
    #[error("no v1 signature matches the payload")]
    Mismatch,
}

const BLOCK: usize = 64;

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn signed_payload(timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut payload = format!("{timestamp}.").into_bytes();
    payload.extend_from_slice(body);
    payload
}

/// The `Stripe-Signature` header value for `body` signed at `timestamp`.
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mac = hmac_sha256(secret.as_bytes(), &signed_payload(timestamp, body));
    format!("t={timestamp},v1={}", hex::encode(mac))
}

/// Checks `header` against `body` at time `now` (unix seconds); returns the
/// signed timestamp.
pub fn verify(
    secret: &str,
    header: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<i64, SignatureError> {
    let header = header
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .ok_or(SignatureError::Missing)?;
    let mut timestamp = None;
    let mut candidates = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => timestamp = v.trim().parse::<i64>().ok(),
            // Undecodable entries are skipped: they cannot match anyway.
            Some(("v1", v)) => candidates.extend(hex::decode(v.trim()).ok()),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if candidates.is_empty() {
        return Err(SignatureError::Malformed);
    }
    if (now - timestamp).abs() > TOLERANCE_SECS {
        return Err(SignatureError::OutsideTolerance);
    }
    let expected = hmac_sha256(secret.as_bytes(), &signed_payload(timestamp, body));
    // Constant time per candidate, so timing tells nothing about the secret.
    let matched = candidates.iter().fold(subtle::Choice::from(0), |acc, c| {
        acc | c.as_slice().ct_eq(&expected)
    });
    if bool::from(matched) {
        Ok(timestamp)
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_the_rfc_4231_test_vectors() {
        // Test case 2.
        assert_eq!(
            hex::encode(hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block is hashed first.
        assert_eq!(
            hex::encode(hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_signature_made_with_the_secret_verifies() {
        let header = sign("whsec_test", 1_700_000_000, b"{\"id\":\"evt_1\"}");
        assert_eq!(
            verify(
                "whsec_test",
                Some(&header),
                b"{\"id\":\"evt_1\"}",
                1_700_000_100
            ),
            Ok(1_700_000_000)
        );
    }

    #[test]
    fn any_matching_v1_entry_is_enough_while_secrets_roll() {
        let good = sign("whsec_new", 1_700_000_000, b"{}");
        let v1 = good.split_once(",v1=").unwrap().1;
        let header = format!("t=1700000000,v1={},v1={v1},v0=abc", "00".repeat(32));
        assert!(verify("whsec_new", Some(&header), b"{}", 1_700_000_000).is_ok());
    }

    #[test]
    fn a_changed_body_a_wrong_secret_or_an_old_timestamp_is_refused() {
        let header = sign("whsec_test", 1_700_000_000, b"{\"a\":1}");
        assert_eq!(
            verify("whsec_test", Some(&header), b"{\"a\":2}", 1_700_000_000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify("whsec_other", Some(&header), b"{\"a\":1}", 1_700_000_000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify("whsec_test", Some(&header), b"{\"a\":1}", 1_700_000_301),
            Err(SignatureError::OutsideTolerance)
        );
        assert_eq!(
            verify("whsec_test", None, b"{}", 0),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify("whsec_test", Some("v1=abcd"), b"{}", 0),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify("whsec_test", Some("t=5"), b"{}", 5),
            Err(SignatureError::Malformed)
        );
    }
}
