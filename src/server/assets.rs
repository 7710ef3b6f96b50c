//! The browser bundle's file names and how `/pkg/` serves them.
//!
//! `scripts/build.sh` names each bundle file after a hash of its content
//! (`runlens.3f2a9c41d07b6e85.js`, `runlens_bg.….wasm`, `runlens.….css`),
//! writes a brotli (`.br`) and a gzip (`.gz`) copy beside it, and lists the
//! three names in `pkg/manifest.json`. Pages link the names the manifest
//! gives ([`Bundle::of_site`]); a file whose name carries a hash never
//! changes, so `/pkg/` sends it as `immutable` for a year ([`cache_control`])
//! and a browser downloads the bundle once per build instead of on every
//! visit. Anything else there (the manifest, a site built without hashes) is
//! sent `no-cache`: the browser asks again each time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use serde::Deserialize;

/// The file in `pkg/` that names the bundle's files.
pub const MANIFEST: &str = "manifest.json";

/// The bundle manifest is a few hundred bytes; anything bigger is not one.
const MAX_MANIFEST_BYTES: u64 = 4096;

/// `Cache-Control` of a content-hashed file: it never changes.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// `Cache-Control` of the rest of `/pkg/`: revalidate on every use.
pub const REVALIDATE: &str = "no-cache";

/// A manifest's modification time when it was read, and what it said.
type Seen = (Option<SystemTime>, Arc<Bundle>);

/// The file names (inside `pkg/`) of the browser bundle a page links.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    /// The JS glue that loads the wasm and exports `hydrate`.
    pub js: String,
    /// The WebAssembly module.
    pub wasm: String,
    /// The stylesheet.
    pub css: String,
}

impl Bundle {
    /// The names of a site built without a manifest (before content hashes,
    /// or by hand): what wasm-bindgen writes.
    pub fn unhashed() -> Bundle {
        Bundle { js: "runlens.js".into(), wasm: "runlens_bg.wasm".into(), css: "runlens.css".into() }
    }

    /// The bundle of the site at `site_root`: the manifest's names, read
    /// again only when the manifest changes (a rebuild while the server
    /// runs), so a page costs one `stat`. Without a readable, valid
    /// manifest, [`Bundle::unhashed`].
    pub fn of_site(site_root: &Path) -> Arc<Bundle> {
        static CACHE: OnceLock<Mutex<HashMap<PathBuf, Seen>>> = OnceLock::new();
        let path = site_root.join("pkg").join(MANIFEST);
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        let cache = CACHE.get_or_init(Default::default);
        let mut cache = cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((seen, bundle)) = cache.get(&path) {
            if *seen == modified {
                return bundle.clone();
            }
        }
        let bundle = Arc::new(Bundle::read(&path).unwrap_or_else(Bundle::unhashed));
        cache.insert(path, (modified, bundle.clone()));
        bundle
    }

    /// Whether the site at `site_root` has its bundle's script: without it
    /// pages render but never hydrate.
    pub fn is_built(site_root: &Path) -> bool {
        site_root.join("pkg").join(&Bundle::of_site(site_root).js).is_file()
    }

    fn read(path: &Path) -> Option<Bundle> {
        let meta = std::fs::metadata(path).ok()?;
        if meta.len() > MAX_MANIFEST_BYTES {
            tracing::warn!(path = %path.display(), "bundle manifest too large; using unhashed names");
            return None;
        }
        let text = std::fs::read_to_string(path).ok()?;
        match serde_json::from_str::<Bundle>(&text) {
            Ok(bundle) if [&bundle.js, &bundle.wasm, &bundle.css].iter().all(|n| is_plain_file_name(n)) => Some(bundle),
            _ => {
                tracing::warn!(path = %path.display(), "bundle manifest not valid; using unhashed names");
                None
            }
        }
    }
}

/// A name safe to put in a URL path and in the page's inline script as is:
/// letters, digits, `_`, `-` and `.`, not starting with a dot.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Whether a file name carries a content hash: a dot-separated part of 16
/// lowercase hex digits before its extension (`runlens.3f2a9c41d07b6e85.js`,
/// `runlens.3f2a9c41d07b6e85.js.br`).
pub fn is_content_hashed(name: &str) -> bool {
    let mut parts = name.split('.');
    parts.next();
    parts.any(|part| part.len() == 16 && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// Middleware of `/pkg/`: a content-hashed file that was found is
/// [`IMMUTABLE`], everything else [`REVALIDATE`]; every answer varies with
/// `Accept-Encoding`.
pub async fn cache_control(request: Request, next: Next) -> Response {
    let hashed = request.uri().path().rsplit('/').next().is_some_and(is_content_hashed);
    let mut response = next.run(request).await;
    let found = response.status().is_success() || response.status() == axum::http::StatusCode::NOT_MODIFIED;
    let value = if hashed && found { IMMUTABLE } else { REVALIDATE };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
    // The body depends on Accept-Encoding (a .br, .gz or plain file): a
    // shared cache must key on it.
    if !headers.contains_key(header::VARY) {
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names() {
        assert!(is_content_hashed("runlens.3f2a9c41d07b6e85.js"));
        assert!(is_content_hashed("runlens_bg.3f2a9c41d07b6e85.wasm.br"));
        assert!(!is_content_hashed("runlens.js"));
        assert!(!is_content_hashed("runlens.3F2A9C41D07B6E85.js"), "hashes are lowercase");
        assert!(!is_content_hashed("runlens.3f2a9c41d07b6e8.js"), "15 digits");
        assert!(!is_content_hashed("3f2a9c41d07b6e85"), "the stem alone is not a hash part");
        assert!(!is_content_hashed("manifest.json"));
    }

    #[test]
    fn plain_names_only() {
        assert!(is_plain_file_name("runlens_bg.3f2a9c41d07b6e85.wasm"));
        for bad in ["", ".hidden", "../x.js", "a/b.js", "x\".js", "x<script>.js", "x y.js", &"a".repeat(129)] {
            assert!(!is_plain_file_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_manifest_is_read_again_when_it_changes() {
        let dir = std::env::temp_dir().join(format!("runlens-bundle-{}", std::process::id()));
        let pkg = dir.join("pkg");
        std::fs::create_dir_all(&pkg).unwrap();
        assert_eq!(*Bundle::of_site(&dir), Bundle::unhashed(), "no manifest");
        std::fs::write(pkg.join(MANIFEST), r#"{"js":"runlens.0000000000000001.js","wasm":"w.wasm","css":"c.css"}"#)
            .unwrap();
        assert_eq!(Bundle::of_site(&dir).js, "runlens.0000000000000001.js");
        // A later build: a new modification time (set explicitly, so a
        // coarse file-system clock cannot hide the change).
        std::fs::write(pkg.join(MANIFEST), r#"{"js":"runlens.0000000000000002.js","wasm":"w.wasm","css":"c.css"}"#)
            .unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options().write(true).open(pkg.join(MANIFEST)).unwrap().set_modified(later).unwrap();
        assert_eq!(Bundle::of_site(&dir).js, "runlens.0000000000000002.js");
        // A manifest naming a path or a script breaker is refused.
        std::fs::write(pkg.join(MANIFEST), r#"{"js":"../../etc/passwd","wasm":"w.wasm","css":"c.css"}"#).unwrap();
        let later = later + std::time::Duration::from_secs(5);
        std::fs::File::options().write(true).open(pkg.join(MANIFEST)).unwrap().set_modified(later).unwrap();
        assert_eq!(*Bundle::of_site(&dir), Bundle::unhashed());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
