//! Outbound HTTP for a project's own endpoints (HTTP tools, status
//! webhooks): where requests may go, and how they are signed.
//!
//! **Where.** A URL must be `http` or `https` with a host. Unless the
//! operator allows private networks (`[http] allow_private_networks`), a
//! request never reaches a loopback, private, link-local, unique-local,
//! shared (CGNAT), multicast or unspecified address: literal addresses are
//! checked in [`check_url`], names by the client's resolver, which drops
//! such addresses after resolving (so a name that resolves to
//! `127.0.0.1` is refused, and DNS rebinding between a check and the
//! connection cannot happen: the address checked is the address used).
//! Redirects are never followed, and no proxy from the environment is used.
//!
//! **How signed.** Like Stripe's webhooks: the header
//! `runlens-signature: t=<unix seconds>,v1=<hex HMAC-SHA256>` over
//! `"<t>.<body>"` with the endpoint's secret. A receiver recomputes the MAC
//! over the raw body, compares in constant time and refuses old timestamps
//! ([`verify`] does all three).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header carrying a request's signature.
pub const SIGNATURE_HEADER: &str = "runlens-signature";
/// What a secret starts with, so a leaked one is recognisable.
pub const SECRET_PREFIX: &str = "whsec_";

/// Whether a request may reach `ip` when private networks are not allowed.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        // 100.64.0.0/10, shared address space (carrier-grade NAT)
        || (a == 100 && (64..128).contains(&b))
        // 192.0.0.0/24, protocol assignments; 198.18.0.0/15, benchmarking; 240/4, reserved
        || (a == 192 && b == 0 && ip.octets()[2] == 0)
        || (a == 198 && (18..20).contains(&b))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // fc00::/7 unique local, fe80::/10 link-local
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        // 2001:db8::/32 documentation; 64:ff9b::/96 NAT64 could reach any IPv4
        || (first == 0x2001 && ip.segments()[1] == 0x0db8)
        || (first == 0x0064 && ip.segments()[1] == 0xff9b))
}

