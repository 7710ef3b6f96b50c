//! Secrets: password hashes (argon2id), API keys and one-time tokens.
//!
//! A password is stored as an argon2id PHC string with a random salt. A key
//! or token is 32 random bytes shown once (`rl_` + 64 hex digits for a key)
//! and stored as its SHA-256 digest: with 256 bits of entropy a fast hash
//! cannot be searched, and a lookup by digest needs no scan.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use rand_core::{OsRng, RngCore};
use sha2::{Digest, Sha256};

use crate::model::limits;

/// The prefix every API key starts with.
pub const KEY_PREFIX: &str = "rl_";
/// Characters of a key shown in lists to tell keys apart (`rl_` + 8).
pub const KEY_SHOWN_CHARS: usize = 11;

/// The argon2id PHC string of `password`.
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash the password: {e}"))
}

/// Whether `password` matches the stored `hash` (a malformed hash matches nothing).
pub fn verify_password(hash: &str, password: &str) -> bool {
    match PasswordHash::new(hash) {
        Ok(parsed) => Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    }
}

/// A hash no password matches, verified against when a name is unknown so
/// that a sign-in takes as long whether or not the user exists.
pub fn decoy_hash() -> &'static str {
    static DECOY: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| hash_password(&random_hex(16)).unwrap_or_default());
    &DECOY
}

/// `n` random bytes from the operating system, as hex.
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    OsRng.fill_bytes(&mut bytes);
    hex(&bytes)
}

/// A new API key's secret: `rl_` and 64 hex digits.
pub fn new_key_secret() -> String {
    format!("{KEY_PREFIX}{}", random_hex(32))
}

/// Whether `text` has the shape of a key (before any lookup).
pub fn looks_like_key(text: &str) -> bool {
    text.len() == KEY_PREFIX.len() + 64
        && text.starts_with(KEY_PREFIX)
        && text[KEY_PREFIX.len()..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// A run id derived from `key` (a server secret) and `parts`: the first
/// 128 bits of HMAC-SHA-256 over the parts (each length-prefixed, so no two
/// lists of parts give the same input), shaped as a UUID. Without the key
/// it cannot be predicted, so no client can create a run under it first.
pub fn keyed_id(key: &str, parts: &[&str]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes keys of any length");
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part.as_bytes());
    }
    let digest = mac.finalize().into_bytes();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid().to_string()
}

/// The SHA-256 digest of a key or token, as stored.
pub fn digest(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A user name: 1 to 64 letters, digits, `.`, `_`, `-` or `@`.
pub fn check_user_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'));
    if ok {
        Ok(())
    } else {
        Err("a user name is 1 to 64 letters, digits, `.`, `_`, `-` or `@`".into())
    }
}

/// A project name: 1 to 40 lower-case letters, digits and `-`, starting
/// with a letter or digit.
pub fn check_project_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err("a project name is 1 to 40 lower-case letters, digits and `-`, not starting with `-`".into())
    }
}

/// A password: 8 to 1,024 characters.
pub fn check_password(password: &str) -> Result<(), String> {
    let n = password.chars().count();
    if (8..=1024).contains(&n) {
        Ok(())
    } else {
        Err("a password is 8 to 1,024 characters".into())
    }
}

/// A key's name: 1 to 100 characters, no control characters.
pub fn check_key_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("name must not be empty".into());
    }
    limits::check_chars("name", name, 100)?;
    if name.chars().any(char::is_control) {
        return Err("name must not contain control characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_verify_only_themselves() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password(&hash, "correct horse"));
        assert!(!verify_password(&hash, "correct horsE"));
        assert!(!verify_password("not a hash", "correct horse"));
        assert!(!verify_password(decoy_hash(), ""));
    }

    #[test]
    fn keys_have_one_shape_and_a_stable_digest() {
        let key = new_key_secret();
        assert!(looks_like_key(&key), "{key}");
        assert_ne!(key, new_key_secret());
        assert_eq!(digest(&key), digest(&key));
        assert_eq!(digest(&key).len(), 64);
        assert!(!looks_like_key("rl_short"));
        assert!(!looks_like_key(&key.replace("rl_", "xx_")));
    }

    #[test]
    fn names_are_checked() {
        assert!(check_user_name("ada.lovelace@example").is_ok());
        assert!(check_user_name("").is_err() && check_user_name("a b").is_err());
        assert!(check_project_name("team-a").is_ok());
        assert!(check_project_name("Team").is_err() && check_project_name("-x").is_err());
        assert!(check_password("1234567").is_err() && check_password("12345678").is_ok());
    }
}
