//! What the lists share: page sizes, offsets, opaque cursors, the page
//! split, and the `scope=instance` switch of the key and audit lists.

use runlens_engine::model::limits::{MAX_LIST_LIMIT, MAX_LIST_OFFSET, MAX_QUERY_TEXT_CHARS};
use runlens_engine::model::Role;
use runlens_engine::openapi::raw;
use serde::Deserialize;
use serde_json::json;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, PartialSchema};

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, Bounded};

/// Items in a page when `limit` is not given.
pub const DEFAULT_PAGE: u32 = 50;

crate::bounded_param!(
    /// Items in a page.
    PageSize = 1, MAX_LIST_LIMIT.into()
);

crate::bounded_param!(
    /// Items to skip before a page.
    ListOffset = 0, MAX_LIST_OFFSET.into()
);

/// `offset` pages a list instead of `cursor`: giving both is a 400.
pub(super) fn offset_or_cursor<C, O>(cursor: &Option<C>, offset: &Option<O>) -> Result<(), AppError> {
    offset_or("cursor", cursor, offset)
}

/// `offset` pages a list instead of its keyset parameter `key` (`cursor`,
/// the audit log's `before`): giving both is a 400.
pub(super) fn offset_or<C, O>(key: &str, keyset: &Option<C>, offset: &Option<O>) -> Result<(), AppError> {
    if keyset.is_some() && offset.is_some() {
        return Err(AppError::BadRequest(format!("offset and {key} cannot be combined")));
    }
    Ok(())
}

/// A page's `offset` (default 0).
pub(super) fn page_offset(offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>) -> u32 {
    offset.map_or(0, Bounded::as_u32)
}

/// A page's `limit` (default [`DEFAULT_PAGE`]).
pub(super) fn page_size(limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>) -> u32 {
    limit.map_or(DEFAULT_PAGE, Bounded::as_u32)
}

/// An opaque paging cursor: at most [`MAX_QUERY_TEXT_CHARS`] characters.
#[derive(Clone, Debug)]
pub struct Cursor(pub String);

impl std::str::FromStr for Cursor {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.chars().count() > MAX_QUERY_TEXT_CHARS {
            return Err(format!("must be at most {MAX_QUERY_TEXT_CHARS} characters"));
        }
        Ok(Cursor(text.to_owned()))
    }
}

impl PartialSchema for Cursor {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS })))
    }
}

/// A page of a list by name (or id): `limit`, and the previous page's
/// `next_cursor` or an `offset`, not both.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// Items in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Cursor>, inline)]
    pub cursor: Option<Cursor>,
    /// Items to skip before the page (not with `cursor`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
}

/// `items` fetched with one more than `limit`: the page, and the cursor of
/// the next one (`key` of the page's last item) when there is more.
pub(super) fn page<T>(mut items: Vec<T>, limit: u32, key: impl Fn(&T) -> String) -> (Vec<T>, Option<String>) {
    let more = items.len() > limit as usize;
    items.truncate(limit as usize);
    let next = if more { items.last().map(key) } else { None };
    (items, next)
}

/// `instance`: the whole instance rather than the current project.
#[derive(Clone, Copy, Debug)]
pub struct InstanceScope;

impl std::str::FromStr for InstanceScope {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "instance" => Ok(InstanceScope),
            other => Err(format!("must be `instance`, not `{other}`")),
        }
    }
}

impl PartialSchema for InstanceScope {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "enum": ["instance", ""] })))
    }
}

/// The project a list with an optional `scope=instance` is about: the
/// current one (its admins), or with the scope every one (`None`; instance
/// admins).
pub(super) fn scope_project(caller: &Caller, scope: Option<InstanceScope>) -> Result<Option<&str>, AppError> {
    match scope {
        Some(InstanceScope) => caller.require_instance_admin().map(|()| None),
        None => caller.require_current(Role::Admin).map(Some),
    }
}