/// A URL requests may be sent to: `http(s)`, with a host, at most 2,048
/// characters, and (unless `allow_private`) not a literal private address.
/// Names are checked when they are resolved (see the module docs).
pub fn check_url(url: &str, allow_private: bool) -> Result<reqwest::Url, String> {
    if url.len() > 2048 {
        return Err("the URL is longer than 2048 characters".into());
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("`{url}` must start with http:// or https://"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("the URL must not carry a user name or password; use headers".into());
    }
    let refused = |ip: IpAddr| {
        format!(
            "`{url}` is a {} address; requests to loopback, private and link-local addresses are refused unless \
             the operator sets allow_private_networks under [http]",
            if ip.is_loopback() { "loopback" } else { "private or reserved" }
        )
    };
    match parsed.host() {
        None => return Err(format!("`{url}` has no host")),
        Some(url::Host::Ipv4(ip)) if !allow_private && !is_public(IpAddr::V4(ip)) => {
            return Err(refused(IpAddr::V4(ip)))
        }
        Some(url::Host::Ipv6(ip)) if !allow_private && !is_public(IpAddr::V6(ip)) => {
            return Err(refused(IpAddr::V6(ip)))
        }
        Some(url::Host::Domain(d)) if !allow_private && (d == "localhost" || d.ends_with(".localhost")) => {
            return Err(refused(IpAddr::V4(Ipv4Addr::LOCALHOST)))
        }
        _ => {}
    }
    Ok(parsed)
}

/// Resolves names with the system resolver and drops addresses a request
/// may not reach (see the module docs).
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = all.iter().copied().filter(|a| is_public(a.ip())).collect();
            if allowed.is_empty() && !all.is_empty() {
                let refused: Box<dyn std::error::Error + Send + Sync> = format!(
                    "`{host}` resolves to a loopback, private or link-local address; such requests are refused \
                     unless the operator sets allow_private_networks under [http]"
                )
                .into();
                return Err(refused);
            }
            let addrs: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// Every HTTP client of runlens starts here: reqwest is built with rustls and
/// no crypto provider of its own (one TLS stack for reqwest and rmcp's client),
/// so the process default is set to ring, once, before any client is built.
pub fn http_builder() -> reqwest::ClientBuilder {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}

/// The client for a project's endpoints: no redirects, no proxy, the
/// address policy above, `timeout` per request.
pub fn client(allow_private: bool, timeout: Duration) -> reqwest::Client {
    let mut builder = http_builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .timeout(timeout)
        .user_agent(concat!("runlens/", env!("CARGO_PKG_VERSION")));
    if !allow_private {
        builder = builder.dns_resolver(Arc::new(PublicOnly));
    }
    builder.build().expect("the HTTP client's settings are valid")
}

/// A new signing secret: `whsec_` and 32 random bytes in hex.
pub fn new_secret() -> String {
    use rand_core::{OsRng, RngCore};
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", hex(&bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn mac(secret: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `runlens-signature` value for `body` sent at `timestamp` (Unix seconds).
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    format!("t={timestamp},v1={}", hex(&mac(secret, timestamp, body).finalize().into_bytes()))
}

/// Checks a `runlens-signature` value as a receiver does: a `v1` MAC of
/// `"<t>.<body>"` under `secret` (compared in constant time), with `t`
/// within `tolerance_s` seconds of `now`.
pub fn verify(secret: &str, header: &str, body: &[u8], now: i64, tolerance_s: i64) -> Result<(), String> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", v)) => signatures.push(v.to_owned()),
            _ => {}
        }
    }
    let t = timestamp.ok_or("no timestamp (t=) in the signature")?;
    if (now - t).abs() > tolerance_s {
        return Err(format!("the timestamp {t} is more than {tolerance_s} s from now"));
    }
    let ok = signatures.iter().any(|s| {
        let Some(bytes) = unhex(s) else { return false };
        mac(secret, t, body).verify_slice(&bytes).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err("no v1 signature matches".into())
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_reserved_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::7f00:1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn urls_are_checked_before_any_request() {
        assert!(check_url("https://example.com/hook", false).is_ok());
        for bad in [
            "ftp://example.com",
            "http://127.0.0.1:9/x",
            "http://[::1]/",
            "http://localhost:3000",
            "http://169.254.169.254/latest",
            "http://user:pw@example.com/",
            "not a url",
            "http://10.0.0.1",
        ] {
            assert!(check_url(bad, false).is_err(), "{bad}");
        }
        assert!(check_url("http://127.0.0.1:9/x", true).is_ok(), "allowed by the operator");
        let long = format!("https://example.com/{}", "a".repeat(2100));
        assert!(check_url(&long, true).is_err());
    }

    #[tokio::test]
    async fn names_that_resolve_to_loopback_are_refused() {
        let err = client(false, Duration::from_secs(5)).get("http://localhost:9/").send().await.unwrap_err();
        let text = format!("{err:?}");
        assert!(text.contains("allow_private_networks"), "{text}");
    }

    #[test]
    fn signatures_verify_and_tampering_is_caught() {
        let secret = new_secret();
        assert!(secret.starts_with(SECRET_PREFIX) && secret.len() == SECRET_PREFIX.len() + 64);
        let body = br#"{"run_id":"r"}"#;
        let header = sign(&secret, 1_700_000_000, body);
        assert!(header.starts_with("t=1700000000,v1="), "{header}");
        assert_eq!(verify(&secret, &header, body, 1_700_000_100, 300), Ok(()));
        assert!(verify(&secret, &header, br#"{"run_id":"x"}"#, 1_700_000_100, 300).is_err());
        assert!(verify("whsec_other", &header, body, 1_700_000_100, 300).is_err());
        assert!(verify(&secret, &header, body, 1_700_001_000, 300).unwrap_err().contains("more than"));
        assert!(verify(&secret, "v1=00", body, 1_700_000_000, 300).is_err());
    }
}
