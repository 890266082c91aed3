//! Standard Webhooks signing: `webhook-signature` carries one `v1,<base64>`
//! per signing secret (several while a rotated secret overlaps the new
//! one), each an HMAC-SHA256 with the secret's decoded bytes over
//! `"{webhook-id}.{webhook-timestamp}.{body}"`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{KeyInit, Mac};
use rand::RngCore;

type HmacSha256 = hmac::Hmac<sha2_next::Sha256>;

/// The prefix of every secret, as Standard Webhooks spells it.
pub const SECRET_PREFIX: &str = "whsec_";

/// A secret that cannot be used to sign: not `whsec_` and base64.
#[derive(Debug, thiserror::Error)]
#[error("a webhook secret is not `whsec_` followed by base64")]
pub struct BadSecret(#[source] Option<base64::DecodeError>);

/// A new secret: `whsec_` and the base64 of 32 random bytes.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))
}

/// The signing key of a secret: the bytes its base64 decodes to.
fn key_of(secret: &str) -> Result<Vec<u8>, BadSecret> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).ok_or(BadSecret(None))?;
    STANDARD.decode(encoded).map_err(|e| BadSecret(Some(e)))
}

/// One `v1,<base64>` value for `secret`.
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<String, BadSecret> {
    let key = key_of(secret)?;
    // HMAC takes keys of any length; this cannot fail.
    let mut mac = HmacSha256::new_from_slice(&key).map_err(|_| BadSecret(None))?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The `webhook-signature` header: one value per secret, space-separated.
pub fn header(
    secrets: &[String],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, BadSecret> {
    let values = secrets
        .iter()
        .map(|s| signature(s, id, timestamp, body))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(values.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference
    /// libraries.
    #[test]
    fn signs_like_the_standard_webhooks_reference() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let sig = signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).unwrap();
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn new_secrets_are_32_random_bytes() {
        let a = new_secret();
        assert!(a.starts_with("whsec_"));
        assert_eq!(key_of(&a).unwrap().len(), 32);
        assert_ne!(a, new_secret());
    }

    #[test]
    fn every_secret_signs_during_a_rotation() {
        let (a, b) = (new_secret(), new_secret());
        let h = header(&[a.clone(), b.clone()], "msg_1", 7, b"{}").unwrap();
        let parts: Vec<&str> = h.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], signature(&a, "msg_1", 7, b"{}").unwrap());
        assert_eq!(parts[1], signature(&b, "msg_1", 7, b"{}").unwrap());
        assert!(header(&["nope".into()], "m", 1, b"").is_err());
    }
}
