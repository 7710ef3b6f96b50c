//! How `POST /api/runs/batch`'s body ([`BatchRuns`]) is read, and its
//! OpenAPI schema: a create-run body with `models` beside its fields.
//!
//! The body is read by hand rather than with `#[serde(flatten)]`: a
//! flattened struct is handed only the fields it knows, so [`CreateRun`]'s
//! `deny_unknown_fields` would never see a misspelt one and it would be
//! dropped silently. Here `models` is taken out and everything else is read
//! as a [`CreateRun`], so an unknown field is refused exactly as
//! `POST /api/runs` refuses it. The schema is [`CreateRun`]'s object without
//! `id` and `model` (a batch names its models in `models` and its runs get
//! new ids) and with `models`, still closed to other fields.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::{BatchRuns, CreateRun};

impl<'de> Deserialize<'de> for BatchRuns {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut fields = Map::<String, Value>::deserialize(deserializer)?;
        let models = fields.remove("models").ok_or_else(|| D::Error::missing_field("models"))?;
        let models = Vec::<String>::deserialize(models).map_err(|e| D::Error::custom(format!("models: {e}")))?;
        let run = CreateRun::deserialize(Value::Object(fields)).map_err(|e| {
            let why = e.to_string();
            // serde lists the fields it expected: `models` is one too.
            D::Error::custom(if why.starts_with("unknown field") { format!("{why}, or `models`") } else { why })
        })?;
        Ok(BatchRuns { run, models })
    }
}

#[cfg(feature = "openapi")]
mod schema {
    use serde_json::{json, Value};
    use utoipa::openapi::{RefOr, Schema};
    use utoipa::{PartialSchema, ToSchema};

    use super::super::{BatchRuns, CreateRun, MAX_BATCH_MODELS};
    use crate::model::limits::MAX_ID_CHARS;

    impl PartialSchema for BatchRuns {
        fn schema() -> RefOr<Schema> {
            let mut object = serde_json::to_value(<CreateRun as PartialSchema>::schema()).unwrap_or_default();
            if let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) {
                properties.remove("id");
                properties.remove("model");
                properties.insert(
                    "models".into(),
                    json!({
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_BATCH_MODELS,
                        "uniqueItems": true,
                        "items": { "type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS },
                        "description": format!(
                            "1 to {MAX_BATCH_MODELS} distinct configured models (GET /api/models): one run on each, \
                             in this order"
                        ),
                    }),
                );
            }
            if let Some(required) = object.get_mut("required").and_then(Value::as_array_mut) {
                required.push("models".into());
            }
            object["description"] = json!(
                "The body of `POST /api/runs/batch`: the fields of `POST /api/runs`' body (without `id` and `model`) \
                 and `models`"
            );
            RefOr::T(crate::model::openapi::raw(object))
        }
    }

    impl ToSchema for BatchRuns {
        fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
            <CreateRun as ToSchema>::schemas(schemas);
        }
    }
}
