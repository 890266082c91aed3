//! Access tokens are short-lived HS256 JWTs naming the user and the session;
//! refresh tokens are opaque random strings stored only as SHA-256 hashes.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::Utc;
use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Claims {
    /// User id.
    pub sub: Uuid,
    /// Session id: revoking the session invalidates its access tokens.
    pub sid: Uuid,
    pub iat: i64,
    pub exp: i64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum TokenError {
    Expired,
    Invalid,
}

/// Signing keys, built once from the configured secret.
#[derive(Clone)]
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    ttl_secs: i64,
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JwtKeys(***)")
    }
}

impl JwtKeys {
    pub fn new(secret: &[u8], ttl_secs: i64) -> JwtKeys {
        JwtKeys {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            ttl_secs,
        }
    }

    pub fn issue(&self, user_id: Uuid, session_id: Uuid) -> String {
        let now = Utc::now().timestamp();
        self.sign(&Claims {
            sub: user_id,
            sid: session_id,
            iat: now,
            exp: now + self.ttl_secs,
        })
    }

    pub fn sign(&self, claims: &Claims) -> String {
        encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
            .expect("HS256 signing with an in-memory key cannot fail")
    }

    pub fn verify(&self, token: &str) -> Result<Claims, TokenError> {
        check_header(token)?;
        let mut v = Validation::new(Algorithm::HS256);
        v.leeway = 0;
        v.set_required_spec_claims(&["exp", "sub"]);
        decode::<Claims>(token, &self.decoding, &v)
            .map(|d| d.claims)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => TokenError::Expired,
                _ => TokenError::Invalid,
            })
    }

    /// Checks the signature but not the expiry: refresh accepts an access
    /// token whose only fault is being expired.
    pub fn verify_ignoring_expiry(&self, token: &str) -> Result<Claims, TokenError> {
        check_header(token)?;
        let mut v = Validation::new(Algorithm::HS256);
        v.validate_exp = false;
        v.set_required_spec_claims(&["sub"]);
        decode::<Claims>(token, &self.decoding, &v)
            .map(|d| d.claims)
            .map_err(|_| TokenError::Invalid)
    }

    pub fn ttl_secs(&self) -> i64 {
        self.ttl_secs
    }
}

/// Refuses what our tokens never carry before the signature is looked at:
/// any algorithm but HS256 (`none`, RS256 signed with a guessed public key,
/// HS512...; `Validation` refuses those too, this makes it explicit) and
/// key-selection headers (`kid`, `jku`, `jwk`, `x5u`, `x5c`, `x5t`): there is
/// one key, so a token asking for another is forged.
fn check_header(token: &str) -> Result<(), TokenError> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Invalid)?;
    let picks_a_key = header.kid.is_some()
        || header.jku.is_some()
        || header.jwk.is_some()
        || header.x5u.is_some()
        || header.x5c.is_some()
        || header.x5t.is_some()
        || header.x5t_s256.is_some();
    if header.alg != Algorithm::HS256 || picks_a_key {
        return Err(TokenError::Invalid);
    }
    Ok(())
}

/// A fresh random secret with a readable prefix (`sfr_`, `sfk_`).
pub fn random_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes))
}

pub fn sha256(value: &str) -> Vec<u8> {
    Sha256::digest(value.as_bytes()).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_verifies_with_its_key_only() {
        let keys = JwtKeys::new(b"one-secret-one-secret-one-secret", 900);
        let other = JwtKeys::new(b"two-secret-two-secret-two-secret", 900);
        let (u, s) = (Uuid::now_v7(), Uuid::now_v7());
        let t = keys.issue(u, s);
        let c = keys.verify(&t).unwrap();
        assert_eq!((c.sub, c.sid), (u, s));
        assert_eq!(other.verify(&t), Err(TokenError::Invalid));
    }

    #[test]
    fn expired_tokens_are_told_apart_and_still_readable_for_refresh() {
        let keys = JwtKeys::new(b"one-secret-one-secret-one-secret", 900);
        let now = Utc::now().timestamp();
        let t = keys.sign(&Claims {
            sub: Uuid::nil(),
            sid: Uuid::nil(),
            iat: now - 100,
            exp: now - 10,
        });
        assert_eq!(keys.verify(&t), Err(TokenError::Expired));
        assert!(keys.verify_ignoring_expiry(&t).is_ok());
    }

    #[test]
    fn a_tampered_token_is_invalid() {
        let keys = JwtKeys::new(b"one-secret-one-secret-one-secret", 900);
        let t = keys.issue(Uuid::now_v7(), Uuid::now_v7());
        let mut parts: Vec<String> = t.split('.').map(str::to_string).collect();
        parts[1] = URL_SAFE_NO_PAD.encode(br#"{"sub":"00000000-0000-0000-0000-000000000000","sid":"00000000-0000-0000-0000-000000000000","iat":0,"exp":9999999999}"#);
        let forged = parts.join(".");
        assert_eq!(keys.verify(&forged), Err(TokenError::Invalid));
        assert_eq!(
            keys.verify_ignoring_expiry(&forged),
            Err(TokenError::Invalid)
        );
    }

    /// Issue 12: algorithm confusion and `kid` games.
    #[test]
    fn tokens_with_another_algorithm_or_a_key_selector_are_invalid() {
        let secret = b"one-secret-one-secret-one-secret";
        let keys = JwtKeys::new(secret, 900);
        let now = Utc::now().timestamp();
        let claims = Claims {
            sub: Uuid::now_v7(),
            sid: Uuid::now_v7(),
            iat: now,
            exp: now + 60,
        };
        for alg in [Algorithm::HS384, Algorithm::HS512] {
            let t = encode(
                &Header::new(alg),
                &claims,
                &EncodingKey::from_secret(secret),
            )
            .unwrap();
            assert_eq!(keys.verify(&t), Err(TokenError::Invalid), "{alg:?}");
            assert_eq!(keys.verify_ignoring_expiry(&t), Err(TokenError::Invalid));
        }
        let mut with_kid = Header::new(Algorithm::HS256);
        with_kid.kid = Some("../../../../dev/null".into());
        let t = encode(&with_kid, &claims, &EncodingKey::from_secret(secret)).unwrap();
        assert_eq!(keys.verify(&t), Err(TokenError::Invalid));
        let mut with_jku = Header::new(Algorithm::HS256);
        with_jku.jku = Some("https://attacker.invalid/jwks.json".into());
        let t = encode(&with_jku, &claims, &EncodingKey::from_secret(secret)).unwrap();
        assert_eq!(keys.verify(&t), Err(TokenError::Invalid));
        // alg `none`, no signature.
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap());
        let none = format!(
            "{}.{body}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#)
        );
        assert_eq!(keys.verify(&none), Err(TokenError::Invalid));
        // The genuine header still passes.
        assert!(keys.verify(&keys.sign(&claims)).is_ok());
    }

    #[test]
    fn random_tokens_are_prefixed_and_unique() {
        let a = random_token("sfr_");
        let b = random_token("sfr_");
        assert!(a.starts_with("sfr_") && a.len() > 40);
        assert_ne!(a, b);
        assert_eq!(sha256(&a).len(), 32);
    }
}
