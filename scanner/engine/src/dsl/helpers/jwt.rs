//! `generate_jwt(json, algorithm, optional_secret, optional_max_age_unix)`
//! for the HMAC algorithms and `none` (the ones templates use to forge
//! tokens). RSA, ECDSA and EdDSA need keys templates do not carry.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::hashing::hmac_named;
use super::CallCtx;
use crate::dsl::error::DslError;
use crate::dsl::value::Value;

pub(super) fn generate_jwt(a: &[Value], _: &CallCtx) -> Result<Value, DslError> {
    let mut claims: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&a[0].as_bytes())
            .map_err(|e| DslError::bad_input("generate_jwt", e))?;
    let alg_given = a[1].to_string_lossy();
    let alg_upper = alg_given.trim().to_uppercase();
    let (header_alg, hash) = match alg_upper.as_str() {
        "" => ("NONE".to_string(), None),
        "NONE" => (alg_given.clone(), None),
        "HS256" => (alg_upper.clone(), Some("sha256")),
        "HS384" => (alg_upper.clone(), Some("sha384")),
        "HS512" => (alg_upper.clone(), Some("sha512")),
        _ => {
            return Err(DslError::arg(
                "generate_jwt",
                format!("unsupported algorithm: {alg_upper}"),
            ))
        }
    };
    if let Some(max_age) = a.get(3) {
        let exp = super::int_arg("generate_jwt", max_age)?;
        let now = chrono::Utc::now().timestamp();
        claims.insert("iat".into(), now.into());
        claims.insert("exp".into(), exp.into());
    }
    let header = serde_json::json!({ "alg": header_alg, "typ": "JWT" });
    let header = serde_json::to_vec(&header).map_err(|e| DslError::bad_input("generate_jwt", e))?;
    let payload =
        serde_json::to_vec(&claims).map_err(|e| DslError::bad_input("generate_jwt", e))?;
    let mut token = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(payload)
    );
    let signature = match hash {
        Some(h) => {
            let key = a.get(2).map(|k| k.as_bytes().to_vec()).unwrap_or_default();
            let mac = hmac_named(h, &key, token.as_bytes()).unwrap_or_default();
            URL_SAFE_NO_PAD.encode(mac)
        }
        None => String::new(),
    };
    token.push('.');
    token.push_str(&signature);
    Ok(Value::from(token))
}
