//! argon2id password hashing. Hashing costs tens of milliseconds of CPU, so it
//! runs on the blocking pool, never on a tokio worker thread.

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::Argon2;

use crate::error::Error;

pub use crate::contract::bounds::{PASSWORD_MAX_LEN as MAX_LEN, PASSWORD_MIN_LEN as MIN_LEN};

/// Checks the length rule; `field` names the request field in the error.
pub fn validate(field: &str, password: &str) -> Result<(), Error> {
    let len = password.chars().count();
    if !(MIN_LEN..=MAX_LEN).contains(&len) {
        return Err(Error::invalid(
            field,
            format!("must be {MIN_LEN} to {MAX_LEN} characters long"),
        ));
    }
    Ok(())
}

pub async fn hash(password: String) -> Result<String, Error> {
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|h| h.to_string())
            .map_err(|e| anyhow::anyhow!("argon2 hashing failed: {e}"))
    })
    .await
    .map_err(|e| anyhow::anyhow!("hashing task failed: {e}"))?
    .map_err(Error::from)
}

/// True when `password` matches `phc`; a malformed stored hash is an error.
pub async fn verify(password: String, phc: String) -> Result<bool, Error> {
    tokio::task::spawn_blocking(move || {
        let parsed = PasswordHash::new(&phc)
            .map_err(|e| anyhow::anyhow!("stored password hash is malformed: {e}"))?;
        Ok::<bool, anyhow::Error>(
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok(),
        )
    })
    .await
    .map_err(|e| anyhow::anyhow!("verification task failed: {e}"))?
    .map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_its_password_only() {
        let h = hash("correct horse".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("correct horse".into(), h.clone()).await.unwrap());
        assert!(!verify("wrong horse".into(), h).await.unwrap());
    }

    #[test]
    fn length_rule_counts_characters() {
        assert!(validate("password", "1234567").is_err());
        assert!(validate("password", "12345678").is_ok());
        assert!(validate("password", &"é".repeat(128)).is_ok());
        assert!(validate("password", &"a".repeat(129)).is_err());
    }
}
